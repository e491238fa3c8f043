import PushcastCore
import PushcastTransport
import Synchronization

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
