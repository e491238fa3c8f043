// The request header fields of RFC 8030 §5: TTL, Urgency, Topic, and the content coding.

import XCTest
@testable import PushcastWebPush

final class WebPushMessageHeadersTests: XCTestCase {
    func testTheFieldsOfACampaign() throws {
        let plain = try WebPushMessageHeaders(ttlSeconds: 86_400)
        XCTAssertEqual(plain.fields.map { "\($0.name): \($0.value)" },
                       ["ttl: 86400", "content-encoding: aes128gcm", "content-type: application/octet-stream"])
        let full = try WebPushMessageHeaders(ttlSeconds: 0, urgency: .veryLow, topic: "sale_2026-12")
        XCTAssertEqual(full.fields.map { "\($0.name): \($0.value)" },
                       ["ttl: 0", "content-encoding: aes128gcm", "content-type: application/octet-stream",
                        "urgency: very-low", "topic: sale_2026-12"])
    }

    func testOutOfRangeTTLsAndBadTopicsAreRefused() {
        XCTAssertThrowsError(try WebPushMessageHeaders(ttlSeconds: -1))
        XCTAssertThrowsError(try WebPushMessageHeaders(ttlSeconds: WebPushMessageHeaders.ttlSecondsMax + 1))
        XCTAssertNoThrow(try WebPushMessageHeaders(ttlSeconds: WebPushMessageHeaders.ttlSecondsMax))
        XCTAssertNoThrow(try WebPushMessageHeaders(ttlSeconds: 60, topic: String(repeating: "a", count: 32)))
        for topic in ["", String(repeating: "a", count: 33), "sale 1", "sale+1", "sale/1", "é"] {
            XCTAssertThrowsError(try WebPushMessageHeaders(ttlSeconds: 60, topic: topic), topic) { error in
                XCTAssertEqual("\(error)", "the Web Push topic must be 1 to 32 letters, digits, '-' or '_' (RFC 8030 §5.4)")
            }
        }
    }

    func testUrgenciesReadAsWritten() throws {
        XCTAssertEqual(try WebPushMessageHeaders.urgency("very-low"), .veryLow)
        XCTAssertEqual(try WebPushMessageHeaders.urgency("HIGH"), .high)
        XCTAssertEqual(WebPushUrgency.allCases.map(\.rawValue), ["very-low", "low", "normal", "high"])
        XCTAssertThrowsError(try WebPushMessageHeaders.urgency("urgent")) {
            XCTAssertEqual("\($0)", "the Web Push urgency must be very-low, low, normal or high, got 'urgent'")
        }
    }
}
