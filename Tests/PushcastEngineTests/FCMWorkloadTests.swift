// The FCM send loop (SendWorkload<FCMAdapter>) driven in memory, like APNsWorkloadTests:
// prepared notifications in through a NotificationChannel, requests out, Google's answers and
// stream failures in, outcomes checked. Time is a ManualClock; the access token comes from a real
// FCMAccessTokens over a scripted token endpoint on a clock of its own, so its refresher thread only
// acts when a test tells it to (a 401, or that clock moved), and the test waits for it.

import Foundation
import PushcastAPNs
import PushcastCore
@testable import PushcastEngine
import PushcastFCM
import PushcastTransport
import PushcastWire
import XCTest

final class FCMWorkloadTests: XCTestCase {
    typealias TokenEndpoint = FCMAccessTokensTests.TokenEndpoint
    typealias SharedClock = FCMAccessTokensTests.SharedClock

    enum Limit {
        case none
        case perSecond(Double?)
    }

    final class Rig {
        let clock = ManualClock(nanoseconds: 1_000_000_000)
        /// The token source's clock: still unless a test moves it.
        let tokenClock = SharedClock(seconds: 1000)
        let endpoint: TokenEndpoint
        let tokens: FCMAccessTokens
        let channel: NotificationChannel
        let outcomes = OutcomeChannel()
        let gauge = WorkerGauge()
        let limiter: ProviderRateLimiter?
        let workload: SendWorkload<FCMAdapter>
        let fatal = FCMAccessTokensTests.FatalLog()

        init(attemptsMax: Int = 3, limit: Limit = .none, lifetimeSeconds: Int = 3600, channelCapacity: Int = 64, inFlightMax: Int = 32,
             rowDeadlineNanoseconds: UInt64? = nil, retryAfterMaxNanoseconds: UInt64? = nil) throws {
            let endpoint = TokenEndpoint(lifetimeSeconds: lifetimeSeconds)
            self.endpoint = endpoint
            tokens = FCMAccessTokens(clock: tokenClock, threads: SystemThreads(), lookSeconds: 0.01) { endpoint.fetch() }
            let fatal = self.fatal
            try tokens.start { fatal.record($0) }
            channel = NotificationChannel(capacity: channelCapacity)
            switch limit {
            case .none: limiter = nil
            case .perSecond(let rate): limiter = ProviderRateLimiter(ratePerSecond: rate, nowNanoseconds: clock.nowNanoseconds())
            }
            let retry = RetryPolicy(delayBaseNanoseconds: 100_000_000, delayMaxNanoseconds: 1_000_000_000, attemptsMax: attemptsMax)
            let settings = FCMSendSettings(authority: "fcm.googleapis.com", project: "P", tokens: tokens)
            var policy = SendPolicy(retry: retry, retryUnknown: false, limiter: limiter, rowDeadlineNanoseconds: rowDeadlineNanoseconds)
            if let retryAfterMaxNanoseconds { policy.retryAfterMaxNanoseconds = retryAfterMaxNanoseconds }
            workload = SendWorkload(adapter: FCMAdapter(settings: settings), policy: policy,
                                    channel: channel, outcomes: outcomes, gauge: gauge, clock: clock, random: SplitMix64(seed: 11),
                                    inFlightMax: inFlightMax)
        }

        static func payload(row: Int) -> [UInt8] {
            Array(#"{"message":{"token":"t\#(row)","data":{"row":"\#(row)"}}}"#.utf8)
        }

        static func notification(row: Int) -> PreparedNotification {
            PreparedNotification(row: row, id: "r\(row)", token: "t\(row)", messageID: nil, payload: payload(row: row), provider: .fcm)
        }

        /// Pushes rows `rows` (the caller keeps within `channel.room`).
        func feed(_ rows: ClosedRange<Int>, close: Bool = true) {
            var batch = rows.map(Rig.notification(row:))
            channel.push(&batch)
            if close { channel.close() }
        }

        func next(file: StaticString = #filePath, line: UInt = #line) throws -> (request: HTTP2Request, tag: UInt64) {
            try XCTUnwrap(workload.nextRequest(), "no request", file: file, line: line)
        }

        func drain() -> [OutcomeRecord] {
            workload.turnEnded()
            var out: [OutcomeRecord] = []
            outcomes.take(into: &out, timeoutSeconds: 0)
            return out
        }

        func waitForGeneration(_ generation: UInt64, file: StaticString = #filePath, line: UInt = #line) {
            XCTAssertTrue(FCMAccessTokensTests.eventually { (tokens.current()?.generation ?? 0) >= generation },
                          "token generation \(generation) never came", file: file, line: line)
        }

        func close() {
            tokens.close()
            endpoint.release()
        }
    }

    func makeRig(attemptsMax: Int = 3, limit: Limit = .none, lifetimeSeconds: Int = 3600, channelCapacity: Int = 64,
                 rowDeadlineNanoseconds: UInt64? = nil, retryAfterMaxNanoseconds: UInt64? = nil) throws -> Rig {
        let rig = try Rig(attemptsMax: attemptsMax, limit: limit, lifetimeSeconds: lifetimeSeconds, channelCapacity: channelCapacity,
                          rowDeadlineNanoseconds: rowDeadlineNanoseconds, retryAfterMaxNanoseconds: retryAfterMaxNanoseconds)
        addTeardownBlock { rig.close() }
        return rig
    }

    // MARK: - Google's answers, as FCM sends them

    static let fcmError = "type.googleapis.com/google.firebase.fcm.v1.FcmError"

    static func envelope(_ code: Int, _ status: String, _ message: String, errorCode: String? = nil, field: String? = nil,
                         projectQuota: Bool = false) -> String {
        var details: [String] = []
        if let errorCode { details.append(#"{"@type":"\#(fcmError)","errorCode":"\#(errorCode)"}"#) }
        if projectQuota {
            details.append(#"{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"RATE_LIMIT_EXCEEDED","domain":"googleapis.com","#
                + #""metadata":{"quota_metric":"fcm.googleapis.com/send_requests","quota_limit":"SendsPerMinutePerProject","service":"fcm.googleapis.com"}}"#)
        }
        if let field {
            details.append(#"{"@type":"type.googleapis.com/google.rpc.BadRequest","fieldViolations":[{"field":"\#(field)","description":"\#(message)"}]}"#)
        }
        let tail = details.isEmpty ? "" : #","details":[\#(details.joined(separator: ","))]"#
        return #"{"error":{"code":\#(code),"message":"\#(message)","status":"\#(status)"\#(tail)}}"#
    }

    static let unregistered = envelope(404, "NOT_FOUND", "Requested entity was not found.", errorCode: "UNREGISTERED")
    static let invalidTokenField = envelope(400, "INVALID_ARGUMENT", "The registration token is not a valid FCM registration token",
                                            errorCode: "INVALID_ARGUMENT", field: "message.token")
    static let invalidTokenMessage = envelope(400, "INVALID_ARGUMENT", "The registration token is not a valid FCM registration token",
                                              errorCode: "INVALID_ARGUMENT")
    static let invalidTTL = envelope(400, "INVALID_ARGUMENT",
                                     "Invalid value at 'message.android.ttl' (type.googleapis.com/google.protobuf.Duration), Field 'ttl', Illegal duration format; duration must end with 's'",
                                     field: "message.android.ttl")
    static let senderIDMismatch = envelope(403, "PERMISSION_DENIED", "SenderId mismatch", errorCode: "SENDER_ID_MISMATCH")
    static let wrongProject = envelope(404, "NOT_FOUND", "Requested entity was not found.")
    static let unavailable = envelope(503, "UNAVAILABLE", "The service is currently unavailable.", errorCode: "UNAVAILABLE")
    static let internalError = envelope(500, "INTERNAL", "Internal error encountered.", errorCode: "INTERNAL")
    static let quotaExceeded = envelope(429, "RESOURCE_EXHAUSTED",
                                        "Quota exceeded for quota metric 'Send requests' and limit 'Send requests per minute' of service 'fcm.googleapis.com' for consumer 'project_number:1234'.",
                                        errorCode: "QUOTA_EXCEEDED", projectQuota: true)
    /// One device over its own limit (240 a minute): nothing names the project.
    static let deviceQuotaExceeded = envelope(429, "RESOURCE_EXHAUSTED", "Quota exceeded for the device.", errorCode: "QUOTA_EXCEEDED")
    static let unauthenticated = envelope(401, "UNAUTHENTICATED",
                                          "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project.")
    static let thirdPartyAuth = envelope(401, "UNAUTHENTICATED", "Auth error from APNS or Web Push Service", errorCode: "THIRD_PARTY_AUTH_ERROR")
    static let permissionDenied = envelope(403, "PERMISSION_DENIED", "The caller does not have permission")
    static let badGatewayPage = "<html><head><title>502 Bad Gateway</title></head><body>Bad Gateway</body></html>"

    static func response(_ status: Int, _ body: String, headers: [HTTP2Header] = []) -> HTTP2Response {
        HTTP2Response(status: status, headers: [HTTP2Header("content-type", "application/json; charset=UTF-8")] + headers, body: Array(body.utf8))
    }

    static func delivered(row: Int) -> HTTP2Response {
        response(200, #"{"name":"projects/P/messages/0:17000000\#(row)%31bd1c9631bd1c96"}"#)
    }

    static func header(_ request: HTTP2Request, _ name: String) -> String? {
        request.allHeaders.first { $0.name == name }?.value
    }

    /// The row a request carries (the payload names it).
    static func row(of request: HTTP2Request) -> Int {
        let parts = String(decoding: request.body, as: UTF8.self).split(separator: "\"")
        return Int(parts[5].dropFirst())!
    }

    // MARK: - Requests and table rows

    func testRequestCarriesPathAuthorityBearerContentTypeAndBody() throws {
        let rig = try makeRig()
        rig.feed(1...1)
        let (request, _) = try rig.next()
        XCTAssertEqual(request.method, "POST")
        XCTAssertEqual(request.fullPath, "/v1/projects/P/messages:send")
        XCTAssertEqual(request.authority, "fcm.googleapis.com")
        XCTAssertEqual(Self.header(request, "authorization"), "Bearer ya29.token-1")
        XCTAssertEqual(Self.header(request, "content-type"), "application/json")
        XCTAssertEqual(request.allHeaders.filter { $0.name == "authorization" }.count, 1)
        XCTAssertEqual(request.body, Rig.payload(row: 1))
        XCTAssertNil(rig.workload.nextRequest(), "one row, one request")
    }

    func testSuccessIsDeliveredWithTheMessageName() throws {
        let rig = try makeRig()
        rig.feed(1...1)
        let (_, tag) = try rig.next()
        rig.clock.advance(milliseconds: 7)
        rig.workload.received(tag: tag, response: Self.delivered(row: 1))
        let out = rig.drain()
        XCTAssertEqual(out.count, 1)
        let record = try XCTUnwrap(out.first)
        XCTAssertEqual(record.outcome, .delivered)
        XCTAssertEqual(record.provider, .fcm)
        XCTAssertEqual(record.status, 200)
        XCTAssertNil(record.reason)
        XCTAssertEqual(record.messageID, "projects/P/messages/0:170000001%31bd1c9631bd1c96")
        XCTAssertEqual(record.row, 1)
        XCTAssertEqual(record.id, "r1")
        XCTAssertEqual(record.token, "t1")
        XCTAssertEqual(record.attempts, 1)
        XCTAssertEqual(record.latencyMilliseconds ?? 0, 7, accuracy: 0.001)
        XCTAssertTrue(rig.workload.isExhausted)
    }

    func testErrorTableRowsThroughGoogleEnvelopes() throws {
        let rig = try makeRig()
        let answers: [(status: Int, body: String, outcome: OutcomeKind, reason: String)] = [
            (404, Self.unregistered, .pruned, "UNREGISTERED"),
            (400, Self.invalidTokenField, .pruned, "INVALID_ARGUMENT"),
            (400, Self.invalidTokenMessage, .pruned, "INVALID_ARGUMENT"),
            (400, Self.invalidTTL, .failed, "INVALID_ARGUMENT"),
            (403, Self.senderIDMismatch, .pruned, "SENDER_ID_MISMATCH"),
            // A wrong project id answers 404 NOT_FOUND without UNREGISTERED: never prune for it.
            (404, Self.wrongProject, .failed, "NOT_FOUND"),
        ]
        rig.feed(1...answers.count)
        var tagOfRow: [Int: UInt64] = [:]
        while let (request, tag) = rig.workload.nextRequest() { tagOfRow[Self.row(of: request)] = tag }
        XCTAssertEqual(tagOfRow.count, answers.count)
        for (index, answer) in answers.enumerated() {
            rig.workload.received(tag: try XCTUnwrap(tagOfRow[index + 1]), response: Self.response(answer.status, answer.body))
        }
        let out = rig.drain().sorted { $0.row < $1.row }
        XCTAssertEqual(out.map(\.row), Array(1...answers.count), "one outcome per row")
        for (record, answer) in zip(out, answers) {
            XCTAssertEqual(record.outcome, answer.outcome, "row \(record.row): \(answer.body)")
            XCTAssertEqual(record.reason, answer.reason, "row \(record.row)")
            XCTAssertEqual(record.status, answer.status, "row \(record.row)")
            XCTAssertEqual(record.attempts, 1, "row \(record.row) was not retried")
            XCTAssertNil(record.messageID)
            XCTAssertEqual(record.provider, .fcm)
        }
        XCTAssertFalse(rig.outcomes.isStopped)
        XCTAssertTrue(rig.workload.isExhausted)
        XCTAssertEqual(rig.gauge.retries.load(ordering: .relaxed), 0)
        XCTAssertEqual(rig.endpoint.calls, 1, "no answer here touches the access token")
    }

    func testServerErrorsAreRetriedAfterABackOffThenDeliveredOrFailed() throws {
        let rig = try makeRig(attemptsMax: 3)
        rig.feed(1...3)
        var tagOfRow: [Int: UInt64] = [:]
        while let (request, tag) = rig.workload.nextRequest() { tagOfRow[Self.row(of: request)] = tag }
        XCTAssertEqual(tagOfRow.count, 3)

        // Round 1: every row gets a server error.
        rig.workload.received(tag: tagOfRow[1]!, response: Self.response(503, Self.unavailable))
        rig.workload.received(tag: tagOfRow[2]!, response: Self.response(502, Self.badGatewayPage, headers: [HTTP2Header("content-type", "text/html")]))
        rig.workload.received(tag: tagOfRow[3]!, response: Self.response(500, Self.internalError))
        XCTAssertTrue(rig.drain().isEmpty, "retried rows have no outcome yet")
        let ready = try XCTUnwrap(rig.workload.nextReadyNanoseconds)
        XCTAssertLessThanOrEqual(ready, rig.clock.nowNanoseconds() + 100_000_000, "the first back-off is at most the base delay")
        XCTAssertFalse(rig.workload.isExhausted)

        // Round 2: after the back-off all three go again.
        rig.clock.advance(nanoseconds: 1_000_000_000)
        tagOfRow = [:]
        while let (request, tag) = rig.workload.nextRequest() { tagOfRow[Self.row(of: request)] = tag }
        XCTAssertEqual(Set(tagOfRow.keys), [1, 2, 3])
        rig.workload.received(tag: tagOfRow[1]!, response: Self.response(500, Self.internalError))
        rig.workload.received(tag: tagOfRow[2]!, response: Self.delivered(row: 2))
        rig.workload.received(tag: tagOfRow[3]!, response: Self.response(503, Self.unavailable))

        // Round 3: row 1 succeeds on its last attempt; row 3 runs out.
        rig.clock.advance(nanoseconds: 1_000_000_000)
        tagOfRow = [:]
        while let (request, tag) = rig.workload.nextRequest() { tagOfRow[Self.row(of: request)] = tag }
        XCTAssertEqual(Set(tagOfRow.keys), [1, 3])
        rig.workload.received(tag: tagOfRow[1]!, response: Self.delivered(row: 1))
        rig.workload.received(tag: tagOfRow[3]!, response: Self.response(503, Self.unavailable))

        let out = rig.drain().sorted { $0.row < $1.row }
        XCTAssertEqual(out.map(\.row), [1, 2, 3])
        XCTAssertEqual(out.map(\.outcome), [.delivered, .delivered, .failed])
        XCTAssertEqual(out.map(\.attempts), [3, 2, 3])
        XCTAssertEqual(out[2].reason, "UNAVAILABLE")
        XCTAssertEqual(out[2].status, 503)
        XCTAssertEqual(rig.gauge.retries.load(ordering: .relaxed), 5)
        XCTAssertTrue(rig.workload.isExhausted)
        XCTAssertFalse(rig.outcomes.isStopped)
    }

    func testCredentialErrorsFailTheRowAndStopTheRun() throws {
        for (status, body, reason) in [(401, Self.thirdPartyAuth, "THIRD_PARTY_AUTH_ERROR"), (403, Self.permissionDenied, "PERMISSION_DENIED")] {
            let rig = try makeRig()
            rig.feed(1...5)
            let (_, a) = try rig.next()
            let (_, b) = try rig.next()
            rig.workload.received(tag: a, response: Self.response(status, body))
            XCTAssertTrue(rig.outcomes.isStopped, reason)
            XCTAssertNil(rig.workload.nextRequest(), "no new request once the run stopped")
            XCTAssertTrue(rig.workload.isExhausted)
            // What was already in flight still gets its one outcome.
            rig.workload.received(tag: b, response: Self.delivered(row: 2))
            let out = rig.drain().sorted { $0.row < $1.row }
            XCTAssertEqual(out.map(\.outcome), [.failed, .delivered], reason)
            XCTAssertEqual(out.first?.reason, reason)
            XCTAssertEqual(out.first?.status, status)
            let stop = rig.outcomes.reasonForStop ?? ""
            XCTAssertTrue(stop.hasPrefix("FCM rejected the credential: \(status) \(reason)"), stop)
            XCTAssertEqual(rig.endpoint.calls, 1, "\(reason) is not an expired token: no refresh")
        }
    }

    // MARK: - 401: a new access token

    func testUnauthenticatedHoldsTheRowsUntilANewTokenThenResendsThem() throws {
        let rig = try makeRig()
        rig.feed(1...3)
        let (_, a) = try rig.next()
        let (_, b) = try rig.next()
        rig.endpoint.hold()
        rig.workload.received(tag: a, response: Self.response(401, Self.unauthenticated))
        XCTAssertTrue(FCMAccessTokensTests.eventually { rig.endpoint.calls == 2 }, "the 401 started a refresh")
        rig.workload.received(tag: b, response: Self.response(401, Self.unauthenticated))

        // No token: nothing goes, neither the refused rows nor the fresh row 3, and the workload
        // says when to ask again.
        XCTAssertNil(rig.workload.nextRequest())
        let ready = try XCTUnwrap(rig.workload.nextReadyNanoseconds)
        XCTAssertGreaterThan(ready, rig.clock.nowNanoseconds())
        XCTAssertLessThanOrEqual(ready, rig.clock.nowNanoseconds() + 100_000_000)
        XCTAssertFalse(rig.workload.isExhausted)
        rig.clock.advance(nanoseconds: ready - rig.clock.nowNanoseconds())
        XCTAssertNil(rig.workload.nextRequest(), "still no token")
        XCTAssertNotNil(rig.workload.nextReadyNanoseconds)
        XCTAssertTrue(rig.drain().isEmpty, "held rows have no outcome")

        rig.endpoint.release()
        rig.waitForGeneration(2)
        rig.clock.advance(milliseconds: 100)
        var tagOfRow: [Int: UInt64] = [:]
        while let (request, tag) = rig.workload.nextRequest() {
            XCTAssertEqual(Self.header(request, "authorization"), "Bearer ya29.token-2", "row \(Self.row(of: request))")
            tagOfRow[Self.row(of: request)] = tag
        }
        XCTAssertEqual(Set(tagOfRow.keys), [1, 2, 3])
        for (row, tag) in tagOfRow { rig.workload.received(tag: tag, response: Self.delivered(row: row)) }
        let out = rig.drain().sorted { $0.row < $1.row }
        XCTAssertEqual(out.map(\.row), [1, 2, 3], "exactly one outcome per row")
        XCTAssertEqual(out.map(\.outcome), [.delivered, .delivered, .delivered])
        XCTAssertEqual(out.map(\.attempts), [2, 2, 1])
        XCTAssertEqual(rig.endpoint.calls, 2, "two 401s for one generation: one fetch")
        XCTAssertTrue(rig.workload.isExhausted)
        XCTAssertFalse(rig.outcomes.isStopped)
    }

    func testALate401ForAnOlderTokenIsResentWithTheNewOneWithoutFetching() throws {
        let rig = try makeRig()
        rig.feed(1...2)
        let (_, a) = try rig.next()
        let (_, b) = try rig.next()
        rig.workload.received(tag: a, response: Self.response(401, Self.unauthenticated))
        rig.waitForGeneration(2)
        rig.workload.received(tag: b, response: Self.response(401, Self.unauthenticated))
        rig.clock.advance(milliseconds: 100)
        var tagOfRow: [Int: UInt64] = [:]
        while let (request, tag) = rig.workload.nextRequest() {
            XCTAssertEqual(Self.header(request, "authorization"), "Bearer ya29.token-2")
            tagOfRow[Self.row(of: request)] = tag
        }
        XCTAssertEqual(Set(tagOfRow.keys), [1, 2])
        for (row, tag) in tagOfRow { rig.workload.received(tag: tag, response: Self.delivered(row: row)) }
        XCTAssertEqual(rig.drain().map(\.outcome), [.delivered, .delivered])
        XCTAssertEqual(rig.endpoint.calls, 2)
    }

    func testAFreshTokenRefusedAgainFailsTheRowAndStopsTheRun() throws {
        let rig = try makeRig(attemptsMax: 5)
        rig.feed(1...3)
        let (_, a) = try rig.next()
        rig.workload.received(tag: a, response: Self.response(401, Self.unauthenticated))
        rig.waitForGeneration(2)
        rig.clock.advance(milliseconds: 100)
        let (request, again) = try rig.next()
        XCTAssertEqual(Self.row(of: request), 1)
        XCTAssertEqual(Self.header(request, "authorization"), "Bearer ya29.token-2")
        rig.workload.received(tag: again, response: Self.response(401, Self.unauthenticated))
        XCTAssertTrue(rig.outcomes.isStopped)
        XCTAssertTrue(rig.outcomes.reasonForStop?.contains("freshly issued access token") ?? false, rig.outcomes.reasonForStop ?? "")
        XCTAssertNil(rig.workload.nextRequest())
        XCTAssertTrue(rig.workload.isExhausted)
        let out = rig.drain()
        XCTAssertEqual(out.map(\.outcome), [.failed])
        XCTAssertEqual(out.first?.reason, "UNAUTHENTICATED")
        XCTAssertEqual(out.first?.status, 401)
        XCTAssertEqual(out.first?.attempts, 2)
        XCTAssertEqual(rig.endpoint.calls, 2)
    }

    /// The token endpoint fails once (a passing failure) while replacing a token FCM refused. The
    /// row must wait for the replacement, not be sent again with the refused token (which only
    /// earns another 401 and spends its attempts).
    func testATokenEndpointHiccupDuringA401RefreshDoesNotFailTheRow() throws {
        let rig = try makeRig(attemptsMax: 2)
        rig.endpoint.enqueue(FCMAccessTokensTests.passingFailure())
        rig.feed(1...1)
        let (_, a) = try rig.next()
        rig.workload.received(tag: a, response: Self.response(401, Self.unauthenticated))
        XCTAssertTrue(FCMAccessTokensTests.eventually { rig.endpoint.answers == 2 }, "the refresh ran and failed")
        let reads = rig.tokenClock.reads
        XCTAssertTrue(FCMAccessTokensTests.eventually { rig.tokenClock.reads >= reads + 2 }, "the refresher noted the failure")

        var refusedResends = 0
        var out: [OutcomeRecord] = []
        for step in 1...40 where out.isEmpty {
            if step == 10 {
                // The back-off (2 s) is over: the replacement comes.
                rig.tokenClock.set(seconds: 1002)
                rig.waitForGeneration(2)
            }
            rig.clock.advance(milliseconds: 25)
            if let (request, tag) = rig.workload.nextRequest() {
                // FCM goes on refusing the token it refused.
                if Self.header(request, "authorization") == "Bearer ya29.token-1" {
                    refusedResends += 1
                    rig.workload.received(tag: tag, response: Self.response(401, Self.unauthenticated))
                } else {
                    rig.workload.received(tag: tag, response: Self.delivered(row: 1))
                }
            }
            out += rig.drain()
        }
        XCTAssertEqual(refusedResends, 0, "the row was sent again with the token FCM had refused")
        XCTAssertEqual(out.map(\.outcome), [.delivered], "\(out.map { "\($0.outcome) \($0.reason ?? "") attempts \($0.attempts)" })")
    }

    // MARK: - Rate limits

    func testQuotaExceededPausesTheProviderForRetryAfterAndHalvesItsRate() throws {
        let rig = try makeRig(limit: .perSecond(100))
        let limiter = try XCTUnwrap(rig.limiter)
        rig.feed(1...10)
        let start = rig.clock.nowNanoseconds()
        let (first, a) = try rig.next()
        XCTAssertEqual(Self.row(of: first), 1)
        rig.workload.received(tag: a, response: Self.response(429, Self.quotaExceeded, headers: [HTTP2Header("retry-after", "2")]))
        XCTAssertEqual(limiter.currentRatePerSecond, 50, "the provider's rate halves")
        XCTAssertTrue(limiter.isPaused(nowNanoseconds: start))
        XCTAssertTrue(rig.drain().isEmpty)

        // For 2 s nothing goes, though nine fresh rows wait.
        for tenth in 0..<20 {
            XCTAssertNil(rig.workload.nextRequest(), "a request went \(tenth * 100) ms into a 2 s Retry-After")
            XCTAssertEqual(rig.workload.nextReadyNanoseconds, start + 2_000_000_000)
            rig.clock.advance(milliseconds: 100)
        }
        XCTAssertEqual(rig.clock.nowNanoseconds(), start + 2_000_000_000)
        let (retried, b) = try rig.next()
        XCTAssertEqual(Self.row(of: retried), 1, "the 429'd row goes first")
        rig.workload.received(tag: b, response: Self.delivered(row: 1))

        // Then requests flow again, at the reduced rate (about 70/s by now, recovering 10/s each
        // second from 50/s): about 14 ms apart, where 100/s would be 10 ms.
        var fresh: [Int] = []
        var sentAt: [UInt64] = [rig.clock.nowNanoseconds()]
        for _ in 0..<300 {
            rig.clock.advance(milliseconds: 1)
            while let (request, tag) = rig.workload.nextRequest() {
                fresh.append(Self.row(of: request))
                sentAt.append(rig.clock.nowNanoseconds())
                rig.workload.received(tag: tag, response: Self.delivered(row: Self.row(of: request)))
            }
        }
        XCTAssertEqual(fresh, Array(2...10), "requests flow again after the pause, in order")
        // The first gap may be shorter by the bucket's burst tolerance (1.4 permits at 70/s).
        let gaps = zip(sentAt.dropFirst(), sentAt).map { ($0 - $1) / 1_000_000 }
        XCTAssertGreaterThanOrEqual(gaps.first ?? 0, 8, "spacing in ms: \(gaps)")
        XCTAssertGreaterThanOrEqual(gaps.dropFirst().min() ?? 0, 12, "spacing in ms: \(gaps)")
        XCTAssertLessThanOrEqual(gaps.max() ?? 0, 20, "spacing in ms: \(gaps)")
        let out = rig.drain().sorted { $0.row < $1.row }
        XCTAssertEqual(out.first?.row, 1)
        XCTAssertEqual(out.first?.outcome, .delivered)
        XCTAssertEqual(out.first?.attempts, 2)
        XCTAssertEqual(out.count, 1 + fresh.count, "one outcome per row")
    }

    /// One device over its own quota: its row alone waits its Retry-After; every other row goes
    /// at the full rate, and the provider is neither paused nor slowed.
    func testADeviceQuotaDelaysOnlyItsRow() throws {
        let rig = try makeRig(limit: .perSecond(1000))
        let limiter = try XCTUnwrap(rig.limiter)
        rig.feed(1...50)
        let start = rig.clock.nowNanoseconds()
        let (first, a) = try rig.next()
        XCTAssertEqual(Self.row(of: first), 1)
        rig.workload.received(tag: a, response: Self.response(429, Self.deviceQuotaExceeded, headers: [HTTP2Header("retry-after", "2")]))
        XCTAssertFalse(limiter.isPaused(nowNanoseconds: start), "one device's quota paused the provider")
        XCTAssertEqual(limiter.currentRatePerSecond, 1000, "one device's quota slowed the provider")
        var sent: [Int] = []
        for _ in 0..<200 {
            rig.clock.advance(milliseconds: 1)
            while let (request, tag) = rig.workload.nextRequest() {
                sent.append(Self.row(of: request))
                rig.workload.received(tag: tag, response: Self.delivered(row: Self.row(of: request)))
            }
        }
        XCTAssertEqual(sent, Array(2...50), "the other rows went at once, the throttled one not before its Retry-After")
        rig.clock.nanoseconds = start + 2_000_000_000
        let (again, b) = try rig.next()
        XCTAssertEqual(Self.row(of: again), 1, "the throttled row goes when its Retry-After has passed")
        rig.workload.received(tag: b, response: Self.delivered(row: 1))
        XCTAssertEqual(rig.drain().count, 50)
    }

    /// The spread rule: device-level 429s from a fifth or more of the rows within a second are
    /// the provider's limit, whatever the bodies say: it slows and pauses.
    func testDeviceQuotasFromManyDevicesAtOnceSlowTheProvider() throws {
        let rig = try makeRig(limit: .perSecond(1000), channelCapacity: 256)
        let limiter = try XCTUnwrap(rig.limiter)
        rig.feed(1...100)
        var throttledAnswers = 0
        for _ in 0..<100 {
            rig.clock.advance(milliseconds: 1)
            while let (_, tag) = rig.workload.nextRequest() {
                throttledAnswers += 1
                rig.workload.received(tag: tag, response: Self.response(429, Self.deviceQuotaExceeded, headers: [HTTP2Header("retry-after", "1")]))
            }
            if limiter.isPaused(nowNanoseconds: rig.clock.nowNanoseconds()) { break }
        }
        XCTAssertTrue(limiter.isPaused(nowNanoseconds: rig.clock.nowNanoseconds()), "after \(throttledAnswers) device 429s")
        XCTAssertEqual(throttledAnswers, Int(ProviderRateLimiter.spreadCountMin), "the rule holds from the twentieth")
        XCTAssertEqual(limiter.currentRatePerSecond, 500, "the provider's rate halves")
    }

    /// A Retry-After past the row's deadline (an hour, with --request-timeout 5 s): a device's
    /// ends its row at once, failed with a reason saying so. The project quota's pauses the
    /// provider, cut to --max-retry-after, and its row waits on the resend budget, unprocessed.
    func testARetryAfterPastTheDeadlineEndsTheRowAndThePauseIsCapped() throws {
        let rig = try makeRig(attemptsMax: 5, limit: .perSecond(100), rowDeadlineNanoseconds: 5_000_000_000, retryAfterMaxNanoseconds: 10_000_000_000)
        let limiter = try XCTUnwrap(rig.limiter)
        let workload = rig.workload
        rig.feed(1...3)
        let start = rig.clock.nowNanoseconds()
        let (_, device) = try XCTUnwrap(workload.nextRequest())
        workload.received(tag: device, response: Self.response(429, Self.deviceQuotaExceeded, headers: [HTTP2Header("retry-after", "3600")]))
        XCTAssertFalse(limiter.isPaused(nowNanoseconds: start))
        var out = rig.drain()
        XCTAssertEqual(out.map(\.outcome), [.failed])
        XCTAssertEqual(out.first?.reason, "RetryAfterPastDeadline")

        let (_, project) = try XCTUnwrap(workload.nextRequest())
        workload.received(tag: project, response: Self.response(429, Self.quotaExceeded, headers: [HTTP2Header("retry-after", "3600")]))
        XCTAssertTrue(limiter.isPaused(nowNanoseconds: start + 9_999_000_000))
        XCTAssertFalse(limiter.isPaused(nowNanoseconds: start + 10_000_000_000), "the pause is cut to --max-retry-after")
        XCTAssertTrue(rig.drain().isEmpty, "the project quota's row waits")
        rig.clock.nanoseconds = start + 10_000_000_000
        var sent = 0
        while let (request, tag) = workload.nextRequest() {
            sent += 1
            workload.received(tag: tag, response: Self.delivered(row: Self.row(of: request)))
        }
        XCTAssertEqual(sent, 2, "after the pause, the waiting row and the fresh one")
        out = rig.drain()
        XCTAssertEqual(out.map(\.outcome), [.delivered, .delivered])
        let notices = rig.outcomes.takeNotices()
        XCTAssertEqual(notices.count, 1)
        XCTAssertTrue(notices.first?.text.hasPrefix("fcm: pausing every send for 10 s after 429 QUOTA_EXCEEDED; its Retry-After of 3600 s cut") ?? false,
                      "\(notices)")
    }

    func testARateLimitHandsOutAboutTheRateEachSecond() throws {
        for rate in [50.0, 200, 1000] {
            let rig = try makeRig(limit: .perSecond(rate))
            let burst = ProviderRateLimiter.burst(forRatePerSecond: rate)
            let start = rig.clock.nowNanoseconds()
            var perSecond = [0, 0]
            var fed = 0
            var delivered = 0
            for _ in 0..<2000 {
                let room = rig.channel.room
                if room > 0 {
                    rig.feed((fed + 1)...(fed + room), close: false)
                    fed += room
                }
                while let (request, tag) = rig.workload.nextRequest() {
                    perSecond[Int((rig.clock.nowNanoseconds() - start) / 1_000_000_000)] += 1
                    rig.workload.received(tag: tag, response: Self.delivered(row: Self.row(of: request)))
                }
                delivered += rig.drain().count
                rig.clock.advance(milliseconds: 1)
            }
            XCTAssertGreaterThanOrEqual(perSecond[0], Int(rate) - 1, "rate \(rate), first second")
            XCTAssertLessThanOrEqual(perSecond[0], Int(rate + burst), "rate \(rate), first second: at most the rate plus one burst")
            XCTAssertGreaterThanOrEqual(perSecond[1], Int(rate) - 1, "rate \(rate), second second")
            XCTAssertLessThanOrEqual(perSecond[1], Int(rate) + 1, "rate \(rate), second second")
            XCTAssertEqual(delivered, perSecond[0] + perSecond[1])
        }
    }

    // MARK: - Simulation

    /// A seeded simulation against a fake FCM that answers with every row of the table, stream
    /// failures, 429 with Retry-After, and 401 for tokens it has revoked, while the access token is
    /// renewed on schedule: every row ends in exactly one outcome, no row is in flight twice, a
    /// finished row is never sent again, and every request carries the current token.
    func testEveryNotificationEndsInExactlyOneOutcome() throws {
        let rig = try makeRig(attemptsMax: 4, limit: .perSecond(5000), lifetimeSeconds: 100)
        let random = SplitMix64(seed: 42)
        let total = 3000
        var fed = 0
        var inFlight: [(tag: UInt64, row: Int, generation: UInt64)] = []
        var rowsInFlight = Set<Int>()
        var finished = Set<Int>()
        var outcomes: [OutcomeRecord] = []
        var revoked = Set<UInt64>()
        var answered: [String: Int] = [:]
        var step = 0
        while outcomes.count < total && step < 20_000 {
            step += 1
            let room = rig.channel.room
            if fed < total && room > 0 {
                let n = min(room, total - fed)
                rig.feed((fed + 1)...(fed + n), close: fed + n == total)
                fed += n
            }
            // The token's life: a scheduled renewal now and then, and FCM revoking the current
            // token (never one fetched because its predecessor was refused: refusing that one
            // stops the run, by design).
            let current = try XCTUnwrap(rig.tokens.current(), "step \(step)")
            if step % 60 == 30 {
                rig.tokenClock.set(seconds: rig.tokenClock.seconds + 95)
                rig.waitForGeneration(current.generation + 1)
            } else if random.next(below: 40) == 0, !revoked.contains(current.generation - 1) {
                revoked.insert(current.generation)
            }

            while inFlight.count < 40, let (request, tag) = rig.workload.nextRequest() {
                let row = Self.row(of: request)
                XCTAssertFalse(finished.contains(row), "row \(row) sent again after its outcome")
                XCTAssertTrue(rowsInFlight.insert(row).inserted, "row \(row) in flight twice")
                let token = try XCTUnwrap(rig.tokens.current())
                XCTAssertEqual(Self.header(request, "authorization"), "Bearer " + token.token)
                inFlight.append((tag, row, token.generation))
            }

            var keep: [(tag: UInt64, row: Int, generation: UInt64)] = []
            for entry in inFlight {
                guard random.next(below: 2) == 0 else { keep.append(entry); continue }
                rowsInFlight.remove(entry.row)
                let kind: String
                if revoked.contains(entry.generation) {
                    kind = "401"
                    rig.workload.received(tag: entry.tag, response: Self.response(401, Self.unauthenticated))
                } else {
                    switch random.next(below: 20) {
                    case 0: kind = "goaway"; rig.workload.failed(tag: entry.tag, failure: .goAwayUnprocessed)
                    case 1: kind = "refused"; rig.workload.failed(tag: entry.tag, failure: .refusedStream)
                    case 2: kind = "lost"; rig.workload.failed(tag: entry.tag, failure: .connectionLost)
                    case 3: kind = "503"; rig.workload.received(tag: entry.tag, response: Self.response(503, Self.unavailable))
                    case 4: kind = "500"; rig.workload.received(tag: entry.tag, response: Self.response(500, Self.internalError))
                    case 5:
                        // One device's quota mostly; now and then the project's (which pauses everyone).
                        kind = "429"
                        let body = random.next(below: 8) == 0 ? Self.quotaExceeded : Self.deviceQuotaExceeded
                        rig.workload.received(tag: entry.tag, response: Self.response(429, body, headers: [HTTP2Header("retry-after", "1")]))
                    case 6: kind = "unregistered"; rig.workload.received(tag: entry.tag, response: Self.response(404, Self.unregistered))
                    case 7: kind = "bad token"; rig.workload.received(tag: entry.tag, response: Self.response(400, Self.invalidTokenField))
                    case 8: kind = "bad ttl"; rig.workload.received(tag: entry.tag, response: Self.response(400, Self.invalidTTL))
                    case 9: kind = "sender"; rig.workload.received(tag: entry.tag, response: Self.response(403, Self.senderIDMismatch))
                    case 10: kind = "502"; rig.workload.received(tag: entry.tag, response: Self.response(502, Self.badGatewayPage))
                    default: kind = "200"; rig.workload.received(tag: entry.tag, response: Self.delivered(row: entry.row))
                    }
                }
                answered[kind, default: 0] += 1
            }
            inFlight = keep
            // A 401 for the current token set off a refresh: let it land, so the run replays.
            if rig.tokens.current() == nil { rig.waitForGeneration(1) }

            rig.clock.advance(nanoseconds: 300_000_000)
            for record in rig.drain() {
                XCTAssertTrue(finished.insert(record.row).inserted, "row \(record.row) has two outcomes")
                XCTAssertFalse(rowsInFlight.contains(record.row), "row \(record.row) finished while in flight")
                outcomes.append(record)
            }
            XCTAssertFalse(rig.outcomes.isStopped, "stopped: \(rig.outcomes.reasonForStop ?? "")")
            if rig.outcomes.isStopped { break }
        }
        XCTAssertEqual(outcomes.count, total)
        XCTAssertEqual(finished, Set(1...total), "each row exactly once")
        XCTAssertTrue(inFlight.isEmpty)
        XCTAssertTrue(rig.workload.isExhausted)
        // The mix really happened.
        for kind in ["401", "goaway", "refused", "lost", "503", "500", "429", "unregistered", "bad token", "bad ttl", "sender", "502", "200"] {
            XCTAssertGreaterThan(answered[kind] ?? 0, 0, "no \(kind) answer in the simulation")
        }
        let kinds = Dictionary(grouping: outcomes, by: \.outcome).mapValues(\.count)
        XCTAssertGreaterThan(kinds[.delivered] ?? 0, 0)
        XCTAssertGreaterThan(kinds[.pruned] ?? 0, 0)
        XCTAssertGreaterThan(kinds[.failed] ?? 0, 0)
        XCTAssertGreaterThan(kinds[.unknown] ?? 0, 0)
        XCTAssertGreaterThan(revoked.count, 1)
        XCTAssertTrue(rig.fatal.all.isEmpty)
    }
}
