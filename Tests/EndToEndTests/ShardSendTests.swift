import Foundation
import XCTest

/// `send --shard I/N` and `pushcast merge` end to end: the binary against `pushcast mock --fcm`
/// over real TLS. N shards of a mixed APNs/FCM file merge into the unsharded run's results;
/// shards of other campaigns or inputs, and missing shards, are refused and named; a shard
/// stopped by SIGTERM and resumed ends with every row exactly once.
final class ShardSendTests: XCTestCase {
    private var directory = ""
    private var mock: FCMSendTests.Mock!

    override func setUpWithError() throws {
        try BinaryTests.requireBinary()
        directory = NSTemporaryDirectory() + "pushcast-shard-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        mock = try FCMSendTests.Mock(directory: directory, extra: [])
        try #"{"aps":{"alert":{"title":"Hi {{first_name}}"}}}"#.write(toFile: directory + "/payload.json", atomically: true, encoding: .utf8)
        try #"{"notification":{"title":"Hi {{first_name}}"}}"#.write(toFile: directory + "/message.json", atomically: true, encoding: .utf8)
    }

    override func tearDown() {
        _ = mock?.stop()
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// A mixed file: iOS and Android rows, repeated tokens, dead tokens, invalid tokens, unknown
    /// platforms and malformed rows (an extra field).
    private func writeInput(_ name: String, rows: Int) throws -> String {
        var generator = SystemRandomNumberGenerator()
        func next() -> UInt64 { generator.next() }
        var lines = ["device_id,token,platform,first_name"]
        var earlier: [(String, String)] = []
        for i in 1...rows {
            let ios = i % 2 == 1
            var platform = ios ? "ios" : "android"
            var token = ios ? String(format: "%016llx%016llx%016llx%016llx", next() & 0x3FFF_FFFF_FFFF_FFFF, next(), next(), next())
                : "f\(next()):APA91b\(next())x\(next())"
            switch i % 41 {
            case 3 where !earlier.isEmpty: (token, platform) = earlier[Int(next() % UInt64(earlier.count))]
            case 5: token = "dead" + token.dropFirst(4)
            case 7: token = ios ? "zz" + token.dropFirst(2) : "has space" + token
            case 9: platform = "symbian"
            case 11:
                lines.append("d\(i),\(token),\(platform),N\(i),extra")
                continue
            default: earlier.append((token, platform))
            }
            lines.append("d\(i),\(token.contains(" ") ? "\"\(token)\"" : token),\(platform),N\(i)")
        }
        let path = directory + "/" + name
        try (lines.joined(separator: "\n") + "\n").write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    private func send(_ input: String, _ extra: [String], campaign: String = "spring") throws -> PushcastRun {
        try runPushcast(["send", input, "--payload", directory + "/payload.json", "--fcm-payload", directory + "/message.json"]
                        + mock.sendFlags + ["--quiet", "--campaign", campaign] + extra, seconds: 300)
    }

    private func shardFlags(_ index: Int, of count: Int) -> [String] {
        ["--shard", "\(index)/\(count)", "--results", directory + "/r-{shard}.ndjson", "--prune", directory + "/p-{shard}.csv",
         "--summary", directory + "/s-{shard}.json"]
    }

    private func merge(_ input: String, shards: Int, _ extra: [String] = []) throws -> PushcastRun {
        try runPushcast(["merge", "--input", input, "--shards", "\(shards)", "--results-pattern", directory + "/r-{shard}.ndjson",
                         "--prune-pattern", directory + "/p-{shard}.csv", "--summary-pattern", directory + "/s-{shard}.json",
                         "--results", directory + "/merged.ndjson", "--prune", directory + "/merged.prune.csv",
                         "--summary", directory + "/merged.json"] + extra)
    }

    /// A results line without what differs from run to run: latency, and FCM's message name
    /// (the mock makes a new one per message) and when a dead token died (the mock's "a day ago").
    private func comparable(_ line: [String: Any]) -> NSDictionary {
        var line = line
        line["latency_ms"] = nil
        if let name = line["fcm_name"] as? String { line["fcm_name"] = name.isEmpty ? "" : "<name>" }
        if line["unregistered_at"] is String { line["unregistered_at"] = "<time>" }
        return line as NSDictionary
    }

    func testThreeShardsMergeIntoTheUnshardedResults() throws {
        let rows = 4000
        let input = try writeInput("tokens.csv", rows: rows)
        let whole = try send(input, ["--results", directory + "/whole.ndjson", "--prune", directory + "/whole.prune.csv"])
        XCTAssertTrue([0, 1].contains(whole.status), whole.stderr)
        for index in 0..<3 {
            let run = try send(input, shardFlags(index, of: 3))
            XCTAssertTrue([0, 1].contains(run.status), run.stderr)
        }
        let merged = try merge(input, shards: 3)
        XCTAssertEqual(merged.status, 0, merged.stderr)
        XCTAssertTrue(merged.stderr.contains("4000 of 4000 rows"), merged.stderr)

        let expected = try resultsByRow(directory + "/whole.ndjson")
        let got = try resultsByRow(directory + "/merged.ndjson")
        XCTAssertEqual(got.count, rows)
        for row in 1...rows {
            let a = try XCTUnwrap(expected[row]), b = try XCTUnwrap(got[row])
            XCTAssertEqual(comparable(a), comparable(b), "row \(row)")
            // apns-ids come from (campaign, token): the same in both runs.
            XCTAssertEqual(a["apns_id"] as? String, b["apns_id"] as? String)
        }
        XCTAssertGreaterThan(got.values.filter { $0["outcome"] as? String == "duplicate" }.count, 50)
        XCTAssertGreaterThan(got.values.filter { $0["apns_id"] is String }.count, 1500)
        // Row order, mode 0600, and the same prune lines.
        let text = try String(contentsOfFile: directory + "/merged.ndjson", encoding: .utf8)
        let order = text.split(separator: "\n").map { Int($0.dropFirst(7).prefix { $0.isNumber })! }
        XCTAssertEqual(order, Array(1...rows))
        for file in ["merged.ndjson", "merged.prune.csv"] {
            let mode = try FileManager.default.attributesOfItem(atPath: directory + "/" + file)[.posixPermissions] as? Int
            XCTAssertEqual(mode, 0o600, file)
        }
        // The same prune lines, but for when a dead token died (the mock says "a day ago", to the second).
        let prune = { (name: String) in
            Set(try String(contentsOfFile: self.directory + "/" + name, encoding: .utf8).split(separator: "\n")
                .map { $0.split(separator: ",", omittingEmptySubsequences: false).enumerated().filter { $0.offset != 3 }.map(\.element) })
        }
        XCTAssertEqual(try prune("merged.prune.csv"), try prune("whole.prune.csv"))
        let summary = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: directory + "/merged.json"))) as? [String: Any])
        XCTAssertEqual(summary["rows"] as? Int, rows)
        XCTAssertEqual(summary["shards"] as? Int, 3)
        XCTAssertEqual(summary["input_rows"] as? Int, rows)
        XCTAssertEqual(summary["campaign"] as? String, "spring")
    }

    func testMergeRefusesOtherCampaignsAndInputsAndNamesAMissingShard() throws {
        let input = try writeInput("tokens.csv", rows: 1200)
        let other = try writeInput("other.csv", rows: 1200)
        for index in 0..<2 { XCTAssertTrue([0, 1].contains(try send(input, shardFlags(index, of: 3)).status)) }
        // Shard 2 of another campaign id.
        XCTAssertTrue([0, 1].contains(try send(input, shardFlags(2, of: 3), campaign: "autumn").status))
        var merged = try merge(input, shards: 3)
        XCTAssertEqual(merged.status, 2, merged.stderr)
        XCTAssertTrue(merged.stderr.contains("different campaigns") && merged.stderr.contains("shard 2: campaign autumn"), merged.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory + "/merged.ndjson"))
        // Shard 2 of another input.
        XCTAssertTrue([0, 1].contains(try send(other, shardFlags(2, of: 3) + ["--force"]).status))
        merged = try merge(input, shards: 3)
        XCTAssertEqual(merged.status, 2, merged.stderr)
        XCTAssertTrue(merged.stderr.contains("shard 2") && merged.stderr.contains("another input"), merged.stderr)
        // The right shard 2, then shard 1 gone.
        XCTAssertTrue([0, 1].contains(try send(input, shardFlags(2, of: 3) + ["--force"]).status))
        XCTAssertEqual(try merge(input, shards: 3).status, 0)
        try FileManager.default.removeItem(atPath: directory + "/r-1.ndjson")
        merged = try merge(input, shards: 3)
        XCTAssertEqual(merged.status, 1, merged.stderr)
        XCTAssertTrue(merged.stderr.contains("shard 1 of 3") && merged.stderr.contains("rows missing"), merged.stderr)
    }

    func testShardOptionsAreCheckedBeforeAnythingIsSent() throws {
        let input = try writeInput("tokens.csv", rows: 50)
        var run = try send(input, ["--shard", "4/4"])
        XCTAssertEqual(run.status, 2)
        XCTAssertTrue(run.stderr.contains("below the count"), run.stderr)
        run = try send(input, ["--shard", "1/4", "--results", directory + "/r.ndjson"])
        XCTAssertEqual(run.status, 2)
        XCTAssertTrue(run.stderr.contains("{shard}"), run.stderr)
        run = try send(input, ["--shard", "auto", "--results", directory + "/r-{shard}.ndjson"])
        XCTAssertEqual(run.status, 2)
        XCTAssertTrue(run.stderr.contains("JOB_COMPLETION_INDEX"), run.stderr)
    }

    /// SIGTERM mid-shard (exit 3; the campaign-wide --rate, halved for each of the two shards,
    /// keeps it running ~5 s), then `send --resume` with the very same command line; the
    /// other shard; the merge has every row exactly once and no token reached the mock twice.
    func testAShardStoppedBySigtermResumesAndMergesExactlyOnce() throws {
        _ = mock.stop()
        try FileManager.default.createDirectory(atPath: directory + "/slow", withIntermediateDirectories: true)
        mock = try FCMSendTests.Mock(directory: directory + "/slow", extra: ["--latency-ms", "20"])
        let rows = 40_000
        let input = try writeInput("tokens.csv", rows: rows)
        let args = ["send", input, "--payload", directory + "/payload.json", "--fcm-payload", directory + "/message.json"]
            + mock.sendFlags + ["--quiet", "--campaign", "spring", "--resume", "--connections", "2", "--streams", "50",
                                "--fcm-connections", "2", "--fcm-streams", "50", "--rate", "apns=4000/s,fcm=4000/s"] + shardFlags(1, of: 2)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: BinaryTests.binary)
        process.arguments = args
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        Thread.sleep(forTimeInterval: 2)
        XCTAssertTrue(process.isRunning, "the shard finished before the signal: make it slower")
        kill(process.processIdentifier, SIGTERM)
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 3)
        let partial = try resultsByRow(directory + "/r-1.ndjson").count
        XCTAssertGreaterThan(partial, 0)
        let resumed = try runPushcast(Array(args), seconds: 300)
        XCTAssertTrue([0, 1].contains(resumed.status), resumed.stderr)
        let first = try send(input, shardFlags(0, of: 2) + ["--connections", "2", "--streams", "50"])
        XCTAssertTrue([0, 1].contains(first.status), first.stderr)
        let merged = try merge(input, shards: 2)
        XCTAssertEqual(merged.status, 0, merged.stderr)
        let byRow = try resultsByRow(directory + "/merged.ndjson")
        XCTAssertEqual(byRow.count, rows)
        XCTAssertLessThan(partial, try resultsByRow(directory + "/r-1.ndjson").count)
        var delivered = Set<String>()
        for entry in mock.log where entry["status"] as? Int == 200 && entry["path"] as? String != "/token" {
            let token = entry["token"] as? String ?? ""
            XCTAssertTrue(delivered.insert(token).inserted, "token \(token) delivered twice")
        }
    }
}
