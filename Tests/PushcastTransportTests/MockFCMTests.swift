// The mock's FCM listener over real TLS and HTTP/2 (our client against our server): the OAuth2
// token endpoint, sends with the bearer it issued, the outcomes by token prefix, body checks,
// token expiry on an injected clock, the stream limit, counters and the request log.

import Foundation
import PushcastCore
import PushcastFCM
import PushcastMock
import PushcastReactor
import PushcastSystem
import PushcastTransport
import PushcastWire
import Synchronization
import XCTest

/// Wall time for the mock that a test can move forward.
final class ShiftedWallClock: Sendable {
    let offsetMilliseconds = Atomic<Int64>(0)
    func now() -> Int64 { Int64(SystemClock.wallClockSeconds() * 1000) + offsetMilliseconds.load(ordering: .relaxed) }
    func advance(seconds: Int64) { offsetMilliseconds.add(seconds * 1000, ordering: .relaxed) }
}

/// Sends requests one after another on one connection and keeps every response in order.
final class SequentialWorkload: ClientWorkload {
    private var pending: [HTTP2Request]
    private var waiting = false
    private(set) var responses: [HTTP2Response] = []
    private(set) var failures: [String] = []

    init(_ requests: [HTTP2Request]) { pending = requests.reversed() }

    func nextRequest() -> (request: HTTP2Request, tag: UInt64)? {
        guard !waiting, let request = pending.popLast() else { return nil }
        waiting = true
        return (request, UInt64(responses.count + failures.count))
    }
    func received(tag: UInt64, response: HTTP2Response) { responses.append(response); waiting = false }
    func failed(tag: UInt64, failure: HTTP2StreamFailure) { failures.append("\(failure)"); waiting = false }
    var isExhausted: Bool { pending.isEmpty && !waiting }
    var nextReadyNanoseconds: UInt64? { nil }
}

/// A mock with FCM on, its generated service account, and a client for both ports.
final class FCMMockHarness {
    let pki: TestPKI
    let server: MockServer
    let fcm: MockFCMEndpoint
    let clock = ShiftedWallClock()
    let account: FCMServiceAccount
    let signer: RS256Signer

    init(_ adjust: (inout MockServerConfiguration) -> Void = { _ in }) throws {
        pki = try TestPKI()
        var configuration = MockServerConfiguration(certificate: .files(certificateChain: pki.certFile, privateKey: pki.keyFile))
        configuration.workers = 1
        configuration.reactor.backend = .epoll
        var fcmConfiguration = MockFCMConfiguration(credentials: .generated(directory: pki.directory))
        let clock = self.clock
        fcmConfiguration.wallMilliseconds = { clock.now() }
        configuration.fcm = fcmConfiguration
        adjust(&configuration)
        server = try MockServer(configuration: configuration)
        fcm = try XCTUnwrap(server.fcm)
        account = try FCMServiceAccount.load(path: fcm.credentialsPath, files: SecretFile.read)
        signer = try RS256Signer(account: account)
    }

    @discardableResult
    func stop() -> MockStatistics { server.stop() }

    /// Runs `requests` in order against the FCM port (or the APNs one, or `port`), offering ALPN
    /// `alpn`.
    func exchange(_ requests: [HTTP2Request], apns: Bool = false, port: UInt16? = nil, alpn: [String] = ["h2"]) throws -> [HTTP2Response] {
        let endpoint = Endpoint(host: "127.0.0.1", port: port ?? (apns ? server.port : fcm.port))
        var reactor = ReactorConfiguration()
        reactor.backend = .epoll
        let client = ClientConfiguration(endpoint: endpoint, address: "127.0.0.1", tls: try pki.clientTLS(offering: alpn), limits: Limits(), reactor: reactor)
        let workload = SequentialWorkload(requests)
        let worker = try ClientWorker(configuration: client, connectionCount: 1, workload: workload, clock: TurnClock(source: SystemClock.Monotonic()))
        try worker.run()
        XCTAssertEqual(workload.failures, [])
        XCTAssertEqual(workload.responses.count, requests.count)
        return workload.responses
    }

    func exchange(_ request: HTTP2Request, apns: Bool = false) throws -> HTTP2Response {
        try XCTUnwrap(try exchange([request], apns: apns).first)
    }

    var authority: String { "127.0.0.1:\(fcm.port)" }

    func tokenRequest(assertion: String, grantType: String = OAuthTokenExchange.grantType) -> HTTP2Request {
        var body = OAuthTokenExchange.requestBody(assertion: assertion)
        if grantType != OAuthTokenExchange.grantType {
            body = Array("grant_type=\(grantType)&assertion=\(assertion)".utf8)
        }
        return HTTP2Request(authority: authority, path: "/token", headers: [HTTP2Header("content-type", "application/x-www-form-urlencoded")], body: body)
    }

    func assertion(signer: RS256Signer? = nil, account: FCMServiceAccount? = nil) throws -> String {
        try OAuthAssertion.make(account: account ?? self.account, signer: signer ?? self.signer, issuedAt: clock.now() / 1000)
    }

    /// A fresh access token from the mock's token endpoint.
    func accessToken() throws -> OAuthAccessToken {
        let response = try exchange(tokenRequest(assertion: try assertion()))
        return try OAuthTokenExchange.parseResponse(status: response.status, body: response.body).get()
    }

    func send(_ body: String, bearer: String?, project: String? = nil, contentType: String = "application/json") -> HTTP2Request {
        var headers = [HTTP2Header("content-type", contentType)]
        if let bearer { headers.append(HTTP2Header("authorization", "Bearer " + bearer)) }
        return HTTP2Request(authority: authority, path: FCMProvider.sendPath(project: project ?? fcm.projectID), headers: headers, body: Array(body.utf8))
    }

    static func message(token: String, data: String = #"{"kind":"promo"}"#) -> String {
        #"{"message":{"token":"\#(token)","data":\#(data),"notification":{"title":"Hi","body":"there"}}}"#
    }
}

/// The parts of Google's error envelope a test checks.
struct GoogleErrorEnvelope {
    let code: Int?
    let status: String?
    let message: String?
    let errorCode: String?
    let fieldViolation: String?

    init(_ response: HTTP2Response) throws {
        let root = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any])
        let error = try XCTUnwrap(root["error"] as? [String: Any])
        code = error["code"] as? Int
        status = error["status"] as? String
        message = error["message"] as? String
        let details = error["details"] as? [[String: Any]] ?? []
        errorCode = details.first { $0["@type"] as? String == "type.googleapis.com/google.firebase.fcm.v1.FcmError" }?["errorCode"] as? String
        let badRequest = details.first { $0["@type"] as? String == "type.googleapis.com/google.rpc.BadRequest" }
        fieldViolation = (badRequest?["fieldViolations"] as? [[String: Any]])?.first?["field"] as? String
    }
}

final class MockFCMTests: XCTestCase {
    func testGeneratedCredentialsAndAnnouncement() throws {
        let harness = try FCMMockHarness()
        defer { harness.stop() }
        let fcm = harness.fcm
        XCTAssertNotEqual(fcm.port, harness.server.port, "FCM has a port of its own")
        XCTAssertEqual(fcm.endpoint, "https://127.0.0.1:\(fcm.port)")
        XCTAssertEqual(fcm.tokenURI, "https://127.0.0.1:\(fcm.port)/token")
        XCTAssertEqual(fcm.projectID, "pushcast-demo")
        XCTAssertEqual(fcm.announcement, "FCM_ENDPOINT=https://127.0.0.1:\(fcm.port) FCM_CREDENTIALS=\(harness.pki.directory)/fcm-service-account.json "
                       + "FCM_TOKEN_URI=https://127.0.0.1:\(fcm.port)/token")
        XCTAssertEqual(harness.account.tokenURI, fcm.tokenURI)
        XCTAssertEqual(harness.account.projectID, "pushcast-demo")
        let attributes = try FileManager.default.attributesOfItem(atPath: fcm.credentialsPath)
        XCTAssertEqual((attributes[.posixPermissions] as? NSNumber)?.intValue, 0o600)
    }

    func testTokenEndpointAcceptsAGoodAssertionAndRejectsAnotherKey() throws {
        let harness = try FCMMockHarness { $0.fcm?.tokenTTLSeconds = 1800 }
        let good = try harness.exchange(harness.tokenRequest(assertion: try harness.assertion()))
        XCTAssertEqual(good.status, 200)
        let token = try OAuthTokenExchange.parseResponse(status: good.status, body: good.body).get()
        XCTAssertEqual(token.expiresInSeconds, 1800)
        XCTAssertTrue(token.accessToken.count >= 32)
        XCTAssertNotEqual(try harness.accessToken().accessToken, token.accessToken, "tokens are random")

        // The same claims signed by a key the mock does not know.
        let other = try FCMServiceAccountGenerator.generate(projectID: "pushcast-demo", clientEmail: harness.account.clientEmail, tokenURI: harness.fcm.tokenURI)
        let otherAccount = try FCMServiceAccount(json: other.serviceAccountJSON, source: "other.json")
        let forged = try harness.assertion(signer: try RS256Signer(account: otherAccount), account: otherAccount)
        let refused = try harness.exchange(harness.tokenRequest(assertion: forged))
        XCTAssertEqual(refused.status, 400)
        XCTAssertEqual(String(decoding: refused.body, as: UTF8.self), #"{"error":"invalid_grant","error_description":"Invalid JWT Signature."}"#)
        guard case .failure(let error) = OAuthTokenExchange.parseResponse(status: refused.status, body: refused.body) else { return XCTFail("accepted") }
        XCTAssertTrue(error.isCredentialRejected)

        // The audience must be the advertised token URI, or Google's own (which google-auth
        // always signs for); as the mock plays oauth2.googleapis.com.
        let elsewhere = try FCMServiceAccountGenerator.generate(projectID: "pushcast-demo", clientEmail: harness.account.clientEmail,
                                                               tokenURI: "https://oauth2.example.com/token")
        var fields = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(elsewhere.serviceAccountJSON)) as? [String: Any])
        fields["private_key"] = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(try Data(contentsOf: URL(fileURLWithPath: harness.fcm.credentialsPath)))) as? [String: Any])["private_key"]
        let wrongAudience = try FCMServiceAccount(json: [UInt8](try JSONSerialization.data(withJSONObject: fields)), source: "aud.json")
        let audienceAnswer = try harness.exchange(harness.tokenRequest(assertion: try harness.assertion(signer: try RS256Signer(account: wrongAudience), account: wrongAudience)))
        XCTAssertEqual(audienceAnswer.status, 400)
        XCTAssertTrue(String(decoding: audienceAnswer.body, as: UTF8.self).contains("Failed audience check"))
        fields["token_uri"] = "https://oauth2.googleapis.com/token"
        let google = try FCMServiceAccount(json: [UInt8](try JSONSerialization.data(withJSONObject: fields)), source: "google.json")
        let googleAnswer = try harness.exchange(harness.tokenRequest(assertion: try harness.assertion(signer: try RS256Signer(account: google), account: google)))
        XCTAssertEqual(googleAnswer.status, 200, String(decoding: googleAnswer.body, as: UTF8.self))

        let badGrant = try harness.exchange(harness.tokenRequest(assertion: try harness.assertion(), grantType: "password"))
        XCTAssertEqual(badGrant.status, 400)
        XCTAssertTrue(String(decoding: badGrant.body, as: UTF8.self).contains("unsupported_grant_type"))
        let noAssertion = try harness.exchange(HTTP2Request(authority: harness.authority, path: "/token",
                                                            headers: [HTTP2Header("content-type", "application/x-www-form-urlencoded")],
                                                            body: Array("grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer".utf8)))
        XCTAssertEqual(noAssertion.status, 400)
        XCTAssertTrue(String(decoding: noAssertion.body, as: UTF8.self).contains("Missing required parameter: assertion"))

        let statistics = harness.stop()
        XCTAssertEqual(statistics.fcm.tokenRequests, 7)
        XCTAssertEqual(statistics.fcm.tokensIssued, 3)
        XCTAssertEqual(statistics.fcm.requests, 0, "token calls are not sends")
        XCTAssertTrue(statistics.json.contains(#""fcm":{"requests":0,"#), statistics.json)
        XCTAssertTrue(statistics.json.contains(#""token_requests":7,"tokens_issued":3"#), statistics.json)
    }

    func testSendWithAGoodBearer() throws {
        let harness = try FCMMockHarness()
        let bearer = try harness.accessToken().accessToken
        let responses = try harness.exchange([
            harness.send(FCMMockHarness.message(token: "f00d-token:APA91b"), bearer: bearer),
            harness.send(#"{"validate_only":true,"message":{"topic":"news","notification":{"title":"x"}}}"#, bearer: bearer),
            harness.send(#"{"message":{"condition":"'a' in topics","data":{}}}"#, bearer: bearer),
        ])
        XCTAssertEqual(responses.map(\.status), [200, 200, 200])
        let name = try XCTUnwrap((try JSONSerialization.jsonObject(with: Data(responses[0].body)) as? [String: Any])?["name"] as? String)
        XCTAssertTrue(name.hasPrefix("projects/pushcast-demo/messages/0:"), name)
        XCTAssertNotNil(name.range(of: #"^projects/pushcast-demo/messages/0:[0-9]+%[0-9a-f]{16}$"#, options: .regularExpression), name)
        XCTAssertEqual(String(decoding: responses[1].body, as: UTF8.self), #"{"name":"projects/pushcast-demo/messages/fake_message_id"}"#)
        XCTAssertEqual(responses[0].header("content-type"), "application/json; charset=UTF-8")
        let statistics = harness.stop()
        XCTAssertEqual(statistics.fcm.requests, 3)
        XCTAssertEqual(statistics.fcm.delivered, 3)
        XCTAssertEqual(statistics.fcm.statusCounts, [200: 3])
        XCTAssertEqual(statistics.requests, 0, "the APNs counters stay APNs's")
    }

    func testOutcomesByTokenPrefix() throws {
        let harness = try FCMMockHarness { $0.fcm?.retryAfterSeconds = 2 }
        let bearer = try harness.accessToken().accessToken
        let tokens = ["dead0001", "bad0-token", "mism-token", "5030-token", "5030-token", "4290-token", "4290-token", "5030-other"]
        let responses = try harness.exchange(tokens.map { harness.send(FCMMockHarness.message(token: $0), bearer: bearer) })
        XCTAssertEqual(responses.map(\.status), [404, 400, 403, 503, 200, 429, 200, 503])

        let dead = try GoogleErrorEnvelope(responses[0])
        XCTAssertEqual(dead.code, 404)
        XCTAssertEqual(dead.status, "NOT_FOUND")
        XCTAssertEqual(dead.message, "Requested entity was not found.")
        XCTAssertEqual(dead.errorCode, "UNREGISTERED")
        let bad = try GoogleErrorEnvelope(responses[1])
        XCTAssertEqual(bad.status, "INVALID_ARGUMENT")
        XCTAssertEqual(bad.errorCode, "INVALID_ARGUMENT")
        XCTAssertEqual(bad.message, "The registration token is not a valid FCM registration token")
        XCTAssertEqual(bad.fieldViolation, "message.token")
        XCTAssertEqual(try GoogleErrorEnvelope(responses[2]).errorCode, "SENDER_ID_MISMATCH")
        XCTAssertEqual(try GoogleErrorEnvelope(responses[3]).errorCode, "UNAVAILABLE")
        let quota = try GoogleErrorEnvelope(responses[5])
        XCTAssertEqual(quota.status, "RESOURCE_EXHAUSTED")
        XCTAssertEqual(quota.errorCode, "QUOTA_EXCEEDED")
        XCTAssertEqual(responses[5].header("retry-after"), "2")
        XCTAssertNil(responses[6].header("retry-after"))
        let statistics = harness.stop()
        XCTAssertEqual(statistics.fcm.statusCounts, [200: 2, 400: 1, 403: 1, 404: 1, 429: 1, 503: 2])
    }

    func testBearerChecksAndExpiry() throws {
        let harness = try FCMMockHarness { $0.fcm?.tokenTTLSeconds = 60 }
        let bearer = try harness.accessToken().accessToken
        let body = FCMMockHarness.message(token: "f00d")
        XCTAssertEqual(try harness.exchange(harness.send(body, bearer: bearer)).status, 200)
        var basic = harness.send(body, bearer: nil)
        basic.headers.append(HTTP2Header("authorization", "Basic \(bearer)"))
        for refused in [harness.send(body, bearer: nil), harness.send(body, bearer: "ya29.never-issued"), basic] {
            let response = try harness.exchange(refused)
            XCTAssertEqual(response.status, 401)
            XCTAssertEqual(try GoogleErrorEnvelope(response).status, "UNAUTHENTICATED")
        }
        harness.clock.advance(seconds: 59)
        XCTAssertEqual(try harness.exchange(harness.send(body, bearer: bearer)).status, 200, "59 s into a 60 s token")
        harness.clock.advance(seconds: 1)
        let expired = try harness.exchange(harness.send(body, bearer: bearer))
        XCTAssertEqual(expired.status, 401, "60 s old: expired")
        let envelope = try GoogleErrorEnvelope(expired)
        XCTAssertEqual(envelope.code, 401)
        XCTAssertEqual(envelope.status, "UNAUTHENTICATED")
        XCTAssertTrue(envelope.message?.hasPrefix("Request had invalid authentication credentials.") ?? false)
        let renewed = try harness.accessToken().accessToken
        XCTAssertEqual(try harness.exchange(harness.send(body, bearer: renewed)).status, 200)
        _ = harness.stop()
    }

    func testBodyAndRequestChecks() throws {
        let harness = try FCMMockHarness()
        defer { harness.stop() }
        let bearer = try harness.accessToken().accessToken
        func answer(_ request: HTTP2Request) throws -> (Int, GoogleErrorEnvelope?) {
            let response = try harness.exchange(request)
            return (response.status, response.status == 200 ? nil : try? GoogleErrorEnvelope(response))
        }
        let nonString = try answer(harness.send(FCMMockHarness.message(token: "f00d", data: #"{"count":12,"kind":"x"}"#), bearer: bearer))
        XCTAssertEqual(nonString.0, 400)
        XCTAssertEqual(nonString.1?.message, "Invalid value at 'message.data[0].value' (TYPE_STRING), 12")
        XCTAssertEqual(nonString.1?.status, "INVALID_ARGUMENT")
        XCTAssertEqual(nonString.1?.fieldViolation, "message.data[0].value")
        let secondBad = try answer(harness.send(FCMMockHarness.message(token: "f00d", data: #"{"kind":"x","flag":true}"#), bearer: bearer))
        XCTAssertEqual(secondBad.1?.message, "Invalid value at 'message.data[1].value' (TYPE_STRING), true")

        let twoTargets = try answer(harness.send(#"{"message":{"token":"f00d","topic":"news"}}"#, bearer: bearer))
        XCTAssertEqual(twoTargets.0, 400)
        XCTAssertTrue(twoTargets.1?.message?.contains("oneof field 'target' is already set") ?? false)
        let noTarget = try answer(harness.send(#"{"message":{"data":{"a":"b"}}}"#, bearer: bearer))
        XCTAssertEqual(noTarget.0, 400)
        XCTAssertEqual(noTarget.1?.message, "Recipient of the message is not set.")
        let tooBig = try answer(harness.send(FCMMockHarness.message(token: "f00d", data: #"{"blob":"\#(String(repeating: "x", count: 4100))"}"#), bearer: bearer))
        XCTAssertEqual(tooBig.0, 400)
        XCTAssertTrue(tooBig.1?.message?.hasPrefix("Message is too big") ?? false)
        XCTAssertNil(tooBig.1?.errorCode, "FCM's too-big answer carries no FcmError detail")
        let fits = try answer(harness.send(FCMMockHarness.message(token: "f00d", data: #"{"blob":"\#(String(repeating: "x", count: 4000))"}"#), bearer: bearer))
        XCTAssertEqual(fits.0, 200)
        XCTAssertEqual(try answer(harness.send("{not json", bearer: bearer)).0, 400)
        XCTAssertEqual(try answer(harness.send(#"{"message":{"token":"f00d"},"extra":1}"#, bearer: bearer)).1?.message,
                       #"Invalid JSON payload received. Unknown name "extra": Cannot find field."#)
        XCTAssertEqual(try answer(harness.send(FCMMockHarness.message(token: "f00d"), bearer: bearer, contentType: "text/plain")).0, 400)
        let otherProject = try answer(harness.send(FCMMockHarness.message(token: "f00d"), bearer: bearer, project: "someone-else"))
        XCTAssertEqual(otherProject.0, 403)
        XCTAssertEqual(otherProject.1?.status, "PERMISSION_DENIED")

        let unknownPath = try harness.exchange(HTTP2Request(authority: harness.authority, path: "/v1/nothing", body: []))
        XCTAssertEqual(unknownPath.status, 404)
        XCTAssertEqual(unknownPath.header("content-type"), "text/html; charset=UTF-8")
        XCTAssertThrowsError(try JSONSerialization.jsonObject(with: Data(unknownPath.body)), "Google's front end answers HTML")
    }

    func testStreamLimitCountersAndTheAPNsListenerAlongside() throws {
        let harness = try FCMMockHarness { $0.behavior.latencyNanoseconds = 40_000_000 }
        let bearer = try harness.accessToken().accessToken
        var reactor = ReactorConfiguration()
        reactor.backend = .epoll
        let endpoint = Endpoint(host: "127.0.0.1", port: harness.fcm.port)
        let client = ClientConfiguration(endpoint: endpoint, address: "127.0.0.1", tls: try harness.pki.clientTLS(), limits: Limits(), reactor: reactor)
        let report = try LoadGenerator.run(LoadConfiguration(client: client, requests: 1000, connections: 1, streams: 1000, workers: 1,
                                                             request: harness.send(FCMMockHarness.message(token: "f00d"), bearer: bearer)))
        XCTAssertEqual(report.succeeded, 1000, "\(report.failureCounts)")
        XCTAssertLessThanOrEqual(report.streamsInFlightMax, 100, "FCM advertises 100 concurrent streams")
        XCTAssertGreaterThanOrEqual(report.streamsInFlightMax, 50)

        let apns = try harness.exchange(HTTP2Request(authority: "127.0.0.1:\(harness.server.port)", path: devicePath, body: Array("{}".utf8)), apns: true)
        XCTAssertEqual(apns.status, 200, "the APNs listener answers as before")
        let live = try harness.exchange(HTTP2Request(authority: harness.authority, path: "/stats", body: [], method: "GET"))
        XCTAssertTrue(String(decoding: live.body, as: UTF8.self).contains(#""fcm":{"requests":1000,"delivered":1000,"#))

        let statistics = harness.stop()
        XCTAssertEqual(statistics.fcm.requests, 1000)
        XCTAssertEqual(statistics.fcm.statusCounts, [200: 1000])
        XCTAssertLessThanOrEqual(statistics.fcm.streamsOpenMax, 100)
        XCTAssertGreaterThanOrEqual(statistics.fcm.streamsOpenMax, 50)
        XCTAssertEqual(statistics.fcm.connectionsAccepted, 3, "token, load and stats: one connection each")
        XCTAssertEqual(statistics.fcm.connectionsOpen, 0)
        XCTAssertEqual(statistics.requests, 1)
        XCTAssertEqual(statistics.statusCounts, [200: 1])
    }

    func testLogLinesCarryProviderTokenAndTimestamps() throws {
        let logPath = NSTemporaryDirectory() + "pushcast-fcm-log-\(UUID().uuidString).ndjson"
        defer { try? FileManager.default.removeItem(atPath: logPath) }
        let harness = try FCMMockHarness { $0.logPath = logPath }
        let bearer = try harness.accessToken().accessToken
        let before = Int64(Date().timeIntervalSince1970 * 1000)
        _ = try harness.exchange([harness.send(FCMMockHarness.message(token: "dead-fcm-token"), bearer: bearer),
                                  harness.send(FCMMockHarness.message(token: "live-fcm-token"), bearer: bearer)])
        _ = try harness.exchange(HTTP2Request(authority: "127.0.0.1:\(harness.server.port)", path: devicePath, body: Array("{}".utf8)), apns: true)
        _ = harness.stop()
        let text = try String(contentsOfFile: logPath, encoding: .utf8)
        XCTAssertFalse(text.contains(bearer), "the access token is never logged")
        let lines = try text.split(separator: "\n").map { try XCTUnwrap(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]) }
        XCTAssertEqual(lines.count, 4)
        XCTAssertEqual(lines.map { $0["provider"] as? String }, ["fcm", "fcm", "fcm", "apns"])
        XCTAssertEqual(lines[0]["path"] as? String, "/token")
        XCTAssertNil(lines[0]["token"])
        XCTAssertEqual(lines[1]["token"] as? String, "dead-fcm-token")
        XCTAssertEqual(lines[1]["status"] as? Int, 404)
        XCTAssertEqual(lines[1]["error"] as? String, "UNREGISTERED")
        XCTAssertEqual(lines[2]["token"] as? String, "live-fcm-token")
        XCTAssertEqual(lines[2]["status"] as? Int, 200)
        XCTAssertEqual(lines[3]["token"] as? String, String(devicePath.dropFirst("/3/device/".count)))
        for line in lines {
            let wall = try XCTUnwrap((line["ts"] as? NSNumber)?.int64Value)
            XCTAssertGreaterThan(wall, before - 60_000)
            XCTAssertNotNil(line["mono_ms"] as? NSNumber)
        }
        let monotonic = lines.compactMap { ($0["mono_ms"] as? NSNumber)?.int64Value }
        XCTAssertEqual(monotonic, monotonic.sorted(), "requests were answered one after another")
    }

    func testGivenServiceAccountIsVerifiedWithItsPublicKey() throws {
        let pki = try TestPKI()
        let generated = try FCMServiceAccountGenerator.generate(projectID: "customer-project", clientEmail: "sender@customer-project.iam.gserviceaccount.com",
                                                               tokenURI: "https://oauth2.googleapis.com/token")
        let path = pki.directory + "/customer.json"
        try Data(generated.serviceAccountJSON).write(to: URL(fileURLWithPath: path))
        var configuration = MockServerConfiguration(certificate: .files(certificateChain: pki.certFile, privateKey: pki.keyFile))
        configuration.workers = 1
        configuration.fcm = MockFCMConfiguration(credentials: .serviceAccount(path: path))
        let server = try MockServer(configuration: configuration)
        defer { server.stop() }
        let fcm = try XCTUnwrap(server.fcm)
        XCTAssertEqual(fcm.projectID, "customer-project")
        XCTAssertEqual(fcm.credentialsPath, path)
        // The client signs with the file's token_uri as the audience; the mock accepts it.
        let account = try FCMServiceAccount.load(path: path, files: SecretFile.read)
        let assertion = try OAuthAssertion.make(account: account, signer: try RS256Signer(account: account), issuedAt: Int64(Date().timeIntervalSince1970))
        var reactor = ReactorConfiguration()
        reactor.backend = .epoll
        let client = ClientConfiguration(endpoint: Endpoint(host: "127.0.0.1", port: fcm.port), address: "127.0.0.1", tls: try pki.clientTLS(),
                                         limits: Limits(), reactor: reactor)
        let workload = SequentialWorkload([HTTP2Request(authority: "127.0.0.1:\(fcm.port)", path: "/token",
                                                        headers: [HTTP2Header("content-type", "application/x-www-form-urlencoded")],
                                                        body: OAuthTokenExchange.requestBody(assertion: assertion))])
        try ClientWorker(configuration: client, connectionCount: 1, workload: workload, clock: TurnClock(source: SystemClock.Monotonic())).run()
        XCTAssertEqual(workload.responses.first?.status, 200)

        var broken = MockServerConfiguration(certificate: .files(certificateChain: pki.certFile, privateKey: pki.keyFile))
        broken.fcm = MockFCMConfiguration(credentials: .serviceAccount(path: pki.directory + "/missing.json"))
        XCTAssertThrowsError(try MockServer(configuration: broken)) { error in
            XCTAssertTrue("\(error)".contains("missing.json"), "\(error)")
        }
    }
}
