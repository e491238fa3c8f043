import PushcastCore
import PushcastInput
import PushcastTransport
import PushcastWire
import Synchronization

/// Where a run writes, and how it reports.
public struct CampaignOutput: Sendable {
    public var resultsPath: String
    public var resultsFormat: ResultsFormat
    public var prunePath: String
    public var summaryPath: String?
    public var progress: Bool
    /// The campaign, input and shard, written into the summary file.
    public var identity: CampaignIdentity?
    public init(resultsPath: String, resultsFormat: ResultsFormat, prunePath: String, summaryPath: String?, progress: Bool) {
        self.resultsPath = resultsPath
        self.resultsFormat = resultsFormat
        self.prunePath = prunePath
        self.summaryPath = summaryPath
        self.progress = progress
    }
}

/// One read of the input: a reader and the preparer that turns its rows into notifications for
/// some providers. A file feeds each provider through a reader of its own, so that a paused
/// provider never holds up the others; stdin, read once, feeds them all through one.
public struct CampaignFeed {
    public var reader: any RowSource
    public var preparer: RowPreparer

    public init(reader: any RowSource, preparer: RowPreparer) {
        self.reader = reader
        self.preparer = preparer
    }

    /// The feed's name in the journal: its providers, in position order (`apns`, `apns+fcm`);
    /// a feed of some of a routed provider's routes adds its busiest route
    /// (`webpush@https://push.example`).
    public var journalKey: String {
        let providers = preparer.sends.sorted { $0.position < $1.position }.map(\.rawValue).joined(separator: "+")
        guard let first = preparer.routeFilter?.routes.first else { return providers }
        return providers + "@" + JournalText.escape(first)
    }

    /// Whether this feed hands rows to `lane`.
    func feeds(_ lane: ProviderLane) -> Bool {
        guard preparer.sends.contains(lane.provider) else { return false }
        guard let route = lane.route, let filter = preparer.routeFilter else { return true }
        var text = route.prefix
        return text.withUTF8 { filter.index(of: UnsafeRawBufferPointer($0)) } != nil
    }

    /// The next record, the preparer's layout grown first when the reader found new columns.
    /// One access to the feed: reaching the reader and the preparer from outside it
    /// (`feeds[f].preparer.follow(feeds[f].reader)`) copied the reader, or the whole preparer,
    /// on every row.
    mutating func nextRecord() throws -> InputRecord? {
        let record = try reader.next()
        if preparer.isBehind(columnCount: reader.columnCount) { preparer.follow(reader) }
        return record
    }
}

/// One campaign: the reader (this thread) prepares rows and writes outcomes; each provider lane's
/// threads run a ClientWorker with a SendWorkload over their share of its connections.
public final class CampaignRun {
    private var feeds: [CampaignFeed]
    private let lanes: [ProviderLane]
    private let output: CampaignOutput
    /// The files the run writes, and its clocks.
    private let machine: Machine
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
    /// Follow the run as it goes (progress, metrics); `output.progress` adds the terminal line.
    public var observers: [CampaignObserver] = []
    /// Read once at the end, into the summary's notes (a log stream that stopped taking writes).
    public var notes: () -> [String] = { [] }

    public init(feeds: [CampaignFeed], lanes: [ProviderLane], output: CampaignOutput, machine: Machine, totalRows: Int?,
                started: ((OutcomeChannel) -> Void)? = nil, log: @escaping (String) -> Void) {
        precondition(!feeds.isEmpty && !lanes.isEmpty)
        self.feeds = feeds
        self.lanes = lanes
        self.output = output
        self.machine = machine
        self.totalRows = totalRows
        self.started = started
        self.log = log
    }

    /// Runs the campaign to its end: every row read, every notification answered or given up,
    /// every outcome recorded. Output errors before the first send throw; a disk that fills
    /// during the run stops new sends and ends the run with `stoppedBecause` set.
    public func run() throws(CampaignError) -> CampaignSummary {
        let sink = try ResultFilesSink(resultsPath: output.resultsPath, format: output.resultsFormat, prunePath: output.prunePath,
                                       resuming: durability?.recovered != nil, restoredPrune: durability?.restoredPrune,
                                       columns: ResultColumns(feeds[0].preparer.catalog), files: machine.files)
        let makeClock = machine.monotonicClock
        return run(sinks: [sink]) { lanes, outcomes in LaneCrew(lanes: lanes, outcomes: outcomes, makeClock: makeClock) }
    }

    /// Runs the campaign with these sinks and the crew `makeCrew` builds: real threads and
    /// sockets (`run()`), or the simulator's in-memory server and virtual clock.
    public func run<Crew: CampaignCrew>(sinks: [OutcomeSink], makeCrew: ([ProviderLane], OutcomeChannel) -> Crew) -> CampaignSummary {
        var feedKeys: [String: String] = [:]
        for lane in lanes { feedKeys[lane.key] = feeds.first { $0.feeds(lane) }?.journalKey }
        let outcomes = OutcomeChannel(dispatch: durability?.journal.dispatchLog(feedKeys: feedKeys))
        started?(outcomes)
        let crew = makeCrew(lanes, outcomes)
        let start = crew.nowNanoseconds()
        let loop = CampaignLoop(feeds: feeds, crew: crew, outcomes: outcomes, sinks: sinks, start: start,
                                observers: observers + (output.progress ? [TerminalProgressLine(log: log)] : []), totalRows: totalRows,
                                interruption: interruption, durability: durability, wallClockSeconds: machine.wallClockSeconds, log: log)
        loop.run()
        crew.join()
        var summary = loop.summary
        if crew.hasCrashed {
            // A dead process writes nothing more: what its files hold is what a resume finds.
            for sink in sinks { sink.processDied() }
            summary.stoppedBecause = "crashed"
            return summary
        }
        let failure = finish(sinks)
        summary.resultsPath = output.resultsPath
        summary.prunePath = output.prunePath
        crew.board.addRetries(to: &summary)
        summary.wallSeconds = Double(crew.nowNanoseconds() - start) / 1e9
        summary.stoppedBecause = loop.interruptedBecause ?? outcomes.reasonForStop ?? failure?.description
        summary.interrupted = loop.interruptedBecause != nil || outcomes.stoppedResumably
        summary.identity = output.identity
        summary.notes = notes()
        loop.showProgress(summary: summary, last: true)
        writeSummary(summary)
        return summary
    }

    /// Closes the sinks; with a journal, marks the clean stop once every line is durable.
    private func finish(_ sinks: [OutcomeSink]) -> CampaignError? {
        do {
            for sink in sinks { try sink.close() }
            if let durability {
                // Every row this run handed out now has its line: say so, after the lines are durable.
                if durability.policy != .never { for sink in sinks { try sink.sync(durable: true) } }
                try durability.journal.markCleanStop()
            }
        } catch { return error }
        return nil
    }

    private func writeSummary(_ summary: CampaignSummary) {
        if let path = output.summaryPath {
            // A summary that cannot be written (a full disk) is still printed by the caller.
            do {
                let file = try machine.files.createForAppending(path)
                try file.append(summary.json)
                try file.flush()
            } catch {
                log("pushcast: cannot write the summary to \(path): \(error)\n")
            }
        }
    }

}

