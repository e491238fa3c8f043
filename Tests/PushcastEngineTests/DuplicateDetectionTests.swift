import PushcastAPNs
import PushcastCore
@testable import PushcastEngine
import PushcastInput
import XCTest

/// The filtered (Bloom + second read) duplicate detection must decide every row exactly as the
/// exact table does, whatever the filter's false alarms.
final class DuplicateDetectionTests: XCTestCase {
    private func makeInput(rows: Int) -> [UInt8] {
        let random = SplitMix64(seed: 11)
        var lines = ["device_id,token"]
        var tokens: [String] = []
        for i in 0..<rows {
            var token = String(format: "%016llx%016llx%016llx%016llx", random.next(), random.next(), random.next(), random.next())
            if i % 13 == 5, !tokens.isEmpty { token = tokens[Int(random.next(below: UInt64(tokens.count)))].uppercased() }
            if i % 97 == 3 { token = "zz" }
            tokens.append(token)
            lines.append("d\(i),\(token)")
        }
        return Array((lines.joined(separator: "\n") + "\n").utf8)
    }

    private enum Fate: Equatable { case send, duplicate(of: Int), other(OutcomeKind) }

    private func run(_ detection: DuplicateDetection, _ bytes: [UInt8]) throws -> (fates: [Int: Fate], deferred: Int) {
        let reader = try TokenFileReader(source: MemoryByteSource(bytes, chunkSize: 777), format: .csv, fileName: "t.csv")
        let template = try PayloadTemplate.compile(text: #"{"aps":{"alert":"hi {{device_id}}"}}"#, columns: reader.columns)
        let layout = try RowLayout(columns: reader.columns, idColumn: nil, defaultProvider: .apns, fileName: "t.csv")
        var preparer = RowPreparer(layout: layout, template: template, payloadBytesMax: 4096, campaign: "c", fileName: "t.csv",
                                   configuredProviders: [.apns], duplicates: detection)
        var fates: [Int: Fate] = [:]
        var deferred = 0
        func note(_ row: Int, _ prepared: PreparedRow?) {
            switch prepared {
            case .send(let n)?: XCTAssertNil(fates[n.row]); fates[n.row] = .send
            case .finished(let o)?:
                XCTAssertNil(fates[o.row])
                fates[o.row] = o.outcome == .duplicate ? .duplicate(of: o.duplicateOf!) : .other(o.outcome)
            case .deferred?: deferred += 1
            case .skipped?: XCTFail("an APNs-only preparer skipped row \(row)")
            case nil: break
            }
        }
        while let record = try reader.next() {
            if case .row(let view) = record { note(view.row, preparer.prepare(record)) }
        }
        if preparer.hasSuspects {
            let again = try TokenFileReader(source: MemoryByteSource(bytes, chunkSize: 4096), format: .csv, fileName: "t.csv")
            while let record = try again.next() {
                guard case .row(let view) = record else { continue }
                note(view.row, preparer.resolve(record))
                if preparer.resolveFinished(after: view.row) { break }
            }
        }
        return (fates, deferred)
    }

    func testFilteredDecidesExactlyAsTheExactTableDespiteFalseAlarms() throws {
        let rows = 20_000
        let bytes = makeInput(rows: rows)
        let exact = try run(.exact(expectedRows: rows), bytes)
        // Planned for one row: the filter is far too small, so most "maybe seen" answers are false.
        let filtered = try run(.filtered(expectedRows: 1), bytes)
        XCTAssertEqual(exact.fates.count, rows)
        XCTAssertEqual(exact.deferred, 0)
        XCTAssertGreaterThan(filtered.deferred, 2000, "the test must exercise the false-alarm path")
        XCTAssertEqual(filtered.fates, exact.fates)
        XCTAssertGreaterThan(exact.fates.values.filter { if case .duplicate = $0 { return true } else { return false } }.count, 1000)
    }

    func testWellSizedFilterRarelyDefersAndUsesTwoBytesARow() throws {
        let rows = 20_000
        let bytes = makeInput(rows: rows)
        let filtered = try run(.filtered(expectedRows: rows), bytes)
        let duplicates = filtered.fates.values.filter { if case .duplicate = $0 { return true } else { return false } }.count
        // Real duplicates are always deferred; false alarms add well under 1 %.
        XCTAssertLessThan(filtered.deferred - duplicates, rows / 100)
        XCTAssertEqual(DuplicateFilter(expected: 1_000_000).byteCount, 2_000_000)
    }
}
