#if canImport(Glibc)
import Glibc
#endif
import Foundation

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
