#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// SIGINT, SIGTERM and SIGHUP, counted: the handler only records (an atomic increment and the signal's
/// number, both async-signal-safe) and returns; the campaign's reader loop polls the count and
/// decides (the first asks for a graceful stop, the second for an immediate one).
public enum StopSignals {
    private static let count = Atomic<Int>(0)
    private static let last = Atomic<Int32>(0)

    /// Installs the handlers (once; later calls do nothing more). SIGHUP (an ssh session or a
    /// terminal that goes away) stops as SIGTERM does, unless the process was started with it
    /// ignored (`nohup`), which it then stays.
    public static func install() {
        // Touch the atomics first: a lazily initialised global must not first be reached from a
        // signal handler.
        _ = count.load(ordering: .relaxed)
        _ = last.load(ordering: .relaxed)
        for number in [SIGINT, SIGTERM, SIGHUP] {
            let earlier = signal(number) { received in
                StopSignals.last.store(received, ordering: .relaxed)
                StopSignals.count.add(1, ordering: .releasing)
            }
            if number == SIGHUP && isIgnore(earlier) { _ = signal(SIGHUP, SIG_IGN) }
        }
    }

    /// SIGPIPE ignored for the whole process: a reader of stdout or stderr that goes away (`| head`,
    /// a log shipper restarting) makes a write fail with EPIPE, which `StandardStream` notes,
    /// instead of killing the run with rows in flight. Sockets already send with MSG_NOSIGNAL.
    public static func ignoreBrokenPipes() {
        _ = signal(SIGPIPE, SIG_IGN)
    }

    private static func isIgnore(_ handler: __sighandler_t?) -> Bool {
        guard let handler else { return false }
        return unsafeBitCast(handler, to: Int.self) == 1
    }

    /// Stop signals received so far.
    public static var received: Int { count.load(ordering: .acquiring) }

    /// The last one's name, for messages.
    public static var lastName: String {
        switch last.load(ordering: .relaxed) {
        case SIGINT: return "SIGINT"
        case SIGHUP: return "SIGHUP"
        default: return "SIGTERM"
        }
    }

    /// For a process that only waits to be stopped (the mock): blocks SIGINT and SIGTERM in the
    /// calling thread, and so in every thread it starts afterwards, which therefore inherit the
    /// mask. Call it before any thread starts; then `waitForStop` takes them on this thread alone.
    public static func blockForWaiting() {
        var signals = stopSignalSet()
        pthread_sigmask(SIG_BLOCK, &signals, nil)
    }

    /// Waits (sigwait) until SIGINT or SIGTERM arrives, after `blockForWaiting`; returns its number.
    @discardableResult
    public static func waitForStop() -> Int32 {
        var signals = stopSignalSet()
        var received: Int32 = 0
        sigwait(&signals, &received)
        return received
    }

    private static func stopSignalSet() -> sigset_t {
        var signals = sigset_t()
        sigemptyset(&signals)
        sigaddset(&signals, SIGINT)
        sigaddset(&signals, SIGTERM)
        return signals
    }
}
