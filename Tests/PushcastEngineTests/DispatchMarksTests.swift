import Foundation
import PushcastCore
@testable import PushcastEngine
import PushcastSystem
import XCTest

/// The journal's dispatch marks: which reserved rows a killed run handed to a connection. On the
/// boot that wrote them they decide what a resume writes off as unknown; on another boot, or
/// damaged, the synced reservations do, as before.
final class DispatchMarksTests: XCTestCase {
    private let header = JournalRecoveryTests.fingerprint.headerLine

    func testAWorkersMarksAreOneLineOfRowRangesPerWrite() throws {
        let directory = NSTemporaryDirectory() + "pushcast-marks-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = try JournalFile(path: directory + "/j")
        let log = DispatchLog(file: file, feedKeys: ["apns": "apns", "fcm": "apns+fcm"])
        var apns = try XCTUnwrap(log.marks(forLane: "apns"))
        var fcm = try XCTUnwrap(log.marks(forLane: "fcm"))
        XCTAssertTrue(apns.isEmpty)
        try apns.write()  // nothing noted: nothing written
        for row in [5, 6, 7, 9, 20, 21, 0, 1_234_567_890] { apns.note(row: row) }
        try apns.write()
        fcm.note(row: 3)
        try fcm.write()
        apns.note(row: 22)
        apns.note(row: 22)  // a resend: noted again
        try apns.write()
        // Answers that sent rows back to wait (429, 503, refused), then the turn's new sends: one
        // write, the returned rows first.
        apns.returned(row: 9)
        apns.returned(row: 10)
        apns.note(row: 10)
        try apns.write()
        let text = String(decoding: try file.readAll(), as: UTF8.self)
        XCTAssertEqual(text, "D apns 5-7,9,20-21,0,1234567890\nD apns+fcm 3\nD apns 22,22\nU apns 9-10\nD apns 10\n")
        let state = try JournalState.parse(Array((header + "B boot=b\nR apns 2000000000\nR apns+fcm 64\n" + text).utf8), path: "j", boot: "b")
        XCTAssertEqual((0..<30).filter { state.mayHaveGoneOut(row: $0, feed: "apns") }, [0, 5, 6, 7, 10, 20, 21, 22])
        XCTAssertTrue(state.mayHaveGoneOut(row: 1_234_567_890, feed: "apns"))
        XCTAssertTrue(state.mayHaveGoneOut(row: 3, feed: "apns+fcm"))
    }

    /// Every cut of a journal whose runs crashed with marks written recovers to what its complete
    /// lines say: rows in a complete `D` line may have gone out, reserved rows without one did not.
    func testEveryTruncationWithMarksRecoversToItsCompleteLines() throws {
        let events = ["B boot=b1", "R apns 4096", "D apns 0-99", "D apns 100-150,200", "U apns 7,90-120", "D apns 95", "R fcm 64", "D fcm 3",
                      "B boot=b1", "R apns 4096", "D apns 151-160,4000-4095", "U apns 4000", "B boot=b1", "R apns 8192", "D apns 4096", "S"]
        let bytes = Array((header + events.map { $0 + "\n" }.joined()).utf8)
        for cut in header.utf8.count...bytes.count {
            let state = try JournalState.parse(Array(bytes[0..<cut]), path: "j", boot: "b1")
            let complete = String(decoding: bytes[header.utf8.count..<cut], as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false).dropLast()
            var expected: [String: Set<Int>] = [:]
            var run: [String: Set<Int>] = [:]
            var clean = true
            func end() { if !clean { for (feed, rows) in run { expected[feed, default: []].formUnion(rows) } } }
            for line in complete {
                let fields = line.split(separator: " ")
                switch fields[0] {
                case "B": end(); run = [:]; clean = false
                case "D", "U":
                    for range in fields[2].split(separator: ",") {
                        let ends = range.split(separator: "-").map { Int($0)! }
                        if fields[0] == "D" { run[String(fields[1]), default: []].formUnion(ends[0]...ends.last!) }
                        else { run[String(fields[1]), default: []].subtract(ends[0]...ends.last!) }
                    }
                case "S": clean = true
                default: clean = false
                }
            }
            end()
            XCTAssertEqual(state.uncleanMarks, [:], "cut at \(cut): every run is of this boot")
            XCTAssertTrue(state.distrusted.isEmpty, "cut at \(cut): \(state.distrusted)")
            for feed in ["apns", "fcm"] {
                for row in 0..<8200 where state.mayHaveGoneOut(row: row, feed: feed) != expected[feed, default: []].contains(row) {
                    XCTFail("cut at \(cut): \(feed) row \(row)")
                    break
                }
            }
        }
    }

    func testMarksOfAnotherBootAreNotBelievedAndTheReservationsDecide() throws {
        let text = header + "B boot=before\nR apns 4096\nD apns 0-9\nB boot=now\nR fcm 64\nD fcm 1\n"
        let state = try JournalState.parse(Array(text.utf8), path: "j", boot: "now")
        // The first run's marks were written before a restart: any reserved apns row may have gone out.
        XCTAssertEqual(state.uncleanMarks, ["apns": 4096])
        XCTAssertTrue(state.mayHaveGoneOut(row: 4095, feed: "apns"))
        XCTAssertFalse(state.mayHaveGoneOut(row: 4096, feed: "apns"))
        // The second run is of this boot: only its marked row.
        XCTAssertTrue(state.mayHaveGoneOut(row: 1, feed: "fcm"))
        XCTAssertFalse(state.mayHaveGoneOut(row: 2, feed: "fcm"))
        XCTAssertEqual(state.dispatchedMarks, ["fcm": 64])
        XCTAssertEqual(state.distrusted.count, 1)
        XCTAssertTrue(state.distrusted[0].contains("restarted"), state.distrusted[0])
        // No boot id now (unreadable): nothing is believed.
        let blind = try JournalState.parse(Array(text.utf8), path: "j", boot: nil)
        XCTAssertEqual(blind.uncleanMarks, ["apns": 4096, "fcm": 64])
        XCTAssertEqual(blind.distrusted.count, 2)
        // A run that recorded no boot (an older pushcast): its reservations decide.
        let old = try JournalState.parse(Array((header + "B\nR apns 128\n").utf8), path: "j", boot: "now")
        XCTAssertEqual(old.uncleanMarks, ["apns": 128])
    }

    func testADamagedMarkMakesItsRunsMarksUnbelievable() throws {
        for damaged in ["D apns 5000", "U apns 4096", "U apns x", "D apns 5-x", "D apns 9-3", "D apns", "D apns 1 2", "D apns 1,,2", "D apns 99999999999999999999"] {
            let text = header + "B boot=b\nR apns 4096\nD apns 0-9\n\(damaged)\nD apns 10\nB boot=b\nR fcm 64\nD fcm 1\n"
            let state = try JournalState.parse(Array(text.utf8), path: "j", boot: "b")
            XCTAssertEqual(state.uncleanMarks, ["apns": 4096], damaged)
            XCTAssertTrue(state.mayHaveGoneOut(row: 4000, feed: "apns"), damaged)
            XCTAssertFalse(state.mayHaveGoneOut(row: 2, feed: "fcm"), "the other run's marks still count: \(damaged)")
            XCTAssertTrue(state.distrusted.first?.contains("damaged") == true, "\(damaged): \(state.distrusted)")
        }
    }

    func testARunThatStoppedCleanlyLeavesNothingAndItsMarksDoNotCount() throws {
        let text = header + "B boot=b\nR apns 4096\nD apns 0-4095\nS\n"
        let state = try JournalState.parse(Array(text.utf8), path: "j", boot: "b")
        XCTAssertFalse(state.mayHaveGoneOut(row: 0, feed: "apns"))
        XCTAssertTrue(state.lastRunClean)
    }

    /// The journal as the kernel leaves it, over many seeds, through the real write path: the
    /// reader reserves blocks (synced), a worker hands rows out (`D`) and gets some back unsent
    /// (`U`), unsynced. A process crash keeps every write: the resume writes off exactly the rows
    /// on the wire. Power loss keeps the synced prefix and maybe some of the rest (or zeros where
    /// the size grew but the data did not land), and the boot id changes: every row that ever
    /// went out must still count as maybe gone out (or the journal is refused as damaged).
    static let storageSeeds = 40

    func testACrashLeavesTheMarksAndPowerLossTheSyncedReservations() throws {
        let directory = NSTemporaryDirectory() + "pushcast-storage-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var refused = 0
        for seed in 0..<Self.storageSeeds {
            let path = directory + "/journal-\(seed)"
            let (everSent, onWire, rows, synced) = try writeJournal(path: path, seed: UInt64(seed))
            let bytes = try Array(Data(contentsOf: URL(fileURLWithPath: path)))
            let crashed = try JournalState.parse(bytes, path: path, boot: "before")
            for row in 0..<rows where crashed.mayHaveGoneOut(row: row, feed: "apns") != onWire.contains(row) {
                XCTFail("seed \(seed), process crash: row \(row) \(onWire.contains(row) ? "was on the wire but would be sent again" : "never went out but is written off")")
                break
            }
            let random = SplitMix64(seed: UInt64(seed) &+ 1000)
            var lost = Array(bytes[0..<(synced + Int(random.next() % UInt64(bytes.count - synced + 1)))])
            if random.next() % 3 == 0 && lost.count > synced {
                for index in synced..<lost.count where random.next() % 2 == 0 { lost[index] = 0 }
            }
            do {
                let afterPowerLoss = try JournalState.parse(lost, path: path, boot: "after")
                for row in everSent.sorted() where !afterPowerLoss.mayHaveGoneOut(row: row, feed: "apns") {
                    XCTFail("seed \(seed), power loss: row \(row) went out but would be sent again")
                    break
                }
            } catch {
                XCTAssertTrue(error.description.contains(path), "\(error)")
                refused += 1
            }
        }
        print("storage model: \(Self.storageSeeds) seeds, \(refused) journals refused as damaged after a simulated power loss")
    }

    /// Writes one seeded run's journal; returns the rows that ever went out, those on the wire at
    /// the end, how many rows were read, and the journal's length at its last sync. The model
    /// takes each reservation as synced, as `--fsync batch` makes it (the test itself skips the
    /// fsyncs: the page cache is the model's disk).
    private func writeJournal(path: String, seed: UInt64) throws -> (Set<Int>, Set<Int>, Int, Int) {
        let journal = try CampaignJournal(file: try JournalFile(path: path), fingerprint: JournalRecoveryTests.fingerprint, fresh: true,
                                          policy: .never, boot: "before")
        var marks = try XCTUnwrap(journal.dispatchLog(feedKeys: ["apns": "apns"])?.marks(forLane: "apns"))
        let random = SplitMix64(seed: seed)
        var covered = 0, next = 0, now: UInt64 = 0
        var synced = FileSystem.size(path) ?? 0
        var queued: [Int] = [], everSent = Set<Int>(), onWire = Set<Int>()
        for _ in 0..<40 {
            for _ in 0..<Int(random.next() % 300) {
                if next >= covered {
                    covered = try journal.cover(row: next, feed: "apns", nowNanoseconds: now)
                    synced = FileSystem.size(path) ?? 0
                }
                queued.append(next)
                next += 1
            }
            for row in onWire.sorted().filter({ _ in random.next() % 10 == 0 }).prefix(20) {
                marks.returned(row: row)
                onWire.remove(row)
                queued.insert(row, at: 0)
            }
            let sending = Int(random.next() % UInt64(queued.count + 1))
            for row in queued.prefix(sending) {
                marks.note(row: row)
                onWire.insert(row)
                everSent.insert(row)
            }
            queued.removeFirst(sending)
            try marks.write()
            now += random.next() % 300_000_000
        }
        return (everSent, onWire, next, synced)
    }

    func testDispatchedRowsCountEachRowOnce() {
        var rows = DispatchedRows()
        rows.insert(0...70)
        rows.insert(60...130)
        var other = DispatchedRows()
        other.insert(125...300)
        rows.formUnion(other)
        XCTAssertEqual(rows.count, 301)
        XCTAssertTrue(rows.contains(300))
        XCTAssertFalse(rows.contains(301))
        XCTAssertFalse(rows.contains(-1))
        XCTAssertFalse(rows.contains(1 << 40))
        rows.remove(0...9)
        rows.remove(5000...5001)
        XCTAssertEqual(rows.count, 291)
        XCTAssertFalse(rows.contains(9))
        XCTAssertTrue(rows.contains(10))
    }
}
