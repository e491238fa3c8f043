import PushcastCore
import PushcastTransport
import Synchronization

/// Every lane's wiring, and what the reader loop asks of them.
public final class LaneBoard {
    public let wirings: [LaneWiring]
    /// Each provider's feeder by the provider's position (no hashing per row).
    private let feederOf: [LaneFeeder?]
    /// A routed provider's lanes by the provider's position: its routes and their feeders.
    private let routedOf: [RoutedFeeders?]
    /// Notifications that can be between the reader and an answer at once: every channel's
    /// capacity plus every worker's in-flight budget.
    let outstandingMax: Int

    public init(lanes: [ProviderLane]) {
        let wirings = lanes.map(LaneWiring.init)
        self.wirings = wirings
        defer { for wiring in wirings { wiring.board = self } }
        feederOf = (0..<ProviderID.positionsMax).map { position in
            wirings.first { $0.lane.provider.position == position && $0.lane.route == nil }?.feeder
        }
        routedOf = (0..<ProviderID.positionsMax).map { position in
            RoutedFeeders(wirings.filter { $0.lane.provider.position == position && $0.lane.route != nil })
        }
        outstandingMax = wirings.reduce(0) { $0 + $1.outstandingMax }
    }

    /// The feeder of an unrouted provider's lane.
    @inline(__always)
    func feeder(_ provider: ProviderID) -> LaneFeeder? { feederOf[provider.position] }

    /// The feeder a notification goes to: its provider's lane, or for a routed provider the lane
    /// of its token's route; nil when there is none.
    @inline(__always)
    func feeder(for notification: borrowing PreparedNotification) -> LaneFeeder? {
        if let feeder = feederOf[notification.provider.position] { return feeder }
        return routedOf[notification.provider.position]?.feeder(token: notification.packedToken)
    }

    /// Every feeder that rows of `provider` can go to; for a routed provider, only those of the
    /// routes in `routes` when given.
    func feeders(_ provider: ProviderID, routes: RouteTable?) -> [LaneFeeder] {
        if let feeder = feederOf[provider.position] { return [feeder] }
        guard let routed = routedOf[provider.position] else { return [] }
        guard let routes else { return routed.feeders }
        return routes.routes.compactMap { route in
            var text = route
            return text.withUTF8 { routed.table.index(of: UnsafeRawBufferPointer($0)) }.map { routed.feeders[$0] }
        }
    }

    public var workerCount: Int { wirings.reduce(0) { $0 + $1.shares.count } }

    func closeInput() { for wiring in wirings { wiring.feeder.close() } }

    /// Wakes every worker's poll (it then sees the run's stop flags).
    func wakeAll() { for wiring in wirings { wiring.feeder.wake() } }

    /// Each provider's gauges, its lanes' added up (a routed provider has one lane per server).
    func figures() -> [CampaignProgress.LaneFigures] {
        var providers: [ProviderID] = []
        for wiring in wirings where !providers.contains(wiring.lane.provider) { providers.append(wiring.lane.provider) }
        return providers.map { provider in
            let lanes = wirings.filter { $0.lane.provider == provider }
            func sum(_ gauge: (WorkerGauge) -> Int) -> Int { lanes.reduce(0) { $0 + $1.gauges.reduce(0) { $0 + gauge($1) } } }
            var drops: [String: Int] = [:]
            for lane in lanes { drops.merge(lane.lane.client.drops.byReason, uniquingKeysWith: +) }
            return CampaignProgress.LaneFigures(provider: provider,
                                                inFlight: sum { $0.inFlight.load(ordering: .relaxed) },
                                                retries: sum { $0.retries.load(ordering: .relaxed) },
                                                drops: drops,
                                                deviceThrottles: sum { $0.deviceThrottles.load(ordering: .relaxed) },
                                                providerThrottles: sum { $0.providerThrottles.load(ordering: .relaxed) })
        }
    }

    func addRetries(to summary: inout CampaignSummary) {
        summary.retries = 0
        for lane in figures() {
            summary.retriesByProvider[lane.provider] = lane.retries
            summary.retries += lane.retries
            if !lane.drops.isEmpty { summary.connectionsDropped[lane.provider] = lane.drops }
            if lane.deviceThrottles + lane.providerThrottles > 0 {
                summary.throttles[lane.provider] = (lane.deviceThrottles, lane.providerThrottles)
            }
        }
    }
}

/// A routed provider's lanes: their routes, and each route's feeder at the same index.
struct RoutedFeeders {
    let table: RouteTable
    let feeders: [LaneFeeder]
    let routeLength: @Sendable (UnsafeRawBufferPointer) -> Int?

    init?(_ wirings: [LaneWiring]) {
        guard let first = wirings.first?.lane.route else { return nil }
        table = RouteTable(routes: wirings.map { $0.lane.route!.prefix })
        feeders = wirings.map(\.feeder)
        routeLength = first.length
    }

    /// The feeder of the token's route, or nil when the token has no route or no lane has it.
    func feeder(token: PackedText) -> LaneFeeder? {
        token.withUTF8 { bytes in
            guard let length = routeLength(bytes), length <= bytes.count else { return nil }
            return table.index(of: UnsafeRawBufferPointer(rebasing: bytes.prefix(length))).map { feeders[$0] }
        }
    }
}
