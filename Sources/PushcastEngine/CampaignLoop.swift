import PushcastCore
import PushcastInput
import PushcastTransport

/// How a run hears that it should stop early: a count of stop signals it polls (injected: the
/// CLI passes the process's SIGINT/SIGTERM count, tests a closure of their own).
public struct Interruption: Sendable {
    public var signals: @Sendable () -> Int
    public var signalName: @Sendable () -> String
    /// How long answers in flight may take after the first signal (`--drain-timeout`).
    public var drainNanoseconds: UInt64

    public init(signals: @escaping @Sendable () -> Int = { 0 }, signalName: @escaping @Sendable () -> String = { "signal" },
                drainNanoseconds: UInt64 = 20_000_000_000) {
        self.signals = signals
        self.signalName = signalName
        self.drainNanoseconds = drainNanoseconds
    }
}

/// The reader side of a campaign, on the calling thread: reads the feeds while the lanes take
/// notifications, records every outcome through the sinks (rows refused on the reader side at
/// once, answers as the workers hand them over), and shows progress. Before feeding, it makes
/// sure the sinks can record every outcome that could then be outstanding: a disk that fills
/// stops new sends, never the recording of sends already made.
final class CampaignLoop<Crew: CampaignCrew> {
    private var feeds: [CampaignFeed]
    private let crew: Crew
    private let board: LaneBoard
    private let outcomes: OutcomeChannel
    private let sinks: [OutcomeSink]
    private let observers: [CampaignObserver]
    private let totalRows: Int?
    private let start: UInt64
    private let log: (String) -> Void
    private(set) var summary = CampaignSummary()
    private let feedLanes: [[LaneFeeder]]
    private var feedDone: [Bool]
    private var inputDone = false
    private var drained: [OutcomeRecord] = []
    /// Request bodies the workers gave back, for the preparers to render later rows into.
    private let payloadPool: PayloadPool
    private var returnedPayloads: [[UInt8]] = []
    private var lastProgress: UInt64
    private let interruption: Interruption
    /// Set by the first stop signal: why the run stopped early, and when its drain ends.
    private(set) var interruptedBecause: String? = nil
    private var drainDeadline: UInt64 = 0
    private var abandoned = false
    private let durability: CampaignDurability?
    /// Each feed's journal key (its providers), and the row below which it is already covered.
    private let feedKeys: [String]
    private var coveredBelow: [Int]
    private var lastSync: UInt64
    /// Outcomes recorded since the results last went to the kernel.
    private var unflushed = false
    /// Outcomes taken from the workers since the results last went to the kernel.
    private var drainedUnpersisted = 0
    /// Rows one feed turn may read; the sinks reserve room for these plus all outstanding ones.
    private static var rowsPerTurn: Int { 8192 }
    /// The wall clock, for the time a pause ends.
    private let wallClockSeconds: @Sendable () -> Double

    init(feeds: [CampaignFeed], crew: Crew, outcomes: OutcomeChannel, sinks: [OutcomeSink], start: UInt64,
         observers: [CampaignObserver], totalRows: Int?, interruption: Interruption, durability: CampaignDurability?,
         wallClockSeconds: @escaping @Sendable () -> Double, log: @escaping (String) -> Void) {
        self.interruption = interruption
        self.wallClockSeconds = wallClockSeconds
        self.durability = durability
        feedKeys = feeds.map(\.journalKey)
        coveredBelow = Array(repeating: 0, count: feeds.count)
        lastSync = start
        if let durability { summary = durability.summary }
        self.feeds = feeds
        self.crew = crew
        board = crew.board
        payloadPool = PayloadPool(keptMax: crew.board.outstandingMax + Self.rowsPerTurn * feeds.count)
        for f in self.feeds.indices { self.feeds[f].preparer.payloadPool = payloadPool }
        self.outcomes = outcomes
        self.sinks = sinks
        self.observers = observers
        self.totalRows = totalRows
        self.start = start
        self.log = log
        lastProgress = start
        feedLanes = feeds.map { feed in feed.preparer.sends.flatMap { crew.board.feeders($0, routes: feed.preparer.routeFilter) } }
        feedDone = Array(repeating: false, count: feeds.count)
    }

    func run() {
        while true {
            checkSignals()
            if !inputDone && !outcomes.isStopped && reserveRoom() {
                for f in feeds.indices where !feedDone[f] { feedTurn(f) }
                if feedDone.allSatisfy({ $0 }) { closeInput() }
            }
            if outcomes.isStopped && !inputDone { closeInput() }
            let allFinished = crew.allFinished
            let blocked = feeds.indices.allSatisfy { feedDone[$0] || feedLanes[$0].contains { $0.isBlocked } }
            crew.awaitOutcomes(outcomes, into: &drained, timeoutSeconds: inputDone || blocked ? 0.1 : 0)
            if crew.hasCrashed { return }
            drainedUnpersisted += drained.count
            recordAll()
            tellNotices()
            outcomes.takePayloads(into: &returnedPayloads)
            payloadPool.give(&returnedPayloads)
            flushSinks(final: false)
            let now = crew.nowNanoseconds()
            syncIfDue(now: now)
            if !observers.isEmpty, now - lastProgress >= 250_000_000 {
                lastProgress = now
                showProgress(summary: summary, last: false)
            }
            if allFinished && inputDone {
                crew.awaitOutcomes(outcomes, into: &drained, timeoutSeconds: 0)
                recordAll()
                flushSinks(final: true)
                return
            }
        }
    }

    /// Hands the observers a look at the run (`last`: the finished summary).
    func showProgress(summary: CampaignSummary, last: Bool) {
        guard !observers.isEmpty else { return }
        let progress = CampaignProgress(summary: summary, lanes: board.figures(), totalRows: totalRows,
                                        elapsedNanoseconds: crew.nowNanoseconds() &- start, isFinal: last,
                                        isDraining: interruptedBecause != nil)
        for observer in observers { observer.observe(progress) }
    }

    /// The first stop signal stops reading and sending new rows; answers in flight then have the
    /// drain timeout. A second signal, or the timeout, abandons what is still in flight (recorded
    /// `unknown`, `Interrupted`).
    private func checkSignals() {
        let count = interruption.signals()
        guard count > 0 else { return }
        let now = crew.nowNanoseconds()
        if interruptedBecause == nil {
            let name = interruption.signalName()
            interruptedBecause = "interrupted by \(name): resumable with send --resume"
            drainDeadline = now &+ interruption.drainNanoseconds
            outcomes.stop(reason: "interrupted by \(name)")
            board.closeInput()
            inputDone = true
            log("\npushcast: \(name): no new sends; waiting up to \(interruption.drainNanoseconds / 1_000_000_000) s for the answers in flight "
                + "(a second signal stops at once)\n")
        }
        if !abandoned && (count > 1 || now >= drainDeadline) {
            abandoned = true
            outcomes.abandon()
            board.wakeAll()
            log("pushcast: \(count > 1 ? "second signal" : "drain timeout"): stopping now; requests still in flight are recorded unknown (Interrupted)\n")
        }
    }

    /// The workers' lines (a long pause), each with the wall-clock time its pause ends.
    private func tellNotices() {
        for notice in outcomes.takeNotices() {
            let ends = wallClockSeconds() + Double(notice.afterNanoseconds) / 1e9
            log("pushcast: \(notice.text); sending again at \(Self.utcTime(ends))\n")
        }
    }

    /// HH:MM:SS UTC of an epoch time.
    static func utcTime(_ epochSeconds: Double) -> String {
        let seconds = Int(epochSeconds) % 86_400
        func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return "\(two(seconds / 3600)):\(two(seconds / 60 % 60)):\(two(seconds % 60)) UTC"
    }

    /// A lane whose feeds have all ended gets nothing more: its workers finish what they hold and
    /// close their connections, without waiting for the other providers' feeds.
    private func closeFinishedLanes() {
        for f in feeds.indices where feedDone[f] {
            for lane in feedLanes[f] where !lane.isClosed {
                let fed = feeds.indices.filter { g in feedLanes[g].contains { $0 === lane } }
                if fed.allSatisfy({ feedDone[$0] }) { lane.close() }
            }
        }
    }

    private func closeInput() {
        inputDone = true
        board.closeInput()
    }

    /// Room in every sink for all the outcomes that may be outstanding after one more feed turn;
    /// when a sink cannot have it, the run stops sending (what is in flight still lands).
    private func reserveRoom() -> Bool {
        let rows = board.outstandingMax + Self.rowsPerTurn * feeds.count
        let rowsLeft = totalRows.map { max(0, $0 - summary.rows) }
        guard let full = sinks.first(where: { !$0.reserve(rows: rows, rowsLeft: rowsLeft) }) else { return true }
        let short = full.shortfall.map { " (\($0))" } ?? ""
        if interruptedBecause == nil { interruptedBecause = "the disk is full\(short): resumable with send --resume once there is room" }
        outcomes.stop(reason: "the disk is full: cannot reserve space for \(min(rows, rowsLeft ?? rows)) more outcomes in \(full.name)\(short); "
            + "stopped sending, every notification already sent is recorded")
        return false
    }

    /// Reads from one feed while its lanes take notifications; returns when they are full, the
    /// budget is spent, or the feed ends.
    private func feedTurn(_ f: Int) {
        var budget = Self.rowsPerTurn
        let mine = feedLanes[f]
        while budget > 0 && !feedDone[f] {
            if !mine.allSatisfy({ $0.canAccept() }) { break }
            budget -= 1
            let record: InputRecord?
            do { record = try feeds[f].nextRecord() } catch {
                let reader = feeds[f].reader
                var rows = ""
                if error is InputChangedError, let reader = reader as? TokenFileReader {
                    rows = "; the first changed row is row \(reader.lastRow + 1) or a later one, and no row from there on was sent "
                        + "(every row sent is recorded): put the export back as it was and send --resume"
                }
                outcomes.stop(reason: "cannot read \(reader.fileName): \(error)\(rows)")
                feedDone[f] = true
                break
            }
            guard let record else {
                feedDone[f] = true
                closeFinishedLanes()
                break
            }
            let prepared = feeds[f].preparer.prepare(record)
            switch consume prepared {
            case .send(let notification): send(consume notification, feed: f)
            case .finished(var outcome):
                if durability?.recovered?.isFinished(outcome.row) != true { self.record(&outcome) }
            case .skipped: break
            }
        }
        for lane in mine { lane.flush() }
    }

    /// Hands a notification to its lane, unless an earlier run finished its row or may have sent
    /// it; the journal covers its row first (write-ahead).
    /// `consuming`: the notification moves into the lane's batch (a copy would retain its
    /// token, ids and body, and the dropped original release them again).
    @inline(__always)
    private func send(_ notification: consuming PreparedNotification, feed f: Int) {
        if let durability {
            switch durability.verdict(row: notification.row, feed: feedKeys[f]) {
            case .skip: return
            case .unknown:
                var outcome = OutcomeRecord(row: notification.row, id: notification.id, token: notification.packedToken,
                                            provider: notification.provider, outcome: .unknown, reason: OutcomeReason.interruptedInFlight,
                                            error: "may have been sent before the campaign was interrupted; not sent again (--retry-unknown sends it)")
                record(&outcome)
                return
            case .send:
                if notification.row >= coveredBelow[f] {
                    do { coveredBelow[f] = try durability.journal.cover(row: notification.row, feed: feedKeys[f], nowNanoseconds: crew.nowNanoseconds()) } catch {
                        outcomes.stop(reason: "\(error.description); stopped sending")
                        return
                    }
                }
            }
        }
        guard let feeder = board.feeder(for: notification) else {
            var outcome = OutcomeRecord(row: notification.row, id: notification.id, token: notification.packedToken, provider: notification.provider,
                                        outcome: .failed, reason: OutcomeReason.noRoute,
                                        error: "no lane goes to this row's server: \(notification.provider.rawValue) rows need a file input, "
                                            + "whose first read finds their servers")
            record(&outcome)
            return
        }
        feeder.add(consume notification)
    }

    /// Results reach the kernel every loop turn that recorded any while the workers keep
    /// dispatch marks (a killed process then leaves unknown only rows that were on the wire),
    /// else every 100 ms; and the disk as `--fsync` says: every 100 ms (batch), every loop turn
    /// (always), or never.
    private func syncIfDue(now: UInt64) {
        guard let durability else { return }
        let due = durability.policy == .always || now &- lastSync >= 100_000_000
        guard due || (unflushed && durability.journal.boot != nil) else { return }
        unflushed = false
        if due { lastSync = now }
        var written = true
        for sink in sinks {
            do { try sink.sync(durable: due && durability.policy != .never) } catch {
                written = false
                outcomes.stop(reason: "\(error.description); stopped sending")
            }
        }
        if written {
            outcomes.persisted(drainedUnpersisted)
            drainedUnpersisted = 0
        }
    }

    private func record(_ outcome: inout OutcomeRecord) {
        unflushed = true
        summary.record(outcome)
        for sink in sinks { sink.record(&outcome) }
    }

    /// Records each record moved out of the array, a placeholder left in its place (iterating the
    /// array, or reading it in place, would copy every record: a retain and release of each of
    /// its strings).
    private func recordAll() {
        drained.withUnsafeMutableBufferPointer { buffer in
            guard let base = buffer.baseAddress else { return }
            // How many records ahead the strings to encode are asked for.
            let prefetchDistance = 4
            for index in buffer.indices {
                // The strings of the record a few places on start loading now (they were
                // allocated when the row was read, and are out of cache by now).
                if index + prefetchDistance < buffer.count {
                    OutcomeRecord.prefetchStrings(of: base + index + prefetchDistance)
                }
                var outcome = OutcomeRecord.placeholder
                swap(&outcome, &buffer[index])
                record(&outcome)
            }
        }
        drained.removeAll(keepingCapacity: true)
    }

    /// A sink that cannot write stops the run's sending; the outcomes still arriving are counted
    /// in the summary, which says why the run stopped.
    private func flushSinks(final: Bool) {
        for sink in sinks {
            do { try sink.flush(final: final) } catch {
                outcomes.stop(reason: "\(error.description); stopped sending")
            }
        }
    }
}
