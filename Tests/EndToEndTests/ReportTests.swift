import Foundation
import XCTest

/// `pushcast report`: the page rendered by headless Chromium (no console error, a screenshot),
/// and the figures its SVG elements carry equal to the campaign's summary: the demo, a merged
/// sharded campaign, and an interrupted one.
final class ReportTests: XCTestCase {
    static let chromium = "/usr/bin/chromium"

    override func setUpWithError() throws {
        try BinaryTests.requireBinary()
        guard FileManager.default.isExecutableFile(atPath: Self.chromium) else {
            XCTFail("chromium is missing: scripts/deps.sh installs it")
            throw CocoaError(.fileNoSuchFile)
        }
    }

    /// What Chromium made of a page: its DOM after loading, what it logged, and a screenshot.
    struct Rendered {
        var dom: String
        var log: String
        var screenshot: Data
    }

    static func render(_ html: String, screenshot: String) throws -> Rendered {
        let profile = NSTemporaryDirectory() + "pushcast-chromium-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: profile) }
        let common = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--user-data-dir=\(profile)", "--enable-logging=stderr", "--v=0"]
        let dump = try runProgram(chromium, common + ["--dump-dom", "file://" + html], seconds: 90)
        XCTAssertEqual(dump.status, 0, dump.stderr)
        let shot = try runProgram(chromium, common + ["--hide-scrollbars", "--window-size=1200,2400", "--screenshot=\(screenshot)", "file://" + html],
                                  seconds: 90)
        XCTAssertEqual(shot.status, 0, shot.stderr)
        return Rendered(dom: dump.stdout, log: dump.stderr + shot.stderr, screenshot: try Data(contentsOf: URL(fileURLWithPath: screenshot)))
    }

    /// The `data-*` attributes of every element of the DOM that has `data-chart` (or `data-table`
    /// rows with `data-reason`), one dictionary per element.
    static func elements(_ dom: String, chart: String) -> [[String: String]] {
        let tag = try! NSRegularExpression(pattern: "<(rect|polyline|text|p|tr)\\b([^>]*)>")
        let attribute = try! NSRegularExpression(pattern: "(data-[a-z0-9-]+)=\"([^\"]*)\"")
        var out: [[String: String]] = []
        let ns = dom as NSString
        for match in tag.matches(in: dom, range: NSRange(location: 0, length: ns.length)) {
            let attributes = ns.substring(with: match.range(at: 2))
            var fields: [String: String] = [:]
            let nsa = attributes as NSString
            for a in attribute.matches(in: attributes, range: NSRange(location: 0, length: nsa.length)) {
                fields[nsa.substring(with: a.range(at: 1))] = nsa.substring(with: a.range(at: 2))
            }
            if fields["data-chart"] == chart { out.append(fields) }
        }
        return out
    }

    /// The page is self-contained and Chromium rendered it without complaint.
    func assertRenderedCleanly(_ html: String, _ rendered: Rendered, file: StaticString = #filePath, line: UInt = #line) throws {
        let page = try String(contentsOfFile: html, encoding: .utf8)
        for forbidden in ["<script", "<link", "src=", "@import", "url("] {
            XCTAssertFalse(page.contains(forbidden), "the page has \(forbidden)", file: file, line: line)
        }
        let fetches = page.replacingOccurrences(of: "xmlns=\"http://www.w3.org/2000/svg\"", with: "")
        XCTAssertFalse(fetches.contains("http://") || fetches.contains("https://"), "the page names a network address", file: file, line: line)
        for logged in rendered.log.split(separator: "\n") where logged.contains("CONSOLE") || logged.contains("Uncaught") || logged.contains("Failed to load") {
            XCTFail("Chromium: \(logged)", file: file, line: line)
        }
        XCTAssertTrue(rendered.dom.contains("<svg"), file: file, line: line)
        XCTAssertEqual(rendered.screenshot.prefix(8), Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]), "not a PNG", file: file, line: line)
        XCTAssertGreaterThan(rendered.screenshot.count, 20_000, "a blank screenshot", file: file, line: line)
    }

    /// Every chart's figures against the summary: outcomes, pruned reasons, answers and
    /// latency quantiles, attempts, retries, rows per second (summed over time), failure table.
    func assertMatches(_ dom: String, summaryPath: String, timelines: Bool = true, file: StaticString = #filePath, line: UInt = #line) throws {
        let summary = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: summaryPath))) as? [String: Any])
        let providers = try XCTUnwrap(summary["providers"] as? [String: [String: Any]])
        let outcomes = Self.elements(dom, chart: "outcomes")
        XCTAssertEqual(outcomes.count, providers.count * 6, file: file, line: line)
        for element in outcomes {
            let figures = try XCTUnwrap(providers[element["data-provider"] ?? ""], file: file, line: line)
            XCTAssertEqual(Int(element["data-value"] ?? ""), (figures["outcomes"] as? [String: Int])?[element["data-outcome"] ?? ""],
                           "\(element)", file: file, line: line)
        }
        var prunedByProvider: [String: Int] = [:]
        for element in Self.elements(dom, chart: "prune") {
            let provider = element["data-provider"] ?? "", value = Int(element["data-value"] ?? "") ?? -1
            let reasons = providers[provider]?["reasons"] as? [String: Int] ?? [:]
            XCTAssertEqual(value, reasons[element["data-reason"] ?? ""], "\(element)", file: file, line: line)
            prunedByProvider[provider, default: 0] += value
        }
        for (provider, figures) in providers {
            let outcomes = figures["outcomes"] as? [String: Int] ?? [:]
            XCTAssertEqual(prunedByProvider[provider] ?? 0, (outcomes["pruned"] ?? 0) + ((figures["reasons"] as? [String: Int])?["InvalidToken"] ?? 0),
                           provider, file: file, line: line)
            try assertProvider(dom, provider, figures, summary: summary, timelines: timelines, file: file, line: line)
        }
        // The failure table: each (provider, reason) row's count is the summary's, when every row
        // with that reason failed (true of the reasons these campaigns see).
        for row in Self.elements(dom, chart: "failures") where row["data-provider"] != "none" {
            let reasons = providers[row["data-provider"] ?? ""]?["reasons"] as? [String: Int] ?? [:]
            XCTAssertEqual(Int(row["data-value"] ?? ""), reasons[row["data-reason"] ?? ""], "\(row)", file: file, line: line)
        }
    }

    func assertProvider(_ dom: String, _ provider: String, _ figures: [String: Any], summary: [String: Any], timelines: Bool,
                        file: StaticString, line: UInt) throws {
        let rows = try XCTUnwrap(figures["rows"] as? Int, file: file, line: line)
        let quantiles = try XCTUnwrap(Self.elements(dom, chart: "latency-quantiles").first { $0["data-provider"] == provider }, file: file, line: line)
        XCTAssertEqual(Int(quantiles["data-count"] ?? ""), figures["answered"] as? Int, provider, file: file, line: line)
        let latency = try XCTUnwrap(figures["latency_ms"] as? [String: Double], file: file, line: line)
        for q in ["p50", "p99"] {
            // The results keep latencies to 0.1 ms; the summary had them to the microsecond.
            XCTAssertEqual(Double(quantiles["data-" + q] ?? "") ?? -1, latency[q] ?? 0, accuracy: 0.2 + 0.02 * (latency[q] ?? 0),
                           "\(provider) \(q)", file: file, line: line)
        }
        let attempts = Self.elements(dom, chart: "attempts").filter { $0["data-provider"] == provider }
        XCTAssertEqual(attempts.count, 6, file: file, line: line)
        XCTAssertEqual(attempts.reduce(0) { $0 + (Int($1["data-value"] ?? "") ?? 0) }, rows, provider, file: file, line: line)
        let retries = Self.elements(dom, chart: "retries").first { $0["data-provider"] == provider }
        XCTAssertEqual(Int(retries?["data-value"] ?? ""), figures["retries"] as? Int, provider, file: file, line: line)
        // Throttles told apart: 429s about one device, and about the provider.
        let throttled = Self.elements(dom, chart: "throttles").first { $0["data-provider"] == provider }
        if let counts = (summary["throttles"] as? [String: [String: Int]])?[provider] {
            XCTAssertEqual(Int(throttled?["data-device"] ?? ""), counts["device"], "\(provider) device throttles", file: file, line: line)
            XCTAssertEqual(Int(throttled?["data-provider-wide"] ?? ""), counts["provider"], "\(provider) provider throttles", file: file, line: line)
        } else {
            XCTAssertNil(throttled, "\(provider): throttles the summary does not have", file: file, line: line)
        }
        if timelines {
            let rate = try XCTUnwrap(Self.elements(dom, chart: "rate").first { $0["data-provider"] == provider }, "no rate line for \(provider)",
                                     file: file, line: line)
            XCTAssertEqual(Int(rate["data-total"] ?? ""), rows, "rows per second over time, summed", file: file, line: line)
            let retried = Self.elements(dom, chart: "retry-rate").first { $0["data-provider"] == provider }
            XCTAssertEqual(Int(retried?["data-total"] ?? ""), figures["retries"] as? Int, "retries per second, summed", file: file, line: line)
        }
    }

    func testDemoReportMatchesItsSummary() throws {
        let directory = NSTemporaryDirectory() + "pushcast-report-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let demo = try runPushcast(["demo", "--rows", "6000", "--tokens", directory + "/tokens.csv", "--out", directory], seconds: 300)
        XCTAssertEqual(demo.status, 0, demo.stderr)
        // `make demo > demo.log 2>&1`: a whole progress line a second, never a carriage return.
        XCTAssertFalse(demo.stderr.contains("\r"), "a carriage return in the demo's log")
        XCTAssertTrue(demo.stderr.split(separator: "\n").contains { $0.hasPrefix("6000/6000 rows (100%)") }, demo.stderr)
        // Three providers: iOS rows to APNs, Android rows to FCM, web rows by Web Push, each
        // with rows delivered and pruned.
        let summary = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: directory + "/summary.json"))) as? [String: Any])
        let providers = try XCTUnwrap(summary["providers"] as? [String: [String: Any]])
        XCTAssertEqual(Set(providers.keys), ["apns", "fcm", "webpush"])
        for (provider, figures) in providers {
            let outcomes = figures["outcomes"] as? [String: Int] ?? [:]
            XCTAssertGreaterThan(outcomes["delivered"] ?? 0, 0, provider)
            XCTAssertGreaterThan(outcomes["pruned"] ?? 0, 0, provider)
        }
        XCTAssertTrue(demo.stderr.contains("mock Web Push: "), demo.stderr)
        let html = directory + "/report.html"
        let report = try runPushcast(["report", directory + "/tokens.results.ndjson", "--summary", directory + "/summary.json", "--html", html])
        XCTAssertEqual(report.status, 0, report.stderr)
        let rendered = try Self.render(html, screenshot: directory + "/report.png")
        try assertRenderedCleanly(html, rendered)
        try assertMatches(rendered.dom, summaryPath: directory + "/summary.json")
        // The failure table explains each reason from pushcast's table.
        XCTAssertEqual(Set(Self.elements(rendered.dom, chart: "failures").map { $0["data-reason"] ?? "" }), ["InvalidToken"])
        XCTAssertTrue(rendered.dom.contains("the token is not a token"))
        XCTAssertTrue(rendered.dom.contains("campaign demo"))
    }

    /// Two shards of a mixed campaign, merged: the report of the shards' results files (their
    /// timelines found beside them) and the report of the merged file (the timelines given) both
    /// match the merged summary.
    func testMergedShardsReportMatchesTheMergedSummary() throws {
        let campaign = try OperatorTests.makeCampaign(rows: 3000)
        let mock = try FCMSendTests.Mock(directory: campaign.directory, extra: ["--latency-ms", "20"])
        defer { _ = mock.stop() }
        let d = campaign.directory
        for shard in 0..<2 {
            let run = try runPushcast(["send", campaign.tokens, "--payload", campaign.payload, "--fcm-payload", campaign.message] + mock.sendFlags
                                      + ["--shard", "\(shard)/2", "--campaign", "spring", "--results", d + "/r-{shard}.ndjson", "--prune", d + "/p-{shard}.csv",
                                         "--summary", d + "/s-{shard}.json", "--quiet"])
            XCTAssertEqual(run.status, 0, run.stderr)
        }
        let merge = try runPushcast(["merge", "--input", campaign.tokens, "--shards", "2", "--results-pattern", d + "/r-{shard}.ndjson",
                                     "--prune-pattern", d + "/p-{shard}.csv", "--summary-pattern", d + "/s-{shard}.json",
                                     "--results", d + "/merged.ndjson", "--prune", d + "/merged.prune.csv", "--summary", d + "/merged.json"])
        XCTAssertEqual(merge.status, 0, merge.stderr)
        let shardsPage = d + "/shards.html", mergedPage = d + "/merged.html"
        XCTAssertEqual(try runPushcast(["report", d + "/r-0.ndjson", d + "/r-1.ndjson", "--summary", d + "/merged.json", "--html", shardsPage]).status, 0)
        XCTAssertEqual(try runPushcast(["report", d + "/merged.ndjson", "--summary", d + "/merged.json", "--timeline", d + "/r-0.ndjson.timeline",
                                        "--timeline", d + "/r-1.ndjson.timeline", "--html", mergedPage]).status, 0)
        for page in [shardsPage, mergedPage] {
            let rendered = try Self.render(page, screenshot: page + ".png")
            try assertRenderedCleanly(page, rendered)
            try assertMatches(rendered.dom, summaryPath: d + "/merged.json")
            XCTAssertTrue(rendered.dom.contains("merged from 2 shards"), page)
        }
    }

    /// A campaign reported while it runs, then stopped by SIGTERM (exit 3): its report matches the
    /// summary it wrote and says it was interrupted; the results alone (no summary) report too.
    func testInterruptedCampaignReportMatchesItsSummary() throws {
        let campaign = try OperatorTests.makeCampaign(rows: 20_000)
        let mock = try FCMSendTests.Mock(directory: campaign.directory, extra: ["--latency-ms", "200"])
        defer { _ = mock.stop() }
        let d = campaign.directory
        let send = Process()
        send.executableURL = URL(fileURLWithPath: BinaryTests.binary)
        send.arguments = OperatorTests.sendArguments(campaign, mock, ["--quiet", "--summary", d + "/summary.json"])
        send.standardOutput = FileHandle.nullDevice
        send.standardError = FileHandle.nullDevice
        try send.run()
        // Stop it once rows are recorded and well before the end (about 1,500 rows a second).
        let deadline = Date().addingTimeInterval(60)
        while send.isRunning && Date() < deadline && ((try? FileManager.default.attributesOfItem(atPath: campaign.results))?[.size] as? Int ?? 0) < 200_000 {
            usleep(50_000)
        }
        // A report of the campaign while it runs: the lines so far (the last one may be torn).
        let live = d + "/live.html"
        let midRun = try runPushcast(["report", campaign.results, "--html", live])
        XCTAssertEqual(midRun.status, 0, midRun.stderr)
        XCTAssertTrue(send.isRunning, "the campaign ended before the mid-run report")
        XCTAssertTrue(try String(contentsOfFile: live, encoding: .utf8).contains("no summary: still running"))
        kill(send.processIdentifier, SIGTERM)
        send.waitUntilExit()
        XCTAssertEqual(send.terminationStatus, 3)
        let running = d + "/running.html", page = d + "/interrupted.html"
        XCTAssertEqual(try runPushcast(["report", campaign.results, "--html", running]).status, 0)
        XCTAssertEqual(try runPushcast(["report", campaign.results, "--summary", d + "/summary.json", "--html", page]).status, 0)
        let rendered = try Self.render(page, screenshot: page + ".png")
        try assertRenderedCleanly(page, rendered)
        try assertMatches(rendered.dom, summaryPath: d + "/summary.json")
        XCTAssertTrue(rendered.dom.contains("interrupted (resumable"), "the page does not say the campaign was interrupted")
        let summary = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: d + "/summary.json"))) as? [String: Any])
        XCTAssertLessThan(summary["rows"] as? Int ?? 20_000, 20_000, "the campaign finished before it was stopped")
        let alone = try String(contentsOfFile: running, encoding: .utf8)
        XCTAssertTrue(alone.contains("no summary: still running"), "the page of the results alone")
        XCTAssertTrue(alone.contains("data-figure=\"rows\"><b>\((summary["rows"] as? Int ?? 0).formatted())</b>"), "rows of the results alone")
    }
}
