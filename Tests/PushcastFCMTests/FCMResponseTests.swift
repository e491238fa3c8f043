import PushcastCore
import PushcastFCM
import PushcastProviderKit
import PushcastWire
import XCTest

final class FCMResponseTests: XCTestCase {
    /// A Google error envelope as FCM sends it (docs/PROTOCOL.md §2.3).
    private func envelope(code: Int, status: String?, message: String?, errorCode: String?, violations: [String] = []) -> String {
        var details: [String] = []
        if let errorCode {
            details.append(#"{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"\#(errorCode)"}"#)
        }
        if !violations.isEmpty {
            let list = violations.map { #"{"field":"\#($0)","description":"bad"}"# }.joined(separator: ",")
            details.append(#"{"@type":"type.googleapis.com/google.rpc.BadRequest","fieldViolations":[\#(list)]}"#)
        }
        var members = [#""code":\#(code)"#]
        if let message { members.append(#""message":"\#(message)""#) }
        if let status { members.append(#""status":"\#(status)""#) }
        if !details.isEmpty { members.append(#""details":[\#(details.joined(separator: ","))]"#) }
        return #"{"error":{\#(members.joined(separator: ","))}}"#
    }

    private func summary(_ status: Int, _ body: String, headers: [HTTP2Header] = [], now: Int64? = nil) -> FCMResponseSummary {
        FCMResponseSummary(status: status, headers: headers, body: Array(body.utf8), nowEpochSeconds: now)
    }

    struct Row {
        let name: String
        let status: Int
        let body: String
        var headers: [HTTP2Header] = []
        let verdict: FCMVerdict
        let errorCode: String?
    }

    /// Every row of docs/PROTOCOL.md §2.3 (ErrorCode table) and §2.4 (which results prune), plus the
    /// fallbacks.
    private var table: [Row] {
        let badToken = "The registration token is not a valid FCM registration token"
        return [
            Row(name: "200 with name", status: 200, body: #"{"name":"projects/p/messages/0:1500415314455276%31bd1c9631bd1c96"}"#,
                verdict: .delivered(name: "projects/p/messages/0:1500415314455276%31bd1c9631bd1c96"), errorCode: nil),
            Row(name: "200 empty body", status: 200, body: "", verdict: .delivered(name: nil), errorCode: nil),
            Row(name: "200 garbage body", status: 200, body: "<html>ok", verdict: .delivered(name: nil), errorCode: nil),
            Row(name: "UNREGISTERED", status: 404,
                body: envelope(code: 404, status: "NOT_FOUND", message: "Requested entity was not found.", errorCode: "UNREGISTERED"),
                verdict: .prune(reason: "UNREGISTERED"), errorCode: "UNREGISTERED"),
            Row(name: "INVALID_ARGUMENT about the token (message)", status: 400,
                body: envelope(code: 400, status: "INVALID_ARGUMENT", message: badToken, errorCode: "INVALID_ARGUMENT"),
                verdict: .prune(reason: "INVALID_ARGUMENT"), errorCode: "INVALID_ARGUMENT"),
            Row(name: "INVALID_ARGUMENT about the token (field violation)", status: 400,
                body: envelope(code: 400, status: "INVALID_ARGUMENT", message: "Request contains an invalid argument.",
                               errorCode: "INVALID_ARGUMENT", violations: ["message.token"]),
                verdict: .prune(reason: "INVALID_ARGUMENT"), errorCode: "INVALID_ARGUMENT"),
            Row(name: "INVALID_ARGUMENT about data", status: 400,
                body: envelope(code: 400, status: "INVALID_ARGUMENT", message: "Invalid value at 'message.data[0].value' (TYPE_STRING), 12",
                               errorCode: "INVALID_ARGUMENT", violations: ["message.data[0].value"]),
                verdict: .fail(reason: "INVALID_ARGUMENT"), errorCode: "INVALID_ARGUMENT"),
            Row(name: "INVALID_ARGUMENT whose violations name other fields, whatever the message says", status: 400,
                body: envelope(code: 400, status: "INVALID_ARGUMENT", message: "registration token fine, ttl not",
                               errorCode: "INVALID_ARGUMENT", violations: ["message.android.ttl"]),
                verdict: .fail(reason: "INVALID_ARGUMENT"), errorCode: "INVALID_ARGUMENT"),
            Row(name: "INVALID_ARGUMENT without FcmError (payload too large)", status: 400,
                body: envelope(code: 400, status: "INVALID_ARGUMENT", message: "Message is too big", errorCode: nil),
                verdict: .fail(reason: "INVALID_ARGUMENT"), errorCode: "INVALID_ARGUMENT"),
            Row(name: "INVALID_ARGUMENT without FcmError, about the token", status: 400,
                body: envelope(code: 400, status: "INVALID_ARGUMENT", message: badToken, errorCode: nil),
                verdict: .prune(reason: "INVALID_ARGUMENT"), errorCode: "INVALID_ARGUMENT"),
            Row(name: "SENDER_ID_MISMATCH", status: 403,
                body: envelope(code: 403, status: "PERMISSION_DENIED", message: "SenderId mismatch", errorCode: "SENDER_ID_MISMATCH"),
                verdict: .prune(reason: "SENDER_ID_MISMATCH"), errorCode: "SENDER_ID_MISMATCH"),
            Row(name: "QUOTA_EXCEEDED with Retry-After", status: 429,
                body: envelope(code: 429, status: "RESOURCE_EXHAUSTED", message: "Quota exceeded", errorCode: "QUOTA_EXCEEDED"),
                headers: [HTTP2Header("retry-after", "60")],
                verdict: .retry(reason: "QUOTA_EXCEEDED", retryAfterSeconds: 60, throttle: .device), errorCode: "QUOTA_EXCEEDED"),
            Row(name: "429 with no body", status: 429, body: "",
                verdict: .retry(reason: "Status429", retryAfterSeconds: nil, throttle: .device), errorCode: nil),
            Row(name: "UNAVAILABLE with Retry-After", status: 503,
                body: envelope(code: 503, status: "UNAVAILABLE", message: "The service is currently unavailable.", errorCode: "UNAVAILABLE"),
                headers: [HTTP2Header("content-type", "application/json"), HTTP2Header("retry-after", "5")],
                verdict: .retry(reason: "UNAVAILABLE", retryAfterSeconds: 5, throttle: .none), errorCode: "UNAVAILABLE"),
            Row(name: "INTERNAL", status: 500,
                body: envelope(code: 500, status: "INTERNAL", message: "Internal error encountered.", errorCode: "INTERNAL"),
                verdict: .retry(reason: "INTERNAL", retryAfterSeconds: nil, throttle: .none), errorCode: "INTERNAL"),
            Row(name: "502 HTML from a gateway", status: 502,
                body: "<!DOCTYPE html><html lang=en><title>Error 502 (Server Error)!!1</title><p>That’s an error.</html>",
                verdict: .retry(reason: "Status502", retryAfterSeconds: nil, throttle: .none), errorCode: nil),
            Row(name: "504 empty", status: 504, body: "",
                verdict: .retry(reason: "Status504", retryAfterSeconds: nil, throttle: .none), errorCode: nil),
            Row(name: "THIRD_PARTY_AUTH_ERROR", status: 401,
                body: envelope(code: 401, status: "UNAUTHENTICATED", message: "Auth error from APNS or Web Push Service",
                               errorCode: "THIRD_PARTY_AUTH_ERROR"),
                verdict: .stopRun(reason: "THIRD_PARTY_AUTH_ERROR"), errorCode: "THIRD_PARTY_AUTH_ERROR"),
            Row(name: "APNS_AUTH_ERROR (older name)", status: 401,
                body: envelope(code: 401, status: "UNAUTHENTICATED", message: nil, errorCode: "APNS_AUTH_ERROR"),
                verdict: .stopRun(reason: "APNS_AUTH_ERROR"), errorCode: "APNS_AUTH_ERROR"),
            Row(name: "401 UNAUTHENTICATED (access token expired)", status: 401,
                body: envelope(code: 401, status: "UNAUTHENTICATED",
                               message: "Request had invalid authentication credentials. Expected OAuth 2 access token", errorCode: nil),
                verdict: .refreshTokenAndRetry, errorCode: "UNAUTHENTICATED"),
            Row(name: "401 without a body", status: 401, body: "", verdict: .refreshTokenAndRetry, errorCode: nil),
            Row(name: "403 PERMISSION_DENIED", status: 403,
                body: envelope(code: 403, status: "PERMISSION_DENIED", message: "Permission 'cloudmessaging.messages.create' denied",
                               errorCode: nil),
                verdict: .stopRun(reason: "PERMISSION_DENIED"), errorCode: "PERMISSION_DENIED"),
            Row(name: "404 NOT_FOUND without UNREGISTERED (a wrong project) never prunes", status: 404,
                body: envelope(code: 404, status: "NOT_FOUND", message: "Requested entity was not found.", errorCode: nil),
                verdict: .fail(reason: "NOT_FOUND"), errorCode: "NOT_FOUND"),
            Row(name: "UNSPECIFIED_ERROR under 400", status: 400,
                body: envelope(code: 400, status: "INVALID_ARGUMENT", message: nil, errorCode: "UNSPECIFIED_ERROR"),
                verdict: .fail(reason: "UNSPECIFIED_ERROR"), errorCode: "UNSPECIFIED_ERROR"),
            Row(name: "UNSPECIFIED_ERROR under 500", status: 500,
                body: envelope(code: 500, status: "INTERNAL", message: nil, errorCode: "UNSPECIFIED_ERROR"),
                verdict: .retry(reason: "UNSPECIFIED_ERROR", retryAfterSeconds: nil, throttle: .none), errorCode: "UNSPECIFIED_ERROR"),
            Row(name: "unknown errorCode under 503", status: 503,
                body: envelope(code: 503, status: "UNAVAILABLE", message: nil, errorCode: "SOMETHING_NEW"),
                verdict: .retry(reason: "SOMETHING_NEW", retryAfterSeconds: nil, throttle: .none), errorCode: "SOMETHING_NEW"),
            Row(name: "unknown errorCode under 400", status: 400,
                body: envelope(code: 400, status: "FAILED_PRECONDITION", message: nil, errorCode: "SOMETHING_NEW"),
                verdict: .fail(reason: "SOMETHING_NEW"), errorCode: "SOMETHING_NEW"),
            Row(name: "413 without body", status: 413, body: "", verdict: .fail(reason: "Status413"), errorCode: nil),
            Row(name: "418 garbage", status: 418, body: "\u{0}\u{1}{{{[[", verdict: .fail(reason: "Status418"), errorCode: nil),
        ]
    }

    func testEveryRowOfTheErrorTable() {
        for row in table {
            let result = summary(row.status, row.body, headers: row.headers)
            XCTAssertEqual(result.verdict, row.verdict, row.name)
            XCTAssertEqual(result.errorCode, row.errorCode, row.name)
            XCTAssertEqual(result.status, row.status, row.name)
        }
    }

    func testInitFromHTTP2ResponseReadsTheSame() {
        for row in table {
            let response = HTTP2Response(status: row.status, headers: row.headers, body: Array(row.body.utf8))
            XCTAssertEqual(FCMResponseSummary(response: response), summary(row.status, row.body, headers: row.headers), row.name)
        }
    }

    func testMessageIsKept() {
        let result = summary(400, envelope(code: 400, status: "INVALID_ARGUMENT", message: "Message is too big", errorCode: nil))
        XCTAssertEqual(result.message, "Message is too big")
        XCTAssertNil(summary(200, #"{"name":"x"}"#).message)
    }

    func testDetailsInAnyOrderAndFcmErrorMatchedBySuffix() {
        let body = #"""
        {"error": {"code": 400, "status": "INVALID_ARGUMENT", "message": "x",
          "details": [
            {"@type": "type.googleapis.com/google.rpc.BadRequest", "fieldViolations": [{"field": "message.token", "description": "Invalid registration token"}]},
            {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [{"subject": "a"}]},
            {"errorCode": "INVALID_ARGUMENT", "@type": "google.firebase.fcm.v1.FcmError"}
          ]}}
        """#
        let parsed = FCMErrorBody.parse(Array(body.utf8))
        XCTAssertEqual(parsed, FCMErrorBody(errorCode: "INVALID_ARGUMENT", status: "INVALID_ARGUMENT", message: "x", fieldViolations: ["message.token"]))
        XCTAssertTrue(parsed.isAboutRegistrationToken)
        XCTAssertEqual(summary(400, body).verdict, .prune(reason: "INVALID_ARGUMENT"))
    }

    func testRegistrationTokenMatchIgnoresCase() {
        XCTAssertTrue(FCMErrorBody(message: "Invalid REGISTRATION Token").isAboutRegistrationToken)
        XCTAssertFalse(FCMErrorBody(message: "invalid registration").isAboutRegistrationToken)
        XCTAssertFalse(FCMErrorBody().isAboutRegistrationToken)
        XCTAssertTrue(FCMErrorBody(fieldViolations: ["message.android", "message.token"]).isAboutRegistrationToken)
    }

    // MARK: - Retry-After

    func testRetryAfterDeltaSeconds() {
        XCTAssertEqual(RetryAfter.seconds("120", nowEpochSeconds: nil), 120)
        XCTAssertEqual(RetryAfter.seconds(" 7 ", nowEpochSeconds: nil), 7)
        XCTAssertEqual(RetryAfter.seconds("0", nowEpochSeconds: nil), 0)
        XCTAssertEqual(RetryAfter.seconds("99999999999999999999999", nowEpochSeconds: nil), RetryAfter.secondsMax)
        XCTAssertEqual(RetryAfter.seconds("100000", nowEpochSeconds: nil), RetryAfter.secondsMax)
        for junk in ["", " ", "-5", "1.5", "abc", "5s", "0x10", "Sun, 06 Nov 1994 08:49:37 GMT"] {
            XCTAssertNil(RetryAfter.seconds(junk, nowEpochSeconds: nil), junk)
        }
    }

    func testRetryAfterHTTPDateNeedsAnInjectedClock() {
        let date = "Sun, 06 Nov 1994 08:49:37 GMT"  // RFC 9110's example: 784111777
        XCTAssertEqual(RetryAfter.seconds(date, nowEpochSeconds: 784_111_777 - 30), 30)
        XCTAssertEqual(RetryAfter.seconds(date, nowEpochSeconds: 784_111_777 + 30), 0)
        XCTAssertEqual(RetryAfter.seconds("Thu, 01 Jan 1970 00:00:10 GMT", nowEpochSeconds: 0), 10)
        XCTAssertEqual(RetryAfter.seconds("Wed, 29 Feb 2040 23:59:59 GMT", nowEpochSeconds: 2_214_172_799 - 1), 1)
        for junk in ["Sun, 06 Nov 1994 08:49:37 UTC", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994",
                     "Sun, 06 Xyz 1994 08:49:37 GMT", "Sun, 32 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 25:49:37 GMT"] {
            XCTAssertNil(RetryAfter.seconds(junk, nowEpochSeconds: 784_111_000), junk)
        }
        let result = summary(503, "", headers: [HTTP2Header("retry-after", date)], now: 784_111_777 - 12)
        XCTAssertEqual(result.verdict, .retry(reason: "Status503", retryAfterSeconds: 12, throttle: .none))
        XCTAssertEqual(summary(503, "", headers: [HTTP2Header("retry-after", date)]).retryAfterSeconds, nil)
    }

    func testRetryAfterOnlyRidesOnRetries() {
        let result = summary(404, envelope(code: 404, status: "NOT_FOUND", message: nil, errorCode: "UNREGISTERED"),
                             headers: [HTTP2Header("retry-after", "30")])
        XCTAssertEqual(result.verdict, .prune(reason: "UNREGISTERED"))
        XCTAssertEqual(result.retryAfterSeconds, 30)
    }

    // MARK: - Garbage

    func testTruncatedEnvelopesNeverCrashAndNeverGuessWorse() {
        let body = Array(envelope(code: 404, status: "NOT_FOUND", message: "Requested entity was not found.", errorCode: "UNREGISTERED").utf8)
        for length in 0...body.count {
            let result = FCMResponseSummary(status: 404, headers: [], body: Array(body.prefix(length)))
            switch result.verdict {
            case .prune(reason: "UNREGISTERED"):
                XCTAssertEqual(result.errorCode, "UNREGISTERED")
            case .fail:
                XCTAssertNotEqual(result.errorCode, "UNREGISTERED", "length \(length)")
            default:
                XCTFail("length \(length): \(result.verdict)")
            }
        }
        // A body cut after the FcmError detail still says what it said.
        let cut = Array(body.prefix(body.count - 3))
        XCTAssertEqual(FCMResponseSummary(status: 404, headers: [], body: cut).verdict, .prune(reason: "UNREGISTERED"))
    }

    func testHostileMessageIsBoundedAndHasNoControlCharacters() throws {
        let hostile = String(repeating: #"ab\u0000\n\t\u001b[31m\u0085"#, count: 2000) + "tail"
        let result = summary(400, envelope(code: 400, status: "INVALID_ARGUMENT", message: hostile, errorCode: "INVALID_ARGUMENT"))
        let message = try XCTUnwrap(result.message)
        XCTAssertLessThanOrEqual(message.utf8.count, FCMErrorBody.messageBytesMax)
        XCTAssertGreaterThan(message.utf8.count, 150)
        XCTAssertFalse(message.unicodeScalars.contains { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) }, message)
        XCTAssertTrue(message.hasPrefix("ab  "))
    }

    func testMessageIsCutOnACharacterBoundary() throws {
        let text = String(repeating: "日本", count: 100)  // 600 bytes of 3-byte characters
        let message = try XCTUnwrap(summary(500, envelope(code: 500, status: "INTERNAL", message: text, errorCode: nil)).message)
        XCTAssertEqual(message.utf8.count, 198)
        XCTAssertTrue(text.hasPrefix(message))
    }

    func testEscapesInStringsDecode() throws {
        let body = #"{"error":{"message":"smile \ud83d\ude00 done \u00e9 \u003cb\u003e \"q\" \/ \\","status":"UNAVAILABLE"}}"#
        let result = summary(503, body)
        XCTAssertEqual(result.message, "smile 😀 done é <b> \"q\" / \\")
        XCTAssertEqual(result.errorCode, "UNAVAILABLE")
        // A string with a broken escape is dropped; the rest of the envelope still counts.
        for broken in [#"lone \ud83d here"#, #"bad \x escape"#, #"short \u12"#] {
            let damaged = summary(503, #"{"error":{"message":"\#(broken)","status":"UNAVAILABLE"}}"#)
            XCTAssertNil(damaged.message, broken)
            XCTAssertEqual(damaged.errorCode, "UNAVAILABLE", broken)
        }
    }

    func testHostileIdentifiersAreDropped() {
        let long = String(repeating: "A", count: 65)
        for code in [long, "UNREGISTERED ", "UNREGISTERED\\u0000", "ÜNREGISTERED", ""] {
            let body = envelope(code: 404, status: "NOT_FOUND", message: nil, errorCode: code)
            let result = summary(404, body)
            XCTAssertEqual(result.verdict, .fail(reason: "NOT_FOUND"), code)
            XCTAssertEqual(result.errorCode, "NOT_FOUND", code)
        }
        let longest = String(repeating: "A", count: 64)
        XCTAssertEqual(summary(400, envelope(code: 400, status: nil, message: nil, errorCode: longest)).errorCode, longest)
    }

    func testWrongTypesInTheEnvelopeAreIgnored() {
        let bodies = [
            #"{"error":"UNREGISTERED"}"#,
            #"{"error":{"status":42,"message":["x"],"details":{"errorCode":"UNREGISTERED"}}}"#,
            #"{"error":{"details":["UNREGISTERED",7,null,{"@type":5,"errorCode":"UNREGISTERED"}]}}"#,
            #"[{"error":{"status":"NOT_FOUND"}}]"#,
            #"{"name":"projects/p/messages/1"}"#,
        ]
        for body in bodies {
            let result = summary(404, body)
            XCTAssertEqual(result.verdict, .fail(reason: "Status404"), body)
            XCTAssertNil(result.errorCode, body)
            XCTAssertNil(result.message, body)
        }
    }

    func testDeepNestingAndHugeBodiesAreCheap() {
        let deep = #"{"error":{"details":"# + String(repeating: "[", count: 100_000) + "}}"
        XCTAssertEqual(summary(503, deep).verdict, .retry(reason: "Status503", retryAfterSeconds: nil, throttle: .none))
        let many = #"{"error":{"status":"INTERNAL","details":["# + Array(repeating: #"{"@type":"x"}"#, count: 10_000).joined(separator: ",") + "]}}"
        XCTAssertEqual(summary(500, many).errorCode, "INTERNAL")
        let violations = (0..<100).map { _ in "message.data" }
        let parsed = FCMErrorBody.parse(Array(envelope(code: 400, status: nil, message: nil, errorCode: nil, violations: violations).utf8))
        XCTAssertEqual(parsed.fieldViolations.count, FCMErrorBody.fieldViolationsKeptMax)
    }

    func testLongSuccessNameIsBounded() throws {
        let name = "projects/p/messages/" + String(repeating: "9", count: 1000)
        let result = summary(200, #"{"name":"\#(name)"}"#)
        guard case .delivered(let kept?) = result.verdict else { return XCTFail("\(result.verdict)") }
        XCTAssertEqual(kept.utf8.count, FCMResponseSummary.nameBytesMax)
        XCTAssertTrue(name.hasPrefix(kept))
    }

    func testRandomBodiesNeverCrash() {
        let random = SplitMix64(seed: 2024)
        let alphabet = Array(#"{}[]",:\u0aA1 "error""details""@type""FcmError""errorCode""message"null truefalse-.eE"#.utf8) + [0x00, 0xFF, 0xC3, 0x0A]
        let statuses = [200, 400, 401, 403, 404, 429, 500, 502, 503]
        for _ in 0..<3000 {
            let length = Int(random.next(below: 300))
            let body = (0..<length).map { _ in alphabet[Int(random.next(below: UInt64(alphabet.count)))] }
            let status = statuses[Int(random.next(below: UInt64(statuses.count)))]
            let result = FCMResponseSummary(status: status, headers: [], body: body)
            if let message = result.message {
                XCTAssertLessThanOrEqual(message.utf8.count, FCMErrorBody.messageBytesMax)
                XCTAssertFalse(message.unicodeScalars.contains { $0.value < 0x20 })
            }
            if let code = result.errorCode { XCTAssertLessThanOrEqual(code.utf8.count, FCMErrorBody.identifierBytesMax) }
        }
    }
}
