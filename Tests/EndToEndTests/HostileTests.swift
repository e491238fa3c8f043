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

    /// One `--misbehave` mode: the exit status, what stderr must say, and the reasons allowed on
    /// the rows that do get a line (the rest are left unsent: no line at all).
    struct Hostile {
        let mode: String
        let status: Int32
        let diagnosis: String
        let reasons: Set<String>
        /// `send` options (the resume uses the same command line).
        var extra: [String] = []
        /// `mock` options besides `--misbehave MODE`.
        var mockExtra: [String] = []
        /// Whether the hostile mock's responder answers (and logs 200) some requests.
        var answers = false
    }

    static let hostiles = [
        Hostile(mode: "refuse-all", status: 2, diagnosis: "every stream refused (RST_STREAM REFUSED_STREAM)", reasons: ["RefusedStream"]),
        Hostile(mode: "reset-all", status: 2, diagnosis: "every stream reset (RST_STREAM error code 2), 64 in a row", reasons: ["StreamReset"]),
        Hostile(mode: "goaway-zero", status: 2, diagnosis: "GOAWAY with last-stream-id 0 on every connection (8 in a row)", reasons: []),
        Hostile(mode: "close-after-handshake", status: 2,
                diagnosis: "every connection closed right after the TLS handshake (8 in a row)", reasons: []),
        Hostile(mode: "silent", status: 2, diagnosis: "no answer for 3 s (--stall-timeout)", reasons: ["Timeout"],
                extra: ["--stall-timeout", "3s"]),
        Hostile(mode: "garbage-after-preface", status: 2, diagnosis: "protocol error from the server", reasons: []),
        Hostile(mode: "huge-body", status: 2, diagnosis: "every response body over 64 KiB (Limits.responseBodyBytesAccepted; streams reset), 64 in a row",
                reasons: ["ResponseTooLarge"]),
        Hostile(mode: "huge-headers", status: 2,
                diagnosis: "every response header block over 64 KiB (Limits.responseHeaderBytesAccepted; streams reset), 64 in a row",
                reasons: ["ResponseTooLarge"]),
        // Answers come a byte every half second: none completes before --request-timeout.
        Hostile(mode: "trickle", status: 2, diagnosis: "but completed no answer: it trickles its answers, slower than --request-timeout",
                reasons: ["Timeout"], extra: ["--stall-timeout", "3s", "--request-timeout", "2s"], answers: true),
        Hostile(mode: "window-zero", status: 2,
                diagnosis: "no answer for 3 s (--stall-timeout); the server never opened its flow-control window (SETTINGS_INITIAL_WINDOW_SIZE 0, no WINDOW_UPDATE)",
                reasons: ["FlowControlBlocked"], extra: ["--stall-timeout", "3s"]),
    ]

    /// Servers that answer 500 requests and then turn bad: a per-request mode and one that acts
    /// when a connection starts. Fewer streams, so that rows are left when it turns.
    static let turningBad = [
        Hostile(mode: "refuse-all", status: 3, diagnosis: "every stream refused (RST_STREAM REFUSED_STREAM)", reasons: ["RefusedStream"],
                extra: ["--connections", "2", "--streams", "50"], mockExtra: ["--misbehave-after", "500"], answers: true),
        Hostile(mode: "close-after-handshake", status: 3, diagnosis: "every connection closed right after the TLS handshake (8 in a row)",
                reasons: [], extra: ["--connections", "2", "--streams", "50"], mockExtra: ["--misbehave-after", "500"],
                answers: true),
    ]

    func testEveryMisbehavingServerEndsTheRunWithADiagnosisAndResumesOnce() throws {
        try runHostiles(Self.hostiles)
    }

    func testAServerThatTurnsBadMidRunStopsResumablyAndResumesOnce() throws {
        try runHostiles(Self.turningBad)
    }

    /// For each hostile server: 2,000 rows against it end within 60 s with its exit status and
    /// diagnosis, each row with one line or none; then `send --resume` with the same command line
    /// against a healthy mock (the same provider key) finishes the campaign: one line per row,
    /// each row that had none sent exactly once, and no token delivered twice by the two.
    private func runHostiles(_ hostiles: [Hostile]) throws {
        var lines = ["device_id,token"]
        for i in 0..<2000 { lines.append("device-\(i),\(String(format: "%08x", i))\(String(repeating: "1", count: 56))") }
        let input = try write("tokens.csv", lines.joined(separator: "\n") + "\n")
        let payload = try write("payload.json", #"{"aps":{"alert":"hi"}}"#)
        // One provider key for every mock: the hostile one and the healthy one that resumes.
        let keys = try SendTests.Mock(directory: directory, extra: [])
        _ = keys.stop()
        let sharedKey = ["--apns-public-key", directory + "/apns-key.pub.pem", "--apns-key-id", keys.keyID, "--apns-team-id", keys.teamID]
        for hostile in hostiles {
            let place = directory + "/" + hostile.mode
            func startMock(_ name: String, _ arguments: [String]) throws -> MockProcess {
                try FileManager.default.createDirectory(atPath: place + name, withIntermediateDirectories: true)
                return try MockProcess(directory: place + name, arguments: ["--port", "0", "--workers", "2", "--duration", "300s"] + arguments + sharedKey,
                                       waitFor: ["PORT"])
            }
            let mock = try startMock("/hostile", ["--misbehave", hostile.mode] + hostile.mockExtra)
            func arguments(port: Int, caFile: String) -> [String] {
                ["send", input, "--payload", payload, "--apns-topic", "com.example.app",
                 "--apns-key", keys.keyPath, "--apns-key-id", keys.keyID, "--apns-team-id", keys.teamID,
                 "--apns-endpoint", "https://127.0.0.1:\(port)", "--ca-file", caFile,
                 "--results", place + "/results.ndjson", "--prune", place + "/prune.csv", "--quiet"] + hostile.extra
            }
            let started = Date()
            let run = try runPushcast(arguments(port: mock.port, caFile: mock.caFile), seconds: 90)
            let seconds = Date().timeIntervalSince(started)
            _ = mock.stop()
            let what = "\(hostile.mode) \(hostile.mockExtra)"
            print("hostile \(what): exit \(run.status) in \(String(format: "%.1f", seconds)) s")
            XCTAssertLessThan(seconds, 60, "\(what): the run took \(seconds) s")
            XCTAssertEqual(run.status, hostile.status, "\(what): \(run.stderr)")
            XCTAssertTrue(run.stderr.contains(hostile.diagnosis), "\(what): \(run.stderr)")
            XCTAssertEqual(run.stderr.contains("turned bad mid-run: resumable with send --resume"), hostile.status == 3, "\(what): \(run.stderr)")
            let first = try resultsByRow(place + "/results.ndjson")
            for line in first.values where line["outcome"] as? String != "delivered" {
                // Requests on the wire when the breaker trips end unknown: ConnectionLost, or
                // AnswerCut when their answer's status had already arrived (a huge header block
                // cut mid-way). Either way their fate is unknown and they are never resent.
                let reason = line["reason"] as? String ?? ""
                let cutOnTheWire = (reason == "ConnectionLost" || reason == "AnswerCut") && line["outcome"] as? String == "unknown"
                XCTAssertTrue(hostile.reasons.contains(reason) || cutOnTheWire, "\(what): \(line)")
            }
            let hostileDelivered = mock.log.filter { $0["status"] as? Int == 200 }.compactMap { $0["token"] as? String }
            if !hostile.answers { XCTAssertTrue(hostileDelivered.isEmpty, "\(what): the mock delivered something") }
            if hostile.status == 3 { XCTAssertGreaterThan(first.count, 0, "\(what): it answered before turning") }
            XCTAssertLessThan(first.count, 2000, "\(what): nothing was left to resume")

            // The same command line, resumed against a healthy mock.
            let healthy = try startMock("/healthy", [])
            let resumed = try runPushcast(arguments(port: healthy.port, caFile: healthy.caFile) + ["--resume"], seconds: 120)
            _ = healthy.stop()
            let final = try resultsByRow(place + "/results.ndjson")
            XCTAssertEqual(final.count, 2000, "\(what): one line per row")
            let unfinished = final.values.contains { ["failed", "unknown"].contains($0["outcome"] as? String ?? "") }
            XCTAssertEqual(resumed.status, unfinished ? 1 : 0, "\(what): \(resumed.stderr)")
            let sentAgain = healthy.log.compactMap { $0["token"] as? String }
            let unsent = Set((1...2000).filter { first[$0] == nil }.compactMap { final[$0]?["token"] as? String })
            XCTAssertEqual(sentAgain.count, unsent.count, "\(what): the resume sent a row more than once or missed one")
            XCTAssertTrue(Set(sentAgain) == unsent, "\(what): the resume sent rows that had a line: "
                          + "\(Set(sentAgain).subtracting(unsent).prefix(3)), or missed some: \(unsent.subtracting(sentAgain).prefix(3))")
            let changed = first.filter { final[$0.key]?["outcome"] as? String != $0.value["outcome"] as? String }
            XCTAssertTrue(changed.isEmpty, "\(what): \(changed.count) lines of the hostile run changed, e.g. row \(changed.first?.key ?? 0)")
            var deliveries: [String: Int] = [:]
            for token in hostileDelivered + healthy.log.filter({ $0["status"] as? Int == 200 }).compactMap({ $0["token"] as? String }) {
                deliveries[token, default: 0] += 1
            }
            XCTAssertEqual(deliveries.values.max() ?? 0, 1, "\(what): a token was delivered twice")
            let phantom = final.values.filter { $0["outcome"] as? String == "delivered" && deliveries[$0["token"] as? String ?? ""] != 1 }
            XCTAssertTrue(phantom.isEmpty, "\(what): \(phantom.count) rows recorded delivered that no mock delivered, e.g. \(phantom.first ?? [:])")
        }
    }

    // MARK: - Finding 4: a full disk loses nothing

    /// Runs `body` with a fresh 24 MiB tmpfs mounted at a new directory (root only: CI and the
    /// development machines run as root), unmounted afterwards.
    private func withSmallFileSystem(megabytes: Int = 24, _ body: (String) throws -> Void) throws {
        guard getuid() == 0 else { throw XCTSkip("mounting a small tmpfs needs root") }
        let mountPoint = directory + "/small"
        try FileManager.default.createDirectory(atPath: mountPoint, withIntermediateDirectories: true)
        let mount = Process()
        mount.executableURL = URL(fileURLWithPath: "/bin/mount")
        mount.arguments = ["-t", "tmpfs", "-o", "size=\(megabytes)m", "tmpfs", mountPoint]
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
            // About 250 bytes a line: 30 MB of results, more than the 24 MiB there is.
            let rows = 120_000
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
            XCTAssertTrue(run.stderr.contains(" is free)"), "the message says what is needed and what is free: \(run.stderr)")
        }
    }

    /// A campaign that needs about 2.5 MB on a disk with 8 MiB: it goes through in one run. Space
    /// is reserved for the rows left at the measured line size, not 55 MB up front (which
    /// stopped each attempt after a few rows).
    func testASmallDiskThatHoldsTheCampaignIsEnough() throws {
        try withSmallFileSystem(megabytes: 8) { small in
            let rows = 10_000
            var lines = ["device_id,token"]
            for i in 0..<rows { lines.append("device-\(i),\(String(format: "%08x", i))\(String(repeating: "0", count: 56))") }
            let input = try write("tokens.csv", lines.joined(separator: "\n") + "\n")
            let payload = try write("payload.json", #"{"aps":{"alert":"hi {{device_id}}"}}"#)
            let mock = try startMock([])
            var arguments = sendArguments(input, mock, payload: payload)
            arguments[arguments.firstIndex(of: directory + "/results.ndjson")!] = small + "/results.ndjson"
            arguments[arguments.firstIndex(of: directory + "/prune.csv")!] = small + "/prune.csv"
            let run = try runPushcast(["send"] + arguments, seconds: 120)
            _ = mock.stop()
            XCTAssertEqual(run.status, 0, run.stderr)
            XCTAssertEqual(try resultsByRow(small + "/results.ndjson").count, rows)
        }
    }
}
