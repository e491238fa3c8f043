import COpenSSL
import Foundation
import PushcastAPNs
import PushcastCore
import PushcastJSON
import PushcastWire
import XCTest

/// A by-hand measurement of the per-row APNs work (token normalisation, template render, apns-id,
/// headers). It prints µs/row, which varies by machine and build (run
/// `swift test -c release --filter HotPathMeasureTests` for release numbers), and it proves that
/// the work it timed is right: what the timed loops produced, for every 13th row, equals what a
/// plain reference path gives (lower-casing, string substitution checked by a JSON parse, a
/// one-shot SHA-256 through EVP_Digest, the header list written out). 13 is prime to the 1,024
/// tokens and to the 15 name × city pairs, so the samples cover every distinct input, spread over
/// the whole run (a fault that shows only after many rows still shows).
final class HotPathMeasureTests: XCTestCase {
    static let templateText =
        #"{"aps":{"alert":{"title":"Hello {{first_name}}","body":"Deals in {{city}} today"},"sound":"default"},"campaign":"spring"}"#
    static let campaign = "spring"

    func testPerRowCost() throws {
        let rows = 20_000
        let columns = ["token", "first_name", "city"]
        let template = try PayloadTemplate.compile(text: Self.templateText, columns: columns)
        let headers = try APNsCampaignHeaders(topic: "com.example.app", nowEpochSeconds: 1_800_000_000)
        let nameTexts = ["Ann", "Zoë", "محمد", "李小龙", "Дмитрий \"Дима\""]
        let cityTexts = ["Oslo", "القاهرة", "北京"]
        let names = nameTexts.map { Array($0.utf8) }
        let cities = cityTexts.map { Array($0.utf8) }
        var tokens: [[UInt8]] = []
        let random = SplitMix64(seed: 1)
        for _ in 0..<1024 {
            var text = ""
            for _ in 0..<4 { text += String(random.next(), radix: 16, uppercase: true).leftPadded(16) }
            tokens.append(Array(text.utf8))
        }
        @inline(__always) func sampled(_ row: Int) -> Bool { row % 13 == 0 }
        let sampleCount = (rows + 12) / 13

        // The whole row, as a worker does it.
        let ids = APNsIDGenerator(campaign: Self.campaign)
        var buffer: [UInt8] = []
        buffer.reserveCapacity(4096)
        var bytes = 0, headerCount = 0
        var rowTokens: [String] = [], rowPayloads: [[UInt8]] = [], rowIDs: [String] = [], rowHeaders: [[HTTP2Header]] = []
        rowTokens.reserveCapacity(sampleCount); rowPayloads.reserveCapacity(sampleCount)
        rowIDs.reserveCapacity(sampleCount); rowHeaders.reserveCapacity(sampleCount)
        let start = DispatchTime.now().uptimeNanoseconds
        for row in 0..<rows {
            let token = try tokens[row & 1023].withUnsafeBytes { try APNsDeviceToken.normalize($0) }
            let name = names[row % names.count], city = cities[row % cities.count]
            bytes += name.withUnsafeBytes { nameBytes in
                city.withUnsafeBytes { cityBytes in
                    template.render(into: &buffer) { $0 == 1 ? nameBytes : $0 == 2 ? cityBytes : nil }
                }
            }
            let id = ids.derive(token: token.hex)
            let requestHeaders = headers.headers(authorization: "bearer x", apnsID: id)
            headerCount += requestHeaders.count
            if sampled(row) {
                rowTokens.append(token.hex)
                rowPayloads.append(buffer)
                rowIDs.append(id)
                rowHeaders.append(requestHeaders)
            }
        }
        let elapsed = DispatchTime.now().uptimeNanoseconds - start
        print("PushcastAPNs hot path: \(String(format: "%.3f", Double(elapsed) / 1000 / Double(rows))) µs/row over \(rows) rows (normalize + render + apns-id + headers)")

        // The same work piece by piece, to see where the time goes; each piece keeps its samples too.
        let hexTokens = try tokens.map { try $0.withUnsafeBytes { try APNsDeviceToken.normalize($0).hex } }
        var pieceTokens: [String] = [], piecePayloads: [[UInt8]] = [], pieceIDs: [String] = [], generatorIDs: [String] = []
        var pieceHeaders: [[HTTP2Header]] = []
        let pieces: [(String, () throws -> Void)] = [
            ("normalize", {
                for row in 0..<rows {
                    let hex = try tokens[row & 1023].withUnsafeBytes { try APNsDeviceToken.normalize($0) }.hex
                    if sampled(row) { pieceTokens.append(hex) }
                }
            }),
            ("render", {
                for row in 0..<rows {
                    let name = names[row % names.count], city = cities[row % cities.count]
                    _ = name.withUnsafeBytes { n in city.withUnsafeBytes { c in template.render(into: &buffer) { $0 == 1 ? n : $0 == 2 ? c : nil } } }
                    if sampled(row) { piecePayloads.append(buffer) }
                }
            }),
            ("apns-id", {
                for row in 0..<rows {
                    let id = APNsID.derive(campaign: Self.campaign, token: hexTokens[row & 1023])
                    if sampled(row) { pieceIDs.append(id) }
                }
            }),
            ("apns-id (per-worker generator)", {
                let generator = APNsIDGenerator(campaign: Self.campaign)
                for row in 0..<rows {
                    let id = generator.derive(token: hexTokens[row & 1023])
                    if sampled(row) { generatorIDs.append(id) }
                }
            }),
            ("headers", {
                for row in 0..<rows {
                    let built = headers.headers(authorization: "bearer x", apnsID: "id")
                    if sampled(row) { pieceHeaders.append(built) }
                }
            }),
        ]
        for (name, work) in pieces {
            let begin = DispatchTime.now().uptimeNanoseconds
            try work()
            let nanoseconds = DispatchTime.now().uptimeNanoseconds - begin
            print("  \(name): \(String(format: "%.3f", Double(nanoseconds) / 1000 / Double(rows))) µs/row")
        }

        // The reference path, row by row for the samples.
        let sampleRows = Array(stride(from: 0, to: rows, by: 13))
        XCTAssertEqual(Set(sampleRows.map { $0 & 1023 }).count, 1024, "the samples cover every token")
        XCTAssertEqual(Set(sampleRows.map { $0 % 15 }).count, 15, "the samples cover every name × city pair")
        let expectedTokens = sampleRows.map { String(decoding: tokens[$0 & 1023], as: UTF8.self).lowercased() }
        let expectedPayloads = sampleRows.map {
            Array(Self.referencePayload(name: nameTexts[$0 % nameTexts.count], city: cityTexts[$0 % cityTexts.count]).utf8)
        }
        let expectedIDs = expectedTokens.map { Self.referenceAPNsID(campaign: Self.campaign, token: $0) }
        let expectedHeaders = expectedIDs.map { Self.referenceHeaders(apnsID: $0) }

        Self.check("normalised token (whole row)", rowTokens, expectedTokens)
        Self.check("rendered payload (whole row)", rowPayloads, expectedPayloads)
        Self.check("apns-id (whole row)", rowIDs, expectedIDs)
        Self.check("headers (whole row)", rowHeaders, expectedHeaders)
        Self.check("normalised token", pieceTokens, expectedTokens)
        Self.check("rendered payload", piecePayloads, expectedPayloads)
        Self.check("apns-id", pieceIDs, expectedIDs)
        Self.check("apns-id (per-worker generator)", generatorIDs, expectedIDs)
        Self.check("headers", pieceHeaders, sampleRows.map { _ in Self.referenceHeaders(apnsID: "id") })

        // Every row's payload length, not only the samples'.
        let referenceLengths = (0..<15).map {
            Self.referencePayload(name: nameTexts[$0 % nameTexts.count], city: cityTexts[$0 % cityTexts.count]).utf8.count
        }
        XCTAssertEqual(bytes, (0..<rows).reduce(0) { $0 + referenceLengths[$1 % 15] }, "rendered bytes over all rows")
        XCTAssertEqual(headerCount, rows * 5)

        // The rendered payloads are JSON that decodes back to the row's values.
        for (index, row) in sampleRows.prefix(15).enumerated() {
            let name = nameTexts[row % nameTexts.count], city = cityTexts[row % cityTexts.count]
            let object = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(rowPayloads[index])) as? [String: Any], "row \(row)")
            let aps = try XCTUnwrap(object["aps"] as? [String: Any])
            let alert = try XCTUnwrap(aps["alert"] as? [String: Any])
            XCTAssertEqual(alert["title"] as? String, "Hello " + name, "row \(row)")
            XCTAssertEqual(alert["body"] as? String, "Deals in \(city) today", "row \(row)")
            XCTAssertEqual(aps["sound"] as? String, "default")
            XCTAssertEqual(object["campaign"] as? String, "spring")
        }
    }

    /// One assertion per sampled output: the count, then the first difference and how many rows differ.
    static func check<T: Equatable>(_ what: String, _ actual: [T], _ expected: [T], file: StaticString = #filePath, line: UInt = #line) {
        guard actual.count == expected.count else {
            return XCTFail("\(what): \(actual.count) samples, expected \(expected.count)", file: file, line: line)
        }
        func show(_ value: T) -> String {
            (value as? [UInt8]).map { String(decoding: $0, as: UTF8.self).debugDescription } ?? "\(value)"
        }
        let wrong = actual.indices.filter { actual[$0] != expected[$0] }
        if let first = wrong.first {
            XCTFail("\(what): \(wrong.count) of \(actual.count) samples differ; row \(first * 13) gave \(show(actual[first])), expected \(show(expected[first]))",
                    file: file, line: line)
        }
    }

    /// The template with each placeholder replaced by its value, JSON-escaped the plain way (the
    /// sample values need only `"` and `\` escaped).
    static func referencePayload(name: String, city: String) -> String {
        func escaped(_ text: String) -> String {
            text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
        }
        return templateText.replacingOccurrences(of: "{{first_name}}", with: escaped(name))
            .replacingOccurrences(of: "{{city}}", with: escaped(city))
    }

    /// SHA-256(campaign ‖ 0x00 ‖ token) in one EVP_Digest call, the first 16 bytes with the version
    /// nibble 5 and the RFC 4122 variant, as lower-case 8-4-4-4-12.
    static func referenceAPNsID(campaign: String, token: String) -> String {
        let input = Array(campaign.utf8) + [0] + Array(token.utf8)
        var digest = [UInt8](repeating: 0, count: 32)
        var size: UInt32 = 0
        precondition(EVP_Digest(input, input.count, &digest, &size, EVP_sha256(), nil) == 1 && size == 32)
        digest[6] = digest[6] & 0x0F | 0x50
        digest[8] = digest[8] & 0x3F | 0x80
        let hex = Array("0123456789abcdef")
        var text = ""
        for index in 0..<16 {
            if index == 4 || index == 6 || index == 8 || index == 10 { text.append("-") }
            text.append(hex[Int(digest[index] >> 4)])
            text.append(hex[Int(digest[index] & 0x0F)])
        }
        return text
    }

    /// An alert push to com.example.app at priority 10, written out: the fixed headers, the
    /// never-indexed apns-id, the bearer.
    static func referenceHeaders(apnsID: String) -> [HTTP2Header] {
        [HTTP2Header("apns-push-type", "alert"), HTTP2Header("apns-topic", "com.example.app"), HTTP2Header("apns-priority", "10"),
         HTTP2Header("apns-id", apnsID, neverIndexed: true), HTTP2Header("authorization", "bearer x")]
    }
}

private extension String {
    func leftPadded(_ width: Int) -> String { String(repeating: "0", count: max(0, width - count)) + self }
}
