// Exponential backoff with full jitter (AWS architecture blog, "Exponential Backoff And Jitter";
// Firebase's scale guide asks for jittered backoff to avoid retry amplification, docs/PROTOCOL.md
// §2.5). Pure arithmetic on an injected random source, so a seeded simulation replays exactly.

public struct RetryPolicy: Sendable, Equatable {
    /// The ceiling of the first retry's delay range.
    public var delayBaseNanoseconds: UInt64
    /// No delay exceeds this.
    public var delayMaxNanoseconds: UInt64
    /// Attempts in total, the first send included (`--max-attempts`, default 5).
    public var attemptsMax: Int

    public init(delayBaseNanoseconds: UInt64 = 100_000_000, delayMaxNanoseconds: UInt64 = 30_000_000_000, attemptsMax: Int = 5) {
        precondition(attemptsMax >= 1, "attemptsMax counts the first send, so it is at least 1")
        precondition(delayBaseNanoseconds > 0 && delayBaseNanoseconds <= delayMaxNanoseconds, "need 0 < base <= max")
        self.delayBaseNanoseconds = delayBaseNanoseconds
        self.delayMaxNanoseconds = delayMaxNanoseconds
        self.attemptsMax = attemptsMax
    }

    /// Whether a row that has been sent `attemptsMade` times may be sent again.
    @inline(__always)
    public func mayRetry(attemptsMade: Int) -> Bool { attemptsMade < attemptsMax }

    /// The ceiling of the delay before retry number `retry` (1 for the first retry):
    /// min(max, base × 2^(retry−1)), without overflow.
    public func delayCeilingNanoseconds(retry: Int) -> UInt64 {
        precondition(retry >= 1)
        let shift = retry - 1
        guard shift < 64, delayBaseNanoseconds <= delayMaxNanoseconds >> UInt64(shift) else { return delayMaxNanoseconds }
        return delayBaseNanoseconds << UInt64(shift)
    }

    /// The delay before retry number `retry`: uniform in 0...ceiling ("full jitter").
    public func delayNanoseconds(retry: Int, random: some RandomSource) -> UInt64 {
        let ceiling = delayCeilingNanoseconds(retry: retry)
        if ceiling == .max { return random.next() }
        // Lemire's multiply-high maps 64 random bits onto 0...ceiling with negligible bias.
        return random.next().multipliedFullWidth(by: ceiling + 1).high
    }
}

/// Whose limit a retryable answer is about, which decides who waits.
public enum ThrottleScope: Sendable, Equatable {
    /// Not a limit (a 5xx): the row retries after its back-off.
    case none
    /// One device's own limit (APNs 429 TooManyRequests, FCM's per-device quota): only that row
    /// waits; the provider's pace does not change.
    case device
    /// The provider as a whole (FCM's project quota): its rate halves and it pauses.
    case provider
}
