import PushcastCore
import PushcastSimulation
import XCTest

/// The simulator's disk: durable and pending bytes, a process death, a power loss and its torn
/// tails, a full disk, EIO, and the journal's lock.
final class SimulatedStorageTests: XCTestCase {
    private func text(_ bytes: [UInt8]?) -> String? { bytes.map { String(decoding: $0, as: UTF8.self) } }

    func testSyncMakesWritesDurableAndAProcessDeathKeepsWhatReachedTheDisk() throws {
        let storage = SimulatedStorage(seed: 1)
        let file = try storage.createForAppending("/r", bufferBytes: 4096)
        try file.append("one\n")
        XCTAssertEqual(text(storage.contents("/r")), "", "appends wait in the process's buffer")
        XCTAssertEqual(file.size, 4)
        try file.flush()
        try file.sync()
        try file.append("two\n")
        try file.flush()
        try file.append("three\n")
        XCTAssertEqual(text(storage.durableContents("/r")), "one\n")
        XCTAssertEqual(text(storage.contents("/r")), "one\ntwo\n")
        // The process dies: its buffer goes, what it handed the disk stays, and it writes no more.
        file.dropBuffered()
        storage.endProcess()
        XCTAssertEqual(text(storage.contents("/r")), "one\ntwo\n")
        XCTAssertThrowsError(try file.append(String(repeating: "x", count: 5000))) { XCTAssertTrue("\($0)".contains("gone"), "\($0)") }
        XCTAssertEqual(text(storage.contents("/r")), "one\ntwo\n")
        // Reopened for appending, it keeps its bytes; truncation cuts them.
        let again = try storage.createForAppending("/r", bufferBytes: 4096, append: true, dropsSyncedPages: true)
        XCTAssertEqual(again.size, 8)
        try storage.truncate("/r", to: 2)
        XCTAssertEqual(text(try storage.readWholeFile("/r")), "on")
        XCTAssertNil(try storage.readWholeFile("/none"))
        XCTAssertFalse(storage.exists("/none"))
    }

    func testAPowerLossLosesEveryUnsyncedByteButATornPrefix() throws {
        var kept = Set<Int>()
        for seed in UInt64(1)...60 {
            let storage = SimulatedStorage(seed: seed)
            let file = try storage.createForAppending("/r", bufferBytes: 4096)
            try file.append("synced\n")
            try file.sync()  // nothing flushed yet: nothing durable
            try file.flush()
            try file.sync()
            let tail = String(repeating: "abcdefghij", count: 10)
            try file.append(tail)
            try file.flush()
            try file.append("buffered")
            storage.powerLoss()
            let after = text(storage.contents("/r"))!
            XCTAssertTrue(after.hasPrefix("synced\n"), after)
            let survived = String(after.dropFirst(7))
            XCTAssertTrue(tail.hasPrefix(survived), "what survives is a prefix of the unsynced tail: \(survived)")
            XCTAssertEqual(storage.durableContents("/r"), storage.contents("/r"), "what survived is on the disk")
            kept.insert(survived.count)
        }
        XCTAssertTrue(kept.contains(0) && kept.contains(100), "\(kept.sorted())")
        XCTAssertTrue(kept.contains { $0 > 0 && $0 < 100 }, "some tails are torn: \(kept.sorted())")
    }

    func testTheSameSeedTearsTheSameWay() throws {
        func run() throws -> [UInt8]? {
            let storage = SimulatedStorage(seed: 42)
            let journal = try storage.openJournal("/j")
            for line in 0..<20 { try journal.append("D apns \(line)\n") }
            storage.powerLoss()
            return storage.contents("/j")
        }
        XCTAssertEqual(try run(), try run())
    }

    func testAFullDiskWritesWhatFitsThenFailsWithENOSPCAndReservationsHoldTheirSpace() throws {
        let storage = SimulatedStorage(seed: 3)
        storage.diskBytes = 100
        let results = try storage.createForAppending("/r", bufferBytes: 4096)
        XCTAssertTrue(results.reserve(headroom: 60, step: 10, ceiling: nil))
        XCTAssertEqual(results.freeBytes, 40)
        let other = try storage.createForAppending("/p", bufferBytes: 4096)
        XCTAssertFalse(other.reserve(headroom: 50, step: 50, ceiling: nil), "the reserved space is taken")
        try other.append(String(repeating: "p", count: 50))
        XCTAssertThrowsError(try other.flush()) { XCTAssertTrue("\($0)".contains("No space left on device"), "\($0)") }
        XCTAssertEqual(storage.contents("/p")?.count, 40, "a short write: the part that fits")
        // What was reserved can still be written.
        try results.append(String(repeating: "r", count: 60))
        try results.flush()
        XCTAssertEqual(storage.contents("/r")?.count, 60)
        XCTAssertEqual(results.freeBytes, 0)
        storage.repair()
        try other.append("more")
        try other.flush()
        XCTAssertNil(results.freeBytes)
    }

    func testTheDiskFillsAfterTheSeededWrite() throws {
        var faults = StorageFaults()
        faults.diskFullAfterWrites = 3
        faults.slackBytes = 5
        let storage = SimulatedStorage(seed: 4, faults: faults)
        let journal = try storage.openJournal("/j")
        try journal.append("first\n")
        try journal.append("second\n")
        XCTAssertThrowsError(try journal.append("third line\n")) { XCTAssertTrue("\($0)".contains("No space left"), "\($0)") }
        XCTAssertEqual(text(storage.contents("/j")), "first\nsecond\nthird", "the line is torn where the disk ran out")
        XCTAssertEqual(storage.fired, ["the disk filled at write 3"])
    }

    func testEIOOnAWriteWritesNothingAndEIOOnASyncLeavesTheBytesVolatile() throws {
        var faults = StorageFaults()
        faults.failingWrite = 2
        faults.failingSync = 1
        let storage = SimulatedStorage(seed: 5, faults: faults)
        let journal = try storage.openJournal("/j")
        try journal.append("a\n")
        XCTAssertThrowsError(try journal.append("b\n")) { XCTAssertTrue("\($0)".contains("Input/output error"), "\($0)") }
        try journal.append("c\n")
        XCTAssertEqual(text(try journal.readAll()), "a\nc\n")
        XCTAssertThrowsError(try journal.sync()) { XCTAssertTrue("\($0)".contains("cannot sync /j: Input/output error"), "\($0)") }
        XCTAssertEqual(text(storage.durableContents("/j")), "")
        try journal.sync()
        XCTAssertEqual(text(storage.durableContents("/j")), "a\nc\n")
        XCTAssertEqual(storage.fired.count, 2)
    }

    func testTheJournalLockHoldsUntilTheProcessEnds() throws {
        let storage = SimulatedStorage(seed: 6)
        var journal: (any JournalStorage)? = try storage.openJournal("/j")
        XCTAssertThrowsError(try storage.openJournal("/j")) { XCTAssertTrue("\($0)".contains("is locked"), "\($0)") }
        try journal?.append("B\n")
        storage.endProcess()
        XCTAssertFalse(storage.isLocked("/j"))
        XCTAssertThrowsError(try journal?.append("R apns 64\n"), "a dead process's journal writes nothing")
        let second = try storage.openJournal("/j")
        XCTAssertEqual(text(try second.readAll()), "B\n")
        journal = nil
        XCTAssertTrue(storage.isLocked("/j"), "an old handle let go does not release the new holder's lock")
        try second.truncate()
        XCTAssertEqual(storage.contents("/j"), [])
    }

    func testAScratchFileReadsBackAtOffsets() throws {
        let storage = SimulatedStorage(seed: 7)
        let scratch = try storage.makeScratch(in: "/tmp")
        let bytes: [UInt8] = Array(0..<200)
        try bytes.withUnsafeBytes { try scratch.append($0) }
        var out = [UInt8](repeating: 0, count: 50)
        let read = try out.withUnsafeMutableBytes { try scratch.read(at: 180, into: $0) }
        XCTAssertEqual(read, 20)
        XCTAssertEqual(Array(out[0..<20]), Array(180..<200))
        let reader = try storage.createForAppending("/in", bufferBytes: 4096)
        try reader.append("row\n")
        try reader.flush()
        let input = try storage.openForReading("/in")
        var chunk = [UInt8](repeating: 0, count: 3)
        XCTAssertEqual(try input.read(into: &chunk), 3)
        XCTAssertEqual(try input.read(into: &chunk), 1)
        XCTAssertEqual(try input.read(into: &chunk), 0)
    }
}
