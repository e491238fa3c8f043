import PushcastCore
import PushcastTransport

/// The worker side of a campaign, as the reader loop (`CampaignLoop`) sees it: where each
/// provider's notifications go, how outcomes come back, and what time it is. Two crews exist:
/// `LaneCrew` runs each lane's worker threads over real sockets; the simulator
/// (PushcastSimulation) steps the very same workloads against an in-memory server on one thread,
/// on a virtual clock. docs/ARCHITECTURE.md, "Seams".
public protocol CampaignCrew: AnyObject {
    /// The board of lanes: feeders, channels and gauges, built the same way for every crew.
    var board: LaneBoard { get }
    /// True once every worker has stopped (its workload exhausted, abandoned, or broken).
    var allFinished: Bool { get }
    /// Takes the outcomes that have arrived, waiting up to `timeoutSeconds` (of the crew's clock)
    /// for the first one.
    func awaitOutcomes(_ outcomes: OutcomeChannel, into records: inout [OutcomeRecord], timeoutSeconds: Double)
    /// The crew's monotonic clock (the simulator's is virtual).
    func nowNanoseconds() -> UInt64
    /// Waits for the workers to end (after `allFinished`).
    func join()
    /// True when the process running the campaign has died (only a simulated crash does this):
    /// the loop returns at once and the run writes nothing more, as a killed process would.
    var hasCrashed: Bool { get }
}

extension CampaignCrew {
    public var hasCrashed: Bool { false }
}

/// One lane's wiring, the same for every crew: its workers' shares of the connections, their
/// channels (sized from each worker's in-flight budget), gauges, and the feeder over the channels.
/// Worker threads share it: they touch only its constants, channels and gauges (each safe to
/// share); the feeder is the reader thread's alone.
public final class LaneWiring: @unchecked Sendable {
    public let lane: ProviderLane
    public let shares: [Int]
    public let channels: [NotificationChannel]
    public let gauges: [WorkerGauge]
    public let feeder: LaneFeeder

    init(_ lane: ProviderLane) {
        self.lane = lane
        let streams = lane.client.limits.streamsPerConnectionMax
        shares = (0..<lane.workers).map { lane.connections / lane.workers + ($0 < lane.connections % lane.workers ? 1 : 0) }
        channels = shares.map { NotificationChannel(capacity: max(64, $0 * streams)) }
        gauges = shares.map { _ in WorkerGauge() }
        feeder = LaneFeeder(provider: lane.provider, channels: channels)
    }

    /// Every lane of the run: a broken lane stops the run only when no other lane is left.
    weak var board: LaneBoard?

    /// The lane's server stopped working (the breaker tripped): its workers stop handing out
    /// requests, the rows queued for it are never sent (no results line: resumable), and the
    /// other lanes carry on. When every lane is broken, the run stops.
    func breakLane(reason: String, resumable: Bool, outcomes: OutcomeChannel) {
        for channel in channels { channel.breakLane() }
        if board?.wirings.allSatisfy({ $0.channels.allSatisfy(\.isLaneBroken) }) ?? true {
            outcomes.stop(reason: reason, resumable: resumable)
        } else {
            outcomes.laneFailed(reason: reason + "; the other providers' lanes carried on", resumable: resumable)
        }
    }

    /// What worker `index`'s workload is made from.
    public func context(worker index: Int, outcomes: OutcomeChannel, clock: TurnClock, random: RandomSource) -> WorkloadContext {
        WorkloadContext(channel: channels[index], outcomes: outcomes, gauge: gauges[index], clock: clock, random: random,
                        inFlightMax: shares[index] * lane.client.limits.streamsPerConnectionMax,
                        dispatch: outcomes.dispatch?.marks(for: lane.provider))
    }

    /// Notifications that can be between the reader and an answer at once in this lane.
    var outstandingMax: Int {
        zip(channels, shares).reduce(0) { $0 + $1.0.capacity + $1.1 * lane.client.limits.streamsPerConnectionMax }
    }
}

/// Every lane's wiring, and what the reader loop asks of them.
public final class LaneBoard {
    public let wirings: [LaneWiring]
    /// Each provider's feeder by the provider's position (no hashing per row).
    private let feederOf: [LaneFeeder?]
    /// Notifications that can be between the reader and an answer at once: every channel's
    /// capacity plus every worker's in-flight budget.
    let outstandingMax: Int

    public init(lanes: [ProviderLane]) {
        let wirings = lanes.map(LaneWiring.init)
        self.wirings = wirings
        defer { for wiring in wirings { wiring.board = self } }
        feederOf = (0..<ProviderID.positionsMax).map { position in wirings.first { $0.lane.provider.position == position }?.feeder }
        outstandingMax = wirings.reduce(0) { $0 + $1.outstandingMax }
    }

    @inline(__always)
    func feeder(_ provider: ProviderID) -> LaneFeeder? { feederOf[provider.position] }

    public var workerCount: Int { wirings.reduce(0) { $0 + $1.shares.count } }

    func closeInput() { for wiring in wirings { wiring.feeder.close() } }

    /// Wakes every worker's poll (it then sees the run's stop flags).
    func wakeAll() { for wiring in wirings { wiring.feeder.wake() } }

    func figures() -> [CampaignProgress.LaneFigures] {
        wirings.map { wiring in
            CampaignProgress.LaneFigures(provider: wiring.lane.provider,
                                     inFlight: wiring.gauges.reduce(0) { $0 + $1.inFlight.load(ordering: .relaxed) },
                                     retries: wiring.gauges.reduce(0) { $0 + $1.retries.load(ordering: .relaxed) },
                                     drops: wiring.lane.client.drops.byReason,
                                     deviceThrottles: wiring.gauges.reduce(0) { $0 + $1.deviceThrottles.load(ordering: .relaxed) },
                                     providerThrottles: wiring.gauges.reduce(0) { $0 + $1.providerThrottles.load(ordering: .relaxed) })
        }
    }

    func addRetries(to summary: inout CampaignSummary) {
        summary.retries = 0
        for wiring in wirings {
            let retries = wiring.gauges.reduce(0) { $0 + $1.retries.load(ordering: .relaxed) }
            summary.retriesByProvider[wiring.lane.provider] = retries
            summary.retries += retries
            let drops = wiring.lane.client.drops.byReason
            if !drops.isEmpty { summary.connectionsDropped[wiring.lane.provider] = drops }
            let device = wiring.gauges.reduce(0) { $0 + $1.deviceThrottles.load(ordering: .relaxed) }
            let provider = wiring.gauges.reduce(0) { $0 + $1.providerThrottles.load(ordering: .relaxed) }
            if device + provider > 0 { summary.throttles[wiring.lane.provider] = (device, provider) }
        }
    }
}

/// The reader side of one lane: its channels and the batch being filled.
public final class LaneFeeder {
    public let provider: ProviderID
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
        if isBroken { return true }
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

    func add(_ notification: consuming PreparedNotification) { batch.append(notification) }

    /// The lane broke: rows for it are dropped here, never sent and never recorded.
    var isBroken: Bool { channels.first?.isLaneBroken ?? false }

    func flush() {
        if isBroken { batch.removeAll(keepingCapacity: true) }
        if !batch.isEmpty {
            channels[next].push(&batch)
            next = (next + 1) % channels.count
        }
        room = 0
    }

    var isBlocked: Bool { !isBroken && batch.count >= room && channels.allSatisfy { $0.room < min(64, $0.capacity) } }

    private(set) var isClosed = false

    func close() {
        flush()
        isClosed = true
        for channel in channels { channel.close() }
    }

    func wake() { for channel in channels { channel.wake() } }
}


