// The clocks of the machine, read here and nowhere else (scripts/tidy.py, the clock rule): code
// above takes a MonotonicClock or a WallClock (PushcastCore) from its caller.
#if canImport(Glibc)
import Glibc
#endif
import PushcastCore

public enum SystemClock {
    /// CLOCK_MONOTONIC in nanoseconds.
    @inlinable
    public static func monotonicNanoseconds() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }

    /// Wall-clock seconds since the Unix epoch (CLOCK_REALTIME), with fractions.
    public static func wallClockSeconds() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    /// Blocks the calling thread for `nanoseconds` (nanosleep, resumed after a signal until the
    /// whole time has passed). Only for threads without a reactor to wait on: start-up retries and
    /// `--start-jitter`.
    public static func sleep(nanoseconds: UInt64) {
        var remaining = timespec(tv_sec: Int(nanoseconds / 1_000_000_000), tv_nsec: Int(nanoseconds % 1_000_000_000))
        var left = timespec()
        while nanosleep(&remaining, &left) != 0 && errno == EINTR {
            remaining = left
        }
    }
}

extension SystemClock {
    /// CLOCK_MONOTONIC as a `MonotonicClock`, for code that takes an injected clock.
    public final class Monotonic: MonotonicClock, Sendable {
        public init() {}
        public func nowNanoseconds() -> UInt64 { SystemClock.monotonicNanoseconds() }
    }
}

/// The real wall clock, for JWT issue times and 410 timestamps, in whole seconds: read from
/// CLOCK_REALTIME_COARSE (the time at the last timer tick, a few milliseconds behind at most),
/// which costs a memory read instead of a TSC read. Each APNs request asks whether its JWT is due
/// for renewal (`APNsTokenSource.isCurrent`): the fine clock was 0.5 % of the client's CPU.
public final class SystemWallClock: WallClock, Sendable {
    public init() {}
    public func secondsSinceEpoch() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME_COARSE, &ts)
        return Int64(ts.tv_sec)
    }
}

extension Machine {
    /// This machine: PushcastSystem's files and clocks.
    public static let real = Machine(files: SystemFiles(), monotonicClock: { SystemClock.Monotonic() },
                                     wallClockSeconds: { SystemClock.wallClockSeconds() })
}
