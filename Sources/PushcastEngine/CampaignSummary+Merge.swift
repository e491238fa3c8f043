import PushcastCore
import PushcastJSON
import PushcastProviderKit

/// Which campaign a summary (or a shard's files) belongs to.
public struct CampaignIdentity: Sendable, Equatable {
    /// The shard these figures are of; nil for a whole campaign (unsharded, or merged).
    public var shard: ShardSpec?
    /// For a merged summary: how many shards it was merged from.
    public var mergedShards: Int?
    public var campaign: String
    /// The input file's fingerprint (`ContentHash` of its bytes), as the journal records it.
    public var input: String
    /// Data rows in the whole input (every shard's), when known.
    public var inputRows: Int?

    public init(shard: ShardSpec?, mergedShards: Int? = nil, campaign: String, input: String, inputRows: Int?) {
        self.shard = shard
        self.mergedShards = mergedShards
        self.campaign = campaign
        self.input = input
        self.inputRows = inputRows
    }
}

extension CampaignSummary {
    /// What a summary needs so that summaries can be added up: answered counts and the latency
    /// histogram's buckets (percentiles of a merged campaign come from the merged histogram,
    /// never from averaged percentiles).
    static func appendMergeable(answered: Int, histogram: LatencyHistogram, to out: inout [UInt8]) {
        out += ",\"answered\":".utf8
        ResultEncoding.appendInteger(answered, to: &out)
        out += ",\"latency_histogram\":{\"unit\":\"us\",\"count\":".utf8
        ResultEncoding.appendInteger(Int(histogram.count), to: &out)
        out += ",\"min\":".utf8
        ResultEncoding.appendInteger(histogram.count > 0 ? Int(histogram.minimum) : 0, to: &out)
        out += ",\"max\":".utf8
        ResultEncoding.appendInteger(Int(histogram.maximum), to: &out)
        out += ",\"sum\":".utf8
        ResultEncoding.appendInteger(Int(truncatingIfNeeded: histogram.sum), to: &out)
        out += ",\"buckets\":[".utf8
        for (i, bucket) in histogram.buckets.enumerated() {
            out += (i > 0 ? ",[" : "[").utf8
            ResultEncoding.appendInteger(Int(bucket.lowerBound), to: &out)
            out.append(0x2C)
            ResultEncoding.appendInteger(Int(bucket.count), to: &out)
            out.append(0x5D)
        }
        out += "]}".utf8
    }

    func appendIdentity(to out: inout [UInt8]) {
        guard let identity else { return }
        out += ",\"campaign\":".utf8
        ResultEncoding.appendJSONString(identity.campaign, to: &out)
        out += ",\"input\":".utf8
        ResultEncoding.appendJSONString(identity.input, to: &out)
        out += ",\"input_rows\":".utf8
        if let rows = identity.inputRows { ResultEncoding.appendInteger(rows, to: &out) } else { out += "null".utf8 }
        out += ",\"shard\":".utf8
        if let shard = identity.shard {
            out += "{\"index\":".utf8
            ResultEncoding.appendInteger(shard.index, to: &out)
            out += ",\"count\":".utf8
            ResultEncoding.appendInteger(shard.count, to: &out)
            out += "}".utf8
        } else {
            out += "null".utf8
        }
        if let merged = identity.mergedShards {
            out += ",\"shards\":".utf8
            ResultEncoding.appendInteger(merged, to: &out)
        }
    }

    /// A summary read back from its JSON file (`--summary`); nil when the bytes are not one.
    public static func parse(_ bytes: [UInt8], catalog: ProviderCatalog) -> CampaignSummary? {
        guard case .success(let object) = JSONScanner.parse(bytes), let rows = object["rows"]?.intValue else { return nil }
        var summary = CampaignSummary()
        summary.rows = rows
        summary.outcomes = outcomeCounts(object["outcomes"])
        summary.reasons = object["reasons"]?.intMembers ?? [:]
        summary.retries = object["retries"]?.intValue ?? 0
        summary.wallSeconds = object["wall_seconds"]?.doubleValue ?? 0
        summary.answered = object["answered"]?.intValue ?? 0
        summary.latencyMicroseconds = histogram(object["latency_histogram"])
        summary.stoppedBecause = object["stopped"]?.stringValue
        summary.interrupted = object["interrupted"]?.boolValue ?? false
        summary.pruned = object["pruned"]?.intValue ?? 0
        for member in object["providers"]?.members ?? [] {
            guard let provider = catalog.provider(named: member.key), case .object = member.value else { continue }
            let p = member.value
            var figures = ProviderFigures()
            figures.rows = p["rows"]?.intValue ?? 0
            figures.outcomes = outcomeCounts(p["outcomes"])
            figures.reasons = p["reasons"]?.intMembers ?? [:]
            figures.answered = p["answered"]?.intValue ?? 0
            figures.latencyMicroseconds = histogram(p["latency_histogram"])
            summary.setFigures(figures, for: provider)
            summary.retriesByProvider[provider] = p["retries"]?.intValue ?? 0
        }
        for member in object["throttles"]?.members ?? [] {
            guard let provider = catalog.provider(named: member.key), let counts = member.value.intMembers else { continue }
            summary.throttles[provider] = (counts["device"] ?? 0, counts["provider"] ?? 0)
        }
        if let campaign = object["campaign"]?.stringValue, let input = object["input"]?.stringValue {
            let shard = object["shard"].flatMap { s -> ShardSpec? in
                guard let i = s["index"]?.intValue, let n = s["count"]?.intValue, n >= 1, n <= ShardSpec.countMax, i >= 0, i < n else { return nil }
                return ShardSpec(index: i, count: n)
            }
            summary.identity = CampaignIdentity(shard: shard, mergedShards: object["shards"]?.intValue, campaign: campaign, input: input,
                                                inputRows: object["input_rows"]?.intValue)
        }
        return summary
    }

    private static func outcomeCounts(_ value: JSONValue?) -> OutcomeCounts {
        var counts = OutcomeCounts()
        for (name, count) in value?.intMembers ?? [:] {
            if let kind = OutcomeKind(rawValue: name) { counts[kind] = count }
        }
        return counts
    }

    private static func histogram(_ value: JSONValue?) -> LatencyHistogram {
        guard let h = value, let buckets = h["buckets"]?.elements else { return LatencyHistogram() }
        let pairs = buckets.compactMap { bucket -> (UInt64, UInt64)? in
            guard let pair = bucket.elements, pair.count == 2, let low = pair[0].intValue, let count = pair[1].intValue,
                  low >= 0, count >= 0 else { return nil }
            return (UInt64(low), UInt64(count))
        }
        return LatencyHistogram(buckets: pairs.map { (lowerBound: $0.0, count: $0.1) }, minimum: UInt64(max(0, h["min"]?.intValue ?? 0)),
                                maximum: UInt64(max(0, h["max"]?.intValue ?? 0)), sum: UInt64(max(0, h["sum"]?.intValue ?? 0)))
    }

    /// Adds another shard's figures: counts summed, histograms merged, the wall time the
    /// longest shard's (shards run side by side), stopped reasons joined.
    public mutating func merge(_ other: CampaignSummary) {
        rows += other.rows
        for kind in OutcomeKind.allCases { outcomes[kind] += other.outcomes[kind] }
        for (reason, count) in other.reasons { reasons[reason, default: 0] += count }
        retries += other.retries
        answered += other.answered
        pruned += other.pruned
        latencyMicroseconds.merge(other.latencyMicroseconds)
        wallSeconds = max(wallSeconds, other.wallSeconds)
        interrupted = interrupted || other.interrupted
        if let reason = other.stoppedBecause { stoppedBecause = stoppedBecause.map { "\($0); \(reason)" } ?? reason }
        for (provider, theirs) in other.byProvider {
            var mine = byProvider[provider] ?? ProviderFigures()
            mine.rows += theirs.rows
            for kind in OutcomeKind.allCases { mine.outcomes[kind] += theirs.outcomes[kind] }
            for (reason, count) in theirs.reasons { mine.reasons[reason, default: 0] += count }
            mine.answered += theirs.answered
            mine.latencyMicroseconds.merge(theirs.latencyMicroseconds)
            setFigures(mine, for: provider)
            retriesByProvider[provider, default: 0] += other.retriesByProvider[provider] ?? 0
        }
        for (provider, theirs) in other.throttles {
            let mine = throttles[provider] ?? (0, 0)
            throttles[provider] = (mine.device + theirs.device, mine.provider + theirs.provider)
        }
    }
}
