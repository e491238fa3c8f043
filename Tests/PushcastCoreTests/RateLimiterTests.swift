import Dispatch
import Foundation
import PushcastCore
import XCTest

private let second: UInt64 = 1_000_000_000
private let millisecond: UInt64 = 1_000_000

final class TokenBucketTests: XCTestCase {
    /// Takes every permit as soon as it is due, jumping from one permit time to the next, and
    /// counts the permits granted in [start, end].
    private func drain(_ bucket: inout TokenBucket, from start: UInt64, through end: UInt64) -> Int {
        var now = start
        var granted = 0
        while now <= end {
            if bucket.take(nowNanoseconds: now) {
                granted += 1
            } else {
                let next = bucket.nextPermitNanoseconds(nowNanoseconds: now)
                XCTAssertGreaterThan(next, now)
                now = next
            }
        }
        return granted
    }

    func testStartsFullWithBurstPermits() {
        var bucket = TokenBucket(ratePerSecond: 1000, burst: 10, nowNanoseconds: 5 * second)
        XCTAssertEqual(bucket.permitsAvailable(nowNanoseconds: 5 * second), 10)
        for _ in 0..<10 { XCTAssertTrue(bucket.take(nowNanoseconds: 5 * second)) }
        XCTAssertFalse(bucket.take(nowNanoseconds: 5 * second))
        XCTAssertEqual(bucket.permitsAvailable(nowNanoseconds: 5 * second), 0)
    }

    func testNextPermitIsExactlyOneIntervalAfterTheBurstIsSpent() {
        var bucket = TokenBucket(ratePerSecond: 1000, burst: 10, nowNanoseconds: 0)
        for _ in 0..<10 { XCTAssertTrue(bucket.take(nowNanoseconds: 0)) }
        XCTAssertEqual(bucket.intervalNanoseconds, millisecond)
        XCTAssertEqual(bucket.nextPermitNanoseconds(nowNanoseconds: 0), millisecond)
        XCTAssertEqual(bucket.nextPermitNanoseconds(nowNanoseconds: 400_000), millisecond)
        XCTAssertFalse(bucket.take(nowNanoseconds: millisecond - 1))
        XCTAssertTrue(bucket.take(nowNanoseconds: millisecond))
        XCTAssertFalse(bucket.take(nowNanoseconds: millisecond))
        XCTAssertEqual(bucket.nextPermitNanoseconds(nowNanoseconds: millisecond), 2 * millisecond)
        // When a permit is there, the next one is now.
        XCTAssertEqual(bucket.nextPermitNanoseconds(nowNanoseconds: 50 * millisecond), 50 * millisecond)
    }

    func testExactPermitCountsOverSimulatedSeconds() {
        // Over [0, T]: the burst plus one permit per interval, floor(T / interval).
        let cases: [(rate: Double, burst: Double, seconds: UInt64, expected: Int)] = [
            (2000, 40, 10, 40 + 20_000),
            (1000, 20, 10, 20 + 10_000),
            (500, 10, 3, 10 + 1500),
            (50, 1, 60, 1 + 3000),
            (3, 1, 10, 1 + 30),              // interval 333,333,333 ns: 30 × it <= 10 s
            (7.0 / 60.0, 1, 600, 1 + 70),    // 7/min, interval 8,571,428,571 ns
            (1_000_000, 20_000, 1, 20_000 + 1_000_000),
        ]
        for item in cases {
            var bucket = TokenBucket(ratePerSecond: item.rate, burst: item.burst, nowNanoseconds: 0)
            XCTAssertEqual(drain(&bucket, from: 0, through: item.seconds * second), item.expected, "rate \(item.rate)")
        }
    }

    func testGreedyPollingEveryMillisecondSeesTheSameCount() {
        // 2000/s with the limiter's burst (1/50 s): 2 permits a millisecond after the first 40.
        var bucket = TokenBucket(ratePerSecond: 2000, burst: 40, nowNanoseconds: 0)
        var granted = 0
        var perSecond = [Int](repeating: 0, count: 10)
        for tick in 0..<10_000 {
            let now = UInt64(tick) * millisecond
            while bucket.take(nowNanoseconds: now) {
                granted += 1
                perSecond[tick / 1000] += 1
            }
        }
        XCTAssertEqual(granted, 40 + 2 * 9_999)
        XCTAssertEqual(perSecond[0], 40 + 2 * 999)
        XCTAssertEqual(Array(perSecond.dropFirst()), Array(repeating: 2000, count: 9))
    }

    func testAnIdleBucketRefillsOnlyToItsBurst() {
        var bucket = TokenBucket(ratePerSecond: 100, burst: 5, nowNanoseconds: 0)
        XCTAssertEqual(drain(&bucket, from: 0, through: 0), 5)
        XCTAssertEqual(bucket.permitsAvailable(nowNanoseconds: 3600 * second), 5)
        XCTAssertEqual(drain(&bucket, from: 3600 * second, through: 3600 * second), 5)
    }

    func testSetRateKeepsWhatIsOwed() {
        var full = TokenBucket(ratePerSecond: 100, burst: 5, nowNanoseconds: 0)
        full.setRate(1000, nowNanoseconds: 0)
        XCTAssertEqual(full.ratePerSecond, 1000)
        XCTAssertEqual(full.burst, 5)
        XCTAssertEqual(full.permitsAvailable(nowNanoseconds: 0), 5)

        var empty = TokenBucket(ratePerSecond: 100, burst: 5, nowNanoseconds: 0)
        XCTAssertEqual(drain(&empty, from: 0, through: 0), 5)
        XCTAssertEqual(empty.nextPermitNanoseconds(nowNanoseconds: 0), 10 * millisecond)
        empty.setRate(1000, nowNanoseconds: 0)
        XCTAssertEqual(empty.nextPermitNanoseconds(nowNanoseconds: 0), millisecond)
        empty.setRate(10, burst: 2, nowNanoseconds: 0)
        // 5 permits owed at 100 ms each, tolerance 1 interval: the next permit at 400 ms.
        XCTAssertEqual(empty.nextPermitNanoseconds(nowNanoseconds: 0), 400 * millisecond)
        XCTAssertEqual(empty.burst, 2)
    }

    func testAClockReadEarlierByAnotherThreadIsHarmless() {
        var bucket = TokenBucket(ratePerSecond: 1000, burst: 1, nowNanoseconds: 10 * second)
        XCTAssertTrue(bucket.take(nowNanoseconds: 10 * second))
        XCTAssertFalse(bucket.take(nowNanoseconds: 9 * second))
        XCTAssertEqual(bucket.nextPermitNanoseconds(nowNanoseconds: 9 * second), 10 * second + millisecond)
        XCTAssertEqual(bucket.permitsAvailable(nowNanoseconds: 0), 0)
        var early = TokenBucket(ratePerSecond: 1, burst: 3, nowNanoseconds: 0)
        XCTAssertTrue(early.take(nowNanoseconds: 0))
    }

    func testExtremeRatesStayInRange() {
        var fast = TokenBucket(ratePerSecond: 1e12, burst: 1, nowNanoseconds: 0)
        XCTAssertEqual(fast.intervalNanoseconds, 1)
        XCTAssertTrue(fast.take(nowNanoseconds: 0))
        XCTAssertEqual(fast.nextPermitNanoseconds(nowNanoseconds: 0), 1)
        var slow = TokenBucket(ratePerSecond: 1e-15, burst: 1, nowNanoseconds: .max - 10)
        XCTAssertTrue(slow.take(nowNanoseconds: .max - 10))
        XCTAssertFalse(slow.take(nowNanoseconds: .max - 1))
        XCTAssertEqual(slow.nextPermitNanoseconds(nowNanoseconds: .max - 5), .max)
    }
}

final class ProviderRateLimiterTests: XCTestCase {
    private func rate(_ limiter: ProviderRateLimiter, at now: UInt64) -> Double? {
        limiter.currentRatePerSecond(nowNanoseconds: now)
    }

    func testUnlimitedGrantsEverything() {
        let limiter = ProviderRateLimiter(ratePerSecond: nil, nowNanoseconds: 0)
        for index in 0..<100_000 { XCTAssertEqual(limiter.acquire(nowNanoseconds: UInt64(index)), .granted) }
        XCTAssertNil(limiter.currentRatePerSecond)
        XCTAssertNil(limiter.configuredRatePerSecond)
    }

    func testBurstIsOneFiftiethOfASecondAndAtLeastOne() {
        XCTAssertEqual(ProviderRateLimiter.burst(forRatePerSecond: 2000), 40)
        XCTAssertEqual(ProviderRateLimiter.burst(forRatePerSecond: 10), 1)
        XCTAssertEqual(ProviderRateLimiter.burst(forRatePerSecond: 0.5), 1)
    }

    func testAConfiguredRateHoldsWithinFivePercentInEverySecondAfterTheFirst() {
        let limiter = ProviderRateLimiter(ratePerSecond: 2000, nowNanoseconds: 0)
        XCTAssertEqual(limiter.currentRatePerSecond, 2000)
        // Workers that poll at irregular moments (0-300 µs apart) and take all they are given.
        let random = SplitMix64(seed: 7)
        var grants: [UInt64] = []
        var now: UInt64 = 0
        while now < 10 * second {
            switch limiter.acquire(nowNanoseconds: now) {
            case .granted:
                grants.append(now)
            case .waitUntil(let time):
                XCTAssertGreaterThan(time, now)
                now = max(now + random.next(below: 300_000), time)
            }
        }
        var start: UInt64 = second
        while start + second <= 10 * second {
            let count = firstIndex(in: grants, atOrAfter: start + second) - firstIndex(in: grants, atOrAfter: start)
            XCTAssertLessThanOrEqual(abs(count - 2000), 100, "window at \(start)")
            XCTAssertLessThanOrEqual(count, 2000 + 40 + 1, "window at \(start)")
            start += 37 * millisecond
        }
    }

    /// Binary search in sorted times.
    private func firstIndex(in times: [UInt64], atOrAfter time: UInt64) -> Int {
        var low = 0, high = times.count
        while low < high {
            let middle = (low + high) / 2
            if times[middle] < time { low = middle + 1 } else { high = middle }
        }
        return low
    }

    func testPauseBlocksUntilItsEndAndTheLaterPauseWins() {
        let limiter = ProviderRateLimiter(ratePerSecond: nil, nowNanoseconds: 0)
        limiter.pause(untilNanoseconds: 5 * second)
        XCTAssertTrue(limiter.isPaused(nowNanoseconds: second))
        XCTAssertEqual(limiter.acquire(nowNanoseconds: second), .waitUntil(5 * second))
        limiter.pause(untilNanoseconds: 3 * second)
        XCTAssertEqual(limiter.acquire(nowNanoseconds: 4 * second), .waitUntil(5 * second))
        limiter.pause(untilNanoseconds: 7 * second)
        XCTAssertEqual(limiter.acquire(nowNanoseconds: 6 * second), .waitUntil(7 * second))
        XCTAssertTrue(limiter.isPaused(nowNanoseconds: 7 * second - 1))
        XCTAssertFalse(limiter.isPaused(nowNanoseconds: 7 * second))
        XCTAssertEqual(limiter.acquire(nowNanoseconds: 7 * second), .granted)
    }

    func testAPausedLimitedProviderResumesWithItsBucket() {
        let limiter = ProviderRateLimiter(ratePerSecond: 100, nowNanoseconds: 0)
        limiter.pause(untilNanoseconds: second)
        XCTAssertEqual(limiter.acquire(nowNanoseconds: 0), .waitUntil(second))
        XCTAssertEqual(limiter.acquire(nowNanoseconds: second), .granted)
        // Burst 2 (100/50): one more now, then 10 ms apart.
        XCTAssertEqual(limiter.acquire(nowNanoseconds: second), .granted)
        XCTAssertEqual(limiter.acquire(nowNanoseconds: second), .waitUntil(second + 10 * millisecond))
    }

    func testThrottleHalvesAtMostOncePerWindow() {
        let limiter = ProviderRateLimiter(ratePerSecond: 1000, nowNanoseconds: 0)
        let t0 = 10 * second
        limiter.throttled(nowNanoseconds: t0)
        XCTAssertEqual(rate(limiter, at: t0), 500)
        // The same overload answers many requests in flight: ignored within the window.
        limiter.throttled(nowNanoseconds: t0 + 1)
        limiter.throttled(nowNanoseconds: t0 + 999 * millisecond)
        XCTAssertEqual(try XCTUnwrap(rate(limiter, at: t0 + 999 * millisecond)), 590, accuracy: 1e-9)
        // One window on: recovered to 600 by then, halved to 300.
        limiter.throttled(nowNanoseconds: t0 + second)
        XCTAssertEqual(try XCTUnwrap(rate(limiter, at: t0 + second)), 300, accuracy: 1e-9)
        XCTAssertEqual(limiter.configuredRatePerSecond, 1000)
    }

    func testRecoveryIsAdditiveTenPercentOfTheBaseASecond() throws {
        let limiter = ProviderRateLimiter(ratePerSecond: 1000, nowNanoseconds: 0)
        let t0 = 2 * second
        limiter.throttled(nowNanoseconds: t0)
        let timeline: [(UInt64, Double)] = [
            (0, 500), (99 * millisecond, 500), (100 * millisecond, 510), (550 * millisecond, 550),
            (second, 600), (2 * second, 700), (4900 * millisecond, 990), (5 * second, 1000), (60 * second, 1000),
        ]
        for (offset, expected) in timeline {
            XCTAssertEqual(try XCTUnwrap(rate(limiter, at: t0 + offset)), expected, accuracy: 1e-9, "at +\(offset) ns")
        }
        // Recovered: the next throttle halves from the base again.
        limiter.throttled(nowNanoseconds: t0 + 61 * second)
        XCTAssertEqual(rate(limiter, at: t0 + 61 * second), 500)
    }

    func testTheThrottledRateIsEnforced() {
        let limiter = ProviderRateLimiter(ratePerSecond: 1000, nowNanoseconds: 0)
        // Spend the burst (20), then throttle: 500/s is 2 ms a permit, the 20 permits owed now
        // weigh 40 ms (tolerance 18 ms), so permits come at 22, 24, ... 88 ms.
        while limiter.acquire(nowNanoseconds: 0) == .granted {}
        limiter.throttled(nowNanoseconds: 0)
        var granted = 0
        var now: UInt64 = 0
        while now < 90 * millisecond {  // within the first recovery step
            switch limiter.acquire(nowNanoseconds: now) {
            case .granted: granted += 1
            case .waitUntil(let time): now = time
            }
        }
        XCTAssertEqual(granted, 34)
    }

    func testTheFloorIsOnePercentOfTheBaseAndAtLeastOnePerSecondButNeverAboveTheBase() throws {
        let slow = ProviderRateLimiter(ratePerSecond: 1.5, nowNanoseconds: 0)
        slow.throttled(nowNanoseconds: second)
        XCTAssertEqual(rate(slow, at: second), 1)
        let slower = ProviderRateLimiter(ratePerSecond: 0.5, nowNanoseconds: 0)
        slower.throttled(nowNanoseconds: second)
        XCTAssertEqual(rate(slower, at: second), 0.5)
        // Halving every window against a 10 %/s recovery settles near 10 % of the base, above the floor.
        let busy = ProviderRateLimiter(ratePerSecond: 10_000, nowNanoseconds: 0)
        for index in 1...40 { busy.throttled(nowNanoseconds: UInt64(index) * second) }
        let settled = try XCTUnwrap(rate(busy, at: 40 * second))
        XCTAssertEqual(settled, 1000, accuracy: 1)
        XCTAssertGreaterThanOrEqual(settled, 100)
    }

    func testUnlimitedProviderThrottlesFromItsObservedRateAndBecomesUnlimitedAgain() throws {
        let limiter = ProviderRateLimiter(ratePerSecond: nil, nowNanoseconds: 0)
        for index in 0..<3000 { XCTAssertEqual(limiter.acquire(nowNanoseconds: UInt64(index) * 333_333), .granted) }
        XCTAssertEqual(limiter.observedRatePerSecond(nowNanoseconds: second), 3000, accuracy: 1e-9)
        XCTAssertEqual(limiter.observedRatePerSecond(nowNanoseconds: second + 500 * millisecond), 1500, accuracy: 1e-6)
        limiter.throttled(nowNanoseconds: second)
        XCTAssertEqual(limiter.currentRatePerSecond, 1500)
        XCTAssertEqual(try XCTUnwrap(rate(limiter, at: second + second)), 1800, accuracy: 1e-9)
        XCTAssertEqual(try XCTUnwrap(rate(limiter, at: second + 4900 * millisecond)), 2970, accuracy: 1e-9)
        XCTAssertNil(rate(limiter, at: 6 * second))
        for index in 0..<10_000 { XCTAssertEqual(limiter.acquire(nowNanoseconds: 6 * second + UInt64(index)), .granted) }
    }

    func testUnlimitedProviderThrottledBeforeAnyTrafficGoesToOnePerSecond() {
        let limiter = ProviderRateLimiter(ratePerSecond: nil, nowNanoseconds: 0)
        limiter.throttled(nowNanoseconds: 0)
        XCTAssertEqual(limiter.currentRatePerSecond, 1)
        XCTAssertEqual(limiter.acquire(nowNanoseconds: 0), .granted)
        XCTAssertEqual(limiter.acquire(nowNanoseconds: 0), .waitUntil(second))
    }

    func testObservedRateWindowsRotate() {
        let limiter = ProviderRateLimiter(ratePerSecond: nil, nowNanoseconds: 0)
        for index in 0..<100 { _ = limiter.acquire(nowNanoseconds: UInt64(index) * millisecond) }
        XCTAssertEqual(limiter.observedRatePerSecond(nowNanoseconds: 500 * millisecond), 100)
        XCTAssertEqual(limiter.observedRatePerSecond(nowNanoseconds: 1250 * millisecond), 75, accuracy: 1e-9)
        XCTAssertEqual(limiter.observedRatePerSecond(nowNanoseconds: 2 * second), 0)
        XCTAssertEqual(limiter.observedRatePerSecond(nowNanoseconds: 3600 * second), 0)
    }

    func testConcurrentAcquirersShareOneBucket() {
        // 8 threads at the same instant: exactly the burst is granted.
        let limiter = ProviderRateLimiter(ratePerSecond: 2000, nowNanoseconds: 0)
        let counts = GrantCounter()
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            var granted = 0
            for _ in 0..<500 where limiter.acquire(nowNanoseconds: 0) == .granted { granted += 1 }
            counts.add(granted)
        }
        XCTAssertEqual(counts.total, 40)

        // 8 threads walking their own clocks over 20 ms at 100,000/s (burst 2000, 10 µs a permit):
        // never more than the bucket's arithmetic allows, never less than its burst.
        let shared = ProviderRateLimiter(ratePerSecond: 100_000, nowNanoseconds: 0)
        let walked = GrantCounter()
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            var granted = 0
            for step in 0..<2000 where shared.acquire(nowNanoseconds: UInt64(step) * 10_000) == .granted { granted += 1 }
            walked.add(granted)
        }
        XCTAssertLessThanOrEqual(walked.total, 2000 + 1999 + 1)
        XCTAssertGreaterThanOrEqual(walked.total, 2000)
    }
}

/// A thread-safe total for the concurrency test.
private final class GrantCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var value = 0
    func add(_ count: Int) { lock.lock(); value += count; lock.unlock() }
    var total: Int { lock.lock(); defer { lock.unlock() }; return value }

    /// A per-minute quota (FCM's project quota) met by a burst: 10,000/s for 6 s fills a 60,000
    /// a minute quota. Its 429 sets the rate to 95 % of what the minute took (950/s), and the
    /// recovery stops there, for the rest of the run; a later 429 halves from it as usual.
    func testAPerMinuteQuotaIsLearnedFromItsOvershootAndNotPassedAgain() {
        let second: UInt64 = 1_000_000_000
        let limiter = ProviderRateLimiter(ratePerSecond: 10_000, nowNanoseconds: 0)
        var now: UInt64 = 0
        var granted = 0
        while now < 6 * second {
            if case .granted = limiter.acquire(nowNanoseconds: now) { granted += 1 }
            now += 100_000
        }
        XCTAssertEqual(Double(granted), 60_000, accuracy: 600)
        limiter.throttled(nowNanoseconds: now, quota: true)
        let learned = 0.95 * Double(granted - 1) / 60
        XCTAssertEqual(limiter.currentRatePerSecond ?? 0, learned, accuracy: 1)
        XCTAssertEqual(limiter.currentRatePerSecond(nowNanoseconds: now + 120 * second) ?? 0, learned, accuracy: 1, "no recovery past the quota")
        limiter.throttled(nowNanoseconds: now + 121 * second, quota: true)
        XCTAssertEqual(limiter.currentRatePerSecond ?? 0, learned / 2, accuracy: 1, "a later 429 halves, and learns nothing lower")
        XCTAssertEqual(limiter.currentRatePerSecond(nowNanoseconds: now + 200 * second) ?? 0, learned, accuracy: 1)
    }

    /// A quota 429 after a few requests (the quota used up by others, or not about volume) learns
    /// nothing: the rate halves and recovers to the configured one, as for any throttle.
    func testAQuotaAnswerWithLittleEvidenceOnlyHalves() {
        let limiter = ProviderRateLimiter(ratePerSecond: 5000, nowNanoseconds: 0)
        for i in 0..<150 { _ = limiter.acquire(nowNanoseconds: UInt64(i) * 1_000_000) }
        limiter.throttled(nowNanoseconds: 1_000_000_000, quota: true)
        XCTAssertEqual(limiter.currentRatePerSecond, 2500)
        XCTAssertEqual(limiter.currentRatePerSecond(nowNanoseconds: 60_000_000_000), 5000)
    }
}
