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
