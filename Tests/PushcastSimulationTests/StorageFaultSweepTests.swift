import PushcastCore
import PushcastEngine
import PushcastSimulation
import XCTest

/// Crashes, power losses and disk faults on the simulated disk, each followed by a resume on
/// what survived, against the same simulated servers.
final class StorageFaultSweepTests: XCTestCase {
    /// Every seed that keeps files: its process deaths, power losses, EIOs and full disks,
    /// resumed, keep every invariant and every resume rule (`ResumeLedger`).
    func testCrashesPowerLossesAndDiskFaultsAreResumedAndEveryInvariantHolds() {
        var failing: [String] = []
        var stops = 0, powerLosses = 0, diskFaults = 0, seeds = 0
        for seed in UInt64(1)...120 {
            let scenario = SimulationScenario(seed: seed)
            guard scenario.durable else { continue }
            seeds += 1
            let report = CampaignSimulator.run(scenario)
            stops += report.crashes
            powerLosses += report.powerLosses
            diskFaults += report.diskFaults.count
            if !report.violations.isEmpty { failing.append(report.description) }
        }
        XCTAssertEqual(failing, [], "replay one with: pushcast simulate --seed N")
        XCTAssertGreaterThan(powerLosses, 5, "the sweep lost power next to never")
        XCTAssertGreaterThan(diskFaults, 3, "disk faults fired next to never")
        print("storage sweep: \(seeds) seeds with files, \(stops) stops resumed, \(powerLosses) power losses, \(diskFaults) disk faults fired")
    }

    private func scenario(seed: UInt64, _ bend: (inout SimulationScenario) -> Void) -> SimulationScenario {
        var scenario = SimulationScenario(seed: seed)
        scenario.serverDeath = nil
        scenario.storageFaults = StorageFaults()
        scenario.crashes = []
        bend(&scenario)
        return scenario
    }

    /// A power loss mid-campaign, twice: the same outcomes and the same results lines (time
    /// fields aside), torn tails and all.
    func testAPowerLossReplaysExactly() {
        for seed in UInt64(20)...22 {
            var scenario = scenario(seed: seed) {
                $0.crashes = [SimulatedCrash(atNanoseconds: 700_000_000, powerLoss: true)]
                $0.syncPolicy = .batch  // with --fsync never, a power loss may take the journal
            }
            scenario.keepsResults = true
            let first = CampaignSimulator.run(scenario)
            let second = CampaignSimulator.run(scenario)
            XCTAssertEqual(first.violations, [])
            XCTAssertEqual(first.description, second.description)
            XCTAssertEqual(first.results.count, scenario.rows.count)
            XCTAssertEqual(first.results, second.results)
            XCTAssertEqual(first.powerLosses, 1, first.description)
        }
    }

    /// An EIO on a write, an EIO on a sync and a full disk, each early and late: the run stops
    /// with exit 2 (or 3 for a full disk), naming the fault (the ledger checks it), loses
    /// nothing recorded, and the resume finishes the campaign.
    func testADiskFaultStopsTheRunAndTheResumeFinishesIt() {
        var fired: [String] = []
        for (seed, write, sync) in [(UInt64(31), 3, 2), (32, 40, 4), (33, 150, 6)] {
            let faults: [StorageFaults] = [{ var f = StorageFaults(); f.failingWrite = write; return f }(),
                                           { var f = StorageFaults(); f.failingSync = sync; return f }(),
                                           { var f = StorageFaults(); f.diskFullAfterWrites = write; f.slackBytes = 100; return f }()]
            for planted in faults {
                let report = CampaignSimulator.run(scenario(seed: seed) { $0.storageFaults = planted })
                XCTAssertEqual(report.violations, [], "\(planted): \(report)")
                if !report.diskFaults.isEmpty {
                    XCTAssertGreaterThanOrEqual(report.crashes, 1, "\(planted): \(report)")
                }
                fired += report.diskFaults
            }
        }
        XCTAssertGreaterThanOrEqual(fired.filter { $0.hasPrefix("EIO on write") }.count, 2, "\(fired)")
        XCTAssertGreaterThanOrEqual(fired.filter { $0.hasPrefix("EIO on sync") }.count, 2, "\(fired)")
        XCTAssertGreaterThanOrEqual(fired.filter { $0.hasPrefix("the disk filled") }.count, 2, "\(fired)")
    }
}

/// Bugs planted in the resume (`ResumeMutation`): the crash sweep must catch each one, and the
/// test says which seed and which rule did.
final class ResumeMutationTests: XCTestCase {
    func testTheCrashSweepCatchesEveryPlantedResumeBug() {
        for mutation in ResumeMutation.allCases {
            let caught = firstCatch(seeds: 1...200) { scenario in
                scenario.resumeMutation = mutation
                return !scenario.crashes.isEmpty
            }
            XCTAssertNotNil(caught, "\(mutation.rawValue) went unnoticed")
            print("resume mutation \(mutation.rawValue) caught by \(caught ?? "nothing")")
        }
    }
}
