import Foundation
import PushcastCommandLine
import PushcastCore
import PushcastEngine
import PushcastProviderKit
import PushcastProviders
import PushcastJSON
import PushcastSystem

/// The options for the people around a campaign: progress that suits where stderr
/// goes, the log format, and the Prometheus metrics file. `send` and `check` take them.
enum OperatorOptions {
    static let logFormat = OptionSpec.value(
        "log-format", metavar: "text|json",
        help: "stderr as text, or one JSON object per line (progress, notes, warnings, errors and the summary) for log pipelines",
        defaultDescription: "text")

    static let options: [OptionSpec] = [
        .value("progress-interval", metavar: "TIME",
               help: "where stderr is not a terminal (with --progress), or with --log-format json: one whole progress line every TIME",
               defaultDescription: "10s"),
        logFormat,
        .value("metrics-file", metavar: "FILE",
               help: "write Prometheus metrics (text format) to FILE while the campaign runs and at its end, atomically "
                   + "(node_exporter's textfile collector: name it *.prom in its --collector.textfile.directory); {shard} is the shard"),
        .value("metrics-interval", metavar: "TIME", help: "how often --metrics-file is rewritten while the campaign runs", defaultDescription: "5s"),
    ]

    /// What `pushcast demo` passes on to its send: a progress line a second where stderr is not a
    /// terminal (a log of `make demo` reads well), the log format, the metrics file.
    static func demoArguments(_ parsed: ParsedArguments) -> [String] {
        ["--progress-interval", parsed.value("progress-interval") ?? "1s", "--log-format", Console.format.rawValue]
            + (parsed.value("metrics-file").map { ["--metrics-file", $0, "--metrics-interval", "1s"] } ?? [])
    }

    /// Whether the engine redraws one progress line in place: only for a person at a terminal,
    /// with text logs.
    static func redrawnProgress(_ parsed: ParsedArguments) -> Bool {
        !parsed.flag("quiet") && Console.format == .text && StandardStream.error.isTerminal
    }

    /// The observers the options ask for: periodic whole progress lines (text or JSON) where the
    /// line is not redrawn, and the metrics file.
    static func observers(_ parsed: ParsedArguments, output: CampaignOutput, durability: CampaignDurability?,
                          shard: ShardSpec) throws -> [CampaignObserver] {
        _ = try parsed.choice("log-format", from: ["text", "json"])
        let identity = output.identity
        let earlier = durability?.summary.byProvider.mapValues(\.rows) ?? [:]
        var observers: [CampaignObserver] = [TimelineWriter(resultsPath: output.resultsPath, startRows: earlier,
                                                            resuming: durability?.recovered != nil)]
        let interval = try parsed.duration("progress-interval", default: .seconds(10), range: .milliseconds(100)...(.seconds(86_400)))
        let wanted = parsed.flag("progress") || StandardStream.error.isTerminal
        if !parsed.flag("quiet") && wanted && !redrawnProgress(parsed) {
            observers.append(PeriodicProgress(intervalNanoseconds: CommonOptions.nanoseconds(interval)))
        }
        if let path = parsed.value("metrics-file") {
            let every = try parsed.duration("metrics-interval", default: .seconds(5), range: .milliseconds(100)...(.seconds(86_400)))
            observers.append(try MetricsFileWriter(path: shard.expand(path), identity: identity,
                                                   intervalNanoseconds: CommonOptions.nanoseconds(every)))
        }
        return observers
    }
}

/// Progress as whole lines, one every interval and one at the end: never a carriage return, so a
/// log file (Kubernetes, Slurm's .out, journald) gets one readable line per interval. With
/// `--log-format json` each is a JSON object with the figures as fields.
final class PeriodicProgress: CampaignObserver {
    private let interval: UInt64
    private var due: UInt64

    init(intervalNanoseconds: UInt64) {
        interval = intervalNanoseconds
        due = intervalNanoseconds
    }

    func observe(_ progress: CampaignProgress) {
        guard progress.isFinal || progress.elapsedNanoseconds >= due else { return }
        while due <= progress.elapsedNanoseconds { due += interval }
        switch Console.format {
        case .text: Console.log(progress.text)
        case .json: StandardStream.error.write(Console.jsonLine(level: "info", message: progress.text, fields: Self.fields(progress)) + "\n")
        }
    }

    /// The progress figures as JSON fields: rows, total, percent, rates, ETA, outcomes, and each
    /// provider's rows, in flight and retries. No token, no reason text.
    static func fields(_ p: CampaignProgress) -> [(String, String)] {
        var fields: [(String, String)] = [("event", "\"progress\""), ("rows", "\(p.summary.rows)"),
                                          ("total", p.totalRows.map(String.init) ?? "null")]
        if let total = p.totalRows, total > 0 {
            fields.append(("percent", String(format: "%.1f", min(100, Double(p.summary.rows) * 100 / Double(total)))))
        }
        fields.append(("rows_per_second", String(format: "%.1f", p.rowsPerSecond)))
        fields.append(("eta_seconds", p.etaSeconds.map { String(format: "%.0f", $0) } ?? "null"))
        fields.append(("elapsed_seconds", String(format: "%.3f", p.elapsedSeconds)))
        fields.append(("outcomes", "{" + OutcomeKind.allCases.map { "\"\($0.rawValue)\":\(p.summary.outcomes[$0])" }.joined(separator: ",") + "}"))
        let providers = p.lanes.map { lane in
            "\"\(lane.provider.rawValue)\":{\"rows\":\(p.summary.byProvider[lane.provider]?.rows ?? 0),\"in_flight\":\(lane.inFlight),\"retries\":\(lane.retries)}"
        }
        fields.append(("providers", "{" + providers.joined(separator: ",") + "}"))
        fields.append(("final", p.isFinal ? "true" : "false"))
        fields.append(("draining", p.isDraining && !p.isFinal ? "true" : "false"))
        return fields
    }
}

/// `--metrics-file`: the campaign's metrics rewritten every interval and at the end, each time
/// as a whole new file (written beside it, then renamed over it), so a collector never reads
/// half a file. The last-success time a previous run left in the file is kept. A file that
/// cannot be written is warned about once; the campaign goes on.
final class MetricsFileWriter: CampaignObserver {
    private let path: String
    private let interval: UInt64
    private var due: UInt64 = 0
    private var metrics: CampaignMetrics
    private var warned = false

    init(path: String, identity: CampaignIdentity?, intervalNanoseconds: UInt64) throws {
        self.path = path
        interval = intervalNanoseconds
        let earlier = ((try? readWholeFile(path)) ?? nil).flatMap { String(validating: $0, as: UTF8.self) }
            .flatMap(CampaignMetrics.lastSuccess(inExposition:))
        metrics = CampaignMetrics(campaign: identity?.campaign ?? "", shard: identity?.shard, catalog: .standard,
                                  lastSuccessEpochSeconds: earlier)
        let directory = (path as NSString).deletingLastPathComponent
        guard FileSystem.isWritable(directory.isEmpty ? "." : directory) else {
            throw CommandFailure("--metrics-file \(path): cannot write in \(directory.isEmpty ? "." : directory)")
        }
    }

    func observe(_ progress: CampaignProgress) {
        guard progress.isFinal || progress.elapsedNanoseconds >= due else { return }
        due = progress.elapsedNanoseconds + interval
        let text = metrics.render(progress, nowEpochSeconds: Machine.real.wallClockSeconds())
        do { try Self.replace(path, with: text) } catch {
            if !warned { Console.error("pushcast: warning: --metrics-file: \(error)") }
            warned = true
        }
    }

    /// Writes `text` to a temporary name in the same directory (not ending in .prom, so the
    /// collector skips it), then renames it over `path`: readers see the old file or the new one.
    static func replace(_ path: String, with text: String) throws {
        if FileSystem.isSpecial(path) {
            // `/dev/null` or a pipe: written in place; a rename would replace the device itself.
            do { try FileSystem.write(text, to: path) } catch { throw CommandFailure(error.description) }
            return
        }
        let temporary = path + ".\(CurrentProcess.id).tmp"
        do {
            try FileSystem.write(text, to: temporary, secret: false)
        } catch {
            throw CommandFailure(error.description)
        }
        do { try FileSystem.rename(temporary, to: path) } catch {
            FileSystem.removeFile(temporary)
            throw CommandFailure("cannot rename \(temporary) to \(path): \(error)")
        }
    }
}

/// `<results>.timeline`: one JSON line a second with the wall time, the seconds since this run
/// started, and each provider's rows finished and retries so far (a first line with the rows an
/// earlier run left, before anything is sent). `pushcast report` draws rows and retries per
/// second from it. Appended to, so a resumed campaign's runs follow each other; never holds a
/// token. A file that cannot be written is warned about once.
final class TimelineWriter: CampaignObserver {
    private let path: String
    private var due: UInt64 = 1_000_000_000
    private var warned = false

    /// A fresh campaign (not a resume) starts the file over.
    init(resultsPath: String, startRows: [ProviderID: Int], resuming: Bool) {
        path = resultsPath + ".timeline"
        append(elapsed: 0, rows: startRows, retries: [:], truncate: !resuming)
    }

    func observe(_ progress: CampaignProgress) {
        guard progress.isFinal || progress.elapsedNanoseconds >= due else { return }
        while due <= progress.elapsedNanoseconds { due += 1_000_000_000 }
        var rows: [ProviderID: Int] = [:], retries: [ProviderID: Int] = [:]
        for lane in progress.lanes {
            rows[lane.provider] = progress.summary.byProvider[lane.provider]?.rows ?? 0
            retries[lane.provider] = progress.isFinal ? progress.summary.retriesByProvider[lane.provider] ?? lane.retries : lane.retries
        }
        append(elapsed: progress.elapsedSeconds, rows: rows, retries: retries)
    }

    private func append(elapsed: Double, rows: [ProviderID: Int], retries: [ProviderID: Int], truncate: Bool = false) {
        func object(_ counts: [ProviderID: Int]) -> String {
            "{" + counts.sorted { $0.key.position < $1.key.position }.map { "\"\($0.key.rawValue)\":\($0.value)" }.joined(separator: ",") + "}"
        }
        let line = String(format: "{\"wall\":%.3f,\"elapsed\":%.3f,", Machine.real.wallClockSeconds(), elapsed)
            + "\"rows\":\(object(rows)),\"retries\":\(object(retries))}\n"
        do {
            let file = try OutputFile(path: path, append: !truncate)
            try file.append(line)
            try file.flush()
        } catch {
            if !warned { Console.error("pushcast: warning: cannot write the timeline \(path): \(error)") }
            warned = true
        }
    }
}
