import PushcastJSON
import PushcastCore
import PushcastProviderKit

/// What `pushcast report` shows, gathered in one pass over the results (any number of files:
/// one campaign, its shards, a campaign still running), each provider's timeline, and the
/// summary file when there is one. Memory stays flat: counts by provider, outcome and reason
/// (reasons outside `ReasonCatalog` beyond `unknownReasonsMax` distinct ones are counted together),
/// histograms of fixed size, timeline bins.
public struct CampaignReport {
    /// Figures counted from the results lines, the way a run counts them (`CampaignSummary.record`).
    public private(set) var counted = CampaignSummary()
    /// The summary file, when given: identity, input rows, wall time, retries, how the run ended.
    public var summaryFile: CampaignSummary?
    /// Pruned rows by provider and reason.
    public private(set) var pruneReasons: [ProviderID: [String: Int]] = [:]
    /// Rows that failed, stayed unknown or were invalid, by provider, outcome and reason.
    public private(set) var failures: [FailureKey: Int] = [:]
    /// Rows by provider and attempts (index 0...5; 5 means five or more).
    public private(set) var attempts: [ProviderID: [Int]] = [:]
    public var timeline = CampaignTimeline()
    public private(set) var files: [String] = []
    public private(set) var tornLines = 0
    private var unknownReasons: Set<String> = []
    public static let unknownReasonsMax = 200
    public static let otherReasons = "(other reasons)"

    /// The providers the results may name, and what their reasons mean.
    public let columns: ResultColumns
    public let reasons: ReasonCatalog

    public struct FailureKey: Hashable, Sendable {
        public let provider: ProviderID?
        public let outcome: OutcomeKind
        public let reason: String
    }

    public init(catalog: ProviderCatalog) {
        columns = ResultColumns(catalog)
        reasons = ReasonCatalog(catalog)
    }

    /// Streams one results file into the report.
    public mutating func add(resultsFile path: String, files storage: any FileStorage) throws(CampaignError) {
        var firstByte: UInt8? = nil
        if let file = try? storage.openForReading(path) {
            var byte = [UInt8](repeating: 0, count: 1)
            if (try? byte.withUnsafeMutableBytes { try file.read(into: $0) }) == 1 { firstByte = byte[0] }
        }
        var stream = ResultsStream(path: path, format: ResultsStream.format(of: path, firstByte: firstByte), columns: columns, files: storage)
        try stream.read { record in self.record(record) }
        files.append(path)
        if stream.tornBytes > 0 { tornLines += 1 }
    }

    mutating func record(_ original: OutcomeRecord) {
        var r = original
        if let reason = r.reason, reasons.entry(reason) == nil, !unknownReasons.contains(reason) {
            if unknownReasons.count < Self.unknownReasonsMax { unknownReasons.insert(reason) } else { r.reason = Self.otherReasons }
        }
        counted.record(r)
        if let provider = r.provider {
            if r.belongsInPruneFile { pruneReasons[provider, default: [:]][r.reason ?? "", default: 0] += 1 }
            attempts[provider, default: [Int](repeating: 0, count: 6)][min(5, max(0, r.attempts))] += 1
        }
        if r.outcome == .failed || r.outcome == .unknown || r.outcome == .invalid {
            failures[FailureKey(provider: r.provider, outcome: r.outcome, reason: r.reason ?? "(none)"), default: 0] += 1
        }
    }

    /// The most frequent failure reasons, largest first.
    public func topFailures(_ count: Int) -> [(key: FailureKey, value: Int)] {
        Array(failures.sorted { $0.value != $1.value ? $0.value > $1.value : $0.key.reason < $1.key.reason }.prefix(count))
    }

    /// How the campaign stands: finished, interrupted, or (no summary, or fewer rows than the
    /// input) still running or stopped without one.
    public var state: String {
        let inputRows = summaryFile?.identity?.inputRows
        if let summary = summaryFile {
            if summary.interrupted { return "interrupted (resumable with send --resume): \(counted.rows) rows have an outcome" }
            if let stopped = summary.stoppedBecause { return "stopped: \(stopped)" }
            if let shard = summary.identity?.shard, summary.identity?.mergedShards == nil {
                return "finished (shard \(shard.index) of \(shard.count))"
            }
            if let inputRows, counted.rows < inputRows { return "\(counted.rows) of \(inputRows) rows have an outcome: not finished" }
            return "finished"
        }
        return "no summary: still running, or stopped before writing one (\(counted.rows) rows have an outcome)"
    }
}

/// Rows finished and retries over the campaign's wall-clock time, from the timeline file each
/// run writes beside its results (`<results>.timeline`: one JSON line a second with the wall
/// time and each provider's cumulative rows and retries). Shards' timelines add up by time.
public struct CampaignTimeline {
    /// (wall time at the end of the step, provider, rows finished in the step, retries in the step)
    public private(set) var steps: [(wall: Double, provider: ProviderID, rows: Int, retries: Int)] = []
    public private(set) var files = 0
    public static let stepsMax = 2_000_000

    public init() {}

    /// Reads one timeline file; a missing file adds nothing. Lines that do not parse are skipped.
    public mutating func add(path: String, files storage: any FileStorage, catalog: ProviderCatalog) {
        guard let bytes = try? storage.readWholeFile(path) else { return }
        files += 1
        var last: [ProviderID: (rows: Int, retries: Int)] = [:]
        var lastElapsed = -1.0
        // A run's first line (elapsed 0) holds the rows it started from; a provider missing there started at 0.
        var started = false
        for line in bytes.split(separator: UInt8(ascii: "\n")) {
            guard steps.count < Self.stepsMax,
                  case .success(let object) = JSONScanner.parse(Array(line)),
                  let wall = object["wall"]?.doubleValue, let elapsed = object["elapsed"]?.doubleValue,
                  let rows = object["rows"]?.intMembers else { continue }
            let retries = object["retries"]?.intMembers ?? [:]
            if elapsed < lastElapsed || elapsed == 0 { last = [:] }  // a new run (send --resume) starts its own counts
            if elapsed == 0 { started = true } else if elapsed < lastElapsed { started = false }
            lastElapsed = elapsed
            for (name, count) in rows {
                guard let provider = catalog.provider(named: name) else { continue }
                let retried = retries[name] ?? 0
                if let before = last[provider] ?? (started && elapsed > 0 ? (0, 0) : nil) {
                    steps.append((wall, provider, max(0, count - before.rows), max(0, retried - before.retries)))
                }
                last[provider] = (count, retried)
            }
        }
    }

    /// Rows (or retries) per second in `binsMax` equal bins over the timeline's span, per provider.
    public func rates(binsMax: Int = 120, retries: Bool = false) -> (start: Double, binSeconds: Double, series: [ProviderID: [Double]]) {
        guard let first = steps.map(\.wall).min(), let last = steps.map(\.wall).max() else { return (0, 1, [:]) }
        let span = max(1, last - first)
        let width = max(1, (span / Double(binsMax)).rounded(.up))
        let count = Int((span / width).rounded(.up)) + 1
        var series: [ProviderID: [Double]] = [:]
        for step in steps {
            let bin = min(count - 1, Int((step.wall - first) / width))
            series[step.provider, default: [Double](repeating: 0, count: count)][bin] += Double(retries ? step.retries : step.rows) / width
        }
        return (first, width, series)
    }
}
