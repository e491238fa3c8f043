import PushcastCore
import PushcastEngine
import PushcastTransport
import PushcastWire

/// The simulator's crew: every lane's workloads, as the real run builds them, each driven by a
/// real `ClientWorker` (its breaker, TLS client and HTTP/2 client) whose reactor runs over the
/// simulated network instead of the kernel. The workers take turns on the caller's thread, and
/// the virtual clock jumps from one happening to the next. The reader loop (`CampaignLoop`)
/// cannot tell it from `LaneCrew`. Runs are deterministic: one thread, one seed.
public final class SimulatedCrew: CampaignCrew {
    private final class Member {
        let worker: ClientWorker?
        let workload: CampaignWorkload
        let host: SimulatedHost
        let clock: TurnClock
        let wiring: LaneWiring
        var started = false
        var finished = false

        init(worker: ClientWorker?, workload: CampaignWorkload, host: SimulatedHost, clock: TurnClock, wiring: LaneWiring) {
            self.worker = worker
            self.workload = workload
            self.host = host
            self.clock = clock
            self.wiring = wiring
        }
    }

    public let board: LaneBoard
    let clock: ManualClock
    private let network: SimulatedNetwork
    private let outcomes: OutcomeChannel
    private var members: [Member] = []
    /// The pushcast process dies at this virtual time (nil: never).
    private let crashAt: UInt64?
    /// The run must have ended by this virtual time; a run still going then is a finding.
    private let timeLimit: UInt64
    public private(set) var hasCrashed = false
    /// Why the simulation cut the run short (a crash it was told to make, or a run that did not
    /// end); nil when the run ended by itself.
    public private(set) var cutShort: String?
    /// Loop turns in a row at one instant: a run that spins instead of waiting is a finding.
    private var turnsWithoutTime = 0

    /// Virtual time one turn of the reader loop costs.
    static let turnNanoseconds: UInt64 = 20_000
    static let spinTurnsMax = 200_000
    /// Worker turns in a row, each with something due within a microsecond: a worker that never
    /// waits (reconnecting at once for ever, say) is a finding.
    static let busyTurnsMax = 50_000
    private var busyTurns = 0

    init(lanes: [ProviderLane], outcomes: OutcomeChannel, servers: [ProviderID: SimulatedServer], network: SimulatedNetwork,
         seed: UInt64, crashAt: UInt64?, timeLimit: UInt64, mutation: ClientWorkerMutation?) {
        board = LaneBoard(lanes: lanes)
        clock = network.clock
        self.network = network
        self.outcomes = outcomes
        self.crashAt = crashAt
        self.timeLimit = timeLimit
        var failure: String?
        for (l, wiring) in board.wirings.enumerated() {
            let server = servers[wiring.lane.provider]!
            server.network = network
            var client = wiring.lane.client
            client.mutation = mutation
            client.reactor.slotsMax = 16
            client.reactor.sendBufferBytes = 64 * 1024
            do {
                client.tls = try SimulatedTLS.client()
                server.tls = try SimulatedTLS.server(host: client.endpoint.host)
            } catch {
                failure = "cannot make the simulated TLS contexts: \(error)"
            }
            for index in wiring.shares.indices {
                let turnClock = TurnClock(source: clock)
                let random = SplitMix64(seed: seed &* 0x9E37_79B9 &+ UInt64(l * 64 + index))
                let workload = wiring.lane.makeWorkload(wiring.context(worker: index, outcomes: outcomes, clock: turnClock, random: random))
                let host = SimulatedHost(network: network, server: server)
                var worker: ClientWorker?
                do {
                    worker = try ClientWorker(configuration: client, connectionCount: wiring.shares[index], workload: workload,
                                              clock: turnClock, sockets: host)
                } catch {
                    failure = "cannot start a worker: \(error)"
                }
                members.append(Member(worker: worker, workload: workload, host: host, clock: turnClock, wiring: wiring))
            }
        }
        if let failure { cut(failure) }
    }

    public var allFinished: Bool { hasCrashed || members.allSatisfy(\.finished) }

    public func nowNanoseconds() -> UInt64 { clock.nanoseconds }

    public func join() {}

    /// Turns the workers and the network until an outcome arrives or `timeoutSeconds` of
    /// virtual time pass, jumping the clock from one happening to the next.
    public func awaitOutcomes(_ outcomes: OutcomeChannel, into records: inout [OutcomeRecord], timeoutSeconds: Double) {
        let start = clock.nanoseconds
        let deadline = start + max(Self.turnNanoseconds, UInt64(timeoutSeconds * 1e9))
        clock.advance(nanoseconds: Self.turnNanoseconds)
        while !hasCrashed {
            if cutIfDue() { break }
            network.runDue()
            for member in members { step(member) }
            if outcomes.hasItems || clock.nanoseconds >= deadline || members.allSatisfy(\.finished) { break }
            // Nothing due now: sleep until the next happening, as a worker's poll would.
            var next = network.nextEventNanoseconds ?? deadline
            for member in members where !member.finished {
                if member.host.hasDueEvents { next = clock.nanoseconds } else if let wake = member.host.wakeAt { next = min(next, wake) }
            }
            busyTurns = next > clock.nanoseconds + 1_000 ? 0 : busyTurns + 1
            if busyTurns > Self.busyTurnsMax { cut("the workers spun: \(busyTurns) turns in a row with something due at once") }
            clock.nanoseconds = min(deadline, max(next, clock.nanoseconds + 1_000))
        }
        turnsWithoutTime = clock.nanoseconds > start + Self.turnNanoseconds ? 0 : turnsWithoutTime + 1
        if turnsWithoutTime > Self.spinTurnsMax { cut("the reader loop spun \(turnsWithoutTime) turns without waiting") }
        outcomes.take(into: &records, timeoutSeconds: 0)
    }

    /// One loop turn of a worker, as its thread would take it; a worker that ends hands what it
    /// holds to the writer, and one that fails breaks its lane, as `LaneCrew`'s do.
    private func step(_ member: Member) {
        guard !member.finished, let worker = member.worker else { return }
        member.clock.refresh()
        if !member.started {
            member.started = true
            worker.start()
        }
        do {
            guard try worker.turn() else { return }
        } catch {
            outcomes.workerFailed(error.description)
            let lane = member.wiring.lane
            member.wiring.breakLane(reason: "\(lane.provider.rawValue): \(error.description)", resumable: error.serverTurnedBad,
                                    outcomes: outcomes)
        }
        member.finished = true
        member.workload.flush()
    }

    private func cutIfDue() -> Bool {
        if let crashAt, clock.nanoseconds >= crashAt {
            cut("crashed")
        } else if clock.nanoseconds >= timeLimit {
            cut("still running after \(timeLimit / 1_000_000_000) s of virtual time")
        }
        return hasCrashed
    }

    /// The process dies here: its connections drop (the servers still process what reached
    /// them), and nothing more is written.
    private func cut(_ reason: String) {
        guard !hasCrashed else { return }
        for member in members where !member.finished {
            member.worker?.abandonSilently()
            member.finished = true
        }
        hasCrashed = true
        cutShort = reason
    }
}
