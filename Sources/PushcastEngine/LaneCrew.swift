import PushcastCore
import PushcastTransport
import Synchronization

/// The worker side of a campaign over real sockets: each lane's threads, each running a
/// `ClientWorker` over its share of the lane's connections.
final class LaneCrew: CampaignCrew {
    let threads = WorkerThreads()
    let board: LaneBoard
    private let finishedWorkers = SharedCounter()
    /// The reader's clock; each worker makes its own (`makeClock`).
    private let clock: any MonotonicClock
    private let makeClock: @Sendable () -> any MonotonicClock

    init(lanes: [ProviderLane], outcomes: OutcomeChannel, makeClock: @escaping @Sendable () -> any MonotonicClock) {
        board = LaneBoard(lanes: lanes)
        clock = makeClock()
        self.makeClock = makeClock
        for wiring in board.wirings {
            for index in wiring.shares.indices { start(wiring, index, outcomes) }
        }
    }

    private func start(_ wiring: LaneWiring, _ index: Int, _ outcomes: OutcomeChannel) {
        let makeClock = makeClock
        let finished = finishedWorkers
        threads.start(name: "\(wiring.lane.provider.rawValue)-\(index)") {
            defer {
                finished.value.add(1, ordering: .releasing)
                outcomes.nudge()
            }
            Self.work(wiring, index: index, outcomes: outcomes, source: makeClock())
        }
    }

    /// One worker thread's life: its send loop over its connections until the lane is done or
    /// broken; what it still holds is handed to the writer.
    private static func work(_ wiring: LaneWiring, index: Int, outcomes: OutcomeChannel, source: any MonotonicClock) {
        let lane = wiring.lane
        let clock = TurnClock(source: source)
        let workload = lane.makeWorkload(wiring.context(worker: index, outcomes: outcomes, clock: clock,
                                                        random: SplitMix64(seed: source.nowNanoseconds() &+ UInt64(index))))
        do throws(TransportError) {
            let worker = try ClientWorker(configuration: lane.client, connectionCount: wiring.shares[index], workload: workload, clock: clock)
            do { wiring.channels[index].attach(try worker.makeWaker()) } catch {
                outcomes.workerFailed("cannot make a waker: \(error)")
                return
            }
            try worker.run()
        } catch {
            outcomes.workerFailed(error.description)
            wiring.breakLane(reason: "\(lane.provider.rawValue): \(error.description)", resumable: error.serverTurnedBad, outcomes: outcomes)
        }
        workload.flush()
    }

    var allFinished: Bool { finishedWorkers.value.load(ordering: .acquiring) == board.workerCount }

    func awaitOutcomes(_ outcomes: OutcomeChannel, into records: inout [OutcomeRecord], timeoutSeconds: Double) {
        outcomes.take(into: &records, timeoutSeconds: timeoutSeconds)
    }

    func nowNanoseconds() -> UInt64 { clock.nowNanoseconds() }

    func join() { threads.join() }
}
