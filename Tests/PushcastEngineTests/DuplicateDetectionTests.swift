import PushcastAPNs
import PushcastCore
import PushcastSystem
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
            let plan = try DuplicatePlan.build(reader: &first, expectedRows: expectedRows, files: SystemFiles(), directory: NSTemporaryDirectory()) {
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
        let plan = try DuplicatePlan.build(reader: &first, expectedRows: 5_000, files: SystemFiles(), directory: NSTemporaryDirectory()) { keyer.duplicateHashes($0) }
        XCTAssertEqual(plan.rows, 5_000)
        let exact = try run({ _, _ in .exact(expectedRows: 5_000) }, bytes)
        XCTAssertEqual(plan.duplicateCount, exact.values.filter { if case .duplicate = $0 { return true } else { return false } }.count)
        XCTAssertGreaterThan(plan.duplicateCount, 300)
    }

    /// The partition pass: crafted records whose hashes share their low bits (every probe
    /// collides and wraps around the table's end), a 64-bit hash shared by two different second
    /// hashes (two tokens, not a repeat), a token seen three times (both repeats name the first
    /// row), and the table reused for a smaller partition.
    func testFirstRowTableGroupsByBothHashesInRowOrder() {
        func record(_ hash: UInt64, _ second: UInt32, row: UInt32) -> [UInt64] { [hash, UInt64(second) << 32 | UInt64(row)] }
        let wrap: UInt64 = 0xF  // the last slot of a 16-slot table: the probe goes on at slot 0
        var entries: [UInt64] = []
        entries += record(wrap, 1, row: 2)
        entries += record(wrap | 0x100, 1, row: 3)     // same slot, other hash
        entries += record(wrap, 2, row: 5)             // same hash, other second hash
        entries += record(wrap, 1, row: 7)             // repeats row 2
        entries += record(wrap | 0x100, 1, row: 8)     // repeats row 3
        entries += record(wrap, 2, row: 9)             // repeats row 5
        entries += record(wrap, 1, row: 11)            // repeats row 2 again
        var table = FirstRowTable()
        var pairs: [UInt64] = [42]
        table.group(entries, into: &pairs)
        let decoded = pairs.map { (row: Int($0 >> 32), first: Int($0 & 0xFFFF_FFFF)) }
        XCTAssertEqual(decoded.map(\.row), [7, 8, 9, 11])
        XCTAssertEqual(decoded.map(\.first), [2, 3, 5, 2])

        // Reused: nothing of the last partition is left in the table.
        table.group(record(wrap, 1, row: 20) + record(0x1234, 9, row: 21), into: &pairs)
        XCTAssertEqual(pairs, [])
        table.group(record(wrap, 1, row: 30) + record(wrap, 1, row: 31), into: &pairs)
        XCTAssertEqual(pairs, [31 << 32 | 30])
    }
}
