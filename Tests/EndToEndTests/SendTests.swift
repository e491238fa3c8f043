import Foundation
import XCTest

/// `pushcast send` against `pushcast mock` over real TLS, as separate processes.
final class SendTests: XCTestCase {
    /// A running `pushcast mock` child with its port and generated APNs key.
    final class Mock {
        private let child: MockProcess
        let port: Int
        let keyPath: String
        let keyID: String
        let teamID: String
        var caFile: String { child.caFile }

        init(directory: String, extra: [String]) throws {
            child = try MockProcess(directory: directory, arguments: ["--port", "0", "--workers", "2", "--write-apns-key", directory,
                                                                    "--duration", "300s"] + extra, waitFor: ["PORT", "APNS_KEY"])
            port = child.port
            keyPath = child.fields["APNS_KEY"] ?? ""
            keyID = child.fields["APNS_KEY_ID"] ?? ""
            teamID = child.fields["APNS_TEAM_ID"] ?? ""
        }

        func stop() -> [String: Any] { child.stop() }
        var log: [[String: Any]] { child.log }
    }

    /// What each generated row should end as.
    enum Expected: String { case delivered, deadToken, badToken, retry503, retry429, invalid, duplicate }

    struct Fixture {
        let directory: String
        let tokens: String
        let payload: String
        var expected: [Expected] = []
        var tokenOfRow: [String] = []
    }

    override func setUpWithError() throws {
        try BinaryTests.requireBinary()
    }

    private func makeFixture(rows: Int) throws -> Fixture {
        let directory = NSTemporaryDirectory() + "pushcast-send-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        var fixture = Fixture(directory: directory, tokens: directory + "/tokens.csv", payload: directory + "/payload.json")
        var generator = SystemRandomNumberGenerator()
        var lines = ["device_id,token,platform,first_name"]
        var earlier: [String] = []
        for i in 0..<rows {
            // Ordinary tokens start with 0-3, so none collides with the mock's prefixes by chance.
            var token = String(format: "%02x", UInt8.random(in: 0...0x3f, using: &generator))
                + (1..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &generator)) }.joined()
            var kind = Expected.delivered
            switch i % 100 {
            case 0, 1, 2: token = "dead" + token.dropFirst(4); kind = .deadToken
            case 3: token = "bad0" + token.dropFirst(4); kind = .badToken
            case 4: token = "5030" + token.dropFirst(4); kind = .retry503
            case 5: token = "4290" + token.dropFirst(4); kind = .retry429
            case 6: token = "zz" + token.dropFirst(2); kind = .invalid
            case 7 where !earlier.isEmpty: token = earlier[i % earlier.count]; kind = .duplicate
            default: break
            }
            if kind == .delivered && earlier.count < 500 { earlier.append(token) }
            fixture.expected.append(kind)
            fixture.tokenOfRow.append(token)
            lines.append("d\(i + 1),\(token),ios,\"N\u{e9}e, \(i)\"")
        }
        try (lines.joined(separator: "\n") + "\n").write(toFile: fixture.tokens, atomically: true, encoding: .utf8)
        try #"{"aps":{"alert":{"title":"Hi {{first_name}}","body":"x"}}}"#.write(toFile: fixture.payload, atomically: true, encoding: .utf8)
        return fixture
    }

    private func sendArguments(_ fixture: Fixture, _ mock: Mock, extra: [String] = []) -> [String] {
        [fixture.tokens, "--payload", fixture.payload, "--apns-topic", "com.example.app",
         "--apns-key", mock.keyPath, "--apns-key-id", mock.keyID, "--apns-team-id", mock.teamID,
         "--apns-endpoint", "https://127.0.0.1:\(mock.port)", "--ca-file", mock.caFile,
         "--results", fixture.directory + "/results.ndjson", "--prune", fixture.directory + "/prune.csv", "--quiet"] + extra
    }

    private func results(_ fixture: Fixture) throws -> [[String: Any]] {
        let text = try String(contentsOfFile: fixture.directory + "/results.ndjson", encoding: .utf8)
        return try text.split(separator: "\n").map { try XCTUnwrap(JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]) }
    }

    /// Runs the whole campaign against a mock with `mockFlags` and checks every acceptance rule.
    private func runCampaign(rows: Int, mockFlags: [String], sendFlags: [String] = []) throws -> [String: Any] {
        let fixture = try makeFixture(rows: rows)
        let mock = try Mock(directory: fixture.directory, extra: mockFlags)
        let run = try runPushcast(["send"] + sendArguments(fixture, mock, extra: sendFlags), seconds: 300)
        let statistics = mock.stop()
        XCTAssertEqual(run.status, 0, run.stderr)

        // Exactly one line per row, with the specified outcome.
        let lines = try results(fixture)
        XCTAssertEqual(lines.count, rows)
        var byRow: [Int: [String: Any]] = [:]
        for line in lines {
            let row = try XCTUnwrap(line["row"] as? Int)
            XCTAssertNil(byRow[row], "row \(row) has two lines")
            byRow[row] = line
        }
        XCTAssertEqual(Set(byRow.keys), Set(1...rows))
        for (index, kind) in fixture.expected.enumerated() {
            let line = try XCTUnwrap(byRow[index + 1])
            let outcome = line["outcome"] as? String
            switch kind {
            case .delivered:
                XCTAssertEqual(outcome, "delivered", "\(line)")
                XCTAssertEqual(line["status"] as? Int, 200)
            case .deadToken:
                XCTAssertEqual(outcome, "pruned", "\(line)")
                XCTAssertEqual(line["reason"] as? String, "Unregistered")
                XCTAssertNotNil(line["unregistered_at"] as? String)
            case .badToken:
                XCTAssertEqual(outcome, "pruned", "\(line)")
                XCTAssertEqual(line["reason"] as? String, "BadDeviceToken")
            case .retry503, .retry429:
                XCTAssertEqual(outcome, "delivered", "\(line)")
                XCTAssertEqual(line["attempts"] as? Int, 2, "\(line)")
            case .invalid:
                XCTAssertEqual(outcome, "invalid", "\(line)")
                XCTAssertTrue((line["error"] as? String ?? "").contains("tokens.csv:\(index + 2): field 'token'"), "\(line)")
            case .duplicate:
                XCTAssertEqual(outcome, "duplicate", "\(line)")
                XCTAssertNotNil(line["duplicate_of"] as? Int)
            }
        }

        // The prune file holds exactly the dead, bad and invalid tokens.
        let pruneLines = try String(contentsOfFile: fixture.directory + "/prune.csv", encoding: .utf8).split(separator: "\n").dropFirst()
        let pruned = Set(pruneLines.map { String($0.split(separator: ",")[0]) })
        let expectedPruned = Set(fixture.expected.indices.filter { [.deadToken, .badToken, .invalid].contains(fixture.expected[$0]) }
            .map { fixture.tokenOfRow[$0] })
        XCTAssertEqual(pruneLines.count, expectedPruned.count)
        XCTAssertEqual(pruned, expectedPruned)

        // The mock never delivered a token twice.
        var delivered = Set<String>()
        for entry in mock.log where entry["status"] as? Int == 200 {
            let token = entry["token"] as? String ?? ""
            XCTAssertTrue(delivered.insert(token).inserted, "token \(token) delivered twice")
        }
        XCTAssertEqual(delivered.count, fixture.expected.filter { [.delivered, .retry503, .retry429].contains($0) }.count)
        return statistics
    }

    func testFiftyThousandRowsEveryOutcomeExactlyOnce() throws {
        _ = try runCampaign(rows: 50_000, mockFlags: [])
    }

    func testGoAwayEveryThousandRequestsLosesAndRepeatsNothing() throws {
        let statistics = try runCampaign(rows: 50_000, mockFlags: ["--goaway-after", "1000"])
        XCTAssertGreaterThan(statistics["goaways_sent"] as? Int ?? 0, 20)
    }

    func testOneStreamAfterRejectionStillCompletes() throws {
        let statistics = try runCampaign(rows: 20_000, mockFlags: ["--streams-after-reject", "1"])
        XCTAssertGreaterThan(statistics["requests"] as? Int ?? 0, 20_000 * 90 / 100)
    }

    func testLatencyKeepsConnectionsAndStreamsFull() throws {
        // 4 connections × 100 streams with 50 ms answers: the mock must see ≥ 90 % of that in flight.
        let statistics = try runCampaign(rows: 12_000, mockFlags: ["--latency-ms", "50"], sendFlags: ["--streams", "100", "--connections", "4"])
        let perConnection = statistics["max_concurrent_streams_per_connection"] as? [String: Any] ?? [:]
        XCTAssertEqual(perConnection["connections"] as? Int, 4, "\(statistics)")
        XCTAssertEqual((perConnection["top"] as? [Int])?.count, 4, "\(statistics)")
        XCTAssertGreaterThanOrEqual(perConnection["sum"] as? Int ?? 0, 4 * 100 * 90 / 100, "\(statistics)")
    }

    func testWrongKeyStopsWithExitTwoAndKeepsEveryResult() throws {
        let fixture = try makeFixture(rows: 500)
        let mock = try Mock(directory: fixture.directory, extra: [])
        // A different key with the right ids: the mock answers 403 InvalidProviderToken.
        let otherDirectory = fixture.directory + "/other"
        try FileManager.default.createDirectory(atPath: otherDirectory, withIntermediateDirectories: true)
        let other = try Mock(directory: otherDirectory, extra: [])
        _ = other.stop()
        var arguments = sendArguments(fixture, mock)
        arguments[arguments.firstIndex(of: mock.keyPath)!] = other.keyPath
        let run = try runPushcast(["send"] + arguments)
        _ = mock.stop()  // flushes the mock's request log
        XCTAssertEqual(run.status, 2, run.stderr)
        XCTAssertTrue(run.stderr.contains("InvalidProviderToken"), run.stderr)
        XCTAssertFalse(run.stderr.contains("eyJ"), "a JWT leaked into stderr")
        // Every outcome received is in the results file: the rejected requests, plus rows that
        // needed no sending.
        let lines = try results(fixture)
        let rejected = lines.filter { $0["reason"] as? String == "InvalidProviderToken" }
        XCTAssertGreaterThanOrEqual(rejected.count, 1)
        let answered = mock.log.filter { $0["status"] as? Int == 403 }.count
        XCTAssertEqual(rejected.count, answered, "every 403 the mock sent is recorded")
    }

    func testUnreadableInputAndUnknownPlaceholderStopBeforeSending() throws {
        let fixture = try makeFixture(rows: 10)
        let mock = try Mock(directory: fixture.directory, extra: [])
        var arguments = sendArguments(fixture, mock)
        arguments[0] = fixture.directory + "/missing.csv"
        let missing = try runPushcast(["send"] + arguments)
        XCTAssertEqual(missing.status, 2)
        XCTAssertTrue(missing.stderr.contains("missing.csv"), missing.stderr)

        try #"{"aps":{"alert":"Hi {{nickname}}"}}"#.write(toFile: fixture.payload, atomically: true, encoding: .utf8)
        let placeholder = try runPushcast(["send"] + sendArguments(fixture, mock))
        XCTAssertEqual(placeholder.status, 2)
        XCTAssertTrue(placeholder.stderr.contains("nickname"), placeholder.stderr)
        let statistics = mock.stop()
        XCTAssertEqual(statistics["requests"] as? Int, 0, "nothing may be sent")
    }

    func testCheckPrintsThePlanWithoutConnecting() throws {
        let fixture = try makeFixture(rows: 300)
        let mock = try Mock(directory: fixture.directory, extra: [])
        let run = try runPushcast(["check"] + sendArguments(fixture, mock))
        let statistics = mock.stop()
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertTrue(run.stdout.contains("would send:"), run.stdout)
        XCTAssertEqual(statistics["requests"] as? Int, 0)
        XCTAssertEqual(statistics["connections_accepted"] as? Int, 0)
        XCTAssertFalse(FileManager.default.fileExists(atPath: fixture.directory + "/results.ndjson"))
    }

    func testResultsAndPruneFilesAreOwnerOnly() throws {
        let fixture = try makeFixture(rows: 200)
        let mock = try Mock(directory: fixture.directory, extra: [])
        let run = try runPushcast(["send"] + sendArguments(fixture, mock))
        _ = mock.stop()
        XCTAssertEqual(run.status, 0, run.stderr)
        for path in [fixture.directory + "/results.ndjson", fixture.directory + "/prune.csv"] {
            let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber
            XCTAssertEqual(mode?.intValue, 0o600, path)
        }
        // Tokens never appear in logs: stderr of a send has none.
        for token in fixture.tokenOfRow.prefix(50) where token.count >= 64 {
            XCTAssertFalse(run.stderr.contains(token))
        }
    }

    func testNDJSONFromStdinWithCSVResultsAndJSONSummary() throws {
        let fixture = try makeFixture(rows: 10)
        let mock = try Mock(directory: fixture.directory, extra: [])
        let good = String(repeating: "ab", count: 32), dead = "dead" + String(repeating: "0", count: 60)
        let ndjson = [
            #"{"token":"\#(good)","first_name":"Ann","device_id":"x1"}"#,
            "",
            #"{"token":"\#(dead)","first_name":"\u0411\u043e\u0440\u0438\u0441","device_id":"x2"}"#,
            #"{"token": 12, "first_name": "broken"#,
            #"{"first_name":"no token","device_id":"x4"}"#,
        ].joined(separator: "\n") + "\n"
        let input = fixture.directory + "/devices.ndjson"
        try ndjson.write(toFile: input, atomically: true, encoding: .utf8)
        var arguments = sendArguments(fixture, mock, extra: ["--format", "ndjson", "--results-format", "csv",
                                                             "--summary", fixture.directory + "/summary.json"])
        arguments[0] = "-"
        let process = Process()
        process.executableURL = URL(fileURLWithPath: BinaryTests.binary)
        process.arguments = ["send"] + arguments
        process.standardInput = try FileHandle(forReadingFrom: URL(fileURLWithPath: input))
        let errors = Pipe()
        process.standardOutput = FileHandle.nullDevice
        process.standardError = errors
        try process.run()
        let stderr = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        _ = mock.stop()
        XCTAssertEqual(process.terminationStatus, 0, stderr)
        let csv = try String(contentsOfFile: fixture.directory + "/results.ndjson", encoding: .utf8).split(separator: "\n")
        XCTAssertEqual(csv.first.map(String.init), String(ResultsHeader.csv.dropLast()))
        XCTAssertEqual(csv.count, 5, "header + 4 rows: \(csv)")
        XCTAssertTrue(csv.contains { $0.hasPrefix("1,x1,\(good),apns,delivered,200,") })
        XCTAssertTrue(csv.contains { $0.hasPrefix("2,x2,\(dead),apns,pruned,410,Unregistered,") })
        XCTAssertTrue(csv.contains { $0.hasPrefix("3,,,,invalid,,MalformedRow,") }, "\(csv)")
        XCTAssertTrue(csv.contains { $0.hasPrefix("4,x4,,apns,invalid,,MissingToken,") }, "\(csv)")
        let summary = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: fixture.directory + "/summary.json"))) as? [String: Any]
        XCTAssertEqual(summary?["rows"] as? Int, 4)
        XCTAssertEqual((summary?["outcomes"] as? [String: Int])?["invalid"], 2)
        XCTAssertEqual(summary?["exit_status"] as? Int, 0)
    }

    func testSendHelpNamesEveryUserFacingFlag() throws {
        let help = try runPushcast(["send", "--help"])
        XCTAssertEqual(help.status, 0)
        for flag in ["--payload", "--apns-topic", "--push-type", "--priority", "--expiration", "--collapse-id", "--campaign",
                     "--apns-key", "--apns-key-id", "--apns-team-id", "--apns-cert", "--apns-cert-password-env",
                     "--apns-environment", "--apns-endpoint", "--ca-file", "--connections", "--streams", "--max-attempts",
                     "--retry-unknown", "--request-timeout", "--results", "--results-format", "--prune", "--summary",
                     "--progress", "--quiet", "--dry-run", "--format", "--id-column", "--provider"] {
            XCTAssertTrue(help.stdout.contains(flag), "send --help lacks \(flag)")
        }
        let missingTopic = try runPushcast(["send", "x.csv", "--payload", "p.json"])
        XCTAssertEqual(missingTopic.status, 2)
        let badPriority = try runPushcast(["send", "x.csv", "--priority", "7"])
        XCTAssertEqual(badPriority.status, 2)
    }
}

/// The CSV results header, as the binary writes it.
enum ResultsHeader {
    static let csv = "row,id,token,provider,outcome,status,reason,apns_id,fcm_name,location,unregistered_at,attempts,latency_ms,duplicate_of,error\n"
}
