import PushcastCore
import PushcastProviderKit

/// A campaign as Prometheus metrics, in the text exposition format (version 0.0.4), for
/// node_exporter's textfile collector: the batch-job convention of a file rewritten atomically
/// while the job runs and at its end. Sans-I/O: `render` turns a `CampaignProgress` and the wall
/// clock into the file's text; the caller writes it.
///
/// Every series carries the campaign id and the shard as labels. Label sets are bounded whatever
/// the servers answer: providers and outcomes are fixed, and reasons outside `ReasonCatalog`
/// become `other`; tokens never appear.
public struct CampaignMetrics {
    public let campaign: String
    /// "2/8" for shard 2 of 8; "0/1" for a whole campaign.
    public let shard: String
    /// When this file's campaign (or an earlier one written to the same file) last finished,
    /// seconds since the epoch.
    public var lastSuccessEpochSeconds: Double?
    /// Latency buckets (seconds), Prometheus `le` bounds.
    public static let latencyBounds: [Double] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]
    private var previous: (elapsed: Double, rows: [ProviderID: Int])?
    private var startEpochSeconds: Double?
    /// The reasons that are labels (the catalog's providers' and pushcast's own).
    private let reasons: ReasonCatalog

    public init(campaign: String, shard: ShardSpec?, catalog: ProviderCatalog, lastSuccessEpochSeconds: Double? = nil) {
        reasons = ReasonCatalog(catalog)
        self.campaign = campaign
        self.shard = shard.map { "\($0.index)/\($0.count)" } ?? "0/1"
        self.lastSuccessEpochSeconds = lastSuccessEpochSeconds
    }

    /// The exposition text for this moment. A final look that finished the campaign (exit 0 or 1:
    /// every row has its outcome) sets the last-success time to `nowEpochSeconds`.
    public mutating func render(_ progress: CampaignProgress, nowEpochSeconds: Double) -> String {
        let start = startEpochSeconds ?? nowEpochSeconds - progress.elapsedSeconds
        startEpochSeconds = start
        let summary = progress.summary
        if progress.isFinal && summary.exitStatus <= 1 { lastSuccessEpochSeconds = nowEpochSeconds }
        var out = MetricsText(base: "campaign=\(Self.quoted(campaign)),shard=\(Self.quoted(shard))")
        rowMetrics(progress, &out)
        laneMetrics(progress, &out)
        latencyMetrics(summary, &out)
        out.family("pushcast_campaign_input_rows", "gauge", "Data rows in the input (all shards).")
        if let rows = summary.identity?.inputRows ?? progress.totalRows { out.sample("pushcast_campaign_input_rows", [], Double(rows)) }
        out.family("pushcast_campaign_start_timestamp_seconds", "gauge", "When the campaign (this run of it) started.")
        out.sample("pushcast_campaign_start_timestamp_seconds", [], start)
        out.family("pushcast_campaign_elapsed_seconds", "gauge", "Seconds since the campaign (this run of it) started.")
        out.sample("pushcast_campaign_elapsed_seconds", [], progress.elapsedSeconds)
        out.family("pushcast_campaign_running", "gauge", "1 while the campaign runs, 0 once it has ended.")
        out.sample("pushcast_campaign_running", [], progress.isFinal ? 0 : 1)
        if progress.isFinal {
            out.family("pushcast_campaign_exit_status", "gauge", "0 done, 1 done with failed or unknown rows, 2 stopped, 3 interrupted (resumable).")
            out.sample("pushcast_campaign_exit_status", [], Double(summary.exitStatus))
        }
        if let lastSuccessEpochSeconds {
            out.family("pushcast_campaign_last_success_timestamp_seconds", "gauge",
                       "When a campaign written to this file last finished with every row recorded (exit status 0 or 1).")
            out.sample("pushcast_campaign_last_success_timestamp_seconds", [], lastSuccessEpochSeconds)
        }
        return out.text
    }

    private func rowMetrics(_ progress: CampaignProgress, _ out: inout MetricsText) {
        let summary = progress.summary
        var providers = summary.byProvider
        for lane in progress.lanes where providers[lane.provider] == nil { providers[lane.provider] = ProviderFigures() }
        let order = providers.keys.sorted { $0.position < $1.position }
        out.family("pushcast_rows_total", "counter", "Input rows with an outcome, by provider (none: rows without one) and outcome.")
        var withProvider = OutcomeCounts()
        for provider in order {
            for kind in OutcomeKind.allCases {
                let count = providers[provider]!.outcomes[kind]
                withProvider[kind] += count
                out.sample("pushcast_rows_total", [("provider", provider.rawValue), ("outcome", kind.rawValue)], Double(count))
            }
        }
        for kind in OutcomeKind.allCases where summary.outcomes[kind] > withProvider[kind] {
            out.sample("pushcast_rows_total", [("provider", "none"), ("outcome", kind.rawValue)], Double(summary.outcomes[kind] - withProvider[kind]))
        }
        out.family("pushcast_reason_rows_total", "counter",
                   "Rows by the reason the provider or pushcast gave; reasons outside pushcast's table are counted as other.")
        for provider in order {
            var byLabel: [String: Int] = [:]
            for (reason, count) in providers[provider]!.reasons { byLabel[reasons.label(reason), default: 0] += count }
            for (label, count) in byLabel.sorted(by: { $0.key < $1.key }) {
                out.sample("pushcast_reason_rows_total", [("provider", provider.rawValue), ("reason", label)], Double(count))
            }
        }
        out.family("pushcast_pruned_rows_total", "counter", "Rows written to the prune file (dead and invalid tokens).")
        out.sample("pushcast_pruned_rows_total", [], Double(summary.pruned))
    }

    private mutating func laneMetrics(_ progress: CampaignProgress, _ out: inout MetricsText) {
        out.family("pushcast_in_flight", "gauge", "Notifications sent and not yet answered.")
        for lane in progress.lanes { out.sample("pushcast_in_flight", [("provider", lane.provider.rawValue)], Double(lane.inFlight)) }
        out.family("pushcast_retries_total", "counter", "Attempts repeated after a retryable answer (429, 5xx, a refused stream).")
        for lane in progress.lanes {
            let retries = progress.isFinal ? progress.summary.retriesByProvider[lane.provider] ?? lane.retries : lane.retries
            out.sample("pushcast_retries_total", [("provider", lane.provider.rawValue)], Double(retries))
        }
        // The rate over the time since the last rendering (since the start for the first).
        out.family("pushcast_connections_dropped_total", "counter",
                   "Connections that ended other than gracefully (closed by the server, an error from it, no answer to PING), by reason.")
        for lane in progress.lanes {
            for (reason, count) in lane.drops.sorted(by: { $0.key < $1.key }) {
                out.sample("pushcast_connections_dropped_total", [("provider", lane.provider.rawValue), ("reason", reason)], Double(count))
            }
        }
        out.family("pushcast_throttles_total", "counter",
                   "429 answers by scope: device (one row waited) or provider (the whole lane slowed and paused).")
        for lane in progress.lanes {
            out.sample("pushcast_throttles_total", [("provider", lane.provider.rawValue), ("scope", "device")], Double(lane.deviceThrottles))
            out.sample("pushcast_throttles_total", [("provider", lane.provider.rawValue), ("scope", "provider")], Double(lane.providerThrottles))
        }
        out.family("pushcast_rows_per_second", "gauge", "Rows finished per second since the previous update of this file.")
        let rows = progress.summary.byProvider.mapValues(\.rows)
        let elapsed = progress.elapsedSeconds
        for lane in progress.lanes {
            let before = previous?.rows[lane.provider] ?? 0
            let seconds = max(0.001, elapsed - (previous?.elapsed ?? 0))
            out.sample("pushcast_rows_per_second", [("provider", lane.provider.rawValue)], Double((rows[lane.provider] ?? 0) - before) / seconds)
        }
        previous = (elapsed, rows)
    }

    private func latencyMetrics(_ summary: CampaignSummary, _ out: inout MetricsText) {
        out.family("pushcast_latency_seconds", "histogram", "Time from a notification's first send to its final answer (to the histogram's 1.6 % resolution).")
        for provider in summary.providers {
            let histogram = summary.byProvider[provider]!.latencyMicroseconds
            let buckets = histogram.buckets
            let labels = [("provider", provider.rawValue)]
            for bound in Self.latencyBounds {
                let limit = UInt64(bound * 1e6)
                let count = buckets.reduce(UInt64(0)) { $0 + ($1.lowerBound <= limit ? $1.count : 0) }
                out.sample("pushcast_latency_seconds_bucket", labels + [("le", MetricsText.number(bound))], Double(count))
            }
            out.sample("pushcast_latency_seconds_bucket", labels + [("le", "+Inf")], Double(histogram.count))
            out.sample("pushcast_latency_seconds_sum", labels, Double(histogram.sum) / 1e6)
            out.sample("pushcast_latency_seconds_count", labels, Double(histogram.count))
        }
    }

    /// A label value in the exposition format: backslash, double quote and newline escaped.
    static func quoted(_ value: String) -> String {
        var out = "\""
        for character in value.unicodeScalars {
            switch character {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            default: out.unicodeScalars.append(character)
            }
        }
        return out + "\""
    }

    /// The last-success time an earlier run left in a metrics file's text (kept across runs, as
    /// the textfile-collector convention expects of a batch job's file).
    public static func lastSuccess(inExposition text: String) -> Double? {
        for line in text.split(separator: "\n") where line.hasPrefix("pushcast_campaign_last_success_timestamp_seconds") {
            if let value = line.split(separator: " ").last.flatMap({ Double($0) }) { return value }
        }
        return nil
    }
}

/// The exposition text being built: families (HELP and TYPE) and samples with the base labels.
struct MetricsText {
    let base: String
    var text = ""

    mutating func family(_ name: String, _ type: String, _ help: String) {
        text += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
    }

    mutating func sample(_ name: String, _ labels: [(String, String)], _ value: Double) {
        let extra = labels.map { "\($0.0)=\(CampaignMetrics.quoted($0.1))" }
        text += "\(name){\(([base] + extra).joined(separator: ","))} \(Self.number(value))\n"
    }

    /// Integers without a fraction; others with enough digits.
    static func number(_ value: Double) -> String {
        if value == value.rounded() && abs(value) < 1e15 { return String(Int64(value)) }
        return value.isFinite ? String(value) : (value.isNaN ? "NaN" : value > 0 ? "+Inf" : "-Inf")
    }
}
