import PushcastAPNs
import PushcastCore
@testable import PushcastEngine
import PushcastWire
import XCTest

/// Every way a row can go again is bounded: resends the server never processed (REFUSED_STREAM,
/// GOAWAY-unprocessed, never sent) have a budget of their own, and `--request-timeout` bounds a
/// row's whole time. Before these bounds, a server refusing every stream made 10 rows into
/// 150,540 requests in 40 s.
final class BoundedRetryTests: XCTestCase {
    struct Rig {
        let clock = ManualClock(nanoseconds: 1_000_000_000)
        let channel = NotificationChannel(capacity: 64)
        let outcomes = OutcomeChannel()
        let workload: APNsWorkload

        init(resendsMax: Int, rowDeadlineNanoseconds: UInt64? = nil, retryUnknown: Bool = false, attemptsMax: Int = 5) throws {
            let pair = try APNsKeyPair.generate()
            let source = try APNsTokenSource(privateKeyPEM: pair.privateKeyPEM, keyID: "KEY0000001", teamID: "TEAM000001", clock: clock)
            let headers = try APNsCampaignHeaders(topic: "com.example.app", nowEpochSeconds: clock.secondsSinceEpoch())
            let retry = RetryPolicy(delayBaseNanoseconds: 100_000_000, delayMaxNanoseconds: 1_000_000_000, attemptsMax: attemptsMax)
            let settings = APNsSendSettings(headers: headers, tokenSource: source, authority: "api.push.apple.com")
            let policy = SendPolicy(retry: retry, retryUnknown: retryUnknown, resendsMax: resendsMax,
                                    rowDeadlineNanoseconds: rowDeadlineNanoseconds)
            workload = SendWorkload(adapter: APNsAdapter(settings: settings), policy: policy, channel: channel, outcomes: outcomes,
                                    gauge: WorkerGauge(), clock: clock, random: SplitMix64(seed: 3), inFlightMax: 32)
        }

        func feed(_ count: Int) {
            var batch = (1...count).map { i in
                PreparedNotification(row: i, id: nil, token: String(format: "%064x", i), messageID: "id-\(i)", payload: Array("{}".utf8))
            }
            channel.push(&batch)
            channel.close()
        }

        func drain() -> [OutcomeRecord] {
            workload.turnEnded()
            var out: [OutcomeRecord] = []
            outcomes.take(into: &out, timeoutSeconds: 0)
            return out
        }

        /// Answers every request the workload hands out with `failure`, moving the clock to each
        /// retry's time, until the workload is exhausted; returns the requests made. Bounded: a
        /// workload that never gives up fails the test instead of hanging it.
        func failEverything(_ failure: HTTP2StreamFailure, limit: Int = 10_000) -> Int {
            var requests = 0
            while !workload.isExhausted {
                if let (_, tag) = workload.nextRequest() {
                    requests += 1
                    workload.failed(tag: tag, failure: failure)
                } else if let next = workload.nextReadyNanoseconds, next > clock.nanoseconds {
                    clock.nanoseconds = next
                } else if workload.nextReadyNanoseconds == nil {
                    XCTFail("nothing ready and not exhausted")
                    return requests
                }
                if requests > limit {
                    XCTFail("more than \(limit) requests: the resends are not bounded")
                    return requests
                }
            }
            return requests
        }
    }

    func testRefusedEveryTimeEndsFailedAfterTheResendBudget() throws {
        let rig = try Rig(resendsMax: 4)
        rig.feed(10)
        let requests = rig.failEverything(.refusedStream)
        XCTAssertEqual(requests, 10 * 5, "one send and four resends per row")
        let out = rig.drain()
        XCTAssertEqual(out.count, 10)
        XCTAssertTrue(out.allSatisfy { $0.outcome == .failed && $0.reason == OutcomeReason.refusedStream }, "\(out.map(\.reason))")
        XCTAssertTrue(out.allSatisfy { $0.attempts == 0 }, "refusals are not attempts")
    }

    func testGoAwayUnprocessedAndNotSentNameWhatHappened() throws {
        for (failure, reason) in [(HTTP2StreamFailure.goAwayUnprocessed, OutcomeReason.goAwayUnprocessed),
                                  (.notSent, OutcomeReason.notSent)] {
            let rig = try Rig(resendsMax: 2)
            rig.feed(3)
            XCTAssertEqual(rig.failEverything(failure), 9)
            XCTAssertEqual(Set(rig.drain().map(\.reason)), [reason])
        }
    }

    func testResendsAfterTheFirstWaitAGrowingJitteredPause() throws {
        let rig = try Rig(resendsMax: 10)
        rig.feed(1)
        let start = rig.clock.nanoseconds
        var (_, tag) = try XCTUnwrap(rig.workload.nextRequest())
        rig.workload.failed(tag: tag, failure: .refusedStream)
        // The first resend goes at once (a graceful GOAWAY moves it to a fresh connection) ...
        (_, tag) = try XCTUnwrap(rig.workload.nextRequest())
        rig.workload.failed(tag: tag, failure: .refusedStream)
        // ... the next one waits.
        XCTAssertNil(rig.workload.nextRequest())
        let ready = try XCTUnwrap(rig.workload.nextReadyNanoseconds)
        XCTAssertGreaterThan(ready, start)
        XCTAssertLessThanOrEqual(ready - start, 50_000_000)
    }

    /// A stopped run sends nothing more, so a retry that falls due must not wake the worker: it
    /// would poll without waiting, turn after turn, until the answers in flight came (the
    /// simulator found a worker spinning after a failed sync stopped the run).
    func testAStoppedRunAsksForNoWakeUpForItsRetries() throws {
        let rig = try Rig(resendsMax: 10)
        rig.feed(2)
        var (_, tag) = try XCTUnwrap(rig.workload.nextRequest())
        rig.workload.failed(tag: tag, failure: .refusedStream)
        (_, tag) = try XCTUnwrap(rig.workload.nextRequest())
        rig.workload.failed(tag: tag, failure: .refusedStream)
        XCTAssertNotNil(rig.workload.nextReadyNanoseconds, "a retry waits")
        rig.outcomes.stop(reason: "cannot sync results: Input/output error; stopped sending")
        rig.clock.nanoseconds += 10_000_000_000
        XCTAssertNil(rig.workload.nextReadyNanoseconds)
        XCTAssertNil(rig.workload.nextRequest())
        XCTAssertTrue(rig.workload.isExhausted)
    }

    func testRowDeadlineEndsRetriesOf503() throws {
        // 503 forever with 100 attempts allowed: the 2 s row budget ends it long before.
        let rig = try Rig(resendsMax: 10, rowDeadlineNanoseconds: 2_000_000_000, attemptsMax: 100)
        rig.feed(1)
        var requests = 0
        while !rig.workload.isExhausted && requests < 1000 {
            if let (_, tag) = rig.workload.nextRequest() {
                requests += 1
                rig.workload.received(tag: tag, response: HTTP2Response(status: 503, headers: [], body: Array(#"{"reason":"ServiceUnavailable"}"#.utf8)))
            } else if let next = rig.workload.nextReadyNanoseconds {
                rig.clock.nanoseconds = max(rig.clock.nanoseconds + 1, next)
            }
        }
        XCTAssertTrue(rig.workload.isExhausted)
        XCTAssertLessThan(requests, 100)
        let out = rig.drain()
        XCTAssertEqual(out.map(\.outcome), [.failed])
        XCTAssertEqual(out.first?.reason, "ServiceUnavailable")
    }

    func testARowThatMayHaveGoneOutNeverEndsFailed() throws {
        // Lost once after sending (retried with --retry-unknown), then refused until the budget
        // ends: it may have been delivered the first time, so it is unknown, not failed.
        let rig = try Rig(resendsMax: 1, retryUnknown: true)
        rig.feed(1)
        var (_, tag) = try XCTUnwrap(rig.workload.nextRequest())
        rig.workload.failed(tag: tag, failure: .connectionLost)
        rig.clock.nanoseconds = try XCTUnwrap(rig.workload.nextReadyNanoseconds)
        (_, tag) = try XCTUnwrap(rig.workload.nextRequest())
        rig.workload.failed(tag: tag, failure: .refusedStream)
        (_, tag) = try XCTUnwrap(rig.workload.nextRequest())
        rig.workload.failed(tag: tag, failure: .refusedStream)
        let out = rig.drain()
        XCTAssertEqual(out.map(\.outcome), [.unknown])
        XCTAssertEqual(out.first?.reason, OutcomeReason.refusedStream)
    }
}
