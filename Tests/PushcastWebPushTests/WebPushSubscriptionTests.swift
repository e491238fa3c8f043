// Subscriptions: PushSubscription.toJSON() output and the three strings, their origins, and every
// refusal with its reason.

import PushcastWire
import XCTest
@testable import PushcastWebPush

final class WebPushSubscriptionTests: XCTestCase {
    private func json(endpoint: String = RFC8291.endpoint, p256dh: String = RFC8291.uaPublic, auth: String = RFC8291.authSecret,
                      extra: String = #","expirationTime":null"#) -> String {
        #"{"endpoint":"\#(endpoint)"\#(extra),"keys":{"p256dh":"\#(p256dh)","auth":"\#(auth)"}}"#
    }

    private func refusal(_ text: String) -> WebPushSubscriptionError? {
        do {
            _ = try WebPushSubscription.parse(json: text)
            return nil
        } catch { return error }
    }

    private func refusal(endpoint: String = RFC8291.endpoint, p256dh: String = RFC8291.uaPublic, auth: String = RFC8291.authSecret) -> WebPushSubscriptionError? {
        do {
            _ = try WebPushSubscription(endpoint: endpoint, p256dh: p256dh, auth: auth)
            return nil
        } catch { return error }
    }

    func testABrowsersSubscriptionParses() throws {
        let subscription = try WebPushSubscription.parse(json: json())
        XCTAssertEqual(subscription.endpoint, RFC8291.endpoint)
        XCTAssertEqual(subscription.origin, "https://push.example.net")
        XCTAssertEqual(subscription.p256dh, decoded(RFC8291.uaPublic))
        XCTAssertEqual(subscription.authSecret, decoded(RFC8291.authSecret))
        XCTAssertEqual(subscription.userAgentKey.publicPoint(), decoded(RFC8291.uaPublic))
        for extra in ["", #","expirationTime":1767225600000"#, #","expirationTime":null,"other":[1,{"x":2}]"#] {
            XCTAssertNoThrow(try WebPushSubscription.parse(json: json(extra: extra)), extra)
        }
    }

    func testOriginsLowerCaseTheHostAndDropPort443() {
        let cases = [
            ("https://FCM.googleapis.com/fcm/send/abc", "https://fcm.googleapis.com"),
            ("HTTPS://updates.push.services.mozilla.com:443/wpush/v2/x", "https://updates.push.services.mozilla.com"),
            ("https://web.push.apple.com:8443/QGuQ?x=1", "https://web.push.apple.com:8443"),
            ("https://push.example.net", "https://push.example.net"),
            ("https://push.example.net?a#b", "https://push.example.net"),
            ("https://[::1]:8443/p", "https://[::1]:8443"),
            ("https://127.0.0.1:0443/p", "https://127.0.0.1"),
        ]
        for (endpoint, origin) in cases {
            XCTAssertEqual(try? WebPushOrigin.parse(endpoint: endpoint).get(), origin, endpoint)
        }
    }

    func testBadEndpointsAreRefusedWithTheirReason() {
        let cases: [(String, WebPushEndpointProblem)] = [
            ("http://push.example.net/x", .notHTTPS),
            ("push.example.net/x", .notHTTPS),
            ("https:///x", .noHost),
            ("https://:8443/x", .noHost),
            ("https://user:pw@push.example.net/x", .userInfo),
            ("https://push.example.net:0/x", .badPort),
            ("https://push.example.net:65536/x", .badPort),
            ("https://push.example.net:/x", .badPort),
            ("https://push.example.net:80a/x", .badPort),
            ("https://push.exa_mple.net/x", .badHost),
            ("https://[::1/x", .badHost),
            ("https://[::1]x/x", .badHost),
            ("https://push.example.net/a b", .badCharacter),
            ("https://pûsh.example.net/x", .badCharacter),
            ("https://push.example.net/" + String(repeating: "a", count: 2048), .tooLong(bytesMax: 2048)),
        ]
        for (endpoint, problem) in cases {
            XCTAssertEqual(refusal(endpoint: endpoint), .endpoint(problem), endpoint)
        }
        XCTAssertEqual(refusal(endpoint: "http://x/y")?.description, "the subscription's endpoint is not an https:// URL")
    }

    func testKeysAreAcceptedInEitherBase64AlphabetWithOrWithoutPadding() throws {
        let point = decoded(RFC8291.uaPublic)
        let standard = Base64URL.encode(point).replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/") + "="
        XCTAssertTrue(standard.contains("+") || standard.contains("/"))
        let subscription = try WebPushSubscription(endpoint: RFC8291.endpoint, p256dh: standard, auth: RFC8291.authSecret + "==")
        XCTAssertEqual(subscription.p256dh, point)
        XCTAssertEqual(subscription.authSecret, decoded(RFC8291.authSecret))
    }

    func testBadKeysAreRefusedWithTheirReason() {
        var offCurve = [UInt8](repeating: 0, count: 65)
        offCurve[0] = 4
        offCurve[32] = 1
        offCurve[64] = 1
        var compressed = decoded(RFC8291.uaPublic)
        compressed[0] = 2
        let mixed = "BCVxsr7N_eNgVRqvHtD0zTZsEc6+VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4"
        XCTAssertEqual(refusal(p256dh: Base64URL.encode(offCurve)), .p256dhNotOnCurve)
        XCTAssertEqual(refusal(p256dh: Base64URL.encode(compressed)), .p256dhNotUncompressed)
        XCTAssertEqual(refusal(p256dh: Base64URL.encode(Array(compressed.prefix(33)))), .p256dhLength(33))
        XCTAssertEqual(refusal(p256dh: mixed), .p256dhNotBase64)
        XCTAssertEqual(refusal(p256dh: "BCVx sr7N"), .p256dhNotBase64)
        XCTAssertEqual(refusal(p256dh: String(repeating: "A", count: 200)), .p256dhNotBase64)
        XCTAssertEqual(refusal(p256dh: ""), .p256dhLength(0))
        XCTAssertEqual(refusal(auth: Base64URL.encode([UInt8](repeating: 1, count: 15))), .authLength(15))
        XCTAssertEqual(refusal(auth: "BTBZMqHH6r4Tts7J_aSIg="), .authNotBase64, "padding where the length needs none")
        XCTAssertEqual(refusal(auth: "BTBZMqHH6r4Tts7J_aSIgh"), .authNotBase64, "non-zero leftover bits")
        let reason = refusal(p256dh: Base64URL.encode(offCurve))?.description ?? ""
        XCTAssertEqual(reason, "keys.p256dh is not a point on the P-256 curve")
        XCTAssertFalse(reason.contains(Base64URL.encode(offCurve)))
    }

    func testMalformedJSONIsRefusedWithTheMissingOrWrongMember() {
        guard case .notJSON(let message)? = refusal(#"{"endpoint":"#) else { return XCTFail("truncated JSON parsed") }
        XCTAssertTrue(message.hasSuffix("at byte 12"), message)
        XCTAssertEqual(refusal("[1]"), .notAnObject)
        XCTAssertEqual(refusal(#"{"keys":{}}"#), .missing("endpoint"))
        XCTAssertEqual(refusal(#"{"endpoint":"https://a.b/c"}"#), .missing("keys"))
        XCTAssertEqual(refusal(#"{"endpoint":"https://a.b/c","keys":[]}"#), .wrongType("keys", expected: "an object"))
        XCTAssertEqual(refusal(#"{"endpoint":"https://a.b/c","keys":{"auth":"x"}}"#), .missing("keys.p256dh"))
        XCTAssertEqual(refusal(#"{"endpoint":"https://a.b/c","keys":{"p256dh":"x"}}"#), .missing("keys.auth"))
        XCTAssertEqual(refusal(#"{"endpoint":7,"keys":{}}"#), .wrongType("endpoint", expected: "a string"))
        XCTAssertEqual(refusal(json(extra: #","expirationTime":"soon""#)), .wrongType("expirationTime", expected: "null or a number"))
        XCTAssertEqual(refusal(json(endpoint: "http://push.example.net/x")), .endpoint(.notHTTPS))
        let large = json(extra: #","pad":""# + String(repeating: "x", count: 8192) + #"""#)
        XCTAssertEqual(refusal(large), .tooLarge(bytesMax: 8192))
        XCTAssertEqual(refusal(#"{"keys":{}}"#)?.description, "the subscription has no endpoint")
    }
}
