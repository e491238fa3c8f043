import Foundation
import XCTest
import PushcastCore
import PushcastSystem
@testable import PushcastEngine

/// `ResultsStream`, what `pushcast report` reads results with: its fast NDJSON path agrees with
/// the recovery parser on every line, lines cut by chunk boundaries read whole, a torn last line
/// is left out, and CSV goes through the recovery parser.
final class ResultsStreamTests: XCTestCase {
    static func records(_ count: Int) -> [OutcomeRecord] {
        let reasons: [String?] = [nil, "Unregistered", "UNREGISTERED", "Hostile \"quoted\" \\ reason", "BadDeviceToken", OutcomeReason.timeout]
        return (1...count).map { row in
            let provider: ProviderID? = row % 7 == 0 ? nil : (row % 2 == 0 ? .apns : .fcm)
            let kind = OutcomeKind.allCases[row % OutcomeKind.allCases.count]
            return OutcomeRecord(row: row, id: row % 3 == 0 ? "id-\(row)" : nil, token: String(format: "%064x", row), provider: provider, outcome: kind,
                                 status: row % 4 == 0 ? nil : 200 + row % 300, reason: reasons[row % reasons.count],
                                 error: row % 11 == 0 ? "tokens.csv:\(row): field 'token': odd length, \"x\"" : nil,
                                 messageID: row % 5 == 0 ? "9b1f3a4c-0000-4000-8000-\(String(format: "%012d", row))" : nil,
                                 attempts: row % 6, latencyMilliseconds: row % 9 == 0 ? nil : Double(row % 5000) / 10 + 0.05)
        }
    }

    private func write(_ records: [OutcomeRecord], format: ResultsFormat, tail: String = "") throws -> String {
        var bytes: [UInt8] = format == .csv ? Array(ResultEncoding.csvHeader.utf8) : []
        for record in records { ResultEncoding.appendLine(record, format: format, to: &bytes) }
        bytes += Array(tail.utf8)
        let path = NSTemporaryDirectory() + "pushcast-stream-\(UUID().uuidString).\(format.rawValue)"
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return path
    }

    func testFastPathAgreesWithTheRecoveryParserAcrossChunks() throws {
        // About 3 MiB of lines: several chunk boundaries fall inside lines.
        let records = Self.records(15_000)
        for format in [ResultsFormat.ndjson, .csv] {
            let path = try write(records, format: format, tail: format == .ndjson ? "{\"row\":99999,\"outc" : "99999,,abc")
            var stream = ResultsStream(path: path, format: format, files: SystemFiles())
            var streamed: [OutcomeRecord] = []
            try stream.read { streamed.append($0) }
            var recovered: [OutcomeRecord] = []
            _ = try RecoveredResults.read(try Data(contentsOf: URL(fileURLWithPath: path)).map { $0 }, format: format, path: path) { recovered.append($0) }
            XCTAssertEqual(streamed.count, records.count, "\(format)")
            XCTAssertGreaterThan(stream.tornBytes, 0)
            // The report needs no token, id, message id or error text (the fast path skips them;
            // lines it declines come through the recovery parser whole).
            func needed(_ r: OutcomeRecord) -> OutcomeRecord {
                OutcomeRecord(row: r.row, id: nil, token: "", provider: r.provider, outcome: r.outcome, status: r.status, reason: r.reason,
                              attempts: r.attempts, latencyMilliseconds: r.latencyMilliseconds)
            }
            XCTAssertEqual(streamed.map(needed), recovered.map(needed), "\(format)")
        }
    }

    func testFastPathDeclinesWhatItCannotReadAndDamageIsNamed() throws {
        var cache = ReasonStrings()
        let line = #"{"row":3,"token":"ab","provider":"apns","outcome":"failed","status":400,"reason":"Bad\u0041","attempts":1,"latency_ms":1.5}"#
        XCTAssertNil(Array(line.utf8).withUnsafeBufferPointer { ResultsStream.fastNDJSON($0, .standard, &cache) })
        let nested = #"{"row":3,"provider":"apns","outcome":"failed","extra":{"a":1}}"#
        XCTAssertNil(Array(nested.utf8).withUnsafeBufferPointer { ResultsStream.fastNDJSON($0, .standard, &cache) })
        let plain = #"{"row":3,"token":"ab","provider":"fcm","outcome":"pruned","status":404,"reason":"UNREGISTERED","attempts":2,"latency_ms":12.3}"#
        let record = try XCTUnwrap(Array(plain.utf8).withUnsafeBufferPointer { ResultsStream.fastNDJSON($0, .standard, &cache) })
        XCTAssertEqual(record.provider, .fcm)
        XCTAssertEqual(record.reason, "UNREGISTERED")
        XCTAssertEqual(record.latencyMilliseconds, 12.3)
        XCTAssertEqual(record.attempts, 2)
        // An escaped reason still reads (through the recovery parser); a damaged line is named.
        let path = NSTemporaryDirectory() + "pushcast-stream-\(UUID().uuidString).ndjson"
        try (line + "\n" + "{\"row\":4,oops}\n").write(toFile: path, atomically: true, encoding: .utf8)
        var stream = ResultsStream(path: path, format: .ndjson, files: SystemFiles())
        var seen: [OutcomeRecord] = []
        XCTAssertThrowsError(try stream.read { seen.append($0) }) { error in
            XCTAssertTrue("\(error)".contains(path + ":2"), "\(error)")
        }
        XCTAssertEqual(seen.first?.reason, "BadA")
    }
}
