import PushcastAPNs
import PushcastCore
@testable import PushcastEngine
import PushcastInput
import PushcastJSON
import XCTest

/// The planned duplicate detection (a first read into hash partitions on disk) must decide every
/// row exactly as the exact in-memory table does.
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

    private func run(_ detection: (RowLayout, PayloadTemplate) throws -> DuplicateDetection, _ bytes: [UInt8]) throws -> [Int: Fate] {
        let reader = try TokenFileReader(source: MemoryByteSource(bytes, chunkSize: 777), format: .csv, fileName: "t.csv")
        let template = try PayloadTemplate.compile(text: #"{"aps":{"alert":"hi {{device_id}}"}}"#, columns: reader.columns)
        let layout = try RowLayout(columns: reader.columns, idColumn: nil, defaultProvider: .apns, fileName: "t.csv")
        var preparer = RowPreparer(layout: layout, template: template, payloadBytesMax: 4096, campaign: "c", fileName: "t.csv",
                                   configuredProviders: [.apns], duplicates: try detection(layout, template))
        var fates: [Int: Fate] = [:]
        while let record = try reader.next() {
            guard case .row(let view) = record else { continue }
            switch preparer.prepare(record) {
            case .send(let n): XCTAssertNil(fates[n.row]); fates[n.row] = .send
            case .finished(let o):
                XCTAssertNil(fates[o.row])
                fates[o.row] = o.outcome == .duplicate ? .duplicate(of: o.duplicateOf!) : .other(o.outcome)
            case .skipped: XCTFail("an APNs-only preparer skipped row \(view.row)")
            }
        }
        return fates
    }

    /// A plan over `bytes`, with `rowsPerPartition` tiny so that many partitions and segments merge.
    private func plan(_ bytes: [UInt8], expectedRows: Int) -> (RowLayout, PayloadTemplate) throws -> DuplicateDetection {
        { layout, template in
            var keyer = RowPreparer(layout: layout, template: template, payloadBytesMax: 4096, campaign: "c", fileName: "t.csv",
                                    configuredProviders: [.apns], duplicates: .exact(expectedRows: 0))
            var first = try TokenFileReader(source: MemoryByteSource(bytes, chunkSize: 4096), format: .csv, fileName: "t.csv")
            let plan = try DuplicatePlan.build(reader: &first, expectedRows: expectedRows, directory: NSTemporaryDirectory()) {
                keyer.duplicateHashes($0)
            }
            return .planned(plan)
        }
    }

    func testPlannedDecidesExactlyAsTheExactTable() throws {
        let rows = 20_000
        let bytes = makeInput(rows: rows)
        let exact = try run({ _, _ in .exact(expectedRows: rows) }, bytes)
        XCTAssertEqual(exact.count, rows)
        let duplicates = exact.values.filter { if case .duplicate = $0 { return true } else { return false } }.count
        XCTAssertGreaterThan(duplicates, 1000)
        // One partition, and many (an expected count far above the real one spreads the records
        // over 16 partitions whose repeats are merged back in row order).
        XCTAssertEqual(try run(plan(bytes, expectedRows: rows), bytes), exact)
        XCTAssertEqual(try run(plan(bytes, expectedRows: 1_000_000), bytes), exact)
    }

    func testPlanCountsRowsAndRepeats() throws {
        let bytes = makeInput(rows: 5_000)
        let reader = try TokenFileReader(source: MemoryByteSource(bytes, chunkSize: 4096), format: .csv, fileName: "t.csv")
        let template = try PayloadTemplate.compile(text: #"{"aps":{}}"#, columns: reader.columns)
        let layout = try RowLayout(columns: reader.columns, idColumn: nil, defaultProvider: .apns, fileName: "t.csv")
        var keyer = RowPreparer(layout: layout, template: template, payloadBytesMax: 4096, campaign: "c", fileName: "t.csv",
                                configuredProviders: [.apns], duplicates: .exact(expectedRows: 0))
        var first = try TokenFileReader(source: MemoryByteSource(bytes, chunkSize: 4096), format: .csv, fileName: "t.csv")
        let plan = try DuplicatePlan.build(reader: &first, expectedRows: 5_000, directory: NSTemporaryDirectory()) { keyer.duplicateHashes($0) }
        XCTAssertEqual(plan.rows, 5_000)
        let exact = try run({ _, _ in .exact(expectedRows: 5_000) }, bytes)
        XCTAssertEqual(plan.duplicateCount, exact.values.filter { if case .duplicate = $0 { return true } else { return false } }.count)
        XCTAssertGreaterThan(plan.duplicateCount, 300)
    }
}
