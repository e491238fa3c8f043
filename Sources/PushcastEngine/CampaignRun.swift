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

/// One campaign: the reader (this thread) prepares rows and writes outcomes; `workers` threads
/// each run a ClientWorker with an APNsWorkload over their share of the connections.
public final class CampaignRun {
    private var reader: TokenFileReader
    /// Opens the input again from its first row, for settling deferred possible duplicates
    /// (`DuplicateDetection.filtered`); nil when the input cannot be read twice.
    private let reopen: (() throws -> TokenFileReader)?
    private var preparer: RowPreparer
    private let settings: APNsSendSettings
    private let client: ClientConfiguration
    private let connections: Int
    private let workers: Int
    private let output: CampaignOutput
    private let totalRows: Int?
    private let log: (String) -> Void

    public init(reader: TokenFileReader, preparer: RowPreparer, settings: APNsSendSettings, client: ClientConfiguration,
                connections: Int, workers: Int, output: CampaignOutput, totalRows: Int?,
                reopen: (() throws -> TokenFileReader)? = nil, log: @escaping (String) -> Void) {
        self.reader = reader
        self.reopen = reopen
        self.preparer = preparer
        self.settings = settings
        self.client = client
        self.connections = connections
        self.workers = max(1, min(workers, connections))
        self.output = output
        self.totalRows = totalRows
        self.log = log
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

        // Channels sized from the in-flight budget of each worker.
        let outcomes = OutcomeChannel()
        let streams = client.limits.streamsPerConnectionMax
        var shares: [Int] = []
        for index in 0..<workers { shares.append(connections / workers + (index < connections % workers ? 1 : 0)) }
        let channels = shares.map { NotificationChannel(capacity: max(64, $0 * streams)) }
        let gauges = shares.map { _ in WorkerGauge() }
        let finishedWorkers = SharedCounter()
        let threads = WorkerThreads()
        let (settings, client) = (self.settings, self.client)
        for index in 0..<workers {
            let (channel, gauge, share) = (channels[index], gauges[index], shares[index])
            threads.start(name: "send-\(index)") {
                defer {
                    finishedWorkers.value.add(1, ordering: .releasing)
                    outcomes.nudge()
                }
                let clock = TurnClock(source: SystemMonotonicClock())
                let workload = APNsWorkload(settings: settings, channel: channel, outcomes: outcomes, gauge: gauge, clock: clock,
                                            random: SplitMix64(seed: Reactor.nowNanoseconds() &+ UInt64(index)),
                                            inFlightMax: share * client.limits.streamsPerConnectionMax)
                do throws(TransportError) {
                    let worker = try ClientWorker(configuration: client, connectionCount: share, workload: workload, clock: clock)
                    do { channel.attach(try worker.makeWaker()) } catch {
                        outcomes.workerFailed("cannot make a waker: \(error)")
                        return
                    }
                    try worker.run()
                } catch {
                    outcomes.workerFailed(error.description)
                    outcomes.stop(reason: error.description)
                }
                workload.flush()
            }
        }

        var batch: [PreparedNotification] = []
        batch.reserveCapacity(256)
        var drained: [OutcomeRecord] = []
        var encoded: [UInt8] = []
        encoded.reserveCapacity(256 * 1024)
        var pruneEncoded: [UInt8] = []
        var inputDone = false
        var resolving = false
        var readError: String? = nil
        var nextChannel = 0
        var lastProgress = start
        let progress = output.progress ? ProgressLine(total: totalRows, start: start) : nil

        func write(_ record: OutcomeRecord) {
            summary.record(record)
            ResultEncoding.appendLine(record, format: output.resultsFormat, to: &encoded)
            if record.belongsInPruneFile { ResultEncoding.appendPruneLine(record, to: &pruneEncoded) }
        }

        func flushEncoded() throws(CampaignError) {
            do {
                if !encoded.isEmpty { try results.append(encoded) }
                if !pruneEncoded.isEmpty { try prune.append(pruneEncoded) }
            } catch {
                throw .output(error.description)
            }
            encoded.removeAll(keepingCapacity: true)
            pruneEncoded.removeAll(keepingCapacity: true)
        }

        while true {
            // Feed the workers while they have room; rows that need no sending are written at once.
            if !inputDone && !outcomes.isStopped {
                var budget = 8192
                while budget > 0 && !inputDone {
                    let channel = channels[nextChannel]
                    var room = channel.room
                    // Wait for room for a sizeable batch: many tiny batches cost more than they carry.
                    guard room >= min(64, channel.capacity) else {
                        nextChannel = (nextChannel + 1) % channels.count
                        if channels.allSatisfy({ $0.room < min(64, $0.capacity) }) { break }
                        continue
                    }
                    room = min(room, 256)
                    while batch.count < room && budget > 0 {
                        budget -= 1
                        let record: InputRecord?
                        do { record = try reader.next() } catch {
                            readError = "cannot read \(reader.fileName): \(error)"
                            inputDone = true
                            break
                        }
                        guard let record else {
                            if !resolving && preparer.hasSuspects {
                                // Second read: settle the rows deferred as possible duplicates.
                                guard let reopen else { preconditionFailure("filtered duplicate detection needs a re-readable input") }
                                do { reader = try reopen() } catch {
                                    readError = "cannot read \(reader.fileName) again: \(error)"
                                    inputDone = true
                                    break
                                }
                                resolving = true
                                continue
                            }
                            inputDone = true
                            break
                        }
                        let prepared: PreparedRow?
                        if resolving {
                            prepared = preparer.resolve(record)
                            if case .row(let view) = record, preparer.resolveFinished(after: view.row) { inputDone = true }
                        } else {
                            prepared = preparer.prepare(record)
                        }
                        switch prepared {
                        case .send(let notification)?: batch.append(notification)
                        case .finished(let outcome)?: write(outcome)
                        case .deferred?, nil: break
                        }
                        if inputDone { break }
                    }
                    channel.push(&batch)
                    nextChannel = (nextChannel + 1) % channels.count
                }
                if inputDone { for channel in channels { channel.close() } }
            }
            if outcomes.isStopped && !inputDone {
                inputDone = true
                for channel in channels { channel.close() }
            }
            if let readError {
                outcomes.stop(reason: readError)
            }

            let allFinished = finishedWorkers.value.load(ordering: .acquiring) == workers
            outcomes.take(into: &drained, timeoutSeconds: inputDone || channels.allSatisfy({ $0.room < min(64, $0.capacity) }) ? 0.1 : 0)
            for record in drained { write(record) }
            drained.removeAll(keepingCapacity: true)
            try flushEncoded()

            let now = Reactor.nowNanoseconds()
            if let progress, now - lastProgress >= 250_000_000 {
                lastProgress = now
                let inFlight = gauges.reduce(0) { $0 + $1.inFlight.load(ordering: .relaxed) }
                let retries = gauges.reduce(0) { $0 + $1.retries.load(ordering: .relaxed) }
                log(progress.render(done: summary.rows, inFlight: inFlight, retries: retries, now: now))
            }
            if allFinished && inputDone {
                outcomes.take(into: &drained, timeoutSeconds: 0)
                for record in drained { write(record) }
                try flushEncoded()
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
        summary.retries = gauges.reduce(0) { $0 + $1.retries.load(ordering: .relaxed) }
        summary.wallSeconds = Double(Reactor.nowNanoseconds() - start) / 1e9
        summary.stoppedBecause = outcomes.reasonForStop
        if let progress { log(progress.render(done: summary.rows, inFlight: 0, retries: summary.retries, now: Reactor.nowNanoseconds()) + "\n") }
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
}

/// The progress line on stderr: done/total, rate, ETA, in flight, retries.
struct ProgressLine {
    let total: Int?
    let start: UInt64

    func render(done: Int, inFlight: Int, retries: Int, now: UInt64) -> String {
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
        line += String(format: "  %.0f/s  in flight %d  retries %d   ", rate, inFlight, retries)
        return line
    }
}
