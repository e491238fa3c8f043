import Foundation
import PushcastCore
import XCTest

/// docs/deploy/slurm/pushcast.sbatch on a real one-node Slurm (scripts/slurm-local.sh): a job
/// array of four shards sends a 100,000-row mixed APNs/FCM export to one `pushcast mock --fcm`;
/// one running task is cancelled with scancel (pushcast drains, exit 3), resubmitted for its index
/// with the same script (`--resume`), and runs to the end. `pushcast merge` then finds every row
/// exactly once, the mock's log shows no token delivered twice, and FCM's total rate at the mock,
/// while the four shards ran together, is within 5 % of the campaign-wide `--rate fcm=4000/s`.
///
/// Needs root (the daemons run as SlurmUser=root; `up` installs the packages when missing). The
/// cluster has its own state directory and ports, and tearDown takes it down whatever happened.
final class SlurmTests: XCTestCase {
    static let script = BinaryTests.root.appendingPathComponent("scripts/slurm-local.sh").path
    static let sbatchFile = BinaryTests.root.appendingPathComponent("docs/deploy/slurm/pushcast.sbatch").path
    static let rows = 100_000
    static let shards = 4
    static let fcmRate = 4000.0

    private var directory = ""
    private var clusterStarted = false
    private var mock: MockProcess?
    private let state = NSTemporaryDirectory() + "pushcast-slurm-test"

    private var clusterEnvironment: [String: String] {
        var environment = ProcessInfo.processInfo.environment
        environment["SLURM_LOCAL_DIR"] = state
        environment["SLURM_LOCAL_CTLD_PORT"] = "16817"
        environment["SLURM_LOCAL_D_PORT"] = "16818"
        environment["SLURM_LOCAL_TIMEOUT"] = "60"
        environment["SLURM_CONF"] = state + "/slurm.conf"
        for key in environment.keys where key.hasPrefix("SLURM_ARRAY_") || key.hasPrefix("SLURM_JOB") || key == "PUSHCAST_SHARD" {
            environment[key] = nil
        }
        return environment
    }

    override func setUpWithError() throws {
        try BinaryTests.requireBinary()
        guard getuid() == 0 else { throw XCTSkip("the one-node Slurm needs root (scripts/slurm-local.sh)") }
        directory = NSTemporaryDirectory() + "pushcast-slurm-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory + "/keys", withIntermediateDirectories: true)
    }

    override func tearDown() {
        if clusterStarted {
            let down = try? DeployTests.execute("/bin/bash", [Self.script, "down"], environment: clusterEnvironment, seconds: 120)
            XCTAssertEqual(down?.status, 0, "slurm-local.sh down: \(down?.output ?? "did not run")")
        }
        _ = mock?.stop()
        if !directory.isEmpty { try? FileManager.default.removeItem(atPath: directory) }
    }

    /// A Slurm client command (sbatch, squeue, scancel, scontrol) against the test's cluster.
    @discardableResult
    private func slurm(_ command: String, _ arguments: [String], extra: [String: String] = [:]) throws -> String {
        let run = try DeployTests.execute("/usr/bin/env", [command] + arguments,
                                          environment: clusterEnvironment.merging(extra) { $1 }, seconds: 60)
        XCTAssertEqual(run.status, 0, "\(command) \(arguments.joined(separator: " ")): \(run.output)")
        return run.output.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// `scontrol show job` fields of one array task, e.g. JobState and ExitCode.
    private func job(_ id: String) throws -> [String: String] {
        var fields: [String: String] = [:]
        for word in try slurm("scontrol", ["show", "job", id]).split(whereSeparator: { $0 == " " || $0 == "\n" }) {
            let pair = word.split(separator: "=", maxSplits: 1).map(String.init)
            if pair.count == 2 && fields[pair[0]] == nil { fields[pair[0]] = pair[1] }
        }
        return fields
    }

    private func waitUntil(_ what: String, seconds: Double, _ condition: () throws -> Bool) throws {
        let deadline = Date().addingTimeInterval(seconds)
        while try !condition() {
            guard Date() < deadline else {
                let queue = (try? slurm("squeue", ["--all"])) ?? ""
                let logs = ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).filter { $0.hasPrefix("slurm-") }.sorted()
                    .map { name in "--- \(name)\n" + ((try? String(contentsOfFile: directory + "/" + name, encoding: .utf8)) ?? "") }
                XCTFail("timed out after \(seconds) s waiting for \(what)\nsqueue:\n\(queue)\n\(logs.joined(separator: "\n"))")
                throw CocoaError(.userCancelled)
            }
            usleep(200_000)
        }
    }

    /// 100,000 rows, one in ten iOS, the rest Android, with dead tokens, invalid ones and duplicates.
    private func writeInput(_ path: String) throws {
        let random = SplitMix64(seed: 0x5EED_0012)
        func next() -> UInt64 { random.next() }
        let hex = Array("0123456789abcdef".utf8)
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-".utf8)
        var text = "device_id,token,platform,first_name\n"
        text.reserveCapacity(Self.rows * 140)
        var earlierTokens: [[String]] = [[], []]
        for i in 0..<Self.rows {
            let android = i % 10 != 0
            var bytes: [UInt8] = []
            if android {
                bytes = [UInt8(ascii: "f")]
                for _ in 0..<162 { bytes.append(alphabet[Int(next() % 64)]) }
                bytes[22] = UInt8(ascii: ":")
            } else {
                bytes.append(hex[Int(next() % 4)])
                for _ in 1..<64 { bytes.append(hex[Int(next() % 16)]) }
            }
            var token = String(decoding: bytes, as: UTF8.self)
            let side = android ? 1 : 0
            switch i % 200 {
            case 3, 103: token = "dead" + token.dropFirst(4)
            case 10: token = "zz" + token.dropFirst(2)
            case 11, 151: if !earlierTokens[side].isEmpty { token = earlierTokens[side][Int(next() % UInt64(earlierTokens[side].count))] }
            default: if earlierTokens[side].count < 500 { earlierTokens[side].append(token) }
            }
            text += "d\(i + 1),\(token),\(android ? "android" : "ios"),Name \(i % 1000)\n"
        }
        try text.write(toFile: path, atomically: true, encoding: .utf8)
    }

    func testFourShardsOnSlurmWithACancelledTaskResumedAndMerged() throws {
        let started = Date()
        let up = try DeployTests.execute("/bin/bash", [Self.script, "up"], environment: clusterEnvironment, seconds: 600)
        clusterStarted = true
        XCTAssertEqual(up.status, 0, "slurm-local.sh up: \(up.output)")
        guard up.status == 0 else { return }
        let upSeconds = Date().timeIntervalSince(started)

        let keys = directory + "/keys"
        let mock = try MockProcess(directory: directory, arguments: ["--port", "0", "--workers", "2", "--write-apns-key", keys, "--fcm",
                                                                    "--write-fcm-credentials", keys, "--duration", "600s"],
                                   waitFor: ["PORT", "APNS_KEY", "FCM_ENDPOINT", "FCM_CREDENTIALS"])
        self.mock = mock
        try writeInput(directory + "/tokens.csv")
        try #"{"aps":{"alert":{"title":"Hi {{first_name}}","body":"x"}}}"#.write(toFile: directory + "/payload.json", atomically: true, encoding: .utf8)
        try #"{"notification":{"title":"Hi {{first_name}}"},"data":{"device":"{{device_id}}"}}"#
            .write(toFile: directory + "/fcm-message.json", atomically: true, encoding: .utf8)

        // What a user sets before `sbatch` (Slurm hands the environment to the job); the extra
        // arguments point pushcast at the mock.
        let campaign: [String: String] = [
            "CAMPAIGN_DIR": directory, "PUSHCAST": BinaryTests.binary, "APNS_TOPIC": "com.example.app",
            "APNS_KEY_ID": mock.fields["APNS_KEY_ID"] ?? "", "APNS_TEAM_ID": mock.fields["APNS_TEAM_ID"] ?? "",
            "PUSHCAST_RATE": "apns=500/s,fcm=\(Int(Self.fcmRate))/s", "PUSHCAST_DRAIN_TIMEOUT": "20s",
            "PUSHCAST_EXTRA_ARGS": "--workers 1 --apns-endpoint https://127.0.0.1:\(mock.port) --fcm-endpoint \(mock.fields["FCM_ENDPOINT"] ?? "") --ca-file \(mock.caFile)",
        ]
        let submitArguments = ["--parsable", "--chdir=\(directory)", "--output=\(directory)/slurm-%A_%a.out"]
        let sendStarted = Date()
        let arrayJob = try slurm("sbatch", submitArguments + ["--array=0-\(Self.shards - 1)", Self.sbatchFile], extra: campaign)
        let results = (0..<Self.shards).map { "\(directory)/shards/results-\($0).ndjson" }

        // Every shard is sending once each results file has lines; let them run together a while,
        // then cancel task 3 as a user would.
        try waitUntil("every shard's first results", seconds: 90) {
            results.allSatisfy { ((try? FileManager.default.attributesOfItem(atPath: $0)[.size] as? Int) ?? 0) > 0 }
        }
        Thread.sleep(forTimeInterval: 8)
        let cancelled = "\(arrayJob)_3"
        let cancelMilliseconds = Int64(Date().timeIntervalSince1970 * 1000)
        try slurm("scancel", [cancelled])
        try waitUntil("task 3 to end after scancel", seconds: 60) { try job(cancelled)["JobState"] == "CANCELLED" }
        XCTAssertEqual(try job(cancelled)["ExitCode"], "3:0", "pushcast should drain and exit 3 (interrupted, resumable) on scancel's SIGTERM")

        // The same script for index 3 alone; PUSHCAST_SHARD names the shard, as this one-task array's size is not the campaign's.
        let resubmitted = try slurm("sbatch", submitArguments + ["--array=3", Self.sbatchFile],
                                    extra: campaign.merging(["PUSHCAST_SHARD": "3/\(Self.shards)"]) { $1 })
        try waitUntil("every task to finish", seconds: 150) {
            try slurm("squeue", ["--noheader", "--jobs=\(arrayJob),\(resubmitted)"]).isEmpty
        }
        let sendSeconds = Date().timeIntervalSince(sendStarted)
        for task in (0..<3).map({ "\(arrayJob)_\($0)" }) + ["\(resubmitted)_3"] {
            let fields = try job(task)
            XCTAssertEqual(fields["JobState"], "COMPLETED", "\(task): \(fields)")
            XCTAssertEqual(fields["ExitCode"], "0:0", "\(task): \(fields)")
        }
        let resumedLog = (try? String(contentsOfFile: "\(directory)/slurm-\(resubmitted)_3.out", encoding: .utf8)) ?? ""
        XCTAssertTrue(resumedLog.contains("shard 3/4"), resumedLog)
        XCTAssertFalse(resumedLog.contains("\r"), "a Slurm .out gets whole progress lines, never a carriage return")
        for index in 0..<Self.shards {
            // The sbatch script's --metrics-file: one per shard, ending with the shard's success.
            let metrics = (try? String(contentsOfFile: "\(directory)/shards/metrics-\(index).prom", encoding: .utf8)) ?? ""
            XCTAssertTrue(metrics.contains("pushcast_campaign_last_success_timestamp_seconds{"), "shard \(index): \(metrics.prefix(300))")
            XCTAssertTrue(metrics.contains("shard=\"\(index)/\(Self.shards)\""), "shard \(index)'s metrics carry its shard label: \(metrics.prefix(300))")
        }

        let merge = try runPushcast(["merge", "--input", directory + "/tokens.csv", "--shards", "\(Self.shards)",
                                     "--results-pattern", directory + "/shards/results-{shard}.ndjson",
                                     "--prune-pattern", directory + "/shards/prune-{shard}.csv",
                                     "--summary-pattern", directory + "/shards/summary-{shard}.json",
                                     "--results", directory + "/results.ndjson", "--prune", directory + "/prune.csv",
                                     "--summary", directory + "/summary.json"])
        XCTAssertEqual(merge.status, 0, "pushcast merge: \(merge.stdout)\(merge.stderr)")
        let merged = try resultsByRow(directory + "/results.ndjson")
        XCTAssertEqual(merged.count, Self.rows, "every row exactly once in the merged results")
        XCTAssertEqual(Set(merged.keys), Set(1...Self.rows))
        var outcomes: [String: Int] = [:]
        for line in merged.values { outcomes[line["outcome"] as? String ?? "?", default: 0] += 1 }

        _ = mock.stop()
        self.mock = nil
        let log = mock.log
        var deliveries: [String: Int] = [:]
        for entry in log where entry["status"] as? Int == 200 {
            guard let token = entry["token"] as? String else { continue }   // the OAuth2 token endpoint
            deliveries["\(entry["provider"] as? String ?? "?") \(token)", default: 0] += 1
        }
        let twice = deliveries.filter { $0.value > 1 }
        XCTAssertTrue(twice.isEmpty, "\(twice.count) tokens delivered twice, e.g. \(twice.keys.prefix(3))")
        XCTAssertEqual(outcomes["delivered"], deliveries.count, "delivered rows against the mock's 200 answers")

        // FCM's rate at the mock while all four shards ran: from the last shard's first FCM request
        // to the scancel, by the log's wall-clock timestamps; each log token belongs to one shard.
        var shardOfToken: [String: Int] = [:]
        for (index, path) in results.enumerated() {
            for line in try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n") {
                guard let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                      object["provider"] as? String == "fcm", let token = object["token"] as? String else { continue }
                shardOfToken[token] = index
            }
        }
        var firstSend = [Int64](repeating: .max, count: Self.shards)
        var fcmSends: [Int64] = []
        for entry in log where entry["provider"] as? String == "fcm" && (entry["path"] as? String ?? "").hasSuffix("messages:send") {
            guard let ts = (entry["ts"] as? NSNumber)?.int64Value else { continue }
            fcmSends.append(ts)
            if let token = entry["token"] as? String, let shard = shardOfToken[token] { firstSend[shard] = min(firstSend[shard], ts) }
        }
        let windowStart = (firstSend.max() ?? 0) + 1500
        let windowEnd = cancelMilliseconds - 300
        XCTAssertGreaterThanOrEqual(windowEnd - windowStart, 2000, "the four shards ran together for too short a while: first sends \(firstSend), cancel \(cancelMilliseconds)")
        let inWindow = fcmSends.filter { $0 >= windowStart && $0 < windowEnd }.count
        let rate = Double(inWindow) / (Double(windowEnd - windowStart) / 1000)
        // FCM requests a second over the whole run, from the first: the picture behind the rate.
        let origin = fcmSends.min() ?? 0
        var perSecond = [Int](repeating: 0, count: Int(((fcmSends.max() ?? 0) - origin) / 1000) + 1)
        for ts in fcmSends { perSecond[Int((ts - origin) / 1000)] += 1 }
        let timeline = "FCM requests per second from the first: \(perSecond); window \(windowStart - origin)..\(windowEnd - origin) ms"
        XCTAssertLessThanOrEqual(abs(rate - Self.fcmRate) / Self.fcmRate, 0.05,
                                 "FCM's rate at the mock with four shards: \(Int(rate))/s, against --rate fcm=\(Int(Self.fcmRate))/s; \(timeline)")

        print("slurm: up in \(String(format: "%.1f", upSeconds)) s; \(Self.rows) rows over \(Self.shards) shards (task 3 cancelled, exit 3, resubmitted) in "
              + "\(String(format: "%.1f", sendSeconds)) s; merged \(merged.count) rows \(outcomes.sorted { $0.key < $1.key }); "
              + "FCM \(Int(rate))/s over \(windowEnd - windowStart) ms with four shards; \(deliveries.count) deliveries, none twice; \(timeline)")
    }
}
