// Per-provider rate limiting (docs/DESIGN.md §2.4 and §2.7): a token bucket shared by all worker threads
// of one provider, adaptive on the provider's throttle signal (FCM 429, docs/PROTOCOL.md §2.5 and
// §2.9: "clients should self-throttle"), pausable for Retry-After. Nothing here reads a clock:
// every call passes the caller's `now` in nanoseconds, so tests and the seeded simulation drive it
// on numbers, without sleeping.
//
// The bucket is the GCRA form of a token bucket (ITU-T I.371's virtual scheduling; the
// "theoretical arrival time" of the next permit) in integer nanoseconds: one UInt64 of state, and
// exact permit counts for any rate whose interval is a whole number of nanoseconds.

import Synchronization

/// A token bucket: `ratePerSecond` permits a second on average, at most `burst` at once. Pure
/// arithmetic on the `now` it is given; it starts full (`burst` permits available at once).
///
/// Permits are spaced `intervalNanoseconds` = 1e9 / rate apart (rounded to the nearest
/// nanosecond, at least 1), and a permit is granted at `now` when
/// `now >= theoreticalArrival - tolerance`, with tolerance = (burst - 1) × interval. A `now`
/// earlier than one seen before (another thread read the clock first) is handled: it only finds
/// fewer permits.
public struct TokenBucket: Sendable, Equatable {
    /// The longest permit interval kept (about 31 years): rates below it wait that long.
    static let intervalNanosecondsMax: UInt64 = 1_000_000_000_000_000_000

    public private(set) var ratePerSecond: Double
    public private(set) var burst: Double
    public private(set) var intervalNanoseconds: UInt64
    private var toleranceNanoseconds: UInt64
    /// When the next permit is due if permits were taken back to back.
    private var theoreticalArrivalNanoseconds: UInt64

    public init(ratePerSecond: Double, burst: Double, nowNanoseconds: UInt64) {
        precondition(ratePerSecond > 0 && ratePerSecond.isFinite, "a bucket's rate is positive and finite")
        precondition(burst >= 1 && burst.isFinite, "a bucket holds at least one permit")
        self.ratePerSecond = ratePerSecond
        self.burst = burst
        intervalNanoseconds = Self.interval(ratePerSecond)
        toleranceNanoseconds = Self.tolerance(burst: burst, interval: intervalNanoseconds)
        theoreticalArrivalNanoseconds = nowNanoseconds
    }

    /// Takes one permit at `now` if there is one.
    @inline(__always)
    public mutating func take(nowNanoseconds now: UInt64) -> Bool {
        guard now >= earliestNanoseconds else { return false }
        let (next, overflow) = max(theoreticalArrivalNanoseconds, now).addingReportingOverflow(intervalNanoseconds)
        theoreticalArrivalNanoseconds = overflow ? .max : next
        return true
    }

    /// The earliest time at or after `now` at which `take` succeeds (`now` itself when a permit
    /// is available now).
    public func nextPermitNanoseconds(nowNanoseconds now: UInt64) -> UInt64 {
        max(now, earliestNanoseconds)
    }

    /// Permits available at `now`, whole ones (for tests and the progress line).
    public func permitsAvailable(nowNanoseconds now: UInt64) -> Int {
        guard now >= earliestNanoseconds else { return 0 }
        let owed = theoreticalArrivalNanoseconds > now ? theoreticalArrivalNanoseconds - now : 0
        // Permit k (0-based) is available while owed + k × interval <= tolerance.
        let room = toleranceNanoseconds - owed
        return Int(min(room / intervalNanoseconds + 1, UInt64(burst.rounded(.down))))
    }

    /// Changes the rate (and, when given, the burst) from `now` on, keeping the permits already
    /// owed: a bucket that was full stays full, one that was empty stays empty.
    public mutating func setRate(_ ratePerSecond: Double, burst: Double? = nil, nowNanoseconds now: UInt64) {
        precondition(ratePerSecond > 0 && ratePerSecond.isFinite, "a bucket's rate is positive and finite")
        let owedPermits = Double(theoreticalArrivalNanoseconds > now ? theoreticalArrivalNanoseconds - now : 0) / Double(intervalNanoseconds)
        self.ratePerSecond = ratePerSecond
        if let burst {
            precondition(burst >= 1 && burst.isFinite, "a bucket holds at least one permit")
            self.burst = burst
        }
        intervalNanoseconds = Self.interval(ratePerSecond)
        toleranceNanoseconds = Self.tolerance(burst: self.burst, interval: intervalNanoseconds)
        let owed = min(owedPermits * Double(intervalNanoseconds), Double(Self.intervalNanosecondsMax))
        let (arrival, overflow) = now.addingReportingOverflow(UInt64(owed.rounded()))
        theoreticalArrivalNanoseconds = overflow ? .max : arrival
    }

    @inline(__always)
    private var earliestNanoseconds: UInt64 {
        theoreticalArrivalNanoseconds > toleranceNanoseconds ? theoreticalArrivalNanoseconds - toleranceNanoseconds : 0
    }

    private static func interval(_ ratePerSecond: Double) -> UInt64 {
        let nanoseconds = (1e9 / ratePerSecond).rounded()
        return nanoseconds >= Double(intervalNanosecondsMax) ? intervalNanosecondsMax : max(1, UInt64(nanoseconds))
    }

    private static func tolerance(burst: Double, interval: UInt64) -> UInt64 {
        let nanoseconds = ((burst - 1) * Double(interval)).rounded(.down)
        return nanoseconds >= Double(intervalNanosecondsMax) ? intervalNanosecondsMax : UInt64(nanoseconds)
    }
}

/// The answer to one request for a permit.
public enum RatePermit: Sendable, Equatable {
    case granted
    /// Ask again at this time (nanoseconds on the caller's clock): the bucket is empty or the
    /// provider is paused.
    case waitUntil(UInt64)
}

/// The rate limit of one provider, shared by all its worker threads: a `TokenBucket` (none while
/// unlimited) behind a `Mutex`, a pause for Retry-After, and additive-increase /
/// multiplicative-decrease on the provider's throttle signal.
///
/// Adaptation: `throttled` halves the current rate (at most once per `throttleWindowNanoseconds`,
/// because one overload answers many in-flight requests at once), never below
/// `max(1/s, 1 % of the base)` (nor above the base). From there the rate climbs back by
/// `recoveryPerSecond` of the base each second, in steps every `recoveryStepNanoseconds`, until it
/// is the base again. The base is the configured rate; for an unlimited provider it is the rate
/// observed over the last second when the first throttle came, and the provider is unlimited
/// again once recovered.
public final class ProviderRateLimiter: Sendable {
    public static let throttleWindowNanoseconds: UInt64 = 1_000_000_000
    public static let recoveryStepNanoseconds: UInt64 = 100_000_000
    /// The share of the base rate regained per second after a throttle.
    public static let recoveryPerSecond = 0.10
    /// The lowest rate a throttle leads to, as a share of the base (and at least 1/s).
    public static let floorShare = 0.01

    /// The burst a bucket of this rate gets: 1/50 s worth of permits, at least 1, so that any
    /// 1-second window after the first sees the rate within 2 % (+1 permit).
    public static func burst(forRatePerSecond rate: Double) -> Double { max(1, rate / 50) }

    /// The configured rate; nil when unlimited.
    public let configuredRatePerSecond: Double?

    private let state: Mutex<State>

    public init(ratePerSecond: Double?, nowNanoseconds now: UInt64) {
        precondition(ratePerSecond.map { $0 > 0 && $0.isFinite } ?? true, "a configured rate is positive and finite")
        configuredRatePerSecond = ratePerSecond
        state = Mutex(State(configured: ratePerSecond, now: now))
    }

    /// One permit for one request at `now`: `.granted`, or `.waitUntil` when the bucket is empty
    /// or the provider is paused.
    public func acquire(nowNanoseconds now: UInt64) -> RatePermit {
        state.withLock { $0.acquire(now) }
    }

    /// The provider said "too much" (FCM 429): halve the rate, then recover additively.
    /// `quota`: the answer named a per-minute quota (FCM's project quota). Then what the provider
    /// accepted over the last minute is what the quota allows: the rate goes no higher than 95 %
    /// of it a second, neither now nor as it recovers, for the rest of the run (when that minute
    /// holds at least `quotaEvidenceMin` requests and a second's worth at the current rate).
    public func throttled(nowNanoseconds now: UInt64, quota: Bool = false) {
        state.withLock { $0.throttled(now, quota: quota) }
    }

    public static let quotaEvidenceMin = 100
    public static let quotaShare = 0.95

    /// Retry-After: no permits at all until `untilNanoseconds`; the later of overlapping pauses
    /// wins. Returns whether this call began a pause or moved its end by a second or more (so
    /// that one line, not one per answer, tells of it).
    @discardableResult
    public func pause(untilNanoseconds until: UInt64, nowNanoseconds now: UInt64 = 0) -> Bool {
        state.withLock { state in
            let earlier = max(state.pausedUntil, now)
            state.pausedUntil = max(state.pausedUntil, until)
            return until >= earlier &+ 1_000_000_000
        }
    }

    /// The spread rule: device-level 429s (each a row's first) coming from at least
    /// `spreadCountMin` devices within one second, and at least `spreadShareMin` of the
    /// permits granted in that second, are the provider's own limit, whatever each body says:
    /// one device's quota never touches more than a few rows, while an overloaded provider or an
    /// exhausted project quota answers most of them. Counts this one and says whether the rule
    /// now holds.
    public func deviceThrottled(nowNanoseconds now: UInt64) -> Bool {
        state.withLock { state in
            state.deviceThrottles.record(now)
            let count = state.deviceThrottles.perSecond(now)
            return count >= Self.spreadCountMin && count >= Self.spreadShareMin * state.observed.perSecond(now)
        }
    }

    public static let spreadCountMin = 20.0
    public static let spreadShareMin = 0.2

    public func isPaused(nowNanoseconds now: UInt64) -> Bool {
        state.withLock { now < $0.pausedUntil }
    }

    /// The rate in force as of the last call (nil while unlimited), for the progress line.
    public var currentRatePerSecond: Double? {
        state.withLock { $0.bucket?.ratePerSecond }
    }

    /// The rate in force at `now` (recovery applied).
    public func currentRatePerSecond(nowNanoseconds now: UInt64) -> Double? {
        state.withLock { state in
            state.recover(now)
            return state.bucket?.ratePerSecond
        }
    }

    /// Permits granted over the last second, estimated from two 1-second counters.
    public func observedRatePerSecond(nowNanoseconds now: UInt64) -> Double {
        state.withLock { $0.observed.perSecond(now) }
    }

    struct Adaptation {
        /// The rate recovery climbs back to.
        var base: Double
        /// The rate right after the last throttle.
        var rateAfterThrottle: Double
        var throttledAt: UInt64
        /// Recovery steps already applied since `throttledAt`.
        var stepsApplied: UInt64 = 0
    }

    struct State {
        let configured: Double?
        /// nil while unlimited.
        var bucket: TokenBucket?
        var pausedUntil: UInt64 = 0
        /// Device-level 429s over the last second (the spread rule).
        var deviceThrottles: RateObserver
        /// Permits granted, less quota refusals, in each of the last 60 seconds.
        var lastMinute = MinuteCounts()
        /// The rate a per-minute quota allows, learned from its first overshoot; the rate stays
        /// at or under it for the rest of the run.
        var quotaCeiling: Double?
        /// Present from a throttle until the rate is back at its base.
        var adaptation: Adaptation?
        var observed: RateObserver

        init(configured: Double?, now: UInt64) {
            self.configured = configured
            bucket = configured.map { TokenBucket(ratePerSecond: $0, burst: ProviderRateLimiter.burst(forRatePerSecond: $0), nowNanoseconds: now) }
            observed = RateObserver(now: now)
            deviceThrottles = RateObserver(now: now)
        }

        mutating func acquire(_ now: UInt64) -> RatePermit {
            if now < pausedUntil { return .waitUntil(pausedUntil) }
            if adaptation != nil { recover(now) }
            if bucket != nil, !bucket!.take(nowNanoseconds: now) {
                return .waitUntil(bucket!.nextPermitNanoseconds(nowNanoseconds: now))
            }
            observed.record(now)
            lastMinute.record(now, 1)
            return .granted
        }

        mutating func throttled(_ now: UInt64, quota: Bool) {
            if quota { lastMinute.record(now, -1) }
            recover(now)
            if let adaptation, now < adaptation.throttledAt &+ ProviderRateLimiter.throttleWindowNanoseconds { return }
            var base = configured ?? adaptation?.base ?? max(1, observed.perSecond(now))
            let current = bucket?.ratePerSecond ?? base
            let floor = min(base, max(1, base * ProviderRateLimiter.floorShare))
            var reduced = max(floor, current / 2)
            let accepted = lastMinute.total(now)
            // Learned from a real overshoot: the minute's rate under half the current one, but at
            // least a second's worth of it (fewer accepted requests say the quota is someone
            // else's to use up, or the 429 is not about volume: then halving is the answer).
            // Later 429s at a rate this run chose itself would ratchet it down: learned once.
            if quota && quotaCeiling == nil && accepted >= ProviderRateLimiter.quotaEvidenceMin {
                let learned = ProviderRateLimiter.quotaShare * Double(accepted) / 60
                if learned < reduced && learned >= current / 60 && learned >= floor { quotaCeiling = learned }
            }
            if let quotaCeiling {
                reduced = min(reduced, quotaCeiling)
                base = min(base, quotaCeiling)
            }
            adaptation = Adaptation(base: base, rateAfterThrottle: reduced, throttledAt: now)
            setRate(reduced, now)
        }

        /// Applies the recovery steps due by `now`; ends the adaptation at the base.
        mutating func recover(_ now: UInt64) {
            guard var adaptation, now > adaptation.throttledAt else { return }
            let steps = (now - adaptation.throttledAt) / ProviderRateLimiter.recoveryStepNanoseconds
            guard steps != adaptation.stepsApplied else { return }
            adaptation.stepsApplied = steps
            let stepsPerSecond = Double(1_000_000_000 / ProviderRateLimiter.recoveryStepNanoseconds)
            let rate = adaptation.rateAfterThrottle + adaptation.base * ProviderRateLimiter.recoveryPerSecond * Double(steps) / stepsPerSecond
            if rate >= adaptation.base * (1 - 1e-9) {
                self.adaptation = nil
                if configured == nil {
                    bucket = nil
                } else {
                    setRate(adaptation.base, now)
                }
            } else {
                self.adaptation = adaptation
                setRate(rate, now)
            }
        }

        mutating func setRate(_ rate: Double, _ now: UInt64) {
            let burst = ProviderRateLimiter.burst(forRatePerSecond: rate)
            if bucket == nil {
                bucket = TokenBucket(ratePerSecond: rate, burst: burst, nowNanoseconds: now)
            } else {
                bucket!.setRate(rate, burst: burst, nowNanoseconds: now)
            }
        }
    }

    /// Counts in each of the last 60 whole seconds (a rolling minute, as FCM counts its quota).
    struct MinuteCounts {
        var counts = [Int](repeating: 0, count: 60)
        var seconds = [UInt64](repeating: UInt64.max, count: 60)

        mutating func record(_ now: UInt64, _ delta: Int) {
            let second = now / 1_000_000_000
            let slot = Int(second % 60)
            if seconds[slot] != second {
                seconds[slot] = second
                counts[slot] = 0
            }
            counts[slot] += delta
        }

        func total(_ now: UInt64) -> Int {
            let second = now / 1_000_000_000
            var sum = 0
            for i in 0..<60 where seconds[i] != UInt64.max && seconds[i] + 60 > second { sum += counts[i] }
            return sum
        }
    }

    /// Permits granted in the current and the previous 1-second window; the estimate of the last
    /// second weights the previous window by the part of it still inside the last second.
    struct RateObserver {
        static let windowNanoseconds: UInt64 = 1_000_000_000
        var windowStart: UInt64
        var current: Double = 0
        var previous: Double = 0

        init(now: UInt64) { windowStart = now }

        mutating func record(_ now: UInt64) {
            rotate(now)
            current += 1
        }

        func perSecond(_ now: UInt64) -> Double {
            var copy = self
            copy.rotate(now)
            let elapsed = now > copy.windowStart ? Double(now - copy.windowStart) / Double(Self.windowNanoseconds) : 0
            return copy.previous * (1 - elapsed) + copy.current
        }

        private mutating func rotate(_ now: UInt64) {
            guard now >= windowStart &+ Self.windowNanoseconds else { return }
            let windows = (now - windowStart) / Self.windowNanoseconds
            previous = windows == 1 ? current : 0
            current = 0
            windowStart += windows * Self.windowNanoseconds
        }
    }
}
