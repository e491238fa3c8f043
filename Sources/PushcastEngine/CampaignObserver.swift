import PushcastCore

/// A look at a running campaign: the figures so far, each lane's gauges, and the time. Handed to
/// every `CampaignObserver` about four times a second on the reader thread, and once at the end
/// (`isFinal`, with the finished summary: wall time, retries, why it stopped).
public struct CampaignProgress {
    public let summary: CampaignSummary
    public let lanes: [LaneFigures]
    /// Data rows in the input (this shard's share included), when known.
    public let totalRows: Int?
    public let elapsedNanoseconds: UInt64
    public let isFinal: Bool
    /// A stop signal arrived: no new sends, the answers in flight are awaited.
    public let isDraining: Bool

    /// One lane's gauges.
    public struct LaneFigures: Sendable {
        public let provider: ProviderID
        public let inFlight: Int
        public let retries: Int
        /// Connections dropped so far, by reason (`ConnectionDrops`).
        public var drops: [String: Int] = [:]
        /// 429s that delayed one row, and those that slowed the whole lane.
        public var deviceThrottles = 0
        public var providerThrottles = 0
    }

    public var elapsedSeconds: Double { max(0.001, Double(elapsedNanoseconds) / 1e9) }
    /// Rows with an outcome per second since the start.
    public var rowsPerSecond: Double { Double(summary.rows) / elapsedSeconds }

    /// Seconds left at the average rate so far; nil without a total or a rate.
    public var etaSeconds: Double? {
        guard let totalRows, totalRows > 0, rowsPerSecond > 0 else { return nil }
        return Double(max(0, totalRows - summary.rows)) / rowsPerSecond
    }

    /// The progress line's text: done/total, rate, ETA, and per provider: done, in flight, retries.
    public var text: String {
        let done = summary.rows
        var line = ""
        if let totalRows, totalRows > 0 {
            let percent = min(100, Double(done) * 100 / Double(totalRows))
            line += "\(done)/\(totalRows) rows (\(NumberText.fixed(percent, places: 0))%)"
            if let etaSeconds { line += "  ETA \(NumberText.fixed(etaSeconds, places: 0))s" }
        } else {
            line += "\(done) rows"
        }
        line += "  \(NumberText.fixed(rowsPerSecond, places: 0))/s"
        for lane in lanes {
            let sent = summary.byProvider[lane.provider]?.rows ?? 0
            line += "  \(lane.provider.rawValue) \(sent) done, \(lane.inFlight) in flight, \(lane.retries) retries"
        }
        return line + (isDraining && !isFinal ? "  draining" : "")
    }
}

/// Something that follows a campaign as it runs: the progress display, the metrics file.
/// Called on the reader thread: it must be quick, and never block on the network.
public protocol CampaignObserver: AnyObject {
    func observe(_ progress: CampaignProgress)
}

/// The progress line for a person at a terminal: one line redrawn in place (a carriage return
/// before each), ended with a newline when the run ends. `CampaignOutput.progress` turns it on.
final class TerminalProgressLine: CampaignObserver {
    private let log: (String) -> Void

    init(log: @escaping (String) -> Void) { self.log = log }

    func observe(_ progress: CampaignProgress) {
        log("\r" + progress.text + (progress.isFinal ? "\n" : "   "))
    }
}
