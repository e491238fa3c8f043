import PushcastCore
import PushcastTransport

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
    public func breakLane(reason: String, resumable: Bool, outcomes: OutcomeChannel) {
        // Once: another worker of the lane may find the same fault.
        guard !channels.allSatisfy(\.isLaneBroken) else { return }
        for channel in channels { channel.breakLane() }
        if board?.wirings.allSatisfy({ $0.channels.allSatisfy(\.isLaneBroken) }) ?? true {
            outcomes.stop(reason: reason, resumable: resumable)
        } else {
            outcomes.laneFailed(reason: reason + (lane.route == nil ? "; the other providers' lanes carried on" : "; the other lanes carried on"),
                               resumable: resumable)
        }
    }

    /// What worker `index`'s workload is made from.
    public func context(worker index: Int, outcomes: OutcomeChannel, clock: TurnClock, random: RandomSource) -> WorkloadContext {
        WorkloadContext(channel: channels[index], outcomes: outcomes, gauge: gauges[index], clock: clock, random: random,
                        inFlightMax: shares[index] * lane.client.limits.streamsPerConnectionMax,
                        dispatch: outcomes.dispatch?.marks(forLane: lane.key),
                        breakLane: { [weak self] reason in self?.breakLane(reason: reason, resumable: false, outcomes: outcomes) })
    }

    /// Notifications that can be between the reader and an answer at once in this lane.
    var outstandingMax: Int {
        zip(channels, shares).reduce(0) { $0 + $1.0.capacity + $1.1 * lane.client.limits.streamsPerConnectionMax }
    }
}
