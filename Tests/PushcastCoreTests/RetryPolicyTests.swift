import PushcastCore
import XCTest

final class RetryPolicyTests: XCTestCase {
    func testCeilingsDoubleUpToTheCap() {
        let policy = RetryPolicy()
        XCTAssertEqual((1...11).map { policy.delayCeilingNanoseconds(retry: $0) / 1_000_000 },
                       [100, 200, 400, 800, 1600, 3200, 6400, 12800, 25600, 30000, 30000])
        XCTAssertEqual(policy.delayCeilingNanoseconds(retry: 1000), 30_000_000_000)
    }

    func testFullJitterStaysInRangeAndIsSeeded() {
        let policy = RetryPolicy()
        let random = SplitMix64(seed: 7)
        var sums = [UInt64](repeating: 0, count: 4)
        for _ in 0..<10_000 {
            for retry in 1...4 {
                let delay = policy.delayNanoseconds(retry: retry, random: random)
                XCTAssertLessThanOrEqual(delay, policy.delayCeilingNanoseconds(retry: retry))
                sums[retry - 1] += delay
            }
        }
        // Full jitter averages half the ceiling.
        for retry in 1...4 {
            let mean = Double(sums[retry - 1]) / 10_000
            let half = Double(policy.delayCeilingNanoseconds(retry: retry)) / 2
            XCTAssertEqual(mean, half, accuracy: half * 0.05, "retry \(retry)")
        }
        let a = SplitMix64(seed: 99), b = SplitMix64(seed: 99)
        XCTAssertEqual((1...5).map { policy.delayNanoseconds(retry: $0, random: a) }, (1...5).map { policy.delayNanoseconds(retry: $0, random: b) })
    }

    func testAttempts() {
        let policy = RetryPolicy(attemptsMax: 5)
        XCTAssertTrue(policy.mayRetry(attemptsMade: 1))
        XCTAssertTrue(policy.mayRetry(attemptsMade: 4))
        XCTAssertFalse(policy.mayRetry(attemptsMade: 5))
        XCTAssertFalse(RetryPolicy(attemptsMax: 1).mayRetry(attemptsMade: 1))
    }
}
