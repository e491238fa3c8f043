import PushcastCore
import PushcastEngine
import PushcastSimulation
import XCTest

/// The engine's journal, resume and results sink on the simulated disk, one fault at a time.
final class DurabilityOnSimulatedStorageTests: XCTestCase {
    private let results = "/c/results.ndjson"
    private let fingerprint = CampaignFingerprint(campaign: "c", input: "1", templates: "t", providers: "apns", resultsFormat: "ndjson")

    private func open(_ storage: SimulatedStorage, resume: Bool, boot: String) throws -> CampaignDurability {
        try CampaignDurability.open(resultsPath: results, format: .ndjson, columns: .standard, fingerprint: fingerprint,
                                    request: ResumeRequest(resume: resume, force: false, retryUnknown: false, policy: .batch, boot: boot,
                                                           files: storage), note: { _ in })
    }

    /// A power loss tore the journal's last line. The resume cuts it before its own `B` line, so
    /// the next resume still sees where each run began: the resumed run's marks are believed
    /// after it is killed on the same boot (glued to a torn line, its `B` was lost, and its rows
    /// were all written off as the earlier boot's).
    func testATornJournalLineIsCutBeforeTheResumeAppends() throws {
        let storage = SimulatedStorage(seed: 1)
        let first = try open(storage, resume: false, boot: "b1")
        _ = try first.journal.cover(row: 0, feed: "apns", nowNanoseconds: 0)
        storage.endProcess()
        let raw = try storage.openJournal(CampaignDurability.journalPath(results: results))
        try raw.append("D apns 0-9\nD apns 1")
        storage.endProcess()
        let second = try open(storage, resume: true, boot: "b2")
        let journalPath = CampaignDurability.journalPath(results: results)
        XCTAssertFalse(String(decoding: storage.contents(journalPath)!, as: UTF8.self).contains("D apns 1B"))
        _ = try second.journal.cover(row: 200, feed: "apns", nowNanoseconds: 0)
        var marks = try XCTUnwrap(second.journal.dispatchLog(feedKeys: ["apns": "apns"])?.marks(forLane: "apns"))
        marks.note(row: 200)
        try marks.write()
        storage.endProcess()
        let state = try JournalState.parse(storage.contents(journalPath)!, path: journalPath, boot: "b2")
        XCTAssertEqual(state.runs, 2)
        XCTAssertTrue(state.mayHaveGoneOut(row: 200, feed: "apns"), "the resumed run's mark is believed")
        XCTAssertFalse(state.mayHaveGoneOut(row: 201, feed: "apns"), "a reserved row without a mark never went out")
        XCTAssertTrue(state.mayHaveGoneOut(row: 5, feed: "apns"), "the first run's rows are distrusted: another boot")
    }

    /// The disk fills in the middle of a reservation line: the journal takes nothing more (the
    /// clean stop's `S` glued to the torn part made a damaged line no resume got past), and the
    /// resume, once there is room, drops the torn part and goes on.
    func testAJournalTakesNoLineAfterATornOne() throws {
        var faults = StorageFaults()
        faults.diskFullAfterWrites = 4
        faults.slackBytes = 4
        let storage = SimulatedStorage(seed: 3, faults: faults)
        let first = try open(storage, resume: false, boot: "b1")
        _ = try first.journal.cover(row: 0, feed: "apns", nowNanoseconds: 0)
        XCTAssertThrowsError(try first.journal.cover(row: 64, feed: "apns", nowNanoseconds: 0)) {
            XCTAssertTrue("\($0)".contains("No space left on device"), "\($0)")
        }
        storage.repair()
        XCTAssertThrowsError(try first.journal.markCleanStop()) { XCTAssertTrue("\($0)".contains("an earlier write"), "\($0)") }
        let journalPath = CampaignDurability.journalPath(results: results)
        XCTAssertTrue(String(decoding: storage.contents(journalPath)!, as: UTF8.self).hasSuffix("\nR ap"), "the torn part is last")
        storage.endProcess()
        let second = try open(storage, resume: true, boot: "b1")
        XCTAssertTrue(second.earlier?.mayHaveGoneOut(row: 63, feed: "apns") == false, "no row was marked handed out")
        XCTAssertEqual(second.verdict(row: 63, feed: "apns"), .send)
    }

    /// A results write that fails (EIO): every later sync and close throws it too, so the run
    /// cannot mark a clean stop over lines that never reached the file.
    func testAFailedResultsWriteFailsEveryLaterSyncAndClose() throws {
        var faults = StorageFaults()
        faults.failingWrite = 1
        let storage = SimulatedStorage(seed: 2, faults: faults)
        let sink = try ResultFilesSink(resultsPath: results, format: .ndjson, prunePath: "/c/prune.csv", columns: .standard, files: storage)
        var record = OutcomeRecord(row: 1, id: "d1", token: "ab", provider: .apns, outcome: .delivered)
        sink.record(&record)
        XCTAssertThrowsError(try sink.sync(durable: true)) { XCTAssertTrue("\($0)".contains("Input/output error"), "\($0)") }
        XCTAssertThrowsError(try sink.sync(durable: true)) { XCTAssertTrue("\($0)".contains("Input/output error"), "\($0)") }
        XCTAssertThrowsError(try sink.close()) { XCTAssertTrue("\($0)".contains("Input/output error"), "\($0)") }
    }
}
