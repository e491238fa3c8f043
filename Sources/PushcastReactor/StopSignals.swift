#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// SIGINT and SIGTERM, counted: the handler only records (an atomic increment and the signal's
/// number, both async-signal-safe) and returns; the campaign's reader loop polls the count and
/// decides (the first asks for a graceful stop, the second for an immediate one).
public enum StopSignals {
    private static let count = Atomic<Int>(0)
    private static let last = Atomic<Int32>(0)

    /// Installs the handlers (once; later calls do nothing more).
    public static func install() {
        // Touch the atomics first: a lazily initialised global must not first be reached from a
        // signal handler.
        _ = count.load(ordering: .relaxed)
        _ = last.load(ordering: .relaxed)
        for number in [SIGINT, SIGTERM] {
            _ = signal(number) { received in
                StopSignals.last.store(received, ordering: .relaxed)
                StopSignals.count.add(1, ordering: .releasing)
            }
        }
    }

    /// Stop signals received so far.
    public static var received: Int { count.load(ordering: .acquiring) }

    /// The last one's name, for messages.
    public static var lastName: String { last.load(ordering: .relaxed) == SIGINT ? "SIGINT" : "SIGTERM" }

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
