// APNs's server rules (APNsResponder), driven in memory: the device-token shape on its byte-level
// fast path, the apns-id echoed or made, the outcomes by token prefix or by the server's
// decision, header and payload checks, provider tokens, and the answers to injected faults.

@testable import PushcastAPNs
import PushcastCore
import PushcastProviderKit
import PushcastWire
import XCTest

final class APNsResponderTests: XCTestCase {
    static let token = String(repeating: "a1", count: 32)
    static let payload = Array(#"{"aps":{"alert":"hi"}}"#.utf8)

    static func context(device: ServerDevice? = nil, once: FirstTimeSet = FirstTimeSet(), seed: UInt64 = 1) -> ProviderRequestContext {
        ProviderRequestContext(wallMilliseconds: { 1_800_000_000_000 }, random: SplitMix64(seed: seed), once: once, device: device)
    }

    static func request(_ path: String, method: String = "POST", headers: [HTTP2Header] = [], body: [UInt8] = []) -> HTTP2ServerRequest {
        HTTP2ServerRequest(streamID: 1, method: method, path: path, authority: "api.push.apple.com", headers: headers, body: body)
    }

    private func isToken(_ text: String) -> Bool {
        Array(text.utf8).withUnsafeBytes { APNsResponder.isDeviceToken($0) }
    }

    func testDeviceTokenShape() {
        let valid = String(repeating: "0123456789abcdefABCDEF", count: 4).prefix(64)
        XCTAssertTrue(isToken(String(valid)))
        XCTAssertTrue(isToken(String(repeating: "a1", count: 100)))          // 200 digits
        XCTAssertFalse(isToken(String(repeating: "a1", count: 31)))          // 62
        XCTAssertFalse(isToken(String(repeating: "a1", count: 101)))         // 202
        XCTAssertFalse(isToken(String(repeating: "a", count: 65)))           // odd
        // Every non-hex byte, at every position of a word and of the tail.
        let base = Array(repeating: UInt8(ascii: "f"), count: 66)
        for byte in 0...255 where !(48...57).contains(byte) && !(97...102).contains(byte) && !(65...70).contains(byte) {
            for position in [0, 3, 7, 8, 31, 63, 64, 65] {
                var token = base
                token[position] = UInt8(byte)
                XCTAssertFalse(token.withUnsafeBytes { APNsResponder.isDeviceToken($0) }, "byte \(byte) at \(position)")
            }
        }
    }

    func testRandomUUIDsAreCanonicalVersion4() {
        let random = SplitMix64(seed: 42)
        var seen = Set<String>()
        for _ in 0..<1000 {
            let id = APNsResponder.randomUUID(random)
            let bytes = Array(id.utf8)
            XCTAssertEqual(bytes.count, 36)
            for (i, b) in bytes.enumerated() {
                if [8, 13, 18, 23].contains(i) {
                    XCTAssertEqual(b, UInt8(ascii: "-"), id)
                } else {
                    XCTAssertTrue((48...57).contains(b) || (97...102).contains(b), id)
                }
            }
            XCTAssertEqual(bytes[14], UInt8(ascii: "4"), id)
            XCTAssertTrue(Array("89ab".utf8).contains(bytes[19]), id)
            seen.insert(id)
        }
        XCTAssertEqual(seen.count, 1000)
    }

    func testOutcomesByTokenPrefixAndApnsID() {
        let responder = APNsResponder(authentication: .none)
        let once = FirstTimeSet()
        func answer(_ path: String, method: String = "POST", headers: [HTTP2Header] = []) -> ProviderServerAnswer {
            responder.respond(to: Self.request(path, method: method, headers: headers), context: Self.context(once: once))
        }
        let ok = answer("/3/device/" + Self.token)
        XCTAssertEqual(ok.status, 200)
        XCTAssertEqual(ok.kind, .accepted)
        XCTAssertEqual(ok.inlineHeader?.value.utf8.count, 36)
        XCTAssertEqual(ok.body, [])
        XCTAssertEqual(answer("/3/device/" + Self.token, headers: [HTTP2Header("apns-id", "echo-me")]).inlineHeader?.value, "echo-me")
        let longID = String(repeating: "z", count: 80)
        let long = answer("/3/device/" + Self.token, headers: [HTTP2Header("apns-id", longID)])
        XCTAssertNil(long.inlineHeader)
        XCTAssertEqual(long.headers, [HTTP2Header("apns-id", longID)])
        let dead = answer("/3/device/DEAD" + Self.token.dropFirst(4))
        XCTAssertEqual(dead.status, 410)
        XCTAssertEqual(dead.kind, .deviceGone)
        XCTAssertEqual(String(decoding: dead.body, as: UTF8.self), "{\"reason\":\"Unregistered\",\"timestamp\":\(1_800_000_000_000 - 86_400_000)}")
        XCTAssertEqual(answer("/3/device/bad0" + Self.token.dropFirst(4)).reason, "BadDeviceToken")
        XCTAssertEqual(answer("/3/device/5030" + Self.token.dropFirst(4)).status, 503)
        XCTAssertEqual(answer("/3/device/5030" + Self.token.dropFirst(4)).status, 200, "fails once")
        let throttled = answer("/3/device/4290" + Self.token.dropFirst(4))
        XCTAssertEqual(throttled.status, 429)
        XCTAssertEqual(throttled.kind, .busy)
        XCTAssertEqual(answer("/3/device/4290" + Self.token.dropFirst(4)).status, 200, "fails once")
        XCTAssertEqual(answer("/3/device/" + Self.token, method: "GET").status, 405)
        XCTAssertEqual(answer("/4/device/" + Self.token).reason, "BadPath")
        XCTAssertEqual(answer("/3/device/").reason, "MissingDeviceToken")
        XCTAssertEqual(String(decoding: answer("/3/device/xyz").body, as: UTF8.self), #"{"reason":"BadDeviceToken"}"#)
    }

    func testTheServersDecisionOverridesThePrefixes() {
        let responder = APNsResponder(authentication: .none)
        let dead = Self.request("/3/device/dead" + Self.token.dropFirst(4))
        XCTAssertEqual(responder.respond(to: dead, context: Self.context(device: .registered)).status, 200)
        let live = Self.request("/3/device/" + Self.token)
        let gone = responder.respond(to: live, context: Self.context(device: .unregistered))
        XCTAssertEqual(gone.status, 410)
        XCTAssertEqual(gone.reason, "Unregistered")
    }

    func testHeadersAndPayloadAreCheckedWithoutCredentials() {
        let responder = APNsResponder(authentication: .headersOnly)
        func reason(_ headers: [HTTP2Header], body: [UInt8] = APNsResponderTests.payload) -> String? {
            responder.respond(to: Self.request("/3/device/" + Self.token, headers: headers, body: body), context: Self.context()).reason
        }
        let topic = HTTP2Header("apns-topic", "com.example.app")
        XCTAssertNil(reason([topic]))
        XCTAssertEqual(reason([]), "MissingTopic")
        XCTAssertEqual(reason([topic, topic]), "DuplicateHeaders")
        XCTAssertEqual(reason([topic, HTTP2Header("apns-push-type", "nonsense")]), "InvalidPushType")
        XCTAssertEqual(reason([topic, HTTP2Header("apns-push-type", "voip")]), "BadTopic")
        XCTAssertEqual(reason([topic, HTTP2Header("apns-push-type", "background"), HTTP2Header("apns-priority", "10")]), "BadPriority")
        XCTAssertEqual(reason([topic, HTTP2Header("apns-expiration", "-1")]), "BadExpirationDate")
        XCTAssertEqual(reason([topic, HTTP2Header("apns-collapse-id", String(repeating: "c", count: 65))]), "BadCollapseId")
        XCTAssertEqual(reason([topic, HTTP2Header("apns-id", "not-a-uuid")]), "BadMessageId")
        XCTAssertEqual(reason([topic], body: []), "PayloadEmpty")
        XCTAssertEqual(reason([topic], body: Array("[1]".utf8)), "BadPayload")
        XCTAssertEqual(reason([topic], body: Array(repeating: UInt8(ascii: " "), count: 4097)), "PayloadTooLarge")
        XCTAssertNil(responder.streamsBeforeCredentials)
    }

    func testInjectedFaultsInAPNsWordsKeepTheApnsID() {
        let responder = APNsResponder(authentication: .none)
        let request = Self.request("/3/device/" + Self.token, headers: [HTTP2Header("apns-id", "echo-me")])
        let throttled = responder.answer(.throttled(retryAfterSeconds: 5, scope: .provider), to: request, context: Self.context())
        XCTAssertEqual(throttled.status, 429)
        XCTAssertEqual(String(decoding: throttled.body, as: UTF8.self), #"{"reason":"TooManyRequests"}"#)
        XCTAssertEqual(throttled.inlineHeader?.value, "echo-me")
        XCTAssertEqual(responder.answer(.serverError(status: 500), to: request, context: Self.context()).reason, "InternalServerError")
        XCTAssertEqual(responder.answer(.serverError(status: 503), to: request, context: Self.context()).reason, "ServiceUnavailable")
    }

    func testTheLogNamesTokenStatusIdAndReason() {
        let responder = APNsResponder(authentication: .none)
        let request = Self.request("/3/device/bad0" + Self.token.dropFirst(4), headers: [HTTP2Header("apns-id", "id-1")])
        let answer = responder.respond(to: request, context: Self.context())
        XCTAssertEqual(responder.logMembers(request, answer),
                       #""token":"bad0\#(Self.token.dropFirst(4))","status":400,"apns_id":"id-1","reason":"BadDeviceToken""#)
        XCTAssertEqual(responder.token(of: request), "bad0" + Self.token.dropFirst(4))
        XCTAssertEqual(responder.token(of: Self.request("/other")), "")
    }
}
