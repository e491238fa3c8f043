import PushcastCommandLine
import PushcastCore
import PushcastJSON
import PushcastProviderKit
import PushcastTransport
import PushcastWire
import XCTest
@testable import PushcastWebPush

/// The Web Push provider as the engine sees it: tokens, routes, bodies, requests and answers.
final class WebPushProviderTests: XCTestCase {
    let provider = WebPushPushProvider()

    private func normalized(_ raw: String) -> Result<String, TokenProblem> {
        var output: [UInt8] = []
        if let problem = Array(raw.utf8).withUnsafeBytes({ provider.normalize(token: $0, into: &output) }) { return .failure(problem) }
        return .success(String(decoding: output, as: UTF8.self))
    }

    private func routeLength(_ token: String) -> Int? { Array(token.utf8).withUnsafeBytes { provider.routeLength(token: $0) } }

    func testEndpointsNormaliseToHTTPSWithALowerCaseOrigin() throws {
        XCTAssertEqual(try normalized("  HTTPS://Push.Example.NET:443/Push/AbC \r").get(), "https://push.example.net/Push/AbC")
        XCTAssertEqual(try normalized("https://updates.push.services.mozilla.com:8443/wpush/v2/x").get(),
                       "https://updates.push.services.mozilla.com:8443/wpush/v2/x")
        XCTAssertEqual(try normalized("https://push.example.net:08443/x").get(), "https://push.example.net:8443/x")
        let json = #"{"endpoint":"https://Web.Push.Apple.com/QGx?x=1","keys":{"p256dh":"k","auth":"a"}}"#
        XCTAssertEqual(try normalized(json).get(), "https://web.push.apple.com/QGx?x=1", "a subscription's JSON gives its endpoint")
        func refusal(_ raw: String) -> String? {
            guard case .failure(let problem) = normalized(raw) else { return nil }
            return problem.description
        }
        XCTAssertEqual(refusal("http://push.example.net/x"), "the endpoint is not an https:// URL")
        XCTAssertEqual(refusal("https://push.example.net"), "the endpoint has no path")
        XCTAssertEqual(refusal("https://user@push.example.net/x"), "the endpoint has a user name or password before the host")
        XCTAssertEqual(refusal("https://push.example.net/" + String(repeating: "a", count: 2100)), "the endpoint is longer than 2048 bytes")
        XCTAssertEqual(refusal(#"{"keys":{}}"#), "the subscription JSON has no endpoint string")
        XCTAssertEqual(refusal("https://push.example.net:99999/x"), "the endpoint has a port that is not a number from 1 to 65535")
    }

    func testTheRouteIsTheOrigin() throws {
        for (endpoint, origin) in [("https://fcm.googleapis.com/fcm/send/a:b", "https://fcm.googleapis.com"),
                                   ("https://push.example.net:8443/p/q", "https://push.example.net:8443"),
                                   ("https://[::1]:9000/p", "https://[::1]:9000")] {
            let token = try normalized(endpoint).get()
            XCTAssertEqual(routeLength(token).map { String(token.prefix($0)) }, origin)
        }
        XCTAssertNil(routeLength("http://x/y"))
        XCTAssertTrue(provider.isRouted)
        XCTAssertEqual(provider.id.rawValue, "webpush")
        XCTAssertEqual(ProviderCatalog([provider]).provider(columnBytes: UnsafeRawBufferPointer(start: nil, count: 0)), nil)
        let catalog = ProviderCatalog([provider])
        for alias in ["web", "WebPush", " browser "] {
            XCTAssertEqual(Array(alias.utf8).withUnsafeBytes { catalog.provider(columnBytes: $0) }, .webpush, alias)
        }
    }

    // MARK: - Answers

    private func verdict(_ status: Int, headers: [HTTP2Header] = [], body: String = "") -> ProviderVerdict {
        WebPushAdapter.classifyForTest(HTTP2Response(status: status, headers: headers, body: Array(body.utf8)))
    }

    func testEveryStatusHasItsVerdict() {
        XCTAssertEqual(verdict(201, headers: [HTTP2Header("location", "https://push.example.net/m/42")]),
                       .delivered(messageID: "https://push.example.net/m/42"))
        XCTAssertEqual(verdict(201), .delivered(messageID: nil))
        XCTAssertEqual(verdict(410, body: #"{"code":410,"errno":106,"error":"Gone"}"#), .prune(reason: "Gone (errno 106)", unregisteredAt: nil))
        XCTAssertEqual(verdict(404), .prune(reason: "NotFound", unregisteredAt: nil))
        XCTAssertEqual(verdict(410, body: #"{"reason":"Gone"}"#), .prune(reason: "Gone", unregisteredAt: nil), "a detail that repeats the reason")
        XCTAssertEqual(verdict(413), .fail(reason: "PayloadTooLarge"))
        XCTAssertEqual(verdict(429, headers: [HTTP2Header("retry-after", "30")]),
                       .retry(reason: "TooManyRequests", retryAfterSeconds: 30, throttle: .provider))
        XCTAssertEqual(verdict(400, body: "<html>bad</html>"), .fail(reason: "BadRequest"))
        XCTAssertEqual(verdict(403, body: #"{"reason":"BadJwtToken"}"#), .reauthenticate(reason: "BadVAPID (BadJwtToken)"))
        XCTAssertEqual(verdict(401, body: #"{"errno":109}"#), .reauthenticate(reason: "BadVAPID (errno 109)"))
        XCTAssertEqual(verdict(503, headers: [HTTP2Header("retry-after", "soon")]),
                       .retry(reason: "ServerError", retryAfterSeconds: nil, throttle: .none))
        XCTAssertEqual(verdict(500), .retry(reason: "ServerError", retryAfterSeconds: nil, throttle: .none))
        XCTAssertEqual(verdict(418), .fail(reason: "Status418"))
        // A hostile detail is left out.
        XCTAssertEqual(verdict(410, body: #"{"reason":"a b\"c"}"#), .prune(reason: "Gone", unregisteredAt: nil))
        XCTAssertEqual(verdict(410, body: #"{"errno":"12345678"}"#), .prune(reason: "Gone", unregisteredAt: nil))
        let named = Set(provider.reasons.entries.map(\.reason))
        for reason in ["Gone", "NotFound", "PayloadTooLarge", "TooManyRequests", "BadRequest", "BadVAPID", "InvalidSubscription", "ServerError"] {
            XCTAssertTrue(named.contains(reason), reason)
        }
    }

    // MARK: - Bodies

    static let template = #"{"title":"Hi {{name}}"}"#

    private func render(columns: [String], row: [String?], template: String = WebPushProviderTests.template) throws
        -> (size: Int, body: [UInt8], problem: RowProblem?) {
        let rendering = WebPushRendering(template: try PayloadTemplate.compile(text: template, columns: columns), columns: WebPushColumns(columns: columns))
        let renderer = rendering.makeRenderer(campaign: "c")
        var body: [UInt8] = []
        let stored = row.map { text in
            text.map { text -> UnsafeMutableRawBufferPointer in
                let bytes = UnsafeMutableRawBufferPointer.allocate(byteCount: text.utf8.count, alignment: 1)
                bytes.copyBytes(from: text.utf8)
                return bytes
            }
        }
        defer { stored.forEach { $0?.deallocate() } }
        let size = Array("https://push.example.net/x".utf8).withUnsafeBytes { token in
            renderer.render(token: token, into: &body) { column in stored[column].map { UnsafeRawBufferPointer($0) } }
        }
        return (size, body, renderer.rowProblem)
    }

    func testKeysComeFromColumnsAKeysObjectOrTheWholeSubscription() throws {
        let (subscription, _, auth) = try freshSubscription()
        let p256dh = Base64URL.encode(subscription.p256dh), authText = Base64URL.encode(auth)
        let expected = subscription.p256dh + auth + Array(#"{"title":"Hi Ann"}"#.utf8)
        let flat = try render(columns: ["endpoint", "p256dh", "auth", "name"], row: ["e", p256dh, authText, "Ann"])
        XCTAssertEqual(flat.body, expected)
        XCTAssertEqual(flat.size, expected.count)
        let laravel = try render(columns: ["endpoint", "public_key", "auth_token", "content_encoding", "name"],
                                 row: ["e", p256dh, authText, "aes128gcm", "Ann"])
        XCTAssertEqual(laravel.body, expected)
        let nested = try render(columns: ["endpoint", "keys", "name"], row: ["e", #"{"p256dh":"\#(p256dh)","auth":"\#(authText)"}"#, "Ann"])
        XCTAssertEqual(nested.body, expected)
        let whole = try render(columns: ["subscription", "name"],
                               row: [#"{"endpoint":"https://push.example.net/x","keys":{"p256dh":"\#(p256dh)","auth":"\#(authText)"}}"#, "Ann"])
        XCTAssertEqual(whole.body, expected)
    }

    func testARowWithBadKeysIsARowProblemNamingTheField() throws {
        let (subscription, _, auth) = try freshSubscription()
        let p256dh = Base64URL.encode(subscription.p256dh), authText = Base64URL.encode(auth)
        let columns = ["endpoint", "p256dh", "auth", "content_encoding", "name"]
        func problem(_ row: [String?], template: String = WebPushProviderTests.template) throws -> RowProblem? {
            let result = try render(columns: columns, row: row, template: template)
            if result.problem != nil { XCTAssertEqual(result.size, RowProblem.size) }
            return result.problem
        }
        XCTAssertNil(try problem(["e", p256dh, authText, "", "Ann"]))
        XCTAssertEqual(try problem(["e", "not*base64", authText, "", "Ann"]),
                       RowProblem(reason: "InvalidSubscription", field: "p256dh", message: "not base64url"))
        XCTAssertEqual(try problem(["e", Base64URL.encode(Array(subscription.p256dh.prefix(33))), authText, "", "Ann"])?.message,
                       "decodes to 33 bytes; a P-256 public key is 65 (0x04, X, Y)")
        XCTAssertEqual(try problem(["e", p256dh, Base64URL.encode([1, 2, 3]), "", "Ann"]),
                       RowProblem(reason: "InvalidSubscription", field: "auth", message: "decodes to 3 bytes; the authentication secret is 16"))
        XCTAssertEqual(try problem(["e", p256dh, nil, "", "Ann"])?.field, "auth")
        XCTAssertEqual(try problem(["e", nil, nil, "", "Ann"])?.field, "p256dh")
        XCTAssertEqual(try problem(["e", p256dh, authText, "aesgcm", "Ann"])?.field, "content_encoding")
        let big = try problem(["e", p256dh, authText, "", String(repeating: "x", count: 4000)])
        XCTAssertEqual(big?.reason, "PayloadTooLarge")
        XCTAssertEqual(big?.message.hasSuffix("Web Push encrypts at most 3993"), true)
        let nested = try render(columns: ["endpoint", "keys", "name"], row: ["e", #"{"p256dh":"\#(p256dh)"}"#, "Ann"])
        XCTAssertEqual(nested.problem?.field, "keys.auth")
    }

    // MARK: - Requests

    private func adapter(origin: String = "https://push.example.net:8443", clock: ManualClock = ManualClock()) throws -> (WebPushAdapter, VAPIDSigner) {
        let key = try VAPIDKey.generate()
        let signer = try VAPIDSigner(key: key, subject: "mailto:push@example.com", clock: clock)
        let settings = WebPushSendSettings(authority: "push.example.net:8443", credential: WebPushLaneCredential(origin: origin, signer: signer),
                                           headers: try WebPushMessageHeaders(ttlSeconds: 600, urgency: .high, topic: "news"))
        return (WebPushAdapter(settings: settings), signer)
    }

    func testTheRequestPostsToTheEndpointWithVAPIDAndTheMessageHeaders() throws {
        let clock = ManualClock()
        let (adapter, signer) = try self.adapter(clock: clock)
        XCTAssertEqual(adapter.layout, RequestLayout(tokenInPath: true, idInHeader: false, sealsBody: true))
        var request = adapter.makeRequest()
        request.pathSuffix = "https://push.example.net:8443/wpush/v2/abc"
        XCTAssertEqual(request.fullPath, "/wpush/v2/abc")
        XCTAssertEqual(request.authority, "push.example.net:8443")
        XCTAssertEqual(request.method, "POST")
        let generation = try XCTUnwrap(adapter.authorize(&request))
        let headers = try XCTUnwrap(request.fixedHeaders).headers
        let byName = Dictionary(headers.map { ($0.name, $0.value) }, uniquingKeysWith: { a, _ in a })
        XCTAssertEqual(byName["ttl"], "600")
        XCTAssertEqual(byName["urgency"], "high")
        XCTAssertEqual(byName["topic"], "news")
        XCTAssertEqual(byName["content-encoding"], "aes128gcm")
        XCTAssertEqual(byName["content-type"], "application/octet-stream")
        let authorization = try XCTUnwrap(byName["authorization"])
        XCTAssertEqual(try VAPIDVerifier(clock: clock).verify(authorization: authorization, origin: "https://push.example.net:8443").get(),
                       signer.key.publicKey)
        XCTAssertEqual(adapter.authorize(&request), generation, "the same token until it renews")
        clock.advance(nanoseconds: 12 * 3_600_000_000_000)
        XCTAssertEqual(adapter.authorize(&request), generation + 1, "a renewed token is a new generation")
    }

    func testEachAttemptIsSealedAfreshAndDecryptsToThePayload() throws {
        let (adapter, _) = try self.adapter()
        let (subscription, privateKey, auth) = try freshSubscription()
        let payload = Array(#"{"title":"Hi"}"#.utf8)
        var first: [UInt8] = [], second: [UInt8] = []
        XCTAssertNil(adapter.seal(payload: subscription.p256dh + auth + payload, into: &first))
        XCTAssertNil(adapter.seal(payload: subscription.p256dh + auth + payload, into: &second))
        XCTAssertNotEqual(first, second, "a new salt and key for each attempt")
        let decryptor = try WebPushDecryptor(privateKey: privateKey, authSecret: auth)
        XCTAssertEqual(try decryptor.decrypt(first), payload)
        XCTAssertEqual(try decryptor.decrypt(second), payload)
        // A point that is not on the curve is found here: the row is never sent.
        var offCurve = subscription.p256dh
        offCurve[64] ^= 1
        var body: [UInt8] = []
        XCTAssertEqual(adapter.seal(payload: offCurve + auth + payload, into: &body),
                       .invalid(RowProblem(reason: "InvalidSubscription", field: "p256dh", message: "not a point on the P-256 curve")))
    }

    func testARefusedTokenIsRenewedOnceThenTheLaneStops() throws {
        let (adapter, signer) = try self.adapter()
        var request = adapter.makeRequest()
        let generation = try XCTUnwrap(adapter.authorize(&request))
        XCTAssertEqual(adapter.credentialRejected(generation: generation), .retry)
        let renewed = try XCTUnwrap(adapter.authorize(&request))
        XCTAssertEqual(renewed, generation + 1, "a fresh token was signed")
        XCTAssertEqual(signer.signatureCount, 2)
        XCTAssertEqual(adapter.credentialRejected(generation: generation), .retry, "an older token's refusal: the new one goes")
        guard case .stopLane(let message) = adapter.credentialRejected(generation: renewed) else { return XCTFail("the lane goes on") }
        XCTAssertTrue(message.hasPrefix("https://push.example.net:8443 refused the VAPID token twice"), message)
        XCTAssertFalse(message.contains("vapid t="), "no token in messages")
    }
}

extension WebPushAdapter {
    static func classifyForTest(_ response: HTTP2Response) -> ProviderVerdict { WebPushAnswer.verdict(response) }
}
