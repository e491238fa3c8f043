import Foundation
import PushcastCore
@testable import PushcastEngine
import XCTest

final class ResultEncodingTests: XCTestCase {
    private func line(_ record: OutcomeRecord, _ format: ResultsFormat) -> String {
        var out = [UInt8]()
        ResultEncoding.appendLine(record, format: format, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    func testNDJSONLineIsValidJSONWithEveryField() throws {
        let record = OutcomeRecord(row: 12, id: "dev \"7\"\n", token: "dead00", provider: .apns, outcome: .pruned,
                                   status: 410, reason: "Unregistered", messageID: "00000000-0000-5000-8000-000000000000",
                                   unregisteredAt: "2026-11-29T18:00:00.000Z", attempts: 1, latencyMilliseconds: 20.44)
        let text = line(record, .ndjson)
        XCTAssertTrue(text.hasSuffix("}\n"))
        let object = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        XCTAssertEqual(object["row"] as? Int, 12)
        XCTAssertEqual(object["id"] as? String, "dev \"7\"\n")
        XCTAssertEqual(object["outcome"] as? String, "pruned")
        XCTAssertEqual(object["status"] as? Int, 410)
        XCTAssertEqual(object["unregistered_at"] as? String, "2026-11-29T18:00:00.000Z")
        XCTAssertEqual(object["latency_ms"] as? Double, 20.4)
        XCTAssertEqual(object["attempts"] as? Int, 1)
        XCTAssertTrue(object["error"] == nil)
    }

    func testNullsAndControlCharactersAndUnicode() throws {
        let record = OutcomeRecord(row: 1, id: nil, token: "x\u{01}y", provider: nil, outcome: .invalid,
                                   reason: OutcomeReason.malformedRow, error: "t.csv:3: field 'name': bad \u{645}\u{631}\u{62D}\u{628}\u{627}")
        let text = line(record, .ndjson)
        XCTAssertTrue(text.contains("\"token\":\"x\\u0001y\""), text)
        let object = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        XCTAssertTrue(object["id"] is NSNull)
        XCTAssertTrue(object["status"] is NSNull)
        XCTAssertEqual(object["error"] as? String, "t.csv:3: field 'name': bad \u{645}\u{631}\u{62D}\u{628}\u{627}")
    }

    func testFCMRowsCarryTheMessageName() throws {
        let record = OutcomeRecord(row: 7, id: nil, token: "fGx:APA91b-opaque_Token", provider: .fcm, outcome: .delivered, status: 200,
                                   messageID: "projects/p/messages/0:123", attempts: 1, latencyMilliseconds: 2)
        let json = line(record, .ndjson)
        let object = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        XCTAssertEqual(object["fcm_name"] as? String, "projects/p/messages/0:123")
        XCTAssertEqual(object["token"] as? String, "fGx:APA91b-opaque_Token")
        XCTAssertTrue(object["apns_id"] is NSNull)
        XCTAssertEqual(line(record, .csv), "7,,fGx:APA91b-opaque_Token,fcm,delivered,200,,,projects/p/messages/0:123,,,1,2.0,,\n")
        // APNs rows carry no fcm_name field at all.
        let apns = OutcomeRecord(row: 1, id: nil, token: "ab", provider: .apns, outcome: .delivered, status: 200)
        XCTAssertFalse(line(apns, .ndjson).contains("fcm_name"))
    }

    func testCSVQuotesOnlyWhenNeeded() {
        let record = OutcomeRecord(row: 3, id: "a,b", token: "abc", provider: .apns, outcome: .duplicate,
                                   reason: OutcomeReason.duplicate, duplicateOf: 1)
        XCTAssertEqual(line(record, .csv), "3,\"a,b\",abc,apns,duplicate,,Duplicate,,,,,0,,1,\n")
        XCTAssertEqual(ResultEncoding.csvHeader.split(separator: ",").count, line(record, .csv).split(separator: ",", omittingEmptySubsequences: false).count - 1)
    }

    func testPruneLine() {
        var out = [UInt8]()
        let record = OutcomeRecord(row: 5, id: "d-5", token: "dead", provider: .apns, outcome: .pruned, status: 410,
                                   reason: "Unregistered", unregisteredAt: "2026-01-01T00:00:00.000Z")
        ResultEncoding.appendPruneLine(record, to: &out)
        XCTAssertEqual(String(decoding: out, as: UTF8.self), "dead,apns,Unregistered,2026-01-01T00:00:00.000Z,d-5\n")
        XCTAssertTrue(record.belongsInPruneFile)
        XCTAssertTrue(OutcomeRecord(row: 1, id: nil, token: "zz", provider: .apns, outcome: .invalid, reason: OutcomeReason.invalidToken).belongsInPruneFile)
        XCTAssertFalse(OutcomeRecord(row: 1, id: nil, token: "ab", provider: .apns, outcome: .invalid, reason: OutcomeReason.payloadTooLarge).belongsInPruneFile)
    }

    func testIntegersAndMilliseconds() {
        for value in [0, 7, 10, 99, 12345, 9_876_543_210, -42] {
            var out = [UInt8]()
            ResultEncoding.appendInteger(value, to: &out)
            XCTAssertEqual(String(decoding: out, as: UTF8.self), String(value))
        }
        var out = [UInt8]()
        ResultEncoding.appendMilliseconds(0.05, to: &out)
        XCTAssertEqual(String(decoding: out, as: UTF8.self), "0.1")
    }

    /// The eight-bytes-at-a-time scan agrees with the plain byte test on every length, on every
    /// byte value at every position, and beside bytes >= 0x80 (UTF-8 text) and near-misses
    /// (0x1F/0x20, 0x21/0x23, 0x5B/0x5D).
    func testEscapeScanAgreesWithTheByteTest() {
        func plain(_ bytes: [UInt8]) -> Bool { bytes.contains { $0 < 0x20 || $0 == 0x22 || $0 == 0x5C } }
        func fast(_ bytes: [UInt8]) -> Bool { bytes.withUnsafeBufferPointer { ResultEncoding.needsJSONEscape($0) } }
        for length in 0...24 {
            let clean = [UInt8](repeating: 0x61, count: length)
            XCTAssertFalse(fast(clean))
            for position in 0..<length {
                for value in 0...255 {
                    var bytes = clean
                    bytes[position] = UInt8(value)
                    XCTAssertEqual(fast(bytes), plain(bytes), "byte \(value) at \(position) of \(length)")
                }
            }
        }
        let rng = SplitMix64(seed: 11)
        let alphabet: [UInt8] = [0x00, 0x1F, 0x20, 0x21, 0x22, 0x23, 0x5B, 0x5C, 0x5D, 0x7F, 0x80, 0xA0, 0xD9, 0xFF, 0x61]
        for _ in 0..<20_000 {
            let length = Int(rng.next() % 40)
            let bytes = (0..<length).map { _ in rng.next() % 4 == 0 ? alphabet[Int(rng.next() % UInt64(alphabet.count))] : 0x80 | UInt8(rng.next() % 0x40) }
            XCTAssertEqual(fast(bytes), plain(bytes), "\(bytes)")
        }
    }

    /// The results writer's `ByteBuffer` (starting tiny, so it grows many times) holds exactly the
    /// bytes the `[UInt8]` encoding gives, for every field shape and both formats, and every
    /// NDJSON line parses back to its record's values.
    func testByteBufferEncodesExactlyLikeAnArray() throws {
        let buffer = ByteBuffer(capacity: 1)
        var array = [UInt8]()
        var records: [OutcomeRecord] = []
        let texts = ["plain", "quote \" and \\ backslash", "tab\tnew\nline\r", "\u{01}\u{1F}", "comma, here",
                     "\u{645}\u{631}\u{62D}\u{628}\u{627} 李娜 Анна", String(repeating: "x", count: 5000)]
        for (i, text) in texts.enumerated() {
            records.append(OutcomeRecord(row: i + 1, id: text, token: text, provider: i % 2 == 0 ? .apns : .fcm, outcome: .failed,
                                         status: 400 + i, reason: text, error: text, messageID: text,
                                         unregisteredAt: text, duplicateOf: i, attempts: i, latencyMilliseconds: Double(i) * 1.25))
        }
        var bufferSink = buffer
        for format in ResultsFormat.allCases {
            for record in records {
                ResultEncoding.appendLine(record, format: format, to: &bufferSink)
                ResultEncoding.appendLine(record, format: format, to: &array)
                ResultEncoding.appendPruneLine(record, to: &bufferSink)
                ResultEncoding.appendPruneLine(record, to: &array)
            }
        }
        XCTAssertEqual(Array(buffer.bytes), array)
        buffer.removeAll()
        XCTAssertTrue(buffer.isEmpty)
        for record in records {
            var sink = buffer
            ResultEncoding.appendLine(record, format: .ndjson, to: &sink)
            let object = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(buffer.bytes)) as? [String: Any])
            XCTAssertEqual(object["token"] as? String, record.token)
            XCTAssertEqual(object["error"] as? String, record.error)
            XCTAssertEqual(object["row"] as? Int, record.row)
            buffer.removeAll()
        }
    }
}
