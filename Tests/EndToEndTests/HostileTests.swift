import Foundation
import XCTest

/// Hostile servers and files, end to end: `pushcast send` against `pushcast mock --misbehave`
/// over real TLS, and exports that used to lose or misroute rows. Every run must end by itself,
/// in bounded time, with a diagnosis; a row has a results line or is left unsent, never both.
final class HostileTests: XCTestCase {
    static let apnsToken = String(repeating: "ab", count: 32)
    static let fcmToken = "fGz1xQ:APA91b" + String(repeating: "Qx9_-", count: 28)

    private var directory = ""

    override func setUpWithError() throws {
        try BinaryTests.requireBinary()
        directory = NSTemporaryDirectory() + "pushcast-hostile-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: directory)
    }

    private func write(_ name: String, _ text: String) throws -> String {
        let path = directory + "/" + name
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    private func startMock(_ extra: [String]) throws -> SendTests.Mock {
        try SendTests.Mock(directory: directory, extra: extra)
    }

    private func sendArguments(_ input: String, _ mock: SendTests.Mock, payload: String) -> [String] {
        [input, "--payload", payload, "--apns-topic", "com.example.app",
         "--apns-key", mock.keyPath, "--apns-key-id", mock.keyID, "--apns-team-id", mock.teamID,
         "--apns-endpoint", "https://127.0.0.1:\(mock.port)", "--ca-file", mock.caFile,
         "--results", directory + "/results.ndjson", "--prune", directory + "/prune.csv", "--quiet"]
    }

    private func resultLines() throws -> [[String: Any]] {
        let text = (try? String(contentsOfFile: directory + "/results.ndjson", encoding: .utf8)) ?? ""
        return try text.split(separator: "\n").map { try XCTUnwrap(JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]) }
    }

    // MARK: - Finding 5: an NDJSON row's columns are its own keys

    func testNDJSONRowsRouteByTheirOwnKeysAndNeverPruneAValidToken() throws {
        let input = try write("tokens.ndjson", [
            #"{"token": "\#(Self.apnsToken)"}"#,
            #"{"token": "\#(Self.fcmToken)", "platform": "android", "name": "Ann"}"#,
            #"{"token": "\#(String(repeating: "cd", count: 32))", "platform": "bogus"}"#,
            #"{"token": "\#(String(repeating: "ef", count: 32))", "name": "Bo"}"#,
        ].joined(separator: "\n") + "\n")
        // The placeholder's key first appears on line 2: it must not stop the run.
        let payload = try write("payload.json", #"{"aps":{"alert":"hi {{name}}"}}"#)
        let mock = try startMock([])
        let run = try runPushcast(["send"] + sendArguments(input, mock, payload: payload), seconds: 60)
        _ = mock.stop()
        XCTAssertEqual(run.status, 1, run.stderr)
        let byRow = Dictionary(uniqueKeysWithValues: try resultLines().map { ($0["row"] as? Int ?? 0, $0) })
        XCTAssertEqual(byRow[1]?["outcome"] as? String, "delivered")
        XCTAssertEqual(byRow[2]?["reason"] as? String, "ProviderNotConfigured", "\(byRow[2] ?? [:])")
        XCTAssertEqual(byRow[3]?["reason"] as? String, "UnknownProvider", "\(byRow[3] ?? [:])")
        XCTAssertEqual(byRow[4]?["outcome"] as? String, "delivered")
        let prune = try String(contentsOfFile: directory + "/prune.csv", encoding: .utf8)
        XCTAssertFalse(prune.contains(Self.fcmToken), "a valid FCM token reached the prune file")
        let bodies = mock.log.compactMap { $0["token"] as? String }
        XCTAssertEqual(Set(bodies), [Self.apnsToken, String(repeating: "ef", count: 32)])
    }

    func testNDJSONAMalformedFirstLineAndAnUnknownPlaceholder() throws {
        let input = try write("tokens.ndjson", "{oops\n" + #"{"token": "\#(Self.apnsToken)", "name": "A"}"# + "\n")
        let good = try write("good.json", #"{"aps":{"alert":"hi {{name}}"}}"#)
        let mock = try startMock([])
        defer { _ = mock.stop() }
        let run = try runPushcast(["send"] + sendArguments(input, mock, payload: good), seconds: 60)
        XCTAssertEqual(run.status, 0, "a malformed row is an expected outcome: \(run.stderr)")
        let lines = try resultLines()
        XCTAssertEqual(lines.count, 2)
        XCTAssertEqual(lines.first { $0["row"] as? Int == 1 }?["reason"] as? String, "MalformedRow")
        XCTAssertEqual(lines.first { $0["row"] as? Int == 2 }?["outcome"] as? String, "delivered")

        // A placeholder that no line holds stops the run before sending, naming it.
        try FileManager.default.removeItem(atPath: directory + "/results.ndjson")
        let bad = try write("bad.json", #"{"aps":{"alert":"hi {{nobody}}"}}"#)
        let refused = try runPushcast(["send"] + sendArguments(input, mock, payload: bad), seconds: 60)
        XCTAssertEqual(refused.status, 2, refused.stderr)
        XCTAssertTrue(refused.stderr.contains("nobody"), refused.stderr)
    }

    // MARK: - Finding 6: check prints no whole token

    func testCheckRedactsDeviceTokens() throws {
        let input = try write("tokens.csv", "token,platform\n\(Self.apnsToken),ios\n")
        let payload = try write("payload.json", #"{"aps":{"alert":"hi"}}"#)
        let mock = try startMock([])
        _ = mock.stop()
        let run = try runPushcast(["check"] + sendArguments(input, mock, payload: payload), seconds: 60)
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertTrue(run.stdout.contains("first APNs request"), run.stdout)
        XCTAssertTrue(run.stdout.contains(String(Self.apnsToken.prefix(8))), run.stdout)
        for text in [run.stdout, run.stderr] {
            XCTAssertFalse(text.contains(Self.apnsToken), "a whole device token was printed: \(text)")
        }
    }

    // MARK: - Findings 1, 2, 3: every hostile server ends the run in bounded time, with a diagnosis

    /// One `--misbehave` mode: the exit statuses allowed, what stderr must say, and the reasons
    /// allowed on the rows that do get a line (the rest are left unsent: no line at all).
    struct Hostile {
        let mode: String
        let statuses: Set<Int32>
        let diagnoses: [String]
        let reasons: Set<String>
        var extra: [String] = []
    }

    static let hostiles = [
        Hostile(mode: "refuse-all", statuses: [2], diagnoses: ["every stream refused (RST_STREAM REFUSED_STREAM)"], reasons: ["RefusedStream"]),
        // Resets leave each row's fate unknown at once; a slow machine may also trip the breaker.
        Hostile(mode: "reset-all", statuses: [1, 2], diagnoses: ["", "every stream reset (RST_STREAM error code 2)"], reasons: ["StreamReset"]),
        Hostile(mode: "goaway-zero", statuses: [2], diagnoses: ["GOAWAY with last-stream-id 0 on every connection (8 in a row)"], reasons: []),
        Hostile(mode: "close-after-handshake", statuses: [2],
                diagnoses: ["every connection closed right after the TLS handshake (8 in a row)"], reasons: []),
        Hostile(mode: "silent", statuses: [2], diagnoses: ["no answer for 5 s (--stall-timeout)"], reasons: ["Timeout", "ConnectionLost"],
                extra: ["--stall-timeout", "5s"]),
        Hostile(mode: "garbage-after-preface", statuses: [2], diagnoses: ["protocol error from the server"], reasons: []),
    ]

    func testEveryMisbehavingServerEndsTheRunWithADiagnosis() throws {
        var lines = ["device_id,token"]
        for i in 0..<2000 { lines.append("device-\(i),\(String(format: "%08x", i))\(String(repeating: "1", count: 56))") }
        let input = try write("tokens.csv", lines.joined(separator: "\n") + "\n")
        let payload = try write("payload.json", #"{"aps":{"alert":"hi"}}"#)
        for hostile in Self.hostiles {
            try? FileManager.default.removeItem(atPath: directory + "/results.ndjson")
            let mock = try startMock(["--misbehave", hostile.mode])
            let started = Date()
            let run = try runPushcast(["send"] + sendArguments(input, mock, payload: payload) + hostile.extra, seconds: 90)
            let seconds = Date().timeIntervalSince(started)
            _ = mock.stop()
            XCTAssertLessThan(seconds, 60, "\(hostile.mode): the run took \(seconds) s")
            XCTAssertTrue(hostile.statuses.contains(run.status), "\(hostile.mode): exit \(run.status): \(run.stderr)")
            if run.status == 2 {
                XCTAssertTrue(hostile.diagnoses.contains { !$0.isEmpty && run.stderr.contains($0) }, "\(hostile.mode): \(run.stderr)")
            }
            let results = try resultLines()
            XCTAssertEqual(Set(results.compactMap { $0["row"] as? Int }).count, results.count, "\(hostile.mode): a row has two lines")
            for line in results {
                // Requests on the wire when the breaker trips end unknown (ConnectionLost): their fate is unknown.
                let reason = line["reason"] as? String ?? ""
                XCTAssertTrue(hostile.reasons.contains(reason) || reason == "ConnectionLost", "\(hostile.mode): \(line)")
            }
            if run.status == 1 { XCTAssertEqual(results.count, 2000, "\(hostile.mode): a finished run has a line per row") }
            XCTAssertFalse(mock.log.contains { $0["status"] as? Int == 200 }, "\(hostile.mode): the mock delivered something")
        }
    }

    // MARK: - Finding 4: a full disk loses nothing

    /// Runs `body` with a fresh 24 MiB tmpfs mounted at a new directory (root only: CI and the
    /// development machines run as root), unmounted afterwards.
    private func withSmallFileSystem(_ body: (String) throws -> Void) throws {
        guard getuid() == 0 else { throw XCTSkip("mounting a small tmpfs needs root") }
        let mountPoint = directory + "/small"
        try FileManager.default.createDirectory(atPath: mountPoint, withIntermediateDirectories: true)
        let mount = Process()
        mount.executableURL = URL(fileURLWithPath: "/bin/mount")
        mount.arguments = ["-t", "tmpfs", "-o", "size=24m", "tmpfs", mountPoint]
        try mount.run()
        mount.waitUntilExit()
        XCTAssertEqual(mount.terminationStatus, 0, "mount -t tmpfs failed")
        defer {
            let umount = Process()
            umount.executableURL = URL(fileURLWithPath: "/bin/umount")
            umount.arguments = [mountPoint]
            try? umount.run()
            umount.waitUntilExit()
        }
        try body(mountPoint)
    }

    func testAFullDiskStopsSendingAndRecordsEveryNotificationSent() throws {
        try withSmallFileSystem { small in
            let rows = 60_000
            var lines = ["device_id,token"]
            lines.reserveCapacity(rows + 1)
            for i in 0..<rows { lines.append("device-\(i),\(String(format: "%08x", i))\(String(repeating: "0", count: 56))") }
            let input = try write("tokens.csv", lines.joined(separator: "\n") + "\n")
            let payload = try write("payload.json", #"{"aps":{"alert":"hi {{device_id}}"}}"#)
            let mock = try startMock([])
            var arguments = sendArguments(input, mock, payload: payload) + ["--connections", "2", "--streams", "100"]
            arguments[arguments.firstIndex(of: directory + "/results.ndjson")!] = small + "/results.ndjson"
            arguments[arguments.firstIndex(of: directory + "/prune.csv")!] = small + "/prune.csv"
            let run = try runPushcast(["send"] + arguments, seconds: 120)
            _ = mock.stop()
            XCTAssertEqual(run.status, 3, "interrupted, resumable: \(run.stderr)")
            XCTAssertTrue(run.stderr.contains("disk is full"), run.stderr)
            XCTAssertTrue(run.stderr.contains("rows: "), "the summary is printed: \(run.stderr)")
            let text = try String(contentsOfFile: small + "/results.ndjson", encoding: .utf8)
            XCTAssertTrue(text.hasSuffix("\n"), "the last line is torn")
            var delivered = Set<String>()
            for line in text.split(separator: "\n") {
                let object = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], String(line))
                if object["outcome"] as? String == "delivered" { delivered.insert(object["token"] as? String ?? "") }
            }
            XCTAssertGreaterThan(delivered.count, 1000, "the disk filled too early to show anything")
            XCTAssertLessThan(delivered.count, rows, "the disk never filled")
            let answered = Set(mock.log.filter { $0["status"] as? Int == 200 }.compactMap { $0["token"] as? String })
            XCTAssertEqual(answered, delivered, "every notification the mock delivered is in the results file")
        }
    }
}
