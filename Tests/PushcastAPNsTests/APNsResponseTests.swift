import PushcastAPNs
import PushcastJSON
import PushcastWire
import XCTest

final class APNsResponseTests: XCTestCase {
    /// Every (status, reason) of docs/PROTOCOL.md §1.6 and the verdict pushcast gives it.
    let table: [(Int, String, APNsVerdict)] = [
        (400, "BadCollapseId", .fail(reason: "BadCollapseId")),
        (400, "BadDeviceToken", .prune(reason: "BadDeviceToken")),
        (400, "BadExpirationDate", .fail(reason: "BadExpirationDate")),
        (400, "BadMessageId", .fail(reason: "BadMessageId")),
        (400, "BadPriority", .fail(reason: "BadPriority")),
        (400, "BadTopic", .stopRun(reason: "BadTopic")),
        (400, "DeviceTokenNotForTopic", .prune(reason: "DeviceTokenNotForTopic")),
        (400, "DuplicateHeaders", .fail(reason: "DuplicateHeaders")),
        (400, "IdleTimeout", .retry(reason: "IdleTimeout")),
        (400, "InvalidPushType", .fail(reason: "InvalidPushType")),
        (400, "MissingDeviceToken", .fail(reason: "MissingDeviceToken")),
        (400, "MissingTopic", .stopRun(reason: "MissingTopic")),
        (400, "PayloadEmpty", .fail(reason: "PayloadEmpty")),
        (400, "TopicDisallowed", .stopRun(reason: "TopicDisallowed")),
        (403, "BadCertificate", .stopRun(reason: "BadCertificate")),
        (403, "BadCertificateEnvironment", .stopRun(reason: "BadCertificateEnvironment")),
        (403, "ExpiredProviderToken", .refreshTokenAndRetry),
        (403, "Forbidden", .fail(reason: "Forbidden")),
        (403, "InvalidProviderToken", .stopRun(reason: "InvalidProviderToken")),
        (403, "MissingProviderToken", .stopRun(reason: "MissingProviderToken")),
        (403, "UnrelatedKeyIdInToken", .retry(reason: "UnrelatedKeyIdInToken")),
        (403, "BadEnvironmentKeyIdInToken", .stopRun(reason: "BadEnvironmentKeyIdInToken")),
        (404, "BadPath", .fail(reason: "BadPath")),
        (405, "MethodNotAllowed", .fail(reason: "MethodNotAllowed")),
        (410, "ExpiredToken", .prune(reason: "ExpiredToken")),
        (410, "Unregistered", .prune(reason: "Unregistered")),
        (413, "PayloadTooLarge", .fail(reason: "PayloadTooLarge")),
        (429, "TooManyProviderTokenUpdates", .retry(reason: "TooManyProviderTokenUpdates")),
        (429, "TooManyRequests", .retry(reason: "TooManyRequests")),
        (500, "InternalServerError", .retry(reason: "InternalServerError")),
        (503, "ServiceUnavailable", .retry(reason: "ServiceUnavailable")),
        (503, "Shutdown", .retry(reason: "Shutdown")),
    ]

    func testReasonTableCoversEveryDocumentedReason() {
        XCTAssertEqual(Set(table.map(\.1)), Set(APNsReason.documented.map(\.rawValue)))
        XCTAssertEqual(table.count, APNsReason.documented.count)
        for (status, text, verdict) in table {
            let reason = APNsReason(text)
            XCTAssertEqual(reason.rawValue, text)
            if case .unknown = reason { XCTFail("\(text) should be a known reason") }
            XCTAssertEqual(APNsResponseClassifier.verdict(status: status, reason: reason), verdict, "\(status) \(text)")
            let body = Array(#"{"reason":"\#(text)"}"#.utf8)
            XCTAssertEqual(APNsResponseSummary(response: HTTP2Response(status: status, body: body)).verdict, verdict)
        }
    }

    func testSuccessAndUnknownReasons() {
        XCTAssertEqual(APNsResponseClassifier.verdict(status: 200, reason: nil), .delivered)
        XCTAssertEqual(APNsReason("BrandNewReason"), .unknown("BrandNewReason"))
        XCTAssertEqual(APNsResponseClassifier.verdict(status: 400, reason: APNsReason("BrandNew")), .fail(reason: "BrandNew"))
        XCTAssertEqual(APNsResponseClassifier.verdict(status: 403, reason: APNsReason("BrandNew")), .fail(reason: "BrandNew"))
        XCTAssertEqual(APNsResponseClassifier.verdict(status: 410, reason: APNsReason("BrandNew")), .prune(reason: "BrandNew"))
        XCTAssertEqual(APNsResponseClassifier.verdict(status: 429, reason: APNsReason("BrandNew")), .retry(reason: "BrandNew"))
        XCTAssertEqual(APNsResponseClassifier.verdict(status: 502, reason: nil), .retry(reason: "Status502"))
        XCTAssertEqual(APNsResponseClassifier.verdict(status: 302, reason: nil), .fail(reason: "Status302"))
        XCTAssertEqual(APNsResponseClassifier.verdict(status: 500, reason: .badDeviceToken), .retry(reason: "BadDeviceToken"))
    }

    func testSummaryKeepsApnsIDAndTimestamp() {
        let delivered = APNsResponseSummary(response: HTTP2Response(status: 200, headers: [HTTP2Header("apns-id", "abc")]))
        XCTAssertEqual(delivered.verdict, .delivered)
        XCTAssertEqual(delivered.apnsID, "abc")
        XCTAssertNil(delivered.reason)
        let gone = APNsResponseSummary(response: HTTP2Response(status: 410, body: Array(#"{"reason":"Unregistered","timestamp":1234567890123}"#.utf8)))
        XCTAssertEqual(gone.verdict, .prune(reason: "Unregistered"))
        XCTAssertEqual(gone.timestampMilliseconds, 1_234_567_890_123)
        XCTAssertEqual(gone.unregisteredAt, "2009-02-13T23:31:30.123Z")
    }

    func testISO8601() {
        func iso(_ ms: Int64) -> String? { APNsErrorBody(timestampMilliseconds: ms).unregisteredAt }
        XCTAssertEqual(iso(0), "1970-01-01T00:00:00.000Z")
        XCTAssertEqual(iso(951_782_400_000), "2000-02-29T00:00:00.000Z")
        XCTAssertEqual(iso(1_234_567_890_123), "2009-02-13T23:31:30.123Z")
        XCTAssertEqual(iso(253_402_300_799_999), "9999-12-31T23:59:59.999Z")
        XCTAssertNil(iso(-1))
        XCTAssertNil(iso(253_402_300_800_000))
    }

    func testErrorBodyParsingIsTolerant() {
        func parse(_ text: String) -> APNsErrorBody { APNsErrorBody.parse(Array(text.utf8)) }
        XCTAssertEqual(parse(#"{"reason":"BadDeviceToken"}"#), APNsErrorBody(reason: "BadDeviceToken"))
        XCTAssertEqual(parse(#" { "timestamp" : 1234567890123 , "reason" : "Unregistered" } "#),
                       APNsErrorBody(reason: "Unregistered", timestampMilliseconds: 1_234_567_890_123))
        XCTAssertEqual(parse(#"{"reason":"Unregistered","timestamp":"1234567890123"}"#).timestampMilliseconds, 1_234_567_890_123)
        XCTAssertEqual(parse(#"{"extra":{"a":[1,2,{"b":null}]},"reason":"Shutdown"}"#).reason, "Shutdown")
        XCTAssertEqual(parse(#"{"reason":"Unregistered","timestamp":12345678"#).reason, "Unregistered", "truncated after the reason")
        XCTAssertEqual(parse(#"{"reason":"Unreg"#), APNsErrorBody())
        XCTAssertEqual(parse(#"{"reason":"A\u0042\"C"}"#).reason, "AB\"C")
        XCTAssertEqual(parse(#"{"reason":"\ud83d\ude00"}"#).reason, "😀")
        XCTAssertEqual(parse(#"{"reason":"\ud800"}"#).reason, "\u{FFFD}")
        XCTAssertEqual(parse(#"{"reason":"x","timestamp":1e99}"#).timestampMilliseconds, nil)
        XCTAssertEqual(parse(#"{"reason":"x","timestamp":99999999999999999999999}"#).timestampMilliseconds, nil)
        XCTAssertEqual(parse("<html>502 Bad Gateway</html>"), APNsErrorBody())
        XCTAssertEqual(parse(""), APNsErrorBody())
        XCTAssertEqual(parse(String(repeating: "{\"a\":", count: 5000)), APNsErrorBody())
        XCTAssertEqual(parse(#"{"reason":""# + String(repeating: "x", count: 5000) + "\"}").reason?.utf8.count, 512)
        // Random bytes never crash.
        let alphabet = Array(#"{}[]":,\u0 1eE-.trfalsn"#.utf8) + [0xFF, 0xE2, 0x80]
        var state: UInt64 = 42
        for _ in 0..<2000 {
            var bytes: [UInt8] = []
            for _ in 0..<Int(state % 64) {
                state = state &* 6364136223846793005 &+ 1442695040888963407
                bytes.append(alphabet[Int(state >> 58) % alphabet.count])
            }
            _ = APNsErrorBody.parse(bytes)
            state &+= 1
        }
    }

    func testJSONValidationForTheMock() {
        func valid(_ text: String) -> Bool { Array(text.utf8).withUnsafeBytes { JSONValidation.isObject($0) } }
        XCTAssertTrue(valid(#"{"aps":{"alert":"x"}}"#))
        XCTAssertFalse(valid(#"["aps"]"#))
        XCTAssertFalse(valid(#"{"aps":}"#))
        XCTAssertFalse(valid(""))
    }
}
