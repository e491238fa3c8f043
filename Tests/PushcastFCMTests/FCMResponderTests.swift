// FCM's server rules (FCMResponder), driven in memory: the token endpoint and the bearer it
// issues, the send checks in FCM's order, the outcomes by token prefix or by the server's
// decision, and the injected faults. Each answer is read back with the client's own
// classification (FCMResponseSummary), so the mock and the sender cannot disagree on a meaning.

import PushcastCore
@testable import PushcastFCM
import PushcastProviderKit
import PushcastWire
import XCTest

final class FCMResponderTests: XCTestCase {
    static let project = "pushcast-demo"
    static let sendPath = "/v1/projects/pushcast-demo/messages:send"
    /// The wall time the answers see, in milliseconds; a test moves it.
    var wall: Int64 = 1_800_000_000_000
    let once = FirstTimeSet()

    func context(device: ServerDevice? = nil, seed: UInt64 = 1) -> ProviderRequestContext {
        let now = wall
        return ProviderRequestContext(wallMilliseconds: { now }, random: SplitMix64(seed: seed), once: once, device: device)
    }

    func responder(requiresBearer: Bool = false) -> FCMResponder {
        var rules = FCMServerRules()
        rules.requiresBearer = requiresBearer
        rules.retryAfterSeconds = 7
        let verifier = OAuthAssertionVerifier(publicKey: Fixture.publicKey, issuer: Fixture.clientEmail, audience: Fixture.tokenURI)
        return FCMResponder(rules: rules, setup: FCMServerSetup(projectID: Self.project, verifiers: [verifier]))
    }

    static func send(_ body: String, path: String = sendPath, bearer: String? = nil, contentType: String = "application/json") -> HTTP2ServerRequest {
        var headers = [HTTP2Header("content-type", contentType)]
        if let bearer { headers.append(HTTP2Header("authorization", "Bearer " + bearer)) }
        return HTTP2ServerRequest(streamID: 1, method: "POST", path: path, authority: "fcm.googleapis.com", headers: headers, body: Array(body.utf8))
    }

    static func message(token: String) -> String { #"{"message":{"token":"\#(token)","data":{"k":"v"}}}"# }

    static func verdict(_ answer: ProviderServerAnswer) -> FCMVerdict {
        FCMResponseSummary(response: HTTP2Response(status: answer.status, headers: answer.headers, body: answer.body)).verdict
    }

    func testOutcomesByTokenPrefixMeanWhatTheClientReads() {
        let responder = responder()
        func verdict(_ token: String) -> FCMVerdict { Self.verdict(responder.respond(to: Self.send(Self.message(token: token)), context: context())) }
        guard case .delivered(let name?) = verdict("live-token") else { return XCTFail("a live token is delivered with a name") }
        XCTAssertTrue(name.hasPrefix("projects/pushcast-demo/messages/0:"), name)
        XCTAssertEqual(verdict("dead-token"), .prune(reason: "UNREGISTERED"))
        XCTAssertEqual(verdict("mism-token"), .prune(reason: "SENDER_ID_MISMATCH"))
        guard case .prune = verdict("bad0-token") else { return XCTFail("a bad token is pruned") }
        guard case .retry(_, _, .none) = verdict("5030-token") else { return XCTFail("503 retries") }
        guard case .delivered = verdict("5030-token") else { return XCTFail("503 fails once") }
        XCTAssertEqual(verdict("4290-token"), .retry(reason: "QUOTA_EXCEEDED", retryAfterSeconds: 7, throttle: .device))
        guard case .retry(_, 7, .provider) = verdict("4291-token") else { return XCTFail("the project's quota throttles the provider") }
        guard case .delivered = verdict("4291-token") else { return XCTFail("429 fails once") }
    }

    func testTheServersDecisionOverridesThePrefixes() {
        let responder = responder()
        let dead = responder.respond(to: Self.send(Self.message(token: "dead-token")), context: context(device: .registered))
        XCTAssertEqual(dead.kind, .accepted)
        XCTAssertEqual(dead.token, "dead-token")
        let gone = responder.respond(to: Self.send(Self.message(token: "live-token")), context: context(device: .unregistered))
        XCTAssertEqual(gone.status, 404)
        XCTAssertEqual(gone.kind, .deviceGone)
        XCTAssertEqual(gone.reason, "UNREGISTERED")
    }

    func testTheMessageNameComesFromTheContextsDrawsAndClock() {
        let responder = responder()
        let request = Self.send(Self.message(token: "live-token"))
        XCTAssertEqual(responder.respond(to: request, context: context(seed: 5)).body, responder.respond(to: request, context: context(seed: 5)).body)
        XCTAssertNotEqual(responder.respond(to: request, context: context(seed: 5)).body, responder.respond(to: request, context: context(seed: 6)).body)
        let dryRun = responder.respond(to: Self.send(#"{"validate_only":true,"message":{"token":"t"}}"#), context: context())
        XCTAssertEqual(String(decoding: dryRun.body, as: UTF8.self), #"{"name":"projects/pushcast-demo/messages/fake_message_id"}"#)
    }

    func testSendChecksInFCMsOrder() {
        let responder = responder()
        func answer(_ request: HTTP2ServerRequest) -> ProviderServerAnswer { responder.respond(to: request, context: context()) }
        let unknown = answer(Self.send("{}", path: "/v1/other"))
        XCTAssertEqual(unknown.status, 404)
        XCTAssertTrue(unknown.headers.contains(HTTP2Header("content-type", "text/html; charset=UTF-8")))
        XCTAssertEqual(answer(Self.send(Self.message(token: "t"), path: "/v1/projects/other/messages:send")).status, 403)
        XCTAssertEqual(answer(Self.send(Self.message(token: "t"), contentType: "text/plain")).status, 400)
        XCTAssertEqual(answer(Self.send("not json")).status, 400)
        XCTAssertEqual(answer(Self.send(#"{"message":{"token":"t","topic":"news"}}"#)).status, 400)
        XCTAssertEqual(answer(Self.send(#"{"message":{"token":"t","data":{"n":1}}}"#)).status, 400)
        let big = #"{"message":{"token":"t","data":{"k":"\#(String(repeating: "x", count: 4100))"}}}"#
        let tooBig = answer(Self.send(big))
        XCTAssertEqual(tooBig.status, 400)
        XCTAssertEqual(tooBig.token, "t")
        XCTAssertTrue(String(decoding: tooBig.body, as: UTF8.self).contains("Message is too big"))
        XCTAssertEqual(tooBig.kind, .refused)
    }

    func testTheTokenEndpointIssuesTheBearerSendsNeed() throws {
        let responder = responder(requiresBearer: true)
        XCTAssertEqual(responder.respond(to: Self.send(Self.message(token: "t")), context: context()).kind, .credentialsRefused)
        let assertion = try OAuthAssertion.make(account: Fixture.account, signer: Fixture.signer, issuedAt: wall / 1000)
        let exchange = HTTP2ServerRequest(streamID: 1, method: "POST", path: "/token", authority: "oauth2.googleapis.com",
                                          headers: [HTTP2Header("content-type", "application/x-www-form-urlencoded")],
                                          body: OAuthTokenExchange.requestBody(assertion: assertion))
        let issued = responder.respond(to: exchange, context: context())
        XCTAssertEqual(issued.issuedCredential, true)
        let token = try OAuthTokenExchange.parseResponse(status: issued.status, body: issued.body).get()
        XCTAssertEqual(token.expiresInSeconds, 3600)
        let sent = responder.respond(to: Self.send(Self.message(token: "t"), bearer: token.accessToken), context: context())
        XCTAssertEqual(sent.kind, .accepted)
        wall += 3600 * 1000
        let expired = responder.respond(to: Self.send(Self.message(token: "t"), bearer: token.accessToken), context: context())
        XCTAssertEqual(expired.status, 401)
        XCTAssertEqual(Self.verdict(expired), .refreshTokenAndRetry)
        let forged = HTTP2ServerRequest(streamID: 1, method: "POST", path: "/token", authority: "oauth2.googleapis.com",
                                        headers: [HTTP2Header("content-type", "application/x-www-form-urlencoded")],
                                        body: OAuthTokenExchange.requestBody(assertion: assertion + "x"))
        let refused = responder.respond(to: forged, context: context())
        XCTAssertEqual(refused.issuedCredential, false)
        XCTAssertEqual(refused.status, 400)
    }

    func testEveryRequestIsUnavailableUntilTheSetupIsInstalled() {
        let responder = FCMResponder(rules: FCMServerRules())
        let early = responder.respond(to: Self.send(Self.message(token: "t")), context: context())
        XCTAssertEqual(early.status, 503)
        XCTAssertNil(early.issuedCredential)
        XCTAssertEqual(responder.respond(to: Self.send("", path: "/token"), context: context()).issuedCredential, false)
        responder.install(FCMServerSetup(projectID: Self.project, verifiers: []))
        XCTAssertEqual(responder.setup?.sendPath, Self.sendPath)
        XCTAssertEqual(responder.respond(to: Self.send(Self.message(token: "t")), context: context()).status, 401, "now its rules answer")
    }

    func testInjectedFaultsInFCMsWords() {
        let responder = responder()
        let request = Self.send(Self.message(token: "t"))
        let project = responder.answer(.throttled(retryAfterSeconds: 9, scope: .provider), to: request, context: context())
        guard case .retry(_, 9, .provider) = Self.verdict(project) else { return XCTFail("the project's quota: \(Self.verdict(project))") }
        let device = responder.answer(.throttled(retryAfterSeconds: 2, scope: .device), to: request, context: context())
        XCTAssertEqual(Self.verdict(device), .retry(reason: "QUOTA_EXCEEDED", retryAfterSeconds: 2, throttle: .device))
        XCTAssertEqual(responder.answer(.serverError(status: 500), to: request, context: context()).reason, "INTERNAL")
        XCTAssertEqual(responder.answer(.serverError(status: 503), to: request, context: context()).reason, "UNAVAILABLE")
    }

    func testTheLogAndTheTokenComeFromTheBody() {
        let responder = responder()
        let request = Self.send(Self.message(token: "dead-token"))
        XCTAssertEqual(responder.token(of: request), "dead-token")
        XCTAssertEqual(responder.token(of: Self.send("nonsense")), "")
        let answer = responder.respond(to: request, context: context())
        XCTAssertEqual(responder.logMembers(request, answer),
                       #""path":"/v1/projects/pushcast-demo/messages:send","token":"dead-token","status":404,"error":"UNREGISTERED""#)
    }
}
