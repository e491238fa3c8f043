import Foundation
import PushcastCommandLine
import PushcastCore
import PushcastEngine
import PushcastProviderKit
import PushcastProviders
import PushcastSystem

/// `pushcast report`: one self-contained HTML page about a campaign, for the people who asked
/// for it: outcomes per provider, pruned tokens by reason, latency, rows and retries per second
/// over the campaign, and the top failure reasons with what each means and what to do. Reads
/// the results as a stream (one file, the shards' files, or a campaign still running).
enum ReportCommand {
    static let spec = CommandSpec(
        name: "pushcast report",
        summary: "Write a campaign report (one self-contained HTML page with SVG charts) from its results files.",
        options: [
            .value("html", metavar: "FILE", help: "the HTML page to write"),
            .value("summary", metavar: "FILE", help: "the campaign's summary (send --summary, or merge's): campaign, input rows, wall time, retries, how it ended"),
            .value("timeline", metavar: "FILE", help: "a timeline to draw rows and retries per second from, besides each results file's own <results>.timeline "
                   + "(for a merged results file: the shards' timelines)", isRepeatable: true),
            .value("title", metavar: "TEXT", help: "the page's title", defaultDescription: "pushcast campaign report"),
            OperatorOptions.logFormat,
        ],
        positionals: [PositionalSpec("results", help: "results files (NDJSON or CSV): one campaign's, or its shards'", arity: .variadic)])

    static func run(_ parsed: ParsedArguments) throws -> ExitStatus {
        let files = parsed.positionalValues("results")
        guard !files.isEmpty else { throw parsed.error("give at least one results file") }
        guard let output = parsed.value("html") else { throw parsed.error("--html FILE is required (where the page goes)") }
        let clock = Machine.real.monotonicClock()
        let started = clock.nowNanoseconds()
        var report = CampaignReport(catalog: .standard)
        if let path = parsed.value("summary") {
            guard let bytes = try? readWholeFile(path), let summary = CampaignSummary.parse(bytes, catalog: .standard) else {
                throw CommandFailure("--summary \(path): cannot read it as a pushcast summary (send --summary FILE writes one)")
            }
            report.summaryFile = summary
        }
        for file in files {
            do { try report.add(resultsFile: file, files: Machine.real.files) } catch { throw CommandFailure(error.description) }
            report.timeline.add(path: file + ".timeline", files: Machine.real.files, catalog: .standard)
        }
        for timeline in parsed.values("timeline") {
            guard FileSystem.exists(timeline) else { throw CommandFailure("--timeline \(timeline): no such file") }
            report.timeline.add(path: timeline, files: Machine.real.files, catalog: .standard)
        }
        let page = ReportPage.render(report, title: parsed.value("title") ?? "pushcast campaign report",
                                     generatedAt: Machine.real.wallClockSeconds())
        try CommonOptions.write(page, to: output)
        Console.error(String(format: "pushcast report: %d rows from %d file%@ (%d timeline%@) in %.2f s: %@", report.counted.rows, files.count,
                             files.count == 1 ? "" : "s", report.timeline.files, report.timeline.files == 1 ? "" : "s",
                             Double(clock.nowNanoseconds() - started) / 1e9, output))
        return .success
    }
}
