import PushcastCore
import PushcastReactor
import PushcastTransport
import Synchronization

/// The worker side of a campaign over real sockets: each lane's threads, each running a
/// `ClientWorker` over its share of the lane's connections.
final class LaneCrew: CampaignCrew {
    let threads = WorkerThreads()
    let board: LaneBoard
    private let finishedWorkers = SharedCounter()

    init(lanes: [ProviderLane], outcomes: OutcomeChannel) {
        board = LaneBoard(lanes: lanes)
        for wiring in board.wirings {
            for index in wiring.shares.indices { start(wiring, index, outcomes) }
        }
    }

    private func start(_ wiring: LaneWiring, _ index: Int, _ outcomes: OutcomeChannel) {
        let finished = finishedWorkers
        threads.start(name: "\(wiring.lane.provider.rawValue)-\(index)") {
            defer {
                finished.value.add(1, ordering: .releasing)
                outcomes.nudge()
            }
            Self.work(wiring, index: index, outcomes: outcomes)
        }
    }

    /// One worker thread's life: its send loop over its connections until the lane is done or
    /// broken; what it still holds is handed to the writer.
    private static func work(_ wiring: LaneWiring, index: Int, outcomes: OutcomeChannel) {
        let lane = wiring.lane
        let clock = TurnClock(source: SystemMonotonicClock())
        let workload = lane.makeWorkload(wiring.context(worker: index, outcomes: outcomes, clock: clock,
                                                        random: SplitMix64(seed: Reactor.nowNanoseconds() &+ UInt64(index))))
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

    func nowNanoseconds() -> UInt64 { Reactor.nowNanoseconds() }

    func join() { threads.join() }
}
