import PushcastCore
@testable import PushcastEngine
import XCTest

/// The journal and the results file as a crash leaves them: cut at every byte, each must recover
/// to what a model of its complete lines says, and damage before the last line must be refused.
final class JournalRecoveryTests: XCTestCase {
    static let fingerprint = CampaignFingerprint(campaign: "c1", input: "00ff", templates: "ab12", providers: "apns,fcm", resultsFormat: "ndjson")

    /// A journal of three runs: the first crashed (no S), the second stopped cleanly, the third
    /// crashed again after a reservation for fcm only.
    static let events: [String] = ["B", "R apns 4096", "R fcm 4096", "R apns 8192", "B", "R apns 4096", "S", "B", "R fcm 12288"]

    /// The model: which rows of each feed may have gone out, from the complete event lines.
    private func model(_ events: ArraySlice<String>) -> [String: Int] {
        var marks: [String: Int] = [:]
        var current: [String: Int] = [:]
        var clean = true
        func end() { if !clean { for (k, v) in current { marks[k] = max(marks[k, default: 0], v) } } }
        for event in events {
            let parts = event.split(separator: " ")
            switch parts[0] {
            case "B": end(); current = [:]; clean = false
            case "R": current[String(parts[1])] = max(current[String(parts[1]), default: 0], Int(parts[2])!); clean = false
            default: clean = true
            }
        }
        end()
        return marks
    }

    func testEveryTruncationOfAJournalRecoversToItsCompleteLines() throws {
        let text = Self.fingerprint.headerLine + Self.events.map { $0 + "\n" }.joined()
        let bytes = Array(text.utf8)
        let headerLength = Self.fingerprint.headerLine.utf8.count
        for cut in 0...bytes.count {
            let prefix = Array(bytes[0..<cut])
            if cut < headerLength {
                XCTAssertThrowsError(try JournalState.parse(prefix, path: "j"), "cut at \(cut): no complete header")
                continue
            }
            let state = try JournalState.parse(prefix, path: "j")
            XCTAssertEqual(state.fingerprint, Self.fingerprint)
            let complete = String(decoding: prefix, as: UTF8.self).dropFirst(headerLength).split(separator: "\n", omittingEmptySubsequences: false)
            let lines = complete.dropLast()  // the empty tail after the last LF, or the torn line
            let expected = model(ArraySlice(lines.map(String.init)))
            XCTAssertEqual(state.uncleanMarks, expected, "cut at \(cut)")
        }
    }

    func testTheModelMatchesWhatTheRowsMean() throws {
        let text = Self.fingerprint.headerLine + Self.events.map { $0 + "\n" }.joined()
        let state = try JournalState.parse(Array(text.utf8), path: "j")
        // Run 1 (crashed) reserved apns below 8192 and fcm below 4096; run 2 stopped cleanly;
        // run 3 (crashed) reserved fcm below 12288.
        XCTAssertTrue(state.mayHaveGoneOut(row: 8191, feed: "apns"))
        XCTAssertFalse(state.mayHaveGoneOut(row: 8192, feed: "apns"))
        XCTAssertTrue(state.mayHaveGoneOut(row: 12287, feed: "fcm"))
        XCTAssertFalse(state.mayHaveGoneOut(row: 1, feed: "apns+fcm"))
        XCTAssertEqual(state.runs, 3)
    }

    func testDamageBeforeTheLastLineIsRefusedNamingTheLine() {
        let text = Self.fingerprint.headerLine + "B\nR apns x\nR apns 4096\n"
        XCTAssertThrowsError(try JournalState.parse(Array(text.utf8), path: "r.journal")) { error in
            XCTAssertTrue("\(error)".contains("r.journal:3"), "\(error)")
        }
        let garbage = Self.fingerprint.headerLine + "B\nhello\nS\n"
        XCTAssertThrowsError(try JournalState.parse(Array(garbage.utf8), path: "r.journal"))
        XCTAssertThrowsError(try JournalState.parse(Array("not a journal\nB\n".utf8), path: "r.journal"))
    }

    func testFingerprintsNameWhatChanged() {
        var other = Self.fingerprint
        other.campaign = "c2"
        other.input = "1111"
        let changes = other.differences(from: Self.fingerprint)
        XCTAssertEqual(changes.count, 2)
        XCTAssertTrue(changes[0].contains("c1 then, c2 now"))
        XCTAssertTrue(changes[1].contains("input file"))
    }

    // MARK: - Results

    private func resultsText(_ format: ResultsFormat) -> [UInt8] {
        var out = ByteBuffer(capacity: 4096)
        if format == .csv { for byte in ResultEncoding.csvHeader.utf8 { out.append(byte) } }
        let records = [
            OutcomeRecord(row: 1, id: "d1", token: "aa", provider: .apns, outcome: .delivered, status: 200, messageID: "x", attempts: 1, latencyMilliseconds: 2.5),
            OutcomeRecord(row: 3, id: "d,3", token: "bb", provider: .apns, outcome: .pruned, status: 410, reason: "Unregistered", unregisteredAt: "2024-01-01T00:00:00.000Z"),
            OutcomeRecord(row: 2, id: nil, token: "zz", provider: .fcm, outcome: .invalid, reason: "InvalidToken", error: "t.csv:3: field 'token': \"bad\""),
            OutcomeRecord(row: 4, id: "d4", token: "aa", provider: .apns, outcome: .duplicate, reason: "Duplicate", duplicateOf: 1),
        ]
        for record in records { ResultEncoding.appendLine(record, format: format, to: &out) }
        return Array(out.bytes)
    }

    func testEveryTruncationOfAResultsFileKeepsItsCompleteLines() throws {
        for format in [ResultsFormat.ndjson, .csv] {
            let bytes = resultsText(format)
            var lineEnds: [Int] = []
            for (index, byte) in bytes.enumerated() where byte == UInt8(ascii: "\n") { lineEnds.append(index + 1) }
            let rowsInOrder = [1, 3, 2, 4]
            for cut in 0...bytes.count {
                var pruned = 0
                let recovered = try RecoveredResults.read(Array(bytes[0..<cut]), format: format, path: "r") { record in
                    if record.belongsInPruneFile { pruned += 1 }
                }
                let complete = lineEnds.filter { $0 <= cut }
                XCTAssertEqual(recovered.validLength, complete.last ?? 0, "\(format) cut \(cut)")
                let dataLines = format == .csv ? max(0, complete.count - 1) : complete.count
                XCTAssertEqual(recovered.count, dataLines, "\(format) cut \(cut)")
                for (index, row) in rowsInOrder.enumerated() {
                    XCTAssertEqual(recovered.isFinished(row), index < dataLines, "\(format) cut \(cut) row \(row)")
                }
                XCTAssertEqual(pruned, (dataLines >= 2 ? 1 : 0) + (dataLines >= 3 ? 1 : 0), "\(format) cut \(cut)")
            }
        }
    }

    func testADamagedMiddleLineOrARowTwiceIsRefused() {
        var bytes = resultsText(.ndjson)
        let secondLine = bytes.firstIndex(of: UInt8(ascii: "\n"))! + 1
        bytes[secondLine] = UInt8(ascii: "#")
        XCTAssertThrowsError(try RecoveredResults.read(bytes, format: .ndjson, path: "r.ndjson") { _ in }) { error in
            XCTAssertTrue("\(error)".contains("r.ndjson:2"), "\(error)")
        }
        let twice = resultsText(.ndjson) + resultsText(.ndjson)
        XCTAssertThrowsError(try RecoveredResults.read(twice, format: .ndjson, path: "r.ndjson") { _ in }) { error in
            XCTAssertTrue("\(error)".contains("recorded twice"), "\(error)")
        }
    }

    func testContentHashTellsInputsApart() {
        func hash(_ text: String) -> String {
            var h = ContentHash()
            Array(text.utf8).withUnsafeBytes { h.add($0) }
            return h.hex
        }
        XCTAssertEqual(hash("token\nabc\n"), hash("token\nabc\n"))
        XCTAssertNotEqual(hash("token\nabc\n"), hash("token\nabd\n"))
        XCTAssertNotEqual(hash("token\nabc\n"), hash("token\nabc\n\n"))
        // Split reads hash the same as one read.
        var split = ContentHash()
        Array("token\n".utf8).withUnsafeBytes { split.add($0) }
        Array("abc\n".utf8).withUnsafeBytes { split.add($0) }
        XCTAssertEqual(split.hex, hash("token\nabc\n"))
    }
}
