import Foundation
import PushcastAPNs
import PushcastCore
import PushcastInput
import PushcastReactor
import PushcastTransport
import PushcastWire
import Synchronization

/// Reads token files through a reactor `InputFile`.
public final class InputFileSource: ByteSource {
    let file: InputFile
    public init(_ file: InputFile) { self.file = file }
    public func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int { try file.read(into: buffer) }
}

/// Where a run writes, and how it reports.
public struct CampaignOutput: Sendable {
    public var resultsPath: String
    public var resultsFormat: ResultsFormat
    public var prunePath: String
    public var summaryPath: String?
    public var progress: Bool
    public init(resultsPath: String, resultsFormat: ResultsFormat, prunePath: String, summaryPath: String?, progress: Bool) {
        self.resultsPath = resultsPath
        self.resultsFormat = resultsFormat
        self.prunePath = prunePath
        self.summaryPath = summaryPath
        self.progress = progress
    }
}

/// What a worker's send loop gets from the run.
public struct WorkloadContext {
    public let channel: NotificationChannel
    public let outcomes: OutcomeChannel
    public let gauge: WorkerGauge
    public let clock: TurnClock
    public let random: RandomSource
    public let inFlightMax: Int
}

/// A send loop a campaign worker runs: a `ClientWorkload` that can hand over what it holds when
/// its worker stops.
public protocol CampaignWorkload: ClientWorkload {
    func flush()
}

extension SendWorkload: CampaignWorkload {}

/// One provider's share of a campaign: its connections, worker threads, and send loop. Each
/// provider has its own lane (its own connections, rate limiter, retry queues and counters).
public struct ProviderLane: Sendable {
    public let provider: ProviderID
    public let client: ClientConfiguration
    public let connections: Int
    public let workers: Int
    public let makeWorkload: @Sendable (WorkloadContext) -> any CampaignWorkload

    public init(provider: ProviderID, client: ClientConfiguration, connections: Int, workers: Int,
                makeWorkload: @escaping @Sendable (WorkloadContext) -> any CampaignWorkload) {
        self.provider = provider
        self.client = client
        self.connections = connections
        self.workers = max(1, min(workers, connections))
        self.makeWorkload = makeWorkload
    }

    public static func apns(settings: APNsSendSettings, policy: SendPolicy, client: ClientConfiguration, connections: Int,
                            workers: Int) -> ProviderLane {
        ProviderLane(provider: .apns, client: client, connections: connections, workers: workers) { c in
            SendWorkload(adapter: APNsAdapter(settings: settings), policy: policy, channel: c.channel, outcomes: c.outcomes,
                         gauge: c.gauge, clock: c.clock, random: c.random, inFlightMax: c.inFlightMax)
        }
    }

    public static func fcm(settings: FCMSendSettings, policy: SendPolicy, client: ClientConfiguration, connections: Int,
                           workers: Int) -> ProviderLane {
        ProviderLane(provider: .fcm, client: client, connections: connections, workers: workers) { c in
            SendWorkload(adapter: FCMAdapter(settings: settings), policy: policy, channel: c.channel, outcomes: c.outcomes,
                         gauge: c.gauge, clock: c.clock, random: c.random, inFlightMax: c.inFlightMax)
        }
    }
}

/// One read of the input: a reader and the preparer that turns its rows into notifications for
/// some providers. A file feeds each provider through a reader of its own, so that a paused
/// provider never holds up the others; stdin, read once, feeds them all through one.
public struct CampaignFeed {
    public var reader: TokenFileReader
    public var preparer: RowPreparer

    public init(reader: TokenFileReader, preparer: RowPreparer) {
        self.reader = reader
        self.preparer = preparer
    }
}

/// The reader side of one lane: its channels and the batch being filled.
final class LaneFeeder {
    let provider: ProviderID
    let channels: [NotificationChannel]
    private var next = 0
    private var batch: [PreparedNotification] = []
    private var room = 0

    init(provider: ProviderID, channels: [NotificationChannel]) {
        self.provider = provider
        self.channels = channels
        batch.reserveCapacity(256)
    }

    /// Whether one more notification fits now. Waits for room for a sizeable batch: many tiny
    /// batches cost more than they carry.
    func canAccept() -> Bool {
        if batch.count < room { return true }
        flush()
        for _ in 0..<channels.count {
            let channel = channels[next]
            let free = channel.room
            if free >= min(64, channel.capacity) {
                room = min(free, 256)
                return true
            }
            next = (next + 1) % channels.count
        }
        return false
    }

    func add(_ notification: PreparedNotification) { batch.append(notification) }

    func flush() {
        if !batch.isEmpty {
            channels[next].push(&batch)
            next = (next + 1) % channels.count
        }
        room = 0
    }

    var isBlocked: Bool { batch.count >= room && channels.allSatisfy { $0.room < min(64, $0.capacity) } }

    func close() {
        flush()
        for channel in channels { channel.close() }
    }

    func wake() { for channel in channels { channel.wake() } }
}

/// One campaign: the reader (this thread) prepares rows and writes outcomes; each provider lane's
/// threads run a ClientWorker with a SendWorkload over their share of its connections.
public final class CampaignRun {
    private var feeds: [CampaignFeed]
    private let lanes: [ProviderLane]
    private let output: CampaignOutput
    private let totalRows: Int?
    private let log: (String) -> Void
    /// Called with the outcome channel before the workers start (a credential refresher's stop
    /// signal goes there).
    private let started: ((OutcomeChannel) -> Void)?
    /// Graceful stop: how many stop signals have arrived (polled by the reader loop), their name,
    /// and how long answers in flight may take after the first.
    public var interruption = Interruption()
    /// The journal, and what earlier runs of this campaign left (`--resume`); nil: no journal
    /// (stdin, tests).
    public var durability: CampaignDurability?

    public init(feeds: [CampaignFeed], lanes: [ProviderLane], output: CampaignOutput, totalRows: Int?,
                started: ((OutcomeChannel) -> Void)? = nil, log: @escaping (String) -> Void) {
        precondition(!feeds.isEmpty && !lanes.isEmpty)
        self.feeds = feeds
        self.lanes = lanes
        self.output = output
        self.totalRows = totalRows
        self.started = started
        self.log = log
    }

    /// An APNs-only campaign from one reader.
    public convenience init(reader: TokenFileReader, preparer: RowPreparer, settings: APNsSendSettings, client: ClientConfiguration,
                            connections: Int, workers: Int, output: CampaignOutput, totalRows: Int?,
                            log: @escaping (String) -> Void) {
        let lane = ProviderLane.apns(settings: settings, policy: SendPolicy(retry: settings.retry, retryUnknown: settings.retryUnknown),
                                     client: client, connections: connections, workers: workers)
        self.init(feeds: [CampaignFeed(reader: reader, preparer: preparer)], lanes: [lane], output: output,
                  totalRows: totalRows, log: log)
    }

    /// Runs the campaign to its end: every row read, every notification answered or given up,
    /// every outcome recorded. Output errors before the first send throw; a disk that fills
    /// during the run stops new sends and ends the run with `stoppedBecause` set.
    public func run() throws(CampaignError) -> CampaignSummary {
        let sink = try ResultFilesSink(resultsPath: output.resultsPath, format: output.resultsFormat, prunePath: output.prunePath,
                                       resuming: durability?.recovered != nil, restoredPrune: durability?.restoredPrune)
        let start = Reactor.nowNanoseconds()
        let outcomes = OutcomeChannel()
        started?(outcomes)
        let crew = LaneCrew(lanes: lanes, outcomes: outcomes)
        let loop = CampaignLoop(feeds: feeds, crew: crew, outcomes: outcomes, sinks: [sink], start: start,
                                progress: output.progress ? ProgressLine(total: totalRows, start: start) : nil,
                                interruption: interruption, durability: durability, log: log)
        loop.run()
        crew.threads.join()
        var failure: CampaignError? = nil
        do {
            try sink.close()
            if let durability {
                // Every row this run handed out now has its line: say so, after the lines are durable.
                if durability.policy != .never { try sink.sync(durable: true) }
                try durability.journal.markCleanStop()
            }
        } catch { failure = error }
        var summary = loop.summary
        summary.resultsPath = output.resultsPath
        summary.prunePath = output.prunePath
        crew.addRetries(to: &summary)
        summary.wallSeconds = Double(Reactor.nowNanoseconds() - start) / 1e9
        summary.stoppedBecause = loop.interruptedBecause ?? outcomes.reasonForStop ?? failure?.description
        summary.interrupted = loop.interruptedBecause != nil || outcomes.stoppedResumably
        loop.showProgress(summary: summary, last: true)
        if let path = output.summaryPath {
            // A summary that cannot be written (a full disk) is still printed by the caller.
            do {
                let file = try OutputFile(path: path)
                try file.append(summary.json)
                try file.flush()
            } catch {
                log("pushcast: cannot write the summary to \(path): \(error)\n")
            }
        }
        return summary
    }

}

/// The progress line on stderr: done/total, rate, ETA, and per provider: done, in flight, retries.
struct ProgressLine {
    struct LaneFigures {
        let provider: ProviderID
        let inFlight: Int
        let retries: Int
    }

    let total: Int?
    let start: UInt64

    func render(summary: CampaignSummary, lanes: [LaneFigures], now: UInt64) -> String {
        let done = summary.rows
        let seconds = max(0.001, Double(now - start) / 1e9)
        let rate = Double(done) / seconds
        var line = "\r"
        if let total, total > 0 {
            let percent = min(100, Double(done) * 100 / Double(total))
            line += String(format: "%d/%d rows (%.0f%%)", done, total, percent)
            let remaining = max(0, total - done)
            if rate > 0 { line += String(format: "  ETA %.0fs", Double(remaining) / rate) }
        } else {
            line += "\(done) rows"
        }
        line += String(format: "  %.0f/s", rate)
        for lane in lanes {
            let sent = summary.byProvider[lane.provider]?.rows ?? 0
            line += "  \(lane.provider.rawValue) \(sent) done, \(lane.inFlight) in flight, \(lane.retries) retries"
        }
        return line + "   "
    }
}
