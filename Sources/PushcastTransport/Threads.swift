#if canImport(Glibc)
import Glibc
#endif
import Foundation
import PushcastCore
import PushcastSystem

/// `strerror` text for an errno value, e.g. "Connection refused (111)".
func describeErrno(_ code: Int32) -> String {
    code == 0 ? "closed by peer" : "\(String(cString: strerror(code))) (\(code))"
}

/// A set of started threads that can be waited for.
public final class WorkerThreads: @unchecked Sendable {
    private let group = DispatchGroup()

    public init() {}

    /// Starts `body` on a new named thread.
    public func start(name: String, _ body: @escaping @Sendable () -> Void) {
        group.enter()
        let thread = Thread { [group] in
            body()
            group.leave()
        }
        thread.name = name
        thread.stackSize = 1 << 20
        thread.start()
    }

    /// Waits until every started thread has returned.
    public func join() { group.wait() }
}

/// The process's threads, for a module that takes a `ThreadSource`.
public struct SystemThreads: ThreadSource {
    public init() {}

    public func start(name: String, _ body: @escaping @Sendable () -> Void) {
        let thread = Thread(block: body)
        thread.name = name
        thread.start()
    }

    public func makeCondition() -> any WaitCondition { ThreadCondition() }
}

/// Runs `bodies` each on its own thread and waits for all of them. Workers share nothing while
/// they run; each result comes back in order.
/// Collects one result per thread.
private final class ResultBox<Result>: @unchecked Sendable {
    var results: [Result?]
    let lock = NSLock()
    init(count: Int) { results = Array(repeating: nil, count: count) }
}

public func runOnThreads<Result: Sendable>(count: Int, name: String, _ body: @escaping @Sendable (Int) -> Result) -> [Result] {
    let box = ResultBox<Result>(count: count)
    let threads = WorkerThreads()
    for i in 0..<count {
        threads.start(name: "\(name)-\(i)") {
            let r = body(i)
            box.lock.lock()
            box.results[i] = r
            box.lock.unlock()
        }
    }
    threads.join()
    return box.results.map { $0! }
}

/// A mutex and a condition variable (pthread) for hand-offs between threads, with a timed wait
/// that runs on CLOCK_MONOTONIC: a step of the wall clock neither cuts a wait short nor stretches it.
public final class ThreadCondition: WaitCondition, @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let condition: UnsafeMutablePointer<pthread_cond_t>

    public init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
        condition = .allocate(capacity: 1)
        condition.initialize(to: pthread_cond_t())
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    public func lock() { pthread_mutex_lock(mutex) }
    public func unlock() { pthread_mutex_unlock(mutex) }
    /// Wakes one waiter.
    public func signal() { pthread_cond_signal(condition) }

    /// With the lock held: releases it, waits until signalled (or woken spuriously) or until
    /// `seconds` have passed, and takes it again. False when the time ran out.
    @discardableResult
    public func wait(seconds: Double) -> Bool {
        let deadline = SystemClock.monotonicNanoseconds() + UInt64(max(0, seconds) * 1e9)
        var until = timespec(tv_sec: Int(deadline / 1_000_000_000), tv_nsec: Int(deadline % 1_000_000_000))
        return pthread_cond_timedwait(condition, mutex, &until) == 0
    }
}
