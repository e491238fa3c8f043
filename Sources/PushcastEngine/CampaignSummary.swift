import PushcastCore

/// One provider's share of the end-of-run figures.
public struct ProviderFigures: Sendable {
    public var rows = 0
    /// Counts by outcome (`OutcomeCounts`: an array by the kind's position, not a hashed table,
    /// since this runs once per row).
    public var outcomes = OutcomeCounts()
    public var reasons: [String: Int] = [:]
    public var latencyMicroseconds = LatencyHistogram()

    mutating func record(_ r: OutcomeRecord) {
        rows += 1
        outcomes[r.outcome] += 1
        if r.status != nil { answered += 1 }
        if let reason = r.reason { reasons[reason, default: 0] += 1 }
        if let latency = r.latencyMilliseconds { latencyMicroseconds.record(UInt64(latency * 1000)) }
    }

    /// Notifications the provider answered (rows that were never sent, such as a provider without
    /// credentials, do not count).
    var answered = 0
}

/// A count per outcome kind.
public struct OutcomeCounts: Sendable, Sequence {
    private var counts = [Int](repeating: 0, count: OutcomeKind.allCases.count)

    public init() {}

    private static func index(_ kind: OutcomeKind) -> Int {
        switch kind {
        case .delivered: 0
        case .pruned: 1
        case .failed: 2
        case .invalid: 3
        case .duplicate: 4
        case .unknown: 5
        }
    }

    public subscript(kind: OutcomeKind) -> Int {
        get { counts[Self.index(kind)] }
        set { counts[Self.index(kind)] = newValue }
    }

    /// The kinds with a non-zero count.
    public func makeIterator() -> some IteratorProtocol<(key: OutcomeKind, value: Int)> {
        OutcomeKind.allCases.lazy.map { (key: $0, value: self[$0]) }.filter { $0.value > 0 }.makeIterator()
    }
}

/// The end-of-run figures: counts per outcome and reason, rate, latency, wall time; overall and
/// per provider.
public struct CampaignSummary: Sendable {
    public var rows = 0
    public var outcomes = OutcomeCounts()
    public var reasons: [String: Int] = [:]
    public var latencyMicroseconds = LatencyHistogram()
    public var wallSeconds = 0.0
    public var retries = 0
    public var stoppedBecause: String?
    /// Things the run met that changed no outcome but that its owner should know (a log
    /// pipe that went away); each said once.
    public var notes: [String] = []
    /// Connections dropped (not closed gracefully), per provider and reason.
    public var connectionsDropped: [ProviderID: [String: Int]] = [:]
    /// 429s per provider: those about one device (its row waited), and those taken as the
    /// provider's own limit (the lane slowed and paused).
    public var throttles: [ProviderID: (device: Int, provider: Int)] = [:]
    /// The run stopped early and can be resumed (`send --resume`): a signal, a full disk, or a
    /// server that turned bad after answering. Exit status 3.
    public var interrupted = false
    public var resultsPath = ""
    public var prunePath = ""
    public var pruned = 0
    /// Notifications a provider answered.
    public var answered = 0
    /// Rows by the provider they were meant for (rows with no provider, such as malformed ones,
    /// are only in the totals).
    public var byProvider: [ProviderID: ProviderFigures] {
        var out: [ProviderID: ProviderFigures] = [:]
        for (id, figures) in zip(providerIDs, figures) where id != nil { out[id!] = figures }
        return out
    }
    /// The providers seen so far, in position order (the order the summary lists them in).
    public var providers: [ProviderID] { providerIDs.compactMap { $0 } }
    /// By provider position.
    private var figures = [ProviderFigures](repeating: ProviderFigures(), count: ProviderID.positionsMax)
    private var providerIDs = [ProviderID?](repeating: nil, count: ProviderID.positionsMax)
    public var retriesByProvider: [ProviderID: Int] = [:]
    /// Which campaign, input and shard these figures are of (written into the summary file, so
    /// that `pushcast merge` can check that shards belong together).
    public var identity: CampaignIdentity?

    public init() {}

    /// Replaces one provider's figures (a summary read back from its file).
    mutating func setFigures(_ figures: ProviderFigures?, for provider: ProviderID) {
        providerIDs[provider.position] = figures == nil ? nil : provider
        self.figures[provider.position] = figures ?? ProviderFigures()
    }

    public mutating func record(_ r: OutcomeRecord) {
        rows += 1
        outcomes[r.outcome] += 1
        if r.status != nil { answered += 1 }
        if let reason = r.reason { reasons[reason, default: 0] += 1 }
        if let latency = r.latencyMilliseconds { latencyMicroseconds.record(UInt64(latency * 1000)) }
        if r.belongsInPruneFile { pruned += 1 }
        if let provider = r.provider {
            // Written once per provider: not a copy of its name per row.
            if providerIDs[provider.position] == nil { providerIDs[provider.position] = provider }
            figures[provider.position].record(r)
        }
    }

    /// Notifications that got an answer from the provider per second of wall time.
    public var sentPerSecond: Double {
        return wallSeconds > 0 ? Double(answered) / wallSeconds : 0
    }

    /// 0 when every row ended in an expected outcome, 1 when some failed or are unknown, 2 when
    /// the run had to stop.
    public var exitStatus: Int32 {
        if interrupted { return 3 }
        if stoppedBecause != nil { return 2 }
        return outcomes.contains { !$0.key.isExpected && $0.value > 0 } ? 1 : 0
    }

    public var text: String {
        var lines: [String] = []
        let order: [OutcomeKind] = [.delivered, .pruned, .failed, .invalid, .duplicate, .unknown]
        lines.append("rows: \(rows)  " + order.map { "\($0.rawValue) \(outcomes[$0])" }.joined(separator: "  "))
        if !reasons.isEmpty {
            lines.append("reasons: " + reasons.sorted { $0.value != $1.value ? $0.value > $1.value : $0.key < $1.key }
                .map { "\($0.key) \($0.value)" }.joined(separator: ", "))
        }
        let l = latencyMicroseconds
        lines.append("rate: \(fixed(sentPerSecond, 0)) notifications/s   latency p50 \(fixed(Double(l.value(atQuantile: 0.5)) / 1000, 1)) ms, "
            + "p99 \(fixed(Double(l.value(atQuantile: 0.99)) / 1000, 1)) ms   wall \(fixed(wallSeconds, 2)) s   retries \(retries)")
        // A run of the first provider alone (APNs) has no breakdown: its totals say it all.
        if providers.count > 1 || providers.first.map({ $0.position != 0 }) == true {
            for provider in providers {
                let p = figures[provider.position]
                let lp = p.latencyMicroseconds
                lines.append("  \(provider.rawValue): rows \(p.rows)  " + order.map { "\($0.rawValue) \(p.outcomes[$0])" }.joined(separator: "  ")
                    + "   \(fixed(wallSeconds > 0 ? Double(p.answered) / wallSeconds : 0, 0))/s"
                    + "   p50 \(fixed(Double(lp.value(atQuantile: 0.5)) / 1000, 1)) ms, p99 \(fixed(Double(lp.value(atQuantile: 0.99)) / 1000, 1)) ms"
                    + "   retries \(retriesByProvider[provider] ?? 0)")
                if !p.reasons.isEmpty {
                    lines.append("    reasons: " + p.reasons.sorted { $0.value != $1.value ? $0.value > $1.value : $0.key < $1.key }
                        .map { "\($0.key) \($0.value)" }.joined(separator: ", "))
                }
            }
        }
        for (provider, drops) in connectionsDropped.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
            lines.append("connections dropped (\(provider.rawValue)): " + drops.sorted { $0.value != $1.value ? $0.value > $1.value : $0.key < $1.key }
                .map { "\($0.key) \($0.value)" }.joined(separator: ", "))
        }
        for (provider, count) in throttles.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
            lines.append("throttled (\(provider.rawValue)): \(count.device) 429s about one device (the row waited), "
                + "\(count.provider) about the provider (every send paused)")
        }
        for note in notes { lines.append("note: \(note)") }
        if let stoppedBecause { lines.append("stopped: \(stoppedBecause)") }
        return lines.joined(separator: "\n")
    }

    /// `{"key":count,…}`, keys sorted.
    static func appendCounts(_ counts: [String: Int], to out: inout [UInt8]) {
        out.append(0x7B)
        for (i, entry) in counts.sorted(by: { $0.key < $1.key }).enumerated() {
            if i > 0 { out.append(0x2C) }
            ResultEncoding.appendJSONString(entry.key, to: &out)
            out.append(0x3A)
            ResultEncoding.appendInteger(entry.value, to: &out)
        }
        out.append(0x7D)
    }

    public var json: String {
        var out = [UInt8]()
        out += "{\"rows\":".utf8
        ResultEncoding.appendInteger(rows, to: &out)
        out += ",\"outcomes\":{".utf8
        for (i, kind) in OutcomeKind.allCases.enumerated() {
            if i > 0 { out.append(0x2C) }
            out += "\"\(kind.rawValue)\":".utf8
            ResultEncoding.appendInteger(outcomes[kind], to: &out)
        }
        out += "},\"reasons\":".utf8
        Self.appendCounts(reasons, to: &out)
        out += ",\"retries\":".utf8
        ResultEncoding.appendInteger(retries, to: &out)
        out += (",\"notifications_per_second\":\(fixed(sentPerSecond, 1)),\"latency_ms\":"
            + "{\"p50\":\(fixed(Double(latencyMicroseconds.value(atQuantile: 0.5)) / 1000, 1)),"
            + "\"p99\":\(fixed(Double(latencyMicroseconds.value(atQuantile: 0.99)) / 1000, 1))},\"wall_seconds\":\(fixed(wallSeconds, 3))").utf8
        out += ",\"providers\":{".utf8
        for (i, provider) in providers.enumerated() {
            let p = figures[provider.position]
            if i > 0 { out.append(0x2C) }
            out += "\"\(provider.rawValue)\":{\"rows\":".utf8
            ResultEncoding.appendInteger(p.rows, to: &out)
            out += ",\"outcomes\":{".utf8
            for (j, kind) in OutcomeKind.allCases.enumerated() {
                if j > 0 { out.append(0x2C) }
                out += "\"\(kind.rawValue)\":".utf8
                ResultEncoding.appendInteger(p.outcomes[kind], to: &out)
            }
            out += "},\"reasons\":".utf8
            Self.appendCounts(p.reasons, to: &out)
            out += ",\"retries\":".utf8
            ResultEncoding.appendInteger(retriesByProvider[provider] ?? 0, to: &out)
            out += (",\"notifications_per_second\":\(fixed(wallSeconds > 0 ? Double(p.answered) / wallSeconds : 0, 1)),\"latency_ms\":"
                + "{\"p50\":\(fixed(Double(p.latencyMicroseconds.value(atQuantile: 0.5)) / 1000, 1)),"
                + "\"p99\":\(fixed(Double(p.latencyMicroseconds.value(atQuantile: 0.99)) / 1000, 1))}").utf8
            Self.appendMergeable(answered: p.answered, histogram: p.latencyMicroseconds, to: &out)
            out += "}".utf8
        }
        out += "}".utf8
        Self.appendMergeable(answered: answered, histogram: latencyMicroseconds, to: &out)
        appendIdentity(to: &out)
        out += ",\"results\":".utf8
        ResultEncoding.appendJSONString(resultsPath, to: &out)
        out += ",\"prune\":".utf8
        ResultEncoding.appendJSONString(prunePath, to: &out)
        out += ",\"stopped\":".utf8
        ResultEncoding.appendJSONString(stoppedBecause, to: &out)
        out += ",\"interrupted\":".utf8
        out += (interrupted ? "true" : "false").utf8
        if !connectionsDropped.isEmpty {
            out += ",\"connections_dropped\":{".utf8
            for (i, entry) in connectionsDropped.sorted(by: { $0.key.rawValue < $1.key.rawValue }).enumerated() {
                if i > 0 { out.append(0x2C) }
                out += "\"\(entry.key.rawValue)\":".utf8
                Self.appendCounts(entry.value, to: &out)
            }
            out += "}".utf8
        }
        if !throttles.isEmpty {
            out += ",\"throttles\":{".utf8
            for (i, entry) in throttles.sorted(by: { $0.key.rawValue < $1.key.rawValue }).enumerated() {
                if i > 0 { out.append(0x2C) }
                out += "\"\(entry.key.rawValue)\":".utf8
                Self.appendCounts(["device": entry.value.device, "provider": entry.value.provider], to: &out)
            }
            out += "}".utf8
        }
        if !notes.isEmpty {
            out += ",\"notes\":[".utf8
            for (i, note) in notes.enumerated() {
                if i > 0 { out.append(0x2C) }
                ResultEncoding.appendJSONString(note, to: &out)
            }
            out += "]".utf8
        }
        out += ",\"exit_status\":".utf8
        ResultEncoding.appendInteger(Int(exitStatus), to: &out)
        out += "}\n".utf8
        return String(decoding: out, as: UTF8.self)
    }
}

/// `%.<places>f` (NumberText), for the summary's lines and JSON.
private func fixed(_ value: Double, _ places: Int) -> String { NumberText.fixed(value, places: places) }
