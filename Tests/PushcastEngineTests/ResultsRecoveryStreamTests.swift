import Foundation
import XCTest
import PushcastCore
import PushcastSystem
@testable import PushcastEngine

/// The resume's reading of an earlier results file: the exact NDJSON reader against the general
/// JSON parser, and the chunked file reader against the whole-file one.
final class ResultsRecoveryStreamTests: XCTestCase {
    private static let texts: [String?] = [nil, "", "d1", "Unregistered", "José Анна", "a \"quoted\" one", "back\\slash",
                                           "line\nbreak", "tab\there", "\u{1}", "https://x.example/y?z=1", "名前"]

    private func randomRecord(_ random: SplitMix64, row: Int) -> OutcomeRecord {
        func pick() -> String? { Self.texts[Int(random.next() % UInt64(Self.texts.count))] }
        let provider: ProviderID? = [ProviderID.apns, .fcm, nil][Int(random.next() % 3)]
        let kinds = OutcomeKind.allCases
        return OutcomeRecord(row: row, id: pick(), token: pick() ?? "tok\(row)", provider: provider,
                             outcome: kinds[Int(random.next() % UInt64(kinds.count))],
                             status: random.next() % 3 == 0 ? nil : Int(random.next() % 600),
                             reason: pick(), error: random.next() % 4 == 0 ? pick() : nil, messageID: pick(),
                             unregisteredAt: random.next() % 5 == 0 ? "2026-12-01T00:00:00.000Z" : nil,
                             duplicateOf: random.next() % 6 == 0 ? Int(random.next() % 1_000_000) + 1 : nil,
                             attempts: Int(random.next() % 9),
                             latencyMilliseconds: random.next() % 4 == 0 ? nil : Double(random.next() % 100_000) / 10)
    }

    /// Every line the encoder writes reads back the same through the exact reader as through
    /// Foundation's JSON parser; lines the exact reader declines (escapes) still read.
    func testExactReaderAgreesWithTheJSONParser() {
        let random = SplitMix64(seed: 11)
        let columns = ResultColumns.standard
        var exact = 0
        for row in 1...3_000 {
            let record = randomRecord(random, row: row)
            var out = ByteBuffer(capacity: 1024)
            ResultEncoding.appendLine(record, format: .ndjson, columns: columns, to: &out)
            var bytes = Array(out.bytes)
            bytes.removeLast()  // the line end
            let general = RecoveredResults.parseNDJSON(String(decoding: bytes, as: UTF8.self), columns)
            XCTAssertNotNil(general, String(decoding: bytes, as: UTF8.self))
            if let fast = bytes.withUnsafeBytes({ ResultsLineParser.parse($0, columns) }) {
                exact += 1
                XCTAssertEqual(fast, general, String(decoding: bytes, as: UTF8.self))
            }
        }
        XCTAssertGreaterThan(exact, 300, "the exact reader took too few lines")
    }

    func testExactReaderDeclinesWhatItDoesNotWrite() {
        let columns = ResultColumns.standard
        let good = #"{"row":1,"id":"d1","token":"aa","provider":"apns","outcome":"delivered","status":200,"reason":null,"apns_id":"x","unregistered_at":null,"attempts":1,"latency_ms":2.5}"#
        XCTAssertNotNil(Array(good.utf8).withUnsafeBytes { ResultsLineParser.parse($0, columns) })
        let odd = [
            good.replacingOccurrences(of: "{\"row\":1,", with: "{ \"row\":1,"),
            good.replacingOccurrences(of: "\"row\":1", with: "\"row\":0"),
            good.replacingOccurrences(of: "\"delivered\"", with: "\"sent\""),
            good.replacingOccurrences(of: "\"apns_id\"", with: "\"other_id\""),
            good + " ",
            String(good.dropLast()),
            good.replacingOccurrences(of: "\"row\":1", with: "\"row\":12345678901234567890"),
        ]
        for line in odd {
            XCTAssertNil(Array(line.utf8).withUnsafeBytes { ResultsLineParser.parse($0, columns) }, line)
        }
    }

    /// The file reader, at chunk sizes that split lines everywhere, finds what the whole-file
    /// reader finds: the same records in order, valid length and torn bytes, for both formats.
    func testChunkedFileReadMatchesWholeRead() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("recovery-\(getpid())-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let random = SplitMix64(seed: 5)
        for format in [ResultsFormat.ndjson, .csv] {
            var out = ByteBuffer(capacity: 64 * 1024)
            if format == .csv { for byte in ResultEncoding.csvHeader.utf8 { out.append(byte) } }
            for row in 1...200 { ResultEncoding.appendLine(randomRecord(random, row: row), format: format, to: &out) }
            let whole = Array(out.bytes)
            for cut in [whole.count, whole.count - 7] {
                let bytes = Array(whole[0..<cut])
                let path = directory.appendingPathComponent("r-\(format)-\(cut)").path
                try Data(bytes).write(to: URL(fileURLWithPath: path))
                var expected: [OutcomeRecord] = []
                let reference = try RecoveredResults.read(bytes, format: format, path: path) { expected.append($0) }
                // Every record but a torn last one, CSV fields with line breaks included.
                XCTAssertEqual(reference.count, cut == whole.count ? 200 : 199, "\(format) cut \(cut)")
                for chunk in [1, 2, 3, 7, 64, 1000, 1 << 20] {
                    var seen: [OutcomeRecord] = []
                    let streamed = try RecoveredResults.read(path: path, format: format, files: SystemFiles(), chunkBytes: chunk) { seen.append($0) }
                    XCTAssertEqual(seen, expected, "\(format) cut \(cut) chunk \(chunk)")
                    XCTAssertEqual(streamed.validLength, reference.validLength)
                    XCTAssertEqual(streamed.tornBytes, reference.tornBytes)
                    XCTAssertEqual(streamed.count, reference.count)
                }
            }
        }
        let missing = try RecoveredResults.read(path: directory.appendingPathComponent("absent").path, format: .ndjson, files: SystemFiles()) { _ in }
        XCTAssertEqual(missing.count, 0)
    }

    func testDamageIsNamedByLineWhenStreamed() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("recovery-damage-\(getpid()).ndjson").path
        defer { unlink(path) }
        var out = ByteBuffer(capacity: 4096)
        for row in 1...3 {
            ResultEncoding.appendLine(OutcomeRecord(row: row, id: nil, token: "t\(row)", provider: .apns, outcome: .delivered),
                                      format: .ndjson, to: &out)
        }
        var bytes = Array(out.bytes)
        bytes[bytes.firstIndex(of: UInt8(ascii: "\n"))! + 1] = UInt8(ascii: "#")
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        XCTAssertThrowsError(try RecoveredResults.read(path: path, format: .ndjson, files: SystemFiles(), chunkBytes: 5) { _ in }) { error in
            XCTAssertTrue("\(error)".contains(":2: damaged results line"), "\(error)")
        }
    }
}
