import PushcastAPNs
import PushcastCore
@testable import PushcastEngine
import PushcastProviderKit
import PushcastWire
import XCTest

/// The APNs workload driven in memory: requests out, responses and failures in, outcomes checked.
final class APNsWorkloadTests: XCTestCase {
    struct Rig {
        let clock = ManualClock(nanoseconds: 1_000_000_000)
        let channel = NotificationChannel(capacity: 64)
        let outcomes = OutcomeChannel()
        let workload: APNsWorkload
        let source: APNsTokenSource

        init(retryUnknown: Bool = false, attemptsMax: Int = 3) throws {
            let pair = try APNsKeyPair.generate()
            source = try APNsTokenSource(privateKeyPEM: pair.privateKeyPEM, keyID: "KEY0000001", teamID: "TEAM000001", clock: clock)
            let headers = try APNsCampaignHeaders(topic: "com.example.app", nowEpochSeconds: clock.secondsSinceEpoch())
            let settings = APNsSendSettings(headers: headers, tokenSource: source, authority: "api.push.apple.com")
            let retry = RetryPolicy(delayBaseNanoseconds: 100_000_000, delayMaxNanoseconds: 1_000_000_000, attemptsMax: attemptsMax)
            workload = APNsWorkload(adapter: APNsAdapter(settings: settings), policy: SendPolicy(retry: retry, retryUnknown: retryUnknown),
                                    channel: channel, outcomes: outcomes, gauge: WorkerGauge(), clock: clock, random: SplitMix64(seed: 9),
                                    inFlightMax: 32)
        }

        func feed(_ count: Int, close: Bool = true) {
            var batch = (1...count).map { i in
                PreparedNotification(row: i, id: "d\(i)", token: String(format: "%064x", i), messageID: "id-\(i)",
                                     payload: Array("{\"aps\":{}}".utf8))
            }
            channel.push(&batch)
            if close { channel.close() }
        }

        func drain() -> [OutcomeRecord] {
            workload.turnEnded()
            var out: [OutcomeRecord] = []
            outcomes.take(into: &out, timeoutSeconds: 0)
            return out
        }
    }

    static func response(_ status: Int, _ body: String = "", apnsID: String? = nil) -> HTTP2Response {
        HTTP2Response(status: status, headers: apnsID.map { [HTTP2Header("apns-id", $0)] } ?? [], body: Array(body.utf8))
    }

    func testRequestCarriesPathTopicApnsIDAndBearer() throws {
        let rig = try Rig()
        rig.feed(1)
        let (request, _) = try XCTUnwrap(rig.workload.nextRequest())
        XCTAssertEqual(request.fullPath, "/3/device/" + String(format: "%064x", 1))
        XCTAssertEqual(request.authority, "api.push.apple.com")
        XCTAssertEqual(request.body, Array("{\"aps\":{}}".utf8))
        let names = request.allHeaders.map(\.name)
        XCTAssertTrue(names.contains("apns-topic"))
        XCTAssertEqual(request.allHeaders.first { $0.name == "apns-id" }?.value, "id-1")
        XCTAssertTrue(request.allHeaders.first { $0.name == "authorization" }?.value.hasPrefix("bearer eyJ") ?? false)
    }

    func testOutcomesForDeliveredPrunedAndFailed() throws {
        let rig = try Rig()
        rig.feed(3)
        var tags: [UInt64] = []
        // Bounded: a workload that kept handing out requests would otherwise never let this end.
        while tags.count <= 3, let (_, tag) = rig.workload.nextRequest() { tags.append(tag) }
        XCTAssertEqual(tags.count, 3, "three rows fed, three requests")
        guard tags.count == 3 else { return }
        rig.workload.received(tag: tags[0], response: Self.response(200, apnsID: "echoed"))
        rig.workload.received(tag: tags[1], response: Self.response(410, #"{"reason":"Unregistered","timestamp":1700000000123}"#))
        rig.workload.received(tag: tags[2], response: Self.response(400, #"{"reason":"BadCollapseId"}"#))
        let out = rig.drain().sorted { $0.row < $1.row }
        XCTAssertEqual(out.map(\.outcome), [.delivered, .pruned, .failed])
        XCTAssertEqual(out[0].messageID, "echoed")
        XCTAssertEqual(out[1].reason, "Unregistered")
        XCTAssertEqual(out[1].unregisteredAt, "2023-11-14T22:13:20.123Z")
        XCTAssertEqual(out[2].reason, "BadCollapseId")
        XCTAssertTrue(rig.workload.isExhausted)
    }

    /// The request borrows the notification's body while it is handed over, and copies its packed
    /// token and apns-id (`ProviderAdapter.prepare` and `restore`): a resend carries them again,
    /// and the outcome records them, exactly as they were.
    func testLentBuffersComeBackForResendsAndTheOutcome() throws {
        let rig = try Rig()
        rig.feed(2)
        var sent: [(tag: UInt64, path: String, id: String?, body: [UInt8])] = []
        func submitOne() {
            _ = rig.workload.submitNext { request, tag in
                sent.append((tag, request.pointee.fullPath, request.pointee.allHeaders.first { $0.name == "apns-id" }?.value,
                             request.pointee.body))
            }
        }
        submitOne()
        submitOne()
        XCTAssertEqual(sent.map(\.path), (1...2).map { "/3/device/" + String(format: "%064x", $0) })
        XCTAssertEqual(sent.map(\.id), ["id-1", "id-2"])
        rig.workload.failed(tag: sent[0].tag, failure: .refusedStream)
        submitOne()
        XCTAssertEqual(sent.count, 3)
        guard sent.count == 3 else { return }
        XCTAssertEqual(sent[2].path, sent[0].path, "the resend has its token back")
        XCTAssertEqual(sent[2].id, "id-1")
        XCTAssertEqual(sent[2].body, Array("{\"aps\":{}}".utf8))
        rig.workload.received(tag: sent[2].tag, response: Self.response(200))
        rig.workload.received(tag: sent[1].tag, response: Self.response(410, #"{"reason":"Unregistered","timestamp":1700000000123}"#))
        let out = rig.drain().sorted { $0.row < $1.row }
        XCTAssertEqual(out.map(\.token), (1...2).map { String(format: "%064x", $0) })
        XCTAssertEqual(out.map(\.messageID), ["id-1", "id-2"])
        XCTAssertEqual(out.map(\.id), ["d1", "d2"])
    }

    /// A row's body goes back to the reader (for `PayloadPool`) once its outcome is final, with
    /// that outcome's batch; a row waiting for a retry keeps it.
    func testBodiesGoBackWithFinalOutcomesOnly() throws {
        let rig = try Rig()
        rig.feed(2)
        var tags: [UInt64] = []
        while tags.count <= 2, let (_, tag) = rig.workload.nextRequest() { tags.append(tag) }
        XCTAssertEqual(tags.count, 2)
        guard tags.count == 2 else { return }
        rig.workload.received(tag: tags[0], response: Self.response(200))
        rig.workload.received(tag: tags[1], response: Self.response(503, #"{"reason":"ServiceUnavailable"}"#))
        XCTAssertEqual(rig.drain().map(\.row), [1])
        var bodies: [[UInt8]] = []
        rig.outcomes.takePayloads(into: &bodies)
        XCTAssertEqual(bodies, [Array("{\"aps\":{}}".utf8)], "the delivered row's body, not the retried one's")
        // The retried row still sends its body.
        rig.clock.advance(nanoseconds: 2_000_000_000)
        let (again, tag) = try XCTUnwrap(rig.workload.nextRequest())
        XCTAssertEqual(again.body, Array("{\"aps\":{}}".utf8))
        rig.workload.received(tag: tag, response: Self.response(200))
        XCTAssertEqual(rig.drain().map(\.row), [2])
        bodies.removeAll()
        rig.outcomes.takePayloads(into: &bodies)
        XCTAssertEqual(bodies.count, 1)
    }

    func testServerErrorsBackOffThenSucceedOrRunOutOfAttempts() throws {
        let rig = try Rig(attemptsMax: 3)
        rig.feed(2)
        let (_, a) = try XCTUnwrap(rig.workload.nextRequest())
        let (_, b) = try XCTUnwrap(rig.workload.nextRequest())
        rig.workload.received(tag: a, response: Self.response(503, #"{"reason":"ServiceUnavailable"}"#))
        rig.workload.received(tag: b, response: Self.response(429, #"{"reason":"TooManyRequests"}"#))
        // Both wait out a back-off: nothing is ready until the clock passes it.
        let ready = try XCTUnwrap(rig.workload.nextReadyNanoseconds)
        XCTAssertGreaterThanOrEqual(ready, rig.clock.nowNanoseconds())
        XCTAssertFalse(rig.workload.isExhausted)
        rig.clock.advance(nanoseconds: 2_000_000_000)
        let (_, a2) = try XCTUnwrap(rig.workload.nextRequest())
        let (_, b2) = try XCTUnwrap(rig.workload.nextRequest())
        // Whichever comes back first is accepted; the other keeps failing until attempts run out.
        rig.workload.received(tag: a2, response: Self.response(200))
        rig.workload.received(tag: b2, response: Self.response(503))
        rig.clock.advance(nanoseconds: 2_000_000_000)
        let (_, b3) = try XCTUnwrap(rig.workload.nextRequest())
        rig.workload.received(tag: b3, response: Self.response(503))
        let out = rig.drain().sorted { $0.attempts < $1.attempts }
        XCTAssertEqual(out.count, 2)
        XCTAssertEqual(out[0].outcome, .delivered)
        XCTAssertEqual(out[0].attempts, 2)
        XCTAssertEqual(out[1].outcome, .failed)
        XCTAssertEqual(out[1].attempts, 3)
        XCTAssertTrue(rig.workload.isExhausted)
    }

    func testUnprocessedStreamsGoAgainWithoutCountingAndUnknownFatesAreRecorded() throws {
        let rig = try Rig()
        rig.feed(2)
        let (_, a) = try XCTUnwrap(rig.workload.nextRequest())
        let (_, b) = try XCTUnwrap(rig.workload.nextRequest())
        rig.workload.failed(tag: a, failure: .goAwayUnprocessed)
        rig.workload.failed(tag: b, failure: .connectionLost)
        let (_, again) = try XCTUnwrap(rig.workload.nextRequest())
        XCTAssertEqual(again, a)
        rig.workload.received(tag: again, response: Self.response(200))
        let out = rig.drain().sorted { $0.row < $1.row }
        XCTAssertEqual(out.map(\.outcome), [.delivered, .unknown])
        XCTAssertEqual(out[0].attempts, 1, "a GOAWAY-refused send is not an attempt")
        XCTAssertEqual(out[1].reason, OutcomeReason.connectionLost)
    }

    func testRetryUnknownRetriesATimeout() throws {
        let rig = try Rig(retryUnknown: true)
        rig.feed(1)
        let (_, a) = try XCTUnwrap(rig.workload.nextRequest())
        rig.workload.failed(tag: a, failure: .deadlineExceeded)
        XCTAssertNil(rig.workload.nextRequest(), "waits for its back-off")
        rig.clock.advance(nanoseconds: 2_000_000_000)
        let (_, b) = try XCTUnwrap(rig.workload.nextRequest())
        rig.workload.received(tag: b, response: Self.response(200))
        let out = rig.drain()
        XCTAssertEqual(out.map(\.outcome), [.delivered])
        XCTAssertEqual(out[0].attempts, 2)
    }

    func testRejectedCredentialStopsTheRunAndRecordsTheRow() throws {
        let rig = try Rig()
        rig.feed(5)
        let (_, a) = try XCTUnwrap(rig.workload.nextRequest())
        rig.workload.received(tag: a, response: Self.response(403, #"{"reason":"InvalidProviderToken"}"#))
        XCTAssertTrue(rig.outcomes.isStopped)
        XCTAssertNil(rig.workload.nextRequest(), "no new request after a rejected credential")
        XCTAssertTrue(rig.workload.isExhausted)
        let out = rig.drain()
        XCTAssertEqual(out.count, 1)
        XCTAssertEqual(out[0].reason, "InvalidProviderToken")
        XCTAssertTrue(rig.outcomes.reasonForStop?.contains("InvalidProviderToken") ?? false)
    }

    /// A seeded simulation: random answers and failures for 5,000 notifications; every row ends in
    /// exactly one outcome, and what the provider accepted is never sent again. The seeded run
    /// converges in about 370 turns; one that has not converged after `turnsMax` fails (and says
    /// how far it got) instead of spinning for ever.
    func testEveryNotificationEndsInExactlyOneOutcome() throws {
        let rig = try Rig(retryUnknown: false, attemptsMax: 4)
        let random = SplitMix64(seed: 42)
        let total = 5000
        let turnsMax = 2_000
        var turns = 0
        var fed = 0
        var inFlight: [UInt64] = []
        var acceptedTags = Set<Int>()
        var outcomes: [OutcomeRecord] = []
        while outcomes.count < total {
            guard turns < turnsMax else {
                return XCTFail("the simulation did not converge: \(outcomes.count) of \(total) outcomes after \(turns) turns "
                    + "(\(fed) fed, \(inFlight.count) in flight, exhausted: \(rig.workload.isExhausted))")
            }
            turns += 1
            if fed < total && rig.channel.room > 0 {
                let n = min(rig.channel.room, total - fed)
                var batch = (fed + 1...fed + n).map { i in
                    PreparedNotification(row: i, id: nil, token: String(format: "%064x", i), messageID: "x", payload: [0x7B, 0x7D])
                }
                rig.channel.push(&batch)
                fed += n
                if fed == total { rig.channel.close() }
            }
            while inFlight.count < 40, let (request, tag) = rig.workload.nextRequest() {
                XCTAssertFalse(acceptedTags.contains(Int(request.fullPath.dropFirst(10).prefix(64), radix: 16)!), "an accepted row was sent again")
                inFlight.append(tag)
            }
            // Answer a random half of what is in flight.
            var keep: [UInt64] = []
            for tag in inFlight {
                guard random.next(below: 2) == 0 else { keep.append(tag); continue }
                switch random.next(below: 10) {
                case 0: rig.workload.failed(tag: tag, failure: .goAwayUnprocessed)
                case 1: rig.workload.failed(tag: tag, failure: .refusedStream)
                case 2: rig.workload.received(tag: tag, response: Self.response(503))
                case 3: rig.workload.received(tag: tag, response: Self.response(410, #"{"reason":"Unregistered","timestamp":1}"#))
                case 4: rig.workload.failed(tag: tag, failure: .connectionLost)
                default: rig.workload.received(tag: tag, response: Self.response(200))
                }
            }
            inFlight = keep
            rig.clock.advance(nanoseconds: 300_000_000)
            let drained = rig.drain()
            outcomes += drained
            for o in drained where o.outcome == .delivered { acceptedTags.insert(o.row) }
        }
        XCTAssertEqual(outcomes.count, total)
        XCTAssertEqual(Set(outcomes.map(\.row)).count, total, "each row exactly once")
        XCTAssertTrue(rig.workload.isExhausted)
        XCTAssertTrue(inFlight.isEmpty)
    }
}
