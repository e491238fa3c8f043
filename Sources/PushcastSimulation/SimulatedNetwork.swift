import PushcastCore

/// How the simulated network misbehaves, drawn per seed: per-connection latency (so answers on
/// different connections overtake each other), slow readers, connection resets, half-closed
/// connections and partitions.
public struct NetworkModel: Sendable, CustomStringConvertible {
    /// One-way latency: each connection draws its own base up to this, plus jitter per segment
    /// (in order within a connection, as TCP delivers).
    public var latencyNanoseconds: UInt64 = 1_000_000
    public var jitterNanoseconds: UInt64 = 200_000
    /// Bytes a connection carries in flight each way; a slow reader keeps it small, so writes
    /// are taken in part and the rest waits in the reactor's staging buffer.
    public var windowBytes = 1 << 20
    /// Chance per segment that the connection is reset (ECONNRESET) under it.
    public var reset = 0.0
    /// Chance per segment toward the client that the server's side shuts its writing half: the
    /// client reads end-of-file while the server goes on processing what it was sent.
    public var halfClose = 0.0
    /// Chance per segment that a partition starts: nothing moves between the hosts for
    /// `partitionNanoseconds` (TCP retransmits afterwards, so nothing is lost, only late). Kept
    /// shorter than the shortest request deadline the scenarios draw (1 s).
    public var partition = 0.0
    public var partitionNanoseconds: UInt64 = 300_000_000

    public init() {}

    /// Half the seeds run a calm network; the rest a troubled one of some kind.
    public static func random(_ random: SplitMix64) -> NetworkModel {
        var model = NetworkModel()
        model.latencyNanoseconds = 100_000 + random.next(below: 5_000_000)
        model.jitterNanoseconds = random.next(below: 2_000_000)
        guard random.next(below: 2) == 0 else { return model }
        func rate(_ max: Double) -> Double { Double(random.next(below: 1000)) / 1000 * max }
        if random.next(below: 3) == 0 { model.windowBytes = 2048 + Int(random.next(below: 16_384)) }
        model.reset = rate(0.002)
        model.halfClose = rate(0.001)
        model.partition = rate(0.001)
        model.partitionNanoseconds = 50_000_000 + random.next(below: 600_000_000)
        return model
    }

    public var description: String {
        func p(_ x: Double) -> String { String(Int((x * 10_000).rounded())) + "‱" }
        return "latency \(latencyNanoseconds / 1000) µs jitter \(jitterNanoseconds / 1000) µs window \(windowBytes) "
            + "reset \(p(reset)) half-close \(p(halfClose)) partition \(p(partition))"
    }
}

/// The network between the simulated pushcast process and the simulated servers: one queue of
/// happenings (segments arriving, servers acting) in virtual time, ordered by time and then by
/// the order they were scheduled, so that a seed replays exactly.
final class SimulatedNetwork {
    private struct Scheduled {
        let at: UInt64
        let sequence: UInt64
        let action: () -> Void
    }

    let clock: ManualClock
    let model: NetworkModel
    let random: SplitMix64
    private var queue = MinHeap<Scheduled>(capacity: 1024) { $0.at != $1.at ? $0.at < $1.at : $0.sequence < $1.sequence }
    private var sequence: UInt64 = 0
    private var nextLinkID = 1
    private(set) var links: [Int: SimulatedLink] = [:]
    private var partitionedUntil: UInt64 = 0

    init(clock: ManualClock, model: NetworkModel, seed: UInt64) {
        self.clock = clock
        self.model = model
        random = SplitMix64(seed: seed)
    }

    var now: UInt64 { clock.nanoseconds }

    /// The time of the next happening, if any.
    var nextEventNanoseconds: UInt64? { queue.first?.at }

    func schedule(at time: UInt64, _ action: @escaping () -> Void) {
        sequence += 1
        queue.push(Scheduled(at: max(time, now), sequence: sequence, action: action))
    }

    /// Carries out everything due by now (what it schedules for now runs too).
    func runDue() {
        while let first = queue.first, first.at <= now { queue.pop()!.action() }
    }

    /// When a segment sent now on `link` arrives: its base latency plus jitter, never before the
    /// segment before it, and held back while a partition lasts.
    func arrival(on link: SimulatedLink, after previous: UInt64) -> UInt64 {
        if now >= partitionedUntil && chance(model.partition) { partitionedUntil = now + model.partitionNanoseconds }
        var at = max(now, partitionedUntil) + link.latency + random.next(below: max(1, model.jitterNanoseconds))
        at = max(at, previous)
        return at
    }

    func chance(_ rate: Double) -> Bool {
        rate > 0 && Double(random.next(below: 1_000_000)) / 1_000_000 < rate
    }

    /// A new connection from `host` to `server`.
    func open(from host: SimulatedHost, to server: SimulatedServer) -> SimulatedLink {
        let id = nextLinkID
        nextLinkID += 1
        let link = SimulatedLink(id: id, network: self, host: host, server: server,
                                 latency: model.latencyNanoseconds / 2 + random.next(below: max(1, model.latencyNanoseconds)))
        links[id] = link
        return link
    }

    func forget(_ link: SimulatedLink) { links[link.id] = nil }

    /// The run is over: what is still scheduled is dropped, and every connection's two ends,
    /// which hold each other, are unhooked (else each seed's connections outlive it).
    func tearDown() {
        while queue.pop() != nil {}
        for id in links.keys.sorted() { links[id]?.detach() }
        links.removeAll()
    }

    /// Every connection to `server` is reset (an outage).
    func resetEveryLink(to server: SimulatedServer) {
        for id in links.keys.sorted() where links[id]?.server === server { links[id]?.reset() }
    }
}
