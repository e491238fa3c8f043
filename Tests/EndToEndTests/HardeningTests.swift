import Foundation
import XCTest

/// Failures an unattended night job meets, end to end: output paths that name the export or each
/// other, a hang-up and a log pipe that goes away mid-run, and servers that answer a stream and
/// then say it was never processed. Each used to lose data; each must now lose nothing.
final class HardeningTests: XCTestCase {
    private var directory = ""

    override func setUpWithError() throws {
        try BinaryTests.requireBinary()
        directory = NSTemporaryDirectory() + "pushcast-hardening-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    override func tearDown() { try? FileManager.default.removeItem(atPath: directory) }

    private func write(_ name: String, _ text: String) throws -> String {
        let path = directory + "/" + name
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// `rows` distinct APNs tokens (none with one of the mock's special prefixes).
    private func tokens(_ rows: Int) throws -> String {
        var lines = ["device_id,token"]
        for i in 0..<rows { lines.append("d\(i + 1),\(String(format: "%08x", i))\(String(repeating: "2", count: 56))") }
        return try write("tokens.csv", lines.joined(separator: "\n") + "\n")
    }

    private func sendArguments(_ input: String, _ mock: SendTests.Mock, payload: String) -> [String] {
        ["send", input, "--payload", payload, "--apns-topic", "com.example.app",
         "--apns-key", mock.keyPath, "--apns-key-id", mock.keyID, "--apns-team-id", mock.teamID,
         "--apns-endpoint", "https://127.0.0.1:\(mock.port)", "--ca-file", mock.caFile]
    }

    // MARK: - Output paths: no two roles on one file

    func testAnOutputPathOnTheExportOrOnAnotherOutputIsRefusedBeforeAnythingIsWritten() throws {
        let input = try tokens(50)
        let original = try Data(contentsOf: URL(fileURLWithPath: input))
        let payload = try write("payload.json", #"{"aps":{"alert":"hi"}}"#)
        let mock = try SendTests.Mock(directory: directory, extra: [])
        defer { _ = mock.stop() }
        let results = directory + "/out.ndjson"
        try FileManager.default.createSymbolicLink(atPath: directory + "/link.csv", withDestinationPath: input)
        let cases: [(String, [String], String)] = [
            ("results on the export", ["--results", input, "--force"], "--results and the input are the same file"),
            ("results on a link to the export", ["--results", directory + "/link.csv", "--force"], "--results and the input are the same file"),
            ("results through ./ and ..", ["--results", directory + "/./sub/../tokens.csv"], "--results and the input are the same file"),
            ("prune on the export", ["--results", results, "--prune", input], "--prune and the input are the same file"),
            ("summary on the export", ["--results", results, "--summary", input], "--summary and the input are the same file"),
            ("metrics on the export", ["--results", results, "--metrics-file", input], "--metrics-file and the input are the same file"),
            ("prune on the results", ["--results", results, "--prune", results], "--prune and --results are the same file"),
            ("summary on the results", ["--results", results, "--summary", results], "--summary and --results are the same file"),
            ("prune on the journal", ["--results", results, "--prune", results + ".journal"],
             "--prune and the journal (<results>.journal) are the same file"),
            ("metrics on the timeline", ["--results", results, "--metrics-file", results + ".timeline"],
             "--metrics-file and the timeline (<results>.timeline) are the same file"),
        ]
        try FileManager.default.createDirectory(atPath: directory + "/sub", withIntermediateDirectories: true)
        for (what, options, message) in cases {
            let run = try runPushcast(sendArguments(input, mock, payload: payload) + options + ["--quiet"], seconds: 30)
            XCTAssertEqual(run.status, 2, "\(what): \(run.stderr)")
            XCTAssertTrue(run.stderr.contains(message), "\(what): \(run.stderr)")
            XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: input)), original, "\(what): the export changed")
            for made in [results, results + ".journal", results + ".timeline"] {
                XCTAssertFalse(FileManager.default.fileExists(atPath: made), "\(what): \(made) was written")
            }
        }
        XCTAssertTrue(mock.log.isEmpty, "nothing was sent")

        // Devices are no files to protect: the prune file, the summary and the metrics may all go
        // to /dev/null, which stays what it was (never tightened to 0600, never renamed over).
        let before = try FileManager.default.attributesOfItem(atPath: "/dev/null")
        let quiet = try runPushcast(sendArguments(input, mock, payload: payload)
            + ["--results", results, "--prune", "/dev/null", "--summary", "/dev/null", "--metrics-file", "/dev/null", "--quiet"], seconds: 30)
        XCTAssertEqual(quiet.status, 0, quiet.stderr)
        XCTAssertEqual(try resultsByRow(results).count, 50)
        let after = try FileManager.default.attributesOfItem(atPath: "/dev/null")
        XCTAssertEqual(after[.type] as? FileAttributeType, .typeCharacterSpecial)
        XCTAssertEqual(after[.posixPermissions] as? Int, before[.posixPermissions] as? Int, "/dev/null's mode changed")
        try FileManager.default.removeItem(atPath: results)
        try FileManager.default.removeItem(atPath: results + ".journal")
        try? FileManager.default.removeItem(atPath: results + ".timeline")

        // stdin redirected from the export, with the results on it.
        let process = Process()
        process.executableURL = URL(fileURLWithPath: BinaryTests.binary)
        process.arguments = sendArguments("-", mock, payload: payload) + ["--format", "csv", "--results", input, "--force", "--quiet"]
        process.standardInput = try FileHandle(forReadingFrom: URL(fileURLWithPath: input))
        let err = Pipe()
        process.standardError = err
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        let stderr = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 2, stderr)
        XCTAssertTrue(stderr.contains("--results and the input (stdin) are the same file"), stderr)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: input)), original, "stdin: the export changed")
    }

    // MARK: - Inputs that are not exports

    /// `/dev/zero` (read forever before, at 8.6 GB/s) and a header naming a column twice (the
    /// first silently won): exit 2 at once, naming the file and line, nothing sent.
    func testDevZeroAndARepeatedColumnStopAtOnceNamingTheCause() throws {
        let payload = try write("payload.json", #"{"aps":{"alert":"hi"}}"#)
        let mock = try SendTests.Mock(directory: directory, extra: [])
        defer { _ = mock.stop() }
        let repeated = try write("repeated.csv", "token,name,token\n\(String(repeating: "ab", count: 32)),x,\(String(repeating: "cd", count: 32))\n")
        let cases: [(String, [String], String)] = [
            ("/dev/zero as CSV", ["/dev/zero", "--format", "csv"], "/dev/zero:1: header line longer than 65536 bytes"),
            ("/dev/zero as NDJSON", ["/dev/zero", "--format", "ndjson"], "/dev/zero:1: no line end in "),
            ("a column named twice", [repeated], "repeated.csv:1: header: the column 'token' appears twice (columns 1 and 3)"),
        ]
        for (what, input, message) in cases {
            let started = Date()
            let run = try runPushcast(["send"] + input + Array(sendArguments("x", mock, payload: payload).dropFirst(2))
                                      + ["--results", directory + "/r.ndjson", "--quiet"], seconds: 30)
            XCTAssertLessThan(Date().timeIntervalSince(started), 10, what)
            XCTAssertEqual(run.status, 2, "\(what): \(run.stderr)")
            XCTAssertTrue(run.stderr.contains(message), "\(what): \(run.stderr)")
        }
        XCTAssertTrue(mock.log.isEmpty, "nothing was sent")
    }

    // MARK: - An export rewritten while it is sent

    /// `cat new.csv > in.csv` mid-run used to send 15,047 old rows and 4,953 new ones, exit 0.
    /// Now the run stops with exit 2 at the first changed chunk, nothing of the new content goes
    /// out, and with the export put back, `--resume` finishes it: every row once.
    func testAnExportRewrittenMidRunStopsAndNothingNewIsSent() throws {
        let rows = 200_000
        let input = try tokens(rows)
        let original = try Data(contentsOf: URL(fileURLWithPath: input))
        let rewritten = String(decoding: original, as: UTF8.self).replacingOccurrences(of: "2222", with: "7777")
        let payload = try write("payload.json", #"{"aps":{"alert":"hi"}}"#)
        let mock = try SendTests.Mock(directory: directory, extra: ["--latency-ms", "20"])
        let arguments = sendArguments(input, mock, payload: payload)
            + ["--results", directory + "/results.ndjson", "--prune", directory + "/prune.csv", "--connections", "1", "--streams", "100", "--quiet"]
        let rewrite = Thread {
            Thread.sleep(forTimeInterval: 2)
            // In place, as `cat new.csv > in.csv` does: the same inode, truncated and written.
            if let handle = FileHandle(forWritingAtPath: input) {
                handle.truncateFile(atOffset: 0)
                handle.write(Data(rewritten.utf8))
                handle.closeFile()
            }
        }
        rewrite.start()
        let run = try runPushcast(arguments, seconds: 120)
        _ = mock.stop()
        XCTAssertEqual(run.status, 2, String(run.stderr.suffix(800)))
        XCTAssertTrue(run.stderr.contains("the input changed since it was first read"), run.stderr)
        XCTAssertTrue(run.stderr.contains("the first changed row is row "), run.stderr)
        let sent = mock.log.compactMap { $0["token"] as? String }
        XCTAssertFalse(sent.isEmpty)
        XCTAssertLessThan(sent.count, rows, "the run stopped before the end")
        XCTAssertTrue(sent.allSatisfy { $0.hasSuffix(String(repeating: "2", count: 56)) }, "a row of the new content was sent")
        let first = try resultsByRow(directory + "/results.ndjson")
        XCTAssertEqual(Set(first.values.compactMap { $0["token"] as? String }), Set(sent), "every row sent is recorded")

        try original.write(to: URL(fileURLWithPath: input))
        try FileManager.default.createDirectory(atPath: directory + "/again", withIntermediateDirectories: true)
        let healthy = try SendTests.Mock(directory: directory + "/again", extra: [])
        let resumed = try runPushcast(sendArguments(input, healthy, payload: payload)
            + ["--results", directory + "/results.ndjson", "--prune", directory + "/prune.csv", "--quiet", "--resume"], seconds: 120)
        _ = healthy.stop()
        XCTAssertEqual(resumed.status, 0, resumed.stderr)
        let again = healthy.log.compactMap { $0["token"] as? String }
        XCTAssertEqual(again.count + sent.count, rows, "every row sent once in all")
        XCTAssertTrue(Set(again).isDisjoint(with: sent), "a row went twice")
        XCTAssertEqual(try resultsByRow(directory + "/results.ndjson").count, rows)
    }

    // MARK: - A journal deleted, its results kept

    /// Before, the only way on was --force, which resent every row. Now --resume alone sends
    /// nothing and says what is at stake; with --retry-unknown it keeps the finished rows and
    /// sends only the rows without a line.
    func testAResumeWithoutItsJournalKeepsTheFinishedRowsAndAsksBeforeSendingTheRest() throws {
        let rows = 3_000
        let input = try tokens(rows)
        let payload = try write("payload.json", #"{"aps":{"alert":"hi"}}"#)
        let mock = try SendTests.Mock(directory: directory, extra: [])
        let results = directory + "/results.ndjson"
        let arguments = sendArguments(input, mock, payload: payload) + ["--results", results, "--prune", directory + "/prune.csv", "--quiet"]
        XCTAssertEqual(try runPushcast(arguments, seconds: 60).status, 0)
        // Keep the first 1,000 lines only, as if the run had been cut there, and lose the journal.
        let lines = try String(contentsOfFile: results, encoding: .utf8).split(separator: "\n").prefix(1000)
        try (lines.joined(separator: "\n") + "\n").write(toFile: results, atomically: true, encoding: .utf8)
        try FileManager.default.removeItem(atPath: results + ".journal")
        let kept = Set(try resultsByRow(results).keys)

        let refused = try runPushcast(arguments + ["--resume"], seconds: 60)
        XCTAssertEqual(refused.status, 2, refused.stderr)
        XCTAssertTrue(refused.stderr.contains("holds 1000 results but its journal"), refused.stderr)
        XCTAssertTrue(refused.stderr.contains("--resume --retry-unknown keeps those 1000 rows"), refused.stderr)

        let resumed = try runPushcast(arguments + ["--resume", "--retry-unknown"], seconds: 60)
        _ = mock.stop()
        XCTAssertEqual(resumed.status, 0, resumed.stderr)
        let final = try resultsByRow(results)
        XCTAssertEqual(final.count, rows, "one line per row")
        // The log is whole once the mock has stopped: the first run's rows, then the resume's.
        var sends: [String: Int] = [:]
        for entry in mock.log { sends[entry["token"] as? String ?? "", default: 0] += 1 }
        let keptTokens = Set(kept.compactMap { final[$0]?["token"] as? String })
        XCTAssertEqual(sends.values.reduce(0, +), rows + (rows - kept.count), "the refused resume sent nothing, the second only the rows without a line")
        XCTAssertTrue(keptTokens.allSatisfy { sends[$0] == 1 }, "a finished row was sent again")
    }

    // MARK: - Signals: a hang-up and a log pipe that goes away

    /// Starts a send with progress lines on a stderr pipe, returns the process and the pipe.
    private func start(_ arguments: [String]) throws -> (Process, Pipe) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: BinaryTests.binary)
        process.arguments = arguments
        let err = Pipe()
        process.standardError = err
        process.standardOutput = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        return (process, err)
    }

    private func waitForExit(_ process: Process, seconds: Double = 60) -> Int32 {
        let deadline = Date().addingTimeInterval(seconds)
        while process.isRunning && Date() < deadline { usleep(10_000) }
        if process.isRunning {
            process.terminate()
            XCTFail("the sender did not stop within \(seconds) s")
        }
        process.waitUntilExit()
        return process.terminationReason == .uncaughtSignal ? 128 + process.terminationStatus : process.terminationStatus
    }

    func testAHangUpAndAClosedLogPipeStopResumablyAndTheResumeSendsEveryRowOnce() throws {
        let rows = 60_000
        let input = try tokens(rows)
        let payload = try write("payload.json", #"{"aps":{"alert":"hi {{device_id}}"}}"#)
        let mock = try SendTests.Mock(directory: directory, extra: ["--latency-ms", "20"])
        let summary = directory + "/summary.json"
        let arguments = sendArguments(input, mock, payload: payload)
            + ["--results", directory + "/results.ndjson", "--prune", directory + "/prune.csv", "--summary", summary,
               "--connections", "2", "--streams", "100", "--progress", "--progress-interval", "100ms", "--resume"]

        // 1. SIGHUP, as when the ssh session that started the run drops: a graceful stop.
        var (process, err) = try start(arguments)
        Thread.sleep(forTimeInterval: 1.5)
        XCTAssertTrue(process.isRunning, "the run ended before the hang-up")
        kill(process.processIdentifier, SIGHUP)
        let hungUp = waitForExit(process)
        let hungUpText = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        XCTAssertEqual(hungUp, 3, "SIGHUP stops gracefully, resumable: \(hungUpText.suffix(600))")
        XCTAssertTrue(hungUpText.contains("SIGHUP"), String(hungUpText.suffix(600)))

        // 2. The reader of stderr goes away (`| head -1`, a log shipper restarting): the run goes on,
        // then SIGTERM stops it, and the summary notes the lost log lines.
        (process, err) = try start(arguments)
        Thread.sleep(forTimeInterval: 0.5)
        try err.fileHandleForReading.close()
        Thread.sleep(forTimeInterval: 1.0)
        XCTAssertTrue(process.isRunning, "the run died when its stderr reader went away")
        kill(process.processIdentifier, SIGTERM)
        XCTAssertEqual(waitForExit(process), 3, "SIGTERM after the pipe closed: graceful, resumable")
        let notes = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: summary))) as? [String: Any])["notes"]
        XCTAssertTrue((notes as? [String] ?? []).contains { $0.hasPrefix("stderr stopped taking writes (Broken pipe)") }, "\(notes ?? "none")")

        // 3. The same command line finishes the campaign.
        let resumed = try runPushcast(arguments, seconds: 300)
        XCTAssertEqual(resumed.status, 0, String(resumed.stderr.suffix(600)))
        _ = mock.stop()
        let byRow = try resultsByRow(directory + "/results.ndjson")
        XCTAssertEqual(byRow.count, rows, "one line per row")
        let notDelivered = byRow.values.filter { $0["outcome"] as? String != "delivered" }
        XCTAssertTrue(notDelivered.isEmpty, "\(notDelivered.count) rows not delivered, e.g. \(notDelivered.first ?? [:])")
        var counts: [String: Int] = [:]
        for entry in mock.log where entry["status"] as? Int == 200 { counts[entry["token"] as? String ?? "", default: 0] += 1 }
        XCTAssertEqual(counts.count, rows, "every row was delivered")
        XCTAssertEqual(counts.values.max() ?? 0, 1, "a token was delivered twice")
    }

    // MARK: - Servers that contradict themselves

    /// A `--misbehave MODE` mock in its own folder, verifying the key that `keys` made, and a send
    /// of `input` to it (results in the mode's folder); returns the run and the mock's counters.
    private func sendToHostile(_ mode: String, input: String, keys: SendTests.Mock, extra: [String] = [],
                               seconds: Double = 60) throws -> (run: PushcastRun, statistics: [String: Any], place: String) {
        let payload = try write("payload.json", #"{"aps":{"alert":"hi"}}"#)
        let place = directory + "/" + mode
        try FileManager.default.createDirectory(atPath: place, withIntermediateDirectories: true)
        let mock = try MockProcess(directory: place, arguments: ["--port", "0", "--workers", "2", "--duration", "120s", "--misbehave", mode,
                                                                 "--apns-public-key", directory + "/apns-key.pub.pem",
                                                                 "--apns-key-id", keys.keyID, "--apns-team-id", keys.teamID],
                                   waitFor: ["PORT"])
        let run = try runPushcast(["send", input, "--payload", payload, "--apns-topic", "com.example.app",
                                   "--apns-key", keys.keyPath, "--apns-key-id", keys.keyID, "--apns-team-id", keys.teamID,
                                   "--apns-endpoint", "https://127.0.0.1:\(mock.port)", "--ca-file", mock.caFile,
                                   "--results", place + "/results.ndjson", "--prune", place + "/prune.csv", "--quiet"] + extra, seconds: seconds)
        return (run, mock.stop(), place)
    }

    /// 500 rows against a server that answers each stream `:status 200` and then says it was never
    /// processed: each row the server answered ends `unknown` (AnswerCut) and reached it exactly
    /// once; rows left when the breaker stops the run have no line and never reached it.
    private func runContradiction(_ mode: String, diagnosis: String) throws {
        let input = try tokens(500)
        let keys = try SendTests.Mock(directory: directory, extra: [])
        _ = keys.stop()
        let (run, statistics, place) = try sendToHostile(mode, input: input, keys: keys)
        let cut = (statistics["misbehavior"] as? [String: Any])?["answers_cut"] as? Int ?? -1
        XCTAssertEqual(run.status, 2, "\(mode): \(run.stderr)")
        XCTAssertTrue(run.stderr.contains(diagnosis), "\(mode): a line names the server's behaviour: \(run.stderr)")
        let byRow = try resultsByRow(place + "/results.ndjson")
        XCTAssertGreaterThan(byRow.count, 0, "\(mode): some rows were answered")
        XCTAssertEqual(cut, byRow.count, "\(mode): each answered row reached the server once, none was resent (\(statistics))")
        print("contradiction \(mode): \(cut) requests answered and cut, \(byRow.count) rows recorded, exit \(run.status): \(run.stderr.split(separator: "\n").last ?? "")")
        for line in byRow.values {
            XCTAssertEqual(line["outcome"] as? String, "unknown", "\(mode): \(line)")
            // Requests on the wire when the breaker drops the connection end ConnectionLost.
            XCTAssertTrue(["AnswerCut", "ConnectionLost"].contains(line["reason"] as? String ?? ""), "\(mode): \(line)")
        }
    }

    /// A server that closes with requests unanswered, and one that floods PINGs: each run ends
    /// with a line naming the dropped connections by reason, in the summary and in the metrics.
    func testDroppedConnectionsAreNamedByReasonInTheSummaryAndTheMetrics() throws {
        let input = try tokens(500)
        let keys = try SendTests.Mock(directory: directory, extra: [])
        _ = keys.stop()
        let cases = [("close-half-answered", "closed by the server with requests in flight"),
                     ("ping-flood", "error from the server: HTTP/2: nghttp2_session_mem_recv: Flooding was detected")]
        for (mode, reason) in cases {
            let started = Date()
            let outputs = [directory + "/" + mode + "/summary.json", directory + "/" + mode + "/m.prom"]
            let (run, _, place) = try sendToHostile(mode, input: input, keys: keys,
                                                    extra: ["--stall-timeout", "3s", "--summary", outputs[0], "--metrics-file", outputs[1]], seconds: 90)
            XCTAssertLessThan(Date().timeIntervalSince(started), 60, mode)
            XCTAssertNotEqual(run.status, 0, "\(mode): \(run.stderr)")
            XCTAssertTrue(run.stderr.contains("connections dropped (apns): "), "\(mode): \(run.stderr)")
            XCTAssertTrue(run.stderr.contains(reason), "\(mode): \(run.stderr)")
            let summary = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: place + "/summary.json"))) as? [String: Any])
            let dropped = (summary["connections_dropped"] as? [String: [String: Int]])?["apns"] ?? [:]
            XCTAssertTrue(dropped.contains { $0.key.hasPrefix(reason) && $0.value > 0 }, "\(mode): \(dropped)")
            let metrics = try String(contentsOfFile: place + "/m.prom", encoding: .utf8)
            XCTAssertTrue(metrics.contains("pushcast_connections_dropped_total{") && metrics.contains("reason=\"\(reason)"), "\(mode): \(metrics)")
        }
    }

    func testAStatusThenRefusedStreamIsNeverResent() throws {
        try runContradiction("answer-then-refuse", diagnosis: "every stream answered, then reset or dropped before the answer ended")
    }

    func testAStatusThenGoAwayZeroIsNeverResent() throws {
        try runContradiction("answer-then-goaway", diagnosis: "GOAWAY with last-stream-id 0 on every connection")
    }
}
