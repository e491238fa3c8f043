import PushcastCore
import PushcastEngine

/// The simulator's crew: every lane's workloads, as the real run builds them, stepped one after
/// another on the caller's thread against the lanes' simulated servers, on a virtual clock. The
/// reader loop (`CampaignLoop`) cannot tell it from `LaneCrew`; only time and the network are
/// simulated. Runs are deterministic: one thread, one seed.
public final class SimulatedCrew: CampaignCrew {
    public let board: LaneBoard
    let clock: ManualClock
    private var workers: [SimulatedWorker] = []
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

    init(lanes: [ProviderLane], outcomes: OutcomeChannel, servers: [ProviderID: SimulatedServer], clock: ManualClock,
         seed: UInt64, crashAt: UInt64?, timeLimit: UInt64) {
        board = LaneBoard(lanes: lanes)
        self.clock = clock
        self.crashAt = crashAt
        self.timeLimit = timeLimit
        for (l, wiring) in board.wirings.enumerated() {
            let limits = wiring.lane.client.limits
            for index in wiring.shares.indices {
                let turnClock = TurnClock(source: clock)
                let random = SplitMix64(seed: seed &* 0x9E37_79B9 &+ UInt64(l * 64 + index))
                let workload = wiring.lane.makeWorkload(wiring.context(worker: index, outcomes: outcomes, clock: turnClock, random: random))
                workers.append(SimulatedWorker(workload: workload, server: servers[wiring.lane.provider]!, clock: turnClock,
                                               connections: wiring.shares[index], streamsMax: limits.streamsPerConnectionMax,
                                               requestTimeout: limits.requestTimeoutNanoseconds))
            }
        }
    }

    public var allFinished: Bool { hasCrashed || workers.allSatisfy(\.finished) }

    public func nowNanoseconds() -> UInt64 { clock.nanoseconds }

    public func join() {}

    /// Steps the workers until an outcome arrives or `timeoutSeconds` of virtual time pass,
    /// jumping the clock from one event to the next.
    public func awaitOutcomes(_ outcomes: OutcomeChannel, into records: inout [OutcomeRecord], timeoutSeconds: Double) {
        let start = clock.nanoseconds
        let deadline = start + max(Self.turnNanoseconds, UInt64(timeoutSeconds * 1e9))
        clock.advance(nanoseconds: Self.turnNanoseconds)
        while !hasCrashed {
            if cutIfDue() { break }
            for worker in workers { worker.step() }
            if outcomes.hasItems || clock.nanoseconds >= deadline || workers.allSatisfy(\.finished) { break }
            // Nothing due now: sleep until the next event, as a worker's poll would.
            let next = workers.compactMap(\.nextEventNanoseconds).min() ?? deadline
            clock.nanoseconds = min(deadline, max(next, clock.nanoseconds + 1_000))
        }
        turnsWithoutTime = clock.nanoseconds > start + Self.turnNanoseconds ? 0 : turnsWithoutTime + 1
        if turnsWithoutTime > Self.spinTurnsMax { cut("the reader loop spun \(turnsWithoutTime) turns without waiting") }
        outcomes.take(into: &records, timeoutSeconds: 0)
    }

    private func cutIfDue() -> Bool {
        if let crashAt, clock.nanoseconds >= crashAt {
            cut("crashed")
        } else if clock.nanoseconds >= timeLimit {
            cut("still running after \(timeLimit / 1_000_000_000) s of virtual time")
        }
        return hasCrashed
    }

    /// The process dies here: its workers' requests in flight are lost (the servers may have
    /// processed them), and nothing more is written.
    private func cut(_ reason: String) {
        guard !hasCrashed else { return }
        for worker in workers { worker.crash() }
        hasCrashed = true
        cutShort = reason
    }
}
