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

    public func run() throws(CampaignError) -> CampaignSummary {
        let results: OutputFile, prune: OutputFile
        do {
            results = try OutputFile(path: output.resultsPath, bufferBytes: 256 * 1024)
            prune = try OutputFile(path: output.prunePath)
            if output.resultsFormat == .csv { try results.append(ResultEncoding.csvHeader) }
            try prune.append(ResultEncoding.pruneHeader)
        } catch {
            throw .output(error.description)
        }
        var summary = CampaignSummary()
        summary.resultsPath = output.resultsPath
        summary.prunePath = output.prunePath
        let start = Reactor.nowNanoseconds()

        let outcomes = OutcomeChannel()
        started?(outcomes)
        let threads = WorkerThreads()
        let finishedWorkers = SharedCounter()
        var feeders: [LaneFeeder] = []
        var gaugesByLane: [[WorkerGauge]] = []
        var workerCount = 0
        for lane in lanes {
            // Channels sized from the in-flight budget of each worker.
            let streams = lane.client.limits.streamsPerConnectionMax
            var shares: [Int] = []
            for index in 0..<lane.workers { shares.append(lane.connections / lane.workers + (index < lane.connections % lane.workers ? 1 : 0)) }
            let channels = shares.map { NotificationChannel(capacity: max(64, $0 * streams)) }
            let gauges = shares.map { _ in WorkerGauge() }
            feeders.append(LaneFeeder(provider: lane.provider, channels: channels))
            gaugesByLane.append(gauges)
            workerCount += lane.workers
            for index in 0..<lane.workers {
                let (channel, gauge, share) = (channels[index], gauges[index], shares[index])
                threads.start(name: "\(lane.provider.rawValue)-\(index)") {
                    defer {
                        finishedWorkers.value.add(1, ordering: .releasing)
                        outcomes.nudge()
                    }
                    let clock = TurnClock(source: SystemMonotonicClock())
                    let workload = lane.makeWorkload(WorkloadContext(
                        channel: channel, outcomes: outcomes, gauge: gauge, clock: clock,
                        random: SplitMix64(seed: Reactor.nowNanoseconds() &+ UInt64(index)),
                        inFlightMax: share * lane.client.limits.streamsPerConnectionMax))
                    do throws(TransportError) {
                        let worker = try ClientWorker(configuration: lane.client, connectionCount: share, workload: workload, clock: clock)
                        do { channel.attach(try worker.makeWaker()) } catch {
                            outcomes.workerFailed("cannot make a waker: \(error)")
                            return
                        }
                        try worker.run()
                    } catch {
                        outcomes.workerFailed(error.description)
                        outcomes.stop(reason: "\(lane.provider.rawValue): \(error.description)")
                    }
                    workload.flush()
                }
            }
        }
        /// Each provider's lane feeder (by the provider's position: no hashing per row), and each
        /// feed's lanes.
        let feederOf: [LaneFeeder?] = ProviderID.allCases.map { provider in feeders.first { $0.provider == provider } }
        func feeder(_ provider: ProviderID) -> LaneFeeder? { feederOf[provider == .apns ? 0 : 1] }
        let feedLanes: [[LaneFeeder]] = feeds.map { feed in feed.preparer.sends.compactMap { feeder($0) } }

        var drained: [OutcomeRecord] = []
        var encoded = ByteBuffer(capacity: 256 * 1024)
        var pruneEncoded = ByteBuffer(capacity: 16 * 1024)
        var feedDone = Array(repeating: false, count: feeds.count)
        var inputDone = false
        var readError: String? = nil
        var lastProgress = start
        let progress = output.progress ? ProgressLine(total: totalRows, start: start) : nil

        func write(_ record: OutcomeRecord) {
            summary.record(record)
            ResultEncoding.appendLine(record, format: output.resultsFormat, to: &encoded)
            if record.belongsInPruneFile { ResultEncoding.appendPruneLine(record, to: &pruneEncoded) }
        }

        /// Writes each record moved out of the array, a placeholder left in its place (iterating the
        /// array, or reading it in place, would copy every record: a retain and release of each
        /// of its strings).
        func writeAll(_ records: inout [OutcomeRecord]) {
            records.withUnsafeMutableBufferPointer { buffer in
                for index in buffer.indices {
                    var record = OutcomeRecord.placeholder
                    swap(&record, &buffer[index])
                    write(record)
                }
            }
            records.removeAll(keepingCapacity: true)
        }

        /// Encoded lines go to a file once they outgrow its buffer, which then writes them
        /// straight through (handing over less would copy every line a second time, into that
        /// buffer); whatever is left goes at the end.
        func flushEncoded(final: Bool = false) throws(CampaignError) {
            do {
                if encoded.count > results.bufferBytes || (final && !encoded.isEmpty) {
                    try results.append(encoded.bytes)
                    encoded.removeAll()
                }
                if pruneEncoded.count > prune.bufferBytes || (final && !pruneEncoded.isEmpty) {
                    try prune.append(pruneEncoded.bytes)
                    pruneEncoded.removeAll()
                }
            } catch {
                throw .output(error.description)
            }
        }

        /// Reads from one feed while its lanes take notifications; returns when they are full,
        /// the budget is spent, or the feed ends.
        func feedTurn(_ f: Int) {
            var budget = 8192
            let mine = feedLanes[f]
            while budget > 0 && !feedDone[f] {
                if !mine.allSatisfy({ $0.canAccept() }) { break }
                budget -= 1
                let record: InputRecord?
                do { record = try feeds[f].reader.next() } catch {
                    readError = "cannot read \(feeds[f].reader.fileName): \(error)"
                    feedDone[f] = true
                    break
                }
                guard let record else {
                    feedDone[f] = true
                    break
                }
                feeds[f].preparer.follow(feeds[f].reader)
                switch feeds[f].preparer.prepare(record) {
                case .send(let notification): feeder(notification.provider)!.add(notification)
                case .finished(let outcome): write(outcome)
                case .skipped: break
                }
            }
            for lane in mine { lane.flush() }
        }

        while true {
            // Feed the workers while they have room; rows that need no sending are written at once.
            if !inputDone && !outcomes.isStopped {
                for f in feeds.indices where !feedDone[f] { feedTurn(f) }
                if feedDone.allSatisfy({ $0 }) {
                    inputDone = true
                    for feeder in feeders { feeder.close() }
                }
            }
            if outcomes.isStopped && !inputDone {
                inputDone = true
                for feeder in feeders { feeder.close() }
            }
            if let readError {
                outcomes.stop(reason: readError)
            }

            let allFinished = finishedWorkers.value.load(ordering: .acquiring) == workerCount
            let blocked = feeds.indices.allSatisfy { feedDone[$0] || feedLanes[$0].contains { $0.isBlocked } }
            outcomes.take(into: &drained, timeoutSeconds: inputDone || blocked ? 0.1 : 0)
            writeAll(&drained)
            try flushEncoded()

            let now = Reactor.nowNanoseconds()
            if let progress, now - lastProgress >= 250_000_000 {
                lastProgress = now
                log(progress.render(summary: summary, lanes: lanes.indices.map { figures(lanes[$0].provider, gaugesByLane[$0]) }, now: now))
            }
            if allFinished && inputDone {
                outcomes.take(into: &drained, timeoutSeconds: 0)
                writeAll(&drained)
                try flushEncoded(final: true)
                break
            }
        }
        threads.join()
        do {
            try results.flush()
            try prune.flush()
        } catch {
            throw .output(error.description)
        }
        summary.retries = gaugesByLane.joined().reduce(0) { $0 + $1.retries.load(ordering: .relaxed) }
        for (index, lane) in lanes.enumerated() {
            summary.retriesByProvider[lane.provider] = gaugesByLane[index].reduce(0) { $0 + $1.retries.load(ordering: .relaxed) }
        }
        summary.wallSeconds = Double(Reactor.nowNanoseconds() - start) / 1e9
        summary.stoppedBecause = outcomes.reasonForStop
        if let progress {
            log(progress.render(summary: summary, lanes: lanes.indices.map { figures(lanes[$0].provider, gaugesByLane[$0]) },
                                now: Reactor.nowNanoseconds()) + "\n")
        }
        if let path = output.summaryPath {
            do {
                let file = try OutputFile(path: path)
                try file.append(summary.json)
                try file.flush()
            } catch {
                throw .output(error.description)
            }
        }
        return summary
    }

    private func figures(_ provider: ProviderID, _ gauges: [WorkerGauge]) -> ProgressLine.LaneFigures {
        ProgressLine.LaneFigures(provider: provider,
                                 inFlight: gauges.reduce(0) { $0 + $1.inFlight.load(ordering: .relaxed) },
                                 retries: gauges.reduce(0) { $0 + $1.retries.load(ordering: .relaxed) })
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
