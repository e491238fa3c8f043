import COpenSSL
import PushcastAPNs
import PushcastCore
import PushcastWire
import XCTest

final class APNsHeadersTests: XCTestCase {
    let now: Int64 = 1_800_000_000

    func testTopicSuffixes() {
        let expected: [APNsPushType: String] = [
            .alert: "com.example.app", .background: "com.example.app", .mdm: "com.example.app",
            .voip: "com.example.app.voip", .complication: "com.example.app.complication",
            .fileprovider: "com.example.app.pushkit.fileprovider", .liveactivity: "com.example.app.push-type.liveactivity",
            .location: "com.example.app.location-query", .pushtotalk: "com.example.app.voip-ptt",
            .widgets: "com.example.app.push-type.widgets", .controls: "com.example.app.push-type.controls",
        ]
        XCTAssertEqual(Set(expected.keys), Set(APNsPushType.allCases))
        for (type, topic) in expected {
            XCTAssertEqual(type.topic(forBundleID: "com.example.app"), topic, type.rawValue)
            XCTAssertEqual(type.topic(forBundleID: topic), topic, "\(type.rawValue): a suffix already present is not doubled")
        }
    }

    func testFixedHeadersAndPerRequestHeaders() throws {
        let campaign = try APNsCampaignHeaders(topic: "com.example.app", pushType: .voip, priority: .immediate,
                                               expiration: .secondsFromNow(3600), collapseID: "sale-1", nowEpochSeconds: now)
        XCTAssertEqual(campaign.fixedHeaders, [
            HTTP2Header("apns-push-type", "voip"), HTTP2Header("apns-topic", "com.example.app.voip"),
            HTTP2Header("apns-priority", "10"), HTTP2Header("apns-expiration", "1800003600"),
            HTTP2Header("apns-collapse-id", "sale-1"),
        ])
        let headers = campaign.headers(authorization: "bearer x.y.z", apnsID: "bf2e4a0a-2632-50fd-bde9-e5c05b9395ec")
        // apns-id differs on every request: never indexed by HPACK (HTTP2HotPathTests checks the wire).
        XCTAssertEqual(Array(headers.suffix(2)), [HTTP2Header("apns-id", "bf2e4a0a-2632-50fd-bde9-e5c05b9395ec", neverIndexed: true),
                                                  HTTP2Header("authorization", "bearer x.y.z")])
        XCTAssertEqual(campaign.headers(authorization: nil, apnsID: "id").count, 6, "certificate auth sends no authorization header")
        XCTAssertEqual(campaign.notes, ["apns-topic is 'com.example.app.voip' for push type voip"])
    }

    func testBackgroundForcesPriorityFive() throws {
        let campaign = try APNsCampaignHeaders(topic: "com.example.app", pushType: .background, priority: .immediate, nowEpochSeconds: now)
        XCTAssertEqual(campaign.priority, .considerPower)
        XCTAssertTrue(campaign.fixedHeaders.contains(HTTP2Header("apns-priority", "5")))
        XCTAssertEqual(campaign.notes.count, 1)
        XCTAssertFalse(campaign.fixedHeaders.contains { $0.name == "apns-expiration" || $0.name == "apns-collapse-id" })
        let low = try APNsCampaignHeaders(topic: "com.example.app", pushType: .alert, priority: .powerSaving, nowEpochSeconds: now)
        XCTAssertEqual(low.priority, .powerSaving)
    }

    func testExpirationForms() throws {
        XCTAssertEqual(try APNsExpiration.parse("0"), .deliverOnce)
        XCTAssertEqual(try APNsExpiration.parse("86400"), .secondsFromNow(86400))
        XCTAssertEqual(try APNsExpiration.parse("1900000000"), .absolute(epochSeconds: 1_900_000_000))
        XCTAssertThrowsError(try APNsExpiration.parse("-5"))
        XCTAssertThrowsError(try APNsExpiration.parse("soon"))
        let once = try APNsCampaignHeaders(topic: "t", expiration: .deliverOnce, nowEpochSeconds: now)
        XCTAssertEqual(once.expirationEpochSeconds, 0)
        let absolute = try APNsCampaignHeaders(topic: "t", expiration: .absolute(epochSeconds: now + 10), nowEpochSeconds: now)
        XCTAssertEqual(absolute.expirationEpochSeconds, now + 10)
        XCTAssertThrowsError(try APNsCampaignHeaders(topic: "t", expiration: .absolute(epochSeconds: now - 1), nowEpochSeconds: now)) { error in
            XCTAssertTrue("\(error)".contains("in the past"))
        }
    }

    func testValidationErrors() {
        XCTAssertThrowsError(try APNsCampaignHeaders(topic: "", nowEpochSeconds: now)) { XCTAssertTrue("\($0)".contains("apns-topic is required")) }
        XCTAssertThrowsError(try APNsCampaignHeaders(topic: "com.example app", nowEpochSeconds: now))
        XCTAssertThrowsError(try APNsCampaignHeaders(topic: "com.example\r\nx: y", nowEpochSeconds: now))
        XCTAssertNoThrow(try APNsCampaignHeaders(topic: "t", collapseID: String(repeating: "c", count: 64), nowEpochSeconds: now))
        XCTAssertThrowsError(try APNsCampaignHeaders(topic: "t", collapseID: String(repeating: "c", count: 65), nowEpochSeconds: now)) { error in
            XCTAssertTrue("\(error)".contains("65 bytes"), "\(error)")
        }
        // 22 Cyrillic letters are 44 bytes; 33 are 66: bytes count, not characters.
        XCTAssertNoThrow(try APNsCampaignHeaders(topic: "t", collapseID: String(repeating: "ж", count: 32), nowEpochSeconds: now))
        XCTAssertThrowsError(try APNsCampaignHeaders(topic: "t", collapseID: String(repeating: "ж", count: 33), nowEpochSeconds: now))
        XCTAssertThrowsError(try APNsCampaignHeaders(topic: "t", collapseID: "", nowEpochSeconds: now))
    }

    func testAPNsIDIsDeterministicVersionedAndMatchesAnIndependentHash() {
        let token = String(repeating: "ab", count: 32)
        let id = APNsID.derive(campaign: "spring-sale", token: token)
        XCTAssertEqual(id, "bf2e4a0a-2632-50fd-bde9-e5c05b9395ec")  // Python hashlib, same construction
        XCTAssertEqual(APNsID.derive(campaign: "spring-sale", token: token), id)
        XCTAssertNotEqual(APNsID.derive(campaign: "spring-sale2", token: token), id)
        XCTAssertNotEqual(APNsID.derive(campaign: "spring-sal", token: "e" + token), APNsID.derive(campaign: "spring-sale", token: token),
                          "the 0x00 separator keeps (campaign, token) pairs apart")
        XCTAssertTrue(APNsID.isCanonical(id))
        XCTAssertFalse(APNsID.isCanonical(id.uppercased()))
        XCTAssertFalse(APNsID.isCanonical("bf2e4a0a26325 0fd-bde9-e5c05b9395ec"))

        // Independent digest through EVP_Digest.
        let input = Array("campaign-x".utf8) + [0] + Array(token.utf8)
        var digest = [UInt8](repeating: 0, count: 32)
        var size: UInt32 = 0
        XCTAssertEqual(EVP_Digest(input, input.count, &digest, &size, EVP_sha256(), nil), 1)
        digest[6] = digest[6] & 0x0F | 0x50
        digest[8] = digest[8] & 0x3F | 0x80
        let hex = digest.prefix(16).map { String(format: "%02x", $0) }.joined()
        let expected = [hex.prefix(8), hex.dropFirst(8).prefix(4), hex.dropFirst(12).prefix(4), hex.dropFirst(16).prefix(4), hex.dropFirst(20)]
            .joined(separator: "-")
        XCTAssertEqual(APNsID.derive(campaign: "campaign-x", token: token), expected)
        let generator = APNsIDGenerator(campaign: "campaign-x")
        XCTAssertEqual(generator.derive(token: token), expected)
        XCTAssertEqual(generator.derive(token: token), expected, "the prefix state is reused, not consumed")
        XCTAssertEqual(APNsIDGenerator(campaign: "spring-sale").derive(token: token), id)
        let parsed = UUID(uuidString: expected)
        XCTAssertNotNil(parsed)
        for campaign in ["", "c", String(repeating: "long", count: 100)] {
            let value = APNsID.derive(campaign: campaign, token: token)
            XCTAssertTrue(APNsID.isCanonical(value))
            XCTAssertEqual(Array(value.utf8)[14], UInt8(ascii: "5"))
            XCTAssertTrue("89ab".utf8.contains(Array(value.utf8)[19]))
            // The generator's primed state (copied per row) against the one-shot EVP digest, across
            // SHA-256 block and padding boundaries of the prefix and the token.
            let generator = APNsIDGenerator(campaign: campaign)
            for length in [0, 1, 54, 55, 56, 63, 64, 65, 119, 200] {
                let hex = String(repeating: "0123456789abcdef", count: 13).prefix(length)
                XCTAssertEqual(generator.derive(token: String(hex)), APNsID.derive(campaign: campaign, token: String(hex)),
                               "campaign of \(campaign.utf8.count) bytes, token of \(length)")
                // The packed id (its 16 bytes, version and variant set the same way) is the same text.
                let packed = Array(hex.utf8).withUnsafeBytes { generator.derivePacked(token: $0) }
                XCTAssertTrue(packed.isPacked)
                XCTAssertEqual(packed.string, APNsID.derive(campaign: campaign, token: String(hex)))
            }
        }
    }
}
