// PushcastCore: value types shared by every layer, with no I/O of their own.
// Time and randomness are injected through the protocols below so that JWT issue times, token
// buckets, backoff jitter and deadlines can be driven by tests and simulations (docs/DESIGN.md §2.7).

/// A monotonic clock in nanoseconds. The real one is PushcastSystem's `SystemClock.Monotonic`
/// (CLOCK_MONOTONIC); tests use `ManualClock`.
public protocol MonotonicClock: AnyObject {
    func nowNanoseconds() -> UInt64
}

/// A wall clock in seconds since the Unix epoch, for JWT `iat` and expirations.
public protocol WallClock: AnyObject {
    func secondsSinceEpoch() -> Int64
}

/// A clock a test moves by hand. Both monotonic and wall time advance together.
public final class ManualClock: MonotonicClock, WallClock {
    public var nanoseconds: UInt64
    public var epochSecondsAtZero: Int64

    public init(nanoseconds: UInt64 = 0, epochSecondsAtZero: Int64 = 1_800_000_000) {
        self.nanoseconds = nanoseconds
        self.epochSecondsAtZero = epochSecondsAtZero
    }

    public func advance(nanoseconds delta: UInt64) { nanoseconds += delta }
    public func advance(milliseconds delta: UInt64) { nanoseconds += delta * 1_000_000 }
    public func nowNanoseconds() -> UInt64 { nanoseconds }
    public func secondsSinceEpoch() -> Int64 { epochSecondsAtZero + Int64(nanoseconds / 1_000_000_000) }
}

/// Wakes a thread that waits for work (a reactor's poll): the hand-off queues call it when they
/// give that thread something to do.
public protocol Waker: AnyObject, Sendable {
    func wake()
}

/// A lock and a condition for a thread that waits without a reactor (a credential refresher),
/// with a timed wait on the monotonic clock. PushcastTransport's `ThreadCondition` is the real one.
public protocol WaitCondition: AnyObject, Sendable {
    func lock()
    func unlock()
    /// Wakes one waiter.
    func signal()
    /// With the lock held: releases it, waits until signalled or until `seconds` have passed,
    /// and takes it again. False when the time ran out.
    @discardableResult
    func wait(seconds: Double) -> Bool
}

/// Where a module gets a background thread and the condition it waits on: the process's threads
/// (PushcastTransport's `BackgroundThreads.system`), or a test's.
public protocol ThreadSource: Sendable {
    /// Starts `body` on a new thread named `name`, not waited for.
    func start(name: String, _ body: @escaping @Sendable () -> Void)
    func makeCondition() -> any WaitCondition
}

/// A source of random 64-bit values.
public protocol RandomSource: AnyObject {
    func next() -> UInt64
}

/// SplitMix64: small, fast and seedable, so that a simulation replays exactly.
public final class SplitMix64: RandomSource {
    private var state: UInt64
    public init(seed: UInt64) { state = seed }
    public func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    /// A value in 0..<bound, without modulo bias worth caring about for jitter.
    public func next(below bound: UInt64) -> UInt64 {
        precondition(bound > 0)
        return next() % bound
    }
}

/// A clock read once per event-loop turn. Everything that happens in one turn (submitting a
/// batch of requests, handling a batch of completions) sees the same instant, and the loop pays
/// for one clock read per turn instead of several per request.
public final class TurnClock: MonotonicClock {
    private let source: MonotonicClock
    private var now: UInt64

    public init(source: MonotonicClock) {
        self.source = source
        now = source.nowNanoseconds()
    }

    /// Re-reads the source; the loop calls this once after each wait.
    @discardableResult
    public func refresh() -> UInt64 {
        now = source.nowNanoseconds()
        return now
    }

    public func nowNanoseconds() -> UInt64 { now }
}
