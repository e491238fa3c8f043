import PushcastCore
import PushcastTransport
import Synchronization

/// The reader's hand-off to one worker: a bounded queue of prepared notifications, taken in
/// batches (one lock per batch, not per notification). Its capacity is the worker's share of the
/// in-flight budget, so this queue and the in-flight streams are the only buffer between the input
/// file and the network.
public final class NotificationChannel: @unchecked Sendable {
    private struct State {
        /// Whole batches, moved in and out without copying their elements.
        var batches: [[PreparedNotification]] = []
        var count = 0
        var closed = false
        /// Emptied batch arrays the worker gave back (`takeAll`), for the reader's next batches.
        var spare: [[PreparedNotification]] = []
    }
    /// At most this many emptied batch arrays are kept for reuse.
    static let spareMax = 16
    private let state = Mutex(State())
    public let capacity: Int
    private let wakerBox = Mutex<(any Waker)?>(nil)

    /// Set when the lane this channel feeds is broken (its server stopped working): its worker
    /// stops handing out requests, and what the queue holds is never sent (no outcome: those rows
    /// stay resumable).
    private let laneBroken = Atomic<Bool>(false)

    public init(capacity: Int) { self.capacity = capacity }

    public func breakLane() {
        laneBroken.store(true, ordering: .releasing)
        wake()
    }

    @inline(__always)
    public var isLaneBroken: Bool { laneBroken.load(ordering: .relaxed) }

    /// The worker registers its reactor's waker so that new work wakes a sleeping poll.
    public func attach(_ waker: any Waker) {
        wakerBox.withLock { $0 = waker }
    }

    /// Emptied batch arrays kept for the reader (tests).
    var spareCount: Int { state.withLock { $0.spare.count } }

    /// Free room in the queue.
    public var room: Int { state.withLock { capacity - $0.count } }

    /// Moves a batch in (the caller respects `room`; `batch` comes back empty) and wakes the worker.
    public func push(_ batch: inout [PreparedNotification]) {
        guard !batch.isEmpty else { return }
        var moved: [PreparedNotification]
        if batch.count * 2 >= batch.capacity {
            // A full batch moves as it is; the caller gets storage of the same size, one the
            // worker emptied when there is one. A new one is a large block, and glibc answers a
            // large request by first consolidating every small free block (perf: 1.7 % of the
            // client), and the worker would free it in another thread's arena.
            moved = state.withLock { $0.spare.popLast() } ?? []
            if moved.capacity < batch.capacity { moved.reserveCapacity(batch.capacity) }
            swap(&moved, &batch)
        } else {
            // A small batch is copied into storage of its own size: a queue of tiny batches each
            // holding a 256-slot array would cost ~25 KB per in-flight notification.
            moved = Array(batch)
            batch.removeAll(keepingCapacity: true)
        }
        state.withLock { s in
            s.count += moved.count
            s.batches.append(moved)
        }
        wakerBox.withLock { $0 }?.wake()
    }

    /// No more notifications will come.
    /// Wakes the worker's poll without giving it work (it then looks at the run's stop flags).
    public func wake() { wakerBox.withLock { $0 }?.wake() }

    public func close() {
        state.withLock { $0.closed = true }
        wakerBox.withLock { $0 }?.wake()
    }

    /// Takes every queued batch; `finished` says the channel is closed and now empty. What
    /// `batches` held (batches the worker has handed out, vacant notifications only) is emptied,
    /// and up to `spareMax` (16) of those arrays are kept for the reader's next batches.
    public func takeAll(into batches: inout [[PreparedNotification]]) -> (taken: Int, finished: Bool) {
        for index in batches.indices { batches[index].removeAll(keepingCapacity: true) }
        return state.withLock { s in
            while s.spare.count < Self.spareMax, let emptied = batches.popLast() {
                if emptied.capacity > 0 { s.spare.append(emptied) }
            }
            batches.removeAll(keepingCapacity: true)
            let n = s.count
            swap(&s.batches, &batches)
            s.count = 0
            return (n, s.closed)
        }
    }
}

/// Outcomes from every worker to the results writer, in batches, with a condition the writer
/// waits on. Also carries the run's stop signal.
public final class OutcomeChannel: @unchecked Sendable {
    private let condition = ThreadCondition()
    private var items: [OutcomeRecord] = []
    /// Request bodies of finished rows, on their way back to the reader (`PayloadPool`).
    private var payloads: [[UInt8]] = []
    private var stopReason: String?
    private var stopResumable = false
    private let stopped = Atomic<Bool>(false)
    private let abandoned = Atomic<Bool>(false)
    private var workerFailures: [String] = []
    /// Lines for the person watching (a long provider pause), with how long from now the thing
    /// they tell of lasts; at most `noticesMax` wait, the rest are dropped.
    private var notices: [(text: String, afterNanoseconds: UInt64)] = []
    private let hasNotices = Atomic<Bool>(false)
    static let noticesMax = 32

    /// Where the workers record the rows they hand to a connection (the journal's `D` lines);
    /// nil for a run without a journal.
    public let dispatch: DispatchLog?

    public init(dispatch: DispatchLog? = nil) {
        self.dispatch = dispatch
    }

    /// Outcomes the workers pushed, and those of them the reader has handed to the kernel.
    private let pushedCount = Atomic<Int>(0)
    private let persistedCount = Atomic<Int>(0)

    /// The reader wrote `count` more of the pushed outcomes to the kernel (a crash keeps them).
    public func persisted(_ count: Int) {
        if count > 0 { persistedCount.add(count, ordering: .relaxed) }
    }

    /// Outcomes pushed and not yet written to the kernel.
    public var unpersisted: Int {
        max(0, pushedCount.load(ordering: .relaxed) - persistedCount.load(ordering: .relaxed))
    }

    /// A worker's line for the log; the reader loop prints it.
    public func notice(_ text: String, afterNanoseconds: UInt64) {
        condition.lock()
        if notices.count < Self.noticesMax { notices.append((text, afterNanoseconds)) }
        hasNotices.store(true, ordering: .releasing)
        condition.unlock()
    }

    /// The lines waiting (cheap when there are none: one atomic load).
    public func takeNotices() -> [(text: String, afterNanoseconds: UInt64)] {
        guard hasNotices.load(ordering: .acquiring) else { return [] }
        condition.lock()
        defer { condition.unlock() }
        hasNotices.store(false, ordering: .relaxed)
        let taken = notices
        notices.removeAll()
        return taken
    }

    public func push(_ batch: inout [OutcomeRecord]) {
        guard !batch.isEmpty else { return }
        pushedCount.add(batch.count, ordering: .relaxed)
        condition.lock()
        if items.isEmpty {
            // The usual case (the writer took everything): the batch moves in whole, and the
            // caller gets the writer's emptied storage back.
            swap(&items, &batch)
        } else {
            // Another worker's batch is waiting: the records move over one by one, a placeholder
            // left behind. Appending copies would retain every string of every record (perf: 2 %
            // of the client with two workers), and emptying the batch would release them again.
            let needed = items.count + batch.count
            if items.capacity < needed { items.reserveCapacity(max(needed, 2 * items.capacity)) }
            batch.withUnsafeMutableBufferPointer { records in
                for index in records.indices {
                    var record = OutcomeRecord.placeholder
                    swap(&record, &records[index])
                    items.append(consume record)
                }
            }
        }
        condition.signal()
        condition.unlock()
        batch.removeAll(keepingCapacity: true)
    }

    /// A worker gives back the bodies of rows whose outcome is final (`returned` comes back empty).
    public func returnPayloads(_ returned: inout [[UInt8]]) {
        guard !returned.isEmpty else { return }
        condition.lock()
        if payloads.isEmpty {
            swap(&payloads, &returned)
        } else {
            // Moved over by swaps, as `PayloadPool.give` takes them: appending copies would
            // retain each body, and emptying `returned` would release each again.
            for index in returned.indices {
                var body: [UInt8] = []
                swap(&body, &returned[index])
                payloads.append(consume body)
            }
        }
        condition.unlock()
        returned.removeAll(keepingCapacity: true)
    }

    /// The reader takes the bodies given back so far (`out` should be empty).
    public func takePayloads(into out: inout [[UInt8]]) {
        condition.lock()
        swap(&payloads, &out)
        condition.unlock()
    }

    /// Takes everything queued, waiting up to `timeoutSeconds` for something to arrive.
    public func take(into out: inout [OutcomeRecord], timeoutSeconds: Double) {
        condition.lock()
        if items.isEmpty && timeoutSeconds > 0 {
            condition.wait(seconds: timeoutSeconds)
        }
        swap(&items, &out)
        condition.unlock()
    }

    /// Whether outcomes are waiting to be taken.
    public var hasItems: Bool {
        condition.lock()
        defer { condition.unlock() }
        return !items.isEmpty
    }

    /// Wakes a waiting writer (a worker finished, or space opened in a queue).
    public func nudge() {
        condition.lock()
        condition.signal()
        condition.unlock()
    }

    /// One provider's lane broke (its server stopped working) while others go on: the run's
    /// reason to stop early, without stopping the others. The first reason wins, as with `stop`.
    public func laneFailed(reason: String, resumable: Bool) {
        condition.lock()
        if stopReason == nil {
            stopReason = reason
            stopResumable = resumable
        }
        condition.signal()
        condition.unlock()
    }

    /// A credential the provider rejected: every worker stops handing out new requests.
    /// `resumable`: the first stop was a server that turned bad mid-run (exit 3, not 2).
    public func stop(reason: String, resumable: Bool = false) {
        condition.lock()
        if stopReason == nil {
            stopReason = reason
            stopResumable = resumable
        }
        stopped.store(true, ordering: .releasing)
        condition.signal()
        condition.unlock()
    }

    @inline(__always)
    public var isStopped: Bool { stopped.load(ordering: .relaxed) }

    /// Graceful stop's end (its drain timed out, or a second signal): workers drop their
    /// connections now; what was still in flight is recorded `unknown` (`Interrupted`).
    public func abandon() {
        abandoned.store(true, ordering: .releasing)
        stop(reason: "interrupted")
    }

    @inline(__always)
    public var isAbandoned: Bool { abandoned.load(ordering: .relaxed) }

    public var reasonForStop: String? {
        condition.lock()
        defer { condition.unlock() }
        return stopReason
    }

    /// Whether the run stopped because a server that had answered turned bad (resumable).
    public var stoppedResumably: Bool {
        condition.lock()
        defer { condition.unlock() }
        return stopResumable
    }

    public func workerFailed(_ message: String) {
        condition.lock()
        workerFailures.append(message)
        condition.signal()
        condition.unlock()
    }

    public var failures: [String] {
        condition.lock()
        defer { condition.unlock() }
        return workerFailures
    }
}

/// Live figures a worker publishes for the progress line (relaxed atomics, no locks).
public final class WorkerGauge: Sendable {
    public let inFlight = Atomic<Int>(0)
    public let retries = Atomic<Int>(0)
    /// 429s about one device (its row alone waited), and those taken as the provider's own limit
    /// (the whole lane slowed and paused).
    public let deviceThrottles = Atomic<Int>(0)
    public let providerThrottles = Atomic<Int>(0)
    public init() {}
}

/// A counter threads share (here: how many workers have finished).
public final class SharedCounter: Sendable {
    public let value = Atomic<Int>(0)
    public init() {}
}
