import PushcastCore
import PushcastProviderKit
import PushcastTransport

/// What a worker's send loop gets from the run.
public struct WorkloadContext {
    public let channel: NotificationChannel
    public let outcomes: OutcomeChannel
    public let gauge: WorkerGauge
    public let clock: TurnClock
    public let random: RandomSource
    public let inFlightMax: Int
    /// Where the workload records the rows it hands to a connection (nil: no journal).
    public let dispatch: DispatchMarks?
    /// Stops this lane alone (`LaneWiring.breakLane`), with a message for the user.
    public var breakLane: (@Sendable (String) -> Void)? = nil
}

/// A send loop a campaign worker runs: a `ClientWorkload` that can hand over what it holds when
/// its worker stops.
public protocol CampaignWorkload: ClientWorkload {
    func flush()
}

extension SendWorkload: CampaignWorkload {}

/// The server a routed provider's lane sends to: its route (a token prefix, e.g. a push
/// service's origin) and how to find a token's route (`PushProvider.routeLength`).
public struct LaneRoute: Sendable {
    public let prefix: String
    public let length: @Sendable (UnsafeRawBufferPointer) -> Int?

    public init(prefix: String, length: @escaping @Sendable (UnsafeRawBufferPointer) -> Int?) {
        self.prefix = prefix
        self.length = length
    }
}

/// One provider's share of a campaign: its connections, worker threads, and send loop. Each
/// provider has its own lane (its own connections, rate limiter, retry queues and counters); a
/// routed provider has one per server (`route`).
public struct ProviderLane: Sendable {
    public let provider: ProviderID
    /// A routed provider's server; nil for a provider with one.
    public var route: LaneRoute? = nil
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

    /// The lane's name in the journal's dispatch marks and in messages: `apns`, or
    /// `webpush@https://push.example`.
    public var key: String { route.map { "\(provider.rawValue)@\($0.prefix)" } ?? provider.rawValue }

    /// A lane whose workers each send through an adapter `factory` makes.
    public init<Factory: AdapterFactory>(provider: ProviderID, client: ClientConfiguration, connections: Int, workers: Int,
                                         policy: SendPolicy, factory: Factory) {
        self.init(provider: provider, client: client, connections: connections, workers: workers, policy: policy) { factory.makeAdapter() }
    }

    /// A lane whose workers each send through a fresh adapter from `makeAdapter`.
    public init<Adapter: ProviderAdapter>(provider: ProviderID, client: ClientConfiguration, connections: Int, workers: Int,
                                          policy: SendPolicy, makeAdapter: @escaping @Sendable () -> Adapter) {
        self.init(provider: provider, client: client, connections: connections, workers: workers) { c in
            SendWorkload(adapter: makeAdapter(), policy: policy, channel: c.channel, outcomes: c.outcomes,
                         gauge: c.gauge, clock: c.clock, random: c.random, inFlightMax: c.inFlightMax, dispatch: c.dispatch,
                         breakLane: c.breakLane)
        }
    }
}
