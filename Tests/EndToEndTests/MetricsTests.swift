import Foundation
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `send --metrics-file`: the Prometheus text file, valid for promtool whenever it is read during
/// a run, served by a real node_exporter's textfile collector, with values equal to the results.
final class MetricsTests: XCTestCase {
    override func setUpWithError() throws {
        try BinaryTests.requireBinary()
        for tool in ["/usr/bin/promtool", "/usr/bin/prometheus-node-exporter"] where !FileManager.default.isExecutableFile(atPath: tool) {
            XCTFail("\(tool) is missing: scripts/deps.sh installs prometheus and prometheus-node-exporter")
            throw CocoaError(.fileNoSuchFile)
        }
    }

    /// promtool's verdict on one exposition text (its stdin); empty when it accepts it.
    static func promtool(_ text: String) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/promtool")
        process.arguments = ["check", "metrics"]
        let input = Pipe(), output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = output
        try process.run()
        input.fileHandleForWriting.write(Data(text.utf8))
        try input.fileHandleForWriting.close()
        let said = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return process.terminationStatus == 0 ? "" : "promtool exit \(process.terminationStatus): \(said)"
    }

    /// The value of the sample whose line starts with `series` (name and labels, as written).
    static func value(_ text: String, _ name: String, _ labels: [String: String]) -> Double? {
        for line in text.split(separator: "\n") where line.hasPrefix(name + "{") {
            let body = line.dropFirst(name.count + 1).prefix { $0 != "}" }
            let pairs = Set(body.split(separator: ",").map(String.init))
            if labels.allSatisfy({ pairs.contains("\($0.key)=\"\($0.value)\"") }), let value = line.split(separator: " ").last.flatMap({ Double($0) }) {
                return value
            }
        }
        return nil
    }

    func testMetricsFileIsValidWheneverReadAndNodeExporterServesIt() throws {
        let campaign = try OperatorTests.makeCampaign(rows: 6000)
        let mock = try FCMSendTests.Mock(directory: campaign.directory, extra: ["--latency-ms", "100"])
        defer { _ = mock.stop() }
        let textfiles = campaign.directory + "/textfiles"
        try FileManager.default.createDirectory(atPath: textfiles, withIntermediateDirectories: true)
        let metricsPath = textfiles + "/pushcast.prom"
        // A value a previous campaign left: kept until this one succeeds.
        try "pushcast_campaign_last_success_timestamp_seconds{campaign=\"old\",shard=\"0/1\"} 1700000000\n"
            .write(toFile: metricsPath, atomically: true, encoding: .utf8)
        let send = Process()
        send.executableURL = URL(fileURLWithPath: BinaryTests.binary)
        send.arguments = OperatorTests.sendArguments(campaign, mock, ["--quiet", "--campaign", "nightly \"v2\"", "--metrics-file", metricsPath,
                                                                      "--metrics-interval", "200ms", "--summary", campaign.directory + "/summary.json"])
        send.standardOutput = FileHandle.nullDevice
        send.standardError = FileHandle.nullDevice
        try send.run()
        // Read the file as a collector would, as often as it can, while the campaign runs.
        var samples: [String] = []
        let deadline = Date().addingTimeInterval(120)
        while send.isRunning && Date() < deadline {
            if let text = try? String(contentsOfFile: metricsPath, encoding: .utf8), samples.last != text { samples.append(text) }
            usleep(20_000)
        }
        send.waitUntilExit()
        XCTAssertEqual(send.terminationStatus, 0)
        let final = try String(contentsOfFile: metricsPath, encoding: .utf8)
        samples.append(final)
        let running = samples.filter { $0.contains("pushcast_campaign_running{campaign=\"nightly \\\"v2\\\"\",shard=\"0/1\"} 1") }
        XCTAssertGreaterThanOrEqual(running.count, 3, "too few samples while running: \(samples.count)")
        for sample in samples.dropFirst() {
            XCTAssertEqual(try Self.promtool(sample), "", sample)
            XCTAssertEqual(Self.value(sample, "pushcast_campaign_last_success_timestamp_seconds", [:]) != nil, true)
        }
        // Mid-run the earlier success time is kept; at the end it is this run's.
        XCTAssertEqual(Self.value(running[0], "pushcast_campaign_last_success_timestamp_seconds", [:]), 1_700_000_000)
        let finished = try XCTUnwrap(Self.value(final, "pushcast_campaign_last_success_timestamp_seconds", [:]))
        XCTAssertEqual(finished, Date().timeIntervalSince1970, accuracy: 60)
        try checkAgainstSummary(final, campaign)
        try checkNodeExporterServes(textfiles, campaign)
        XCTAssertTrue((try FileManager.default.contentsOfDirectory(atPath: textfiles)) == ["pushcast.prom"], "a temporary file was left")
    }

    /// The final file's counts are the summary's, by provider and outcome.
    func checkAgainstSummary(_ text: String, _ campaign: OperatorTests.Campaign) throws {
        let summary = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: campaign.directory + "/summary.json")))
            as? [String: Any])
        let providers = try XCTUnwrap(summary["providers"] as? [String: [String: Any]])
        for (provider, figures) in providers {
            for (outcome, count) in try XCTUnwrap(figures["outcomes"] as? [String: Int]) {
                XCTAssertEqual(Self.value(text, "pushcast_rows_total", ["provider": provider, "outcome": outcome]), Double(count), "\(provider) \(outcome)")
            }
            let answered = try XCTUnwrap(figures["answered"] as? Int)
            XCTAssertEqual(Self.value(text, "pushcast_latency_seconds_count", ["provider": provider]), Double(answered))
            XCTAssertEqual(Self.value(text, "pushcast_latency_seconds_bucket", ["provider": provider, "le": "+Inf"]), Double(answered))
            XCTAssertEqual(Self.value(text, "pushcast_in_flight", ["provider": provider]), 0)
        }
        XCTAssertEqual(Self.value(text, "pushcast_reason_rows_total", ["provider": "fcm", "reason": "UNREGISTERED"]), 120)
        XCTAssertEqual(Self.value(text, "pushcast_campaign_running", [:]), 0)
        XCTAssertEqual(Self.value(text, "pushcast_campaign_exit_status", [:]), 0)
        XCTAssertEqual(Self.value(text, "pushcast_campaign_input_rows", [:]), 6000)
    }

    /// node_exporter, started on a free loopback port with the textfile collector on `directory`,
    /// serves the campaign's series (with its own timestamp of the file and no scrape error).
    func checkNodeExporterServes(_ directory: String, _ campaign: OperatorTests.Campaign) throws {
        var served = ""
        for attempt in 0..<5 {
            let port = 20_000 + Int.random(in: 0..<20_000)
            let exporter = Process()
            exporter.executableURL = URL(fileURLWithPath: "/usr/bin/prometheus-node-exporter")
            exporter.arguments = ["--web.listen-address=127.0.0.1:\(port)", "--collector.disable-defaults", "--collector.textfile",
                                  "--collector.textfile.directory=\(directory)"]
            exporter.standardOutput = FileHandle.nullDevice
            exporter.standardError = FileHandle.nullDevice
            try exporter.run()
            defer {
                exporter.terminate()
                exporter.waitUntilExit()
            }
            for _ in 0..<50 where served.isEmpty && exporter.isRunning {
                usleep(100_000)
                served = (try? String(contentsOf: URL(string: "http://127.0.0.1:\(port)/metrics")!, encoding: .utf8)) ?? ""
            }
            if !served.isEmpty { break }
            print("node_exporter attempt \(attempt) on port \(port) served nothing")
        }
        XCTAssertEqual(Self.value(served, "node_textfile_scrape_error", [:]) ?? Double(served.contains("node_textfile_scrape_error 0") ? 0 : 1), 0, served)
        XCTAssertTrue(served.contains("node_textfile_scrape_error 0"), served)
        XCTAssertTrue(served.contains("node_textfile_mtime_seconds{file="), served)
        let delivered = try resultsByRow(campaign.results).values.filter { $0["provider"] as? String == "apns" && $0["outcome"] as? String == "delivered" }.count
        XCTAssertEqual(Self.value(served, "pushcast_rows_total", ["provider": "apns", "outcome": "delivered", "campaign": "nightly \\\"v2\\\""]),
                       Double(delivered), served)
    }

    /// A server that answers every request with a reason never seen before: 10,000 rows, 10,000
    /// distinct reasons in the results, and still a small, bounded set of series (`other`).
    func testTenThousandDistinctReasonsStayUnderAHundredSeries() throws {
        let directory = NSTemporaryDirectory() + "pushcast-hostile-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let openssl = [["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", directory + "/key.pem",
                        "-out", directory + "/cert.pem", "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                       ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", directory + "/apns.p8"]]
        for arguments in openssl { XCTAssertEqual(try runProgram("/usr/bin/openssl", arguments).status, 0) }
        let server = Process()
        server.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        server.arguments = [BinaryTests.root.appendingPathComponent("Tests/Ops/hostile_reasons.py").path, "--cert", directory + "/cert.pem",
                            "--key", directory + "/key.pem", "--seconds", "120"]
        let out = Pipe()
        server.standardOutput = out
        try server.run()
        defer { server.terminate() }
        let greeting = String(decoding: out.fileHandleForReading.availableData, as: UTF8.self)
        let port = try XCTUnwrap(greeting.hasPrefix("PORT=") ? Int(greeting.dropFirst(5).trimmingCharacters(in: .whitespacesAndNewlines)) : nil,
                                 "hostile_reasons.py said: \(greeting) (python3-h2 is in scripts/deps.sh)")
        var tokens = "token\n"
        for i in 0..<10_000 { tokens += String(format: "%064x", i + 1) + "\n" }
        try tokens.write(toFile: directory + "/tokens.csv", atomically: true, encoding: .utf8)
        try #"{"aps":{"alert":"x"}}"#.write(toFile: directory + "/payload.json", atomically: true, encoding: .utf8)
        let metrics = directory + "/pushcast.prom"
        let run = try runPushcast(["send", directory + "/tokens.csv", "--payload", directory + "/payload.json", "--apns-topic", "com.example.app",
                                   "--apns-key", directory + "/apns.p8", "--apns-key-id", "ABC123DEFG", "--apns-team-id", "TEAM123456",
                                   "--apns-endpoint", "https://127.0.0.1:\(port)", "--ca-file", directory + "/cert.pem",
                                   "--results", directory + "/results.ndjson", "--prune", directory + "/prune.csv",
                                   "--metrics-file", metrics, "--quiet"])
        XCTAssertEqual(run.status, 1, String(run.stderr.prefix(2000)))
        let reasons = Set(try resultsByRow(directory + "/results.ndjson").values.compactMap { $0["reason"] as? String })
        XCTAssertEqual(reasons.count, 10_000, "the server did not give a distinct reason per row")
        let text = try String(contentsOfFile: metrics, encoding: .utf8)
        XCTAssertEqual(try Self.promtool(text), "")
        let series = text.split(separator: "\n").filter { !$0.hasPrefix("#") }
        XCTAssertLessThan(series.count, 100, text)
        XCTAssertEqual(Self.value(text, "pushcast_reason_rows_total", ["provider": "apns", "reason": "other"]), 10_000)
        XCTAssertFalse(text.contains("Hostile"), "a server's reason became a label")
    }
}
