import PushcastCore
import PushcastEngine
import PushcastFCM

/// Runs with the journal and results files on `SimulatedStorage`: stopped by crashes, power
/// losses, disk faults and the breaker, each followed by a resume as `pushcast send --resume`
/// makes it, on the bytes that survived, against the same simulated servers.
extension CampaignSimulator {
    static let resultsPath = "/simulated/results.ndjson"
    static let prunePath = "/simulated/prune.csv"

    /// What one seed's durable runs share: the disk, the boot, the stops and what they found.
    final class DurableRuns {
        let scenario: SimulationScenario
        let storage: SimulatedStorage
        let servers: [ProviderID: SimulatedServer]
        /// The kernel's boot id; a power loss starts another boot.
        var boot = 1
        var ledger: ResumeLedger

        init(_ scenario: SimulationScenario, servers: [ProviderID: SimulatedServer]) {
            self.scenario = scenario
            self.servers = servers
            storage = SimulatedStorage(seed: scenario.seed &+ 4, faults: scenario.storageFaults)
            ledger = ResumeLedger(bound: scenario.streamsPerConnection * scenario.connections.values.reduce(0, +))
        }

        var bootID: String { "simulated-\(boot)" }

        /// The journal locked for a run and its sink, as `send` opens them; the run's resume
        /// mutation bent in.
        func open(resuming: Bool) throws(CampaignError) -> (CampaignDurability, ResultFilesSink) {
            let fingerprint = CampaignFingerprint(campaign: "sim", input: "\(scenario.seed)", templates: "sim", providers: "apns,fcm",
                                                  resultsFormat: "ndjson")
            let request = ResumeRequest(resume: resuming, force: false, retryUnknown: scenario.resumeRetriesUnknown,
                                        policy: scenario.syncPolicy, boot: bootID, files: storage)
            let durability = try CampaignDurability.open(resultsPath: resultsPath, format: .ndjson, columns: .standard,
                                                         fingerprint: fingerprint, request: request, note: { _ in })
            let journal = CampaignDurability.journalPath(results: resultsPath)
            if (try? storage.openJournal(journal)) != nil { ledger.violations.append("a second sender got the lock of \(journal)") }
            if let mutation = scenario.resumeMutation, var earlier = durability.earlier {
                earlier.bend(mutation)
                durability.earlier = earlier
            }
            let sink = try ResultFilesSink(resultsPath: resultsPath, format: .ndjson, prunePath: prunePath, resuming: durability.recovered != nil,
                                           restoredPrune: durability.restoredPrune, columns: .standard, files: storage)
            return (durability, sink)
        }

        /// Notes a stop: what the files hold now, and what the servers delivered.
        func noteStop(_ kind: ResumeLedger.Stop.Kind) {
            ledger.noteStop(kind, storage: storage, boot: bootID, servers: servers)
        }
    }

    /// Runs that stop where the scenario says (a crash, a power loss, a disk fault, the breaker
    /// against a dead server), each resumed from the files that survived, until one ends by
    /// itself; the records are the results file's lines.
    static func runDurably(_ scenario: SimulationScenario, servers: [ProviderID: SimulatedServer], network: SimulatedNetwork,
                           tokens: FCMAccessTokens, wrap: WorkloadWrapper?) throws -> (Ending, DurableRuns) {
        let runs = DurableRuns(scenario, servers: servers)
        let storage = runs.storage
        var last: (summary: CampaignSummary, cutShort: String?) = (CampaignSummary(), nil)
        var crashesLeft = scenario.crashes[...]
        for index in 0..<(scenario.crashes.count + 8) {
            let crash = crashesLeft.popFirst()
            let fired = storage.fired.count
            if index > 0 && fired > 0 { storage.repair() }  // the operator made room, or replaced the disk
            let durability: CampaignDurability, sink: ResultFilesSink
            let start = network.clock.nanoseconds
            do { (durability, sink) = try runs.open(resuming: index > 0) } catch {
                // A refusal before anything is sent (exit 2): fine only when a disk fault caused it.
                storage.endProcess()
                guard storage.fired.count > fired else { throw error }
                runs.ledger.checkDiskStop(CampaignSummary(stoppedBecause: error.description), fired: Array(storage.fired[fired...]))
                runs.noteStop(.diskFault)
                crashesLeft = crash.map { [$0] + crashesLeft } ?? crashesLeft
                continue
            }
            last = try runOnce(scenario, servers: servers, network: network, tokens: tokens, wrap: wrap, sink: sink, durability: durability,
                               crashAfter: crash?.atNanoseconds)
            if let crash, last.cutShort == "crashed" {
                if crash.powerLoss {
                    storage.powerLoss()
                    runs.boot += 1
                } else {
                    storage.endProcess()
                }
                runs.noteStop(crash.powerLoss ? .powerLoss : .processDeath)
                network.clock.advance(nanoseconds: 1_000_000_000)  // the batch system restarts the shard
                continue
            }
            storage.endProcess()
            if let cutShort = last.cutShort, index < scenario.crashes.count + 7 {
                runs.ledger.violations.append("run \(index + 1) did not end by itself: \(cutShort)")
                break
            }
            if storage.fired.count > fired {
                runs.ledger.checkDiskStop(last.summary, fired: Array(storage.fired[fired...]))
                if last.summary.stoppedBecause != nil {
                    runs.noteStop(.diskFault)
                    crashesLeft = crash.map { [$0] + crashesLeft } ?? crashesLeft
                        network.clock.advance(nanoseconds: 1_000_000_000)
                    continue
                }
            }
            let backAt = servers.values.map { max($0.downUntil, $0.closesAfterHandshakeUntil) }.max() ?? 0
            if last.cutShort == nil, last.summary.stoppedBecause != nil, runs.ledger.breakerStops < 2, backAt > start {
                // The breaker (or a connection that never worked) stopped the run while a server
                // was down (it died, or an outage outlasted a restart): its owner resumes once the
                // server is back.
                runs.noteStop(.breaker)
                network.clock.nanoseconds = max(network.clock.nanoseconds, backAt) + 1_000_000_000
                crashesLeft = crash.map { [$0] + crashesLeft } ?? crashesLeft
                continue
            }
            break
        }
        var records: [OutcomeRecord] = []
        _ = try RecoveredResults.read(storage.contents(resultsPath) ?? [], format: .ndjson, path: resultsPath, columns: .standard) {
            records.append($0)
        }
        if last.cutShort == nil && last.summary.stoppedBecause == nil {
            try resumeFinished(runs, network: network, tokens: tokens, wrap: wrap, summary: last.summary)
        }
        return ((records, last.summary, last.cutShort, runs.ledger.stops.count), runs)
    }

    /// `send --resume` of a finished campaign: nothing is sent, the results stay as they are,
    /// and the summary is the finished run's.
    private static func resumeFinished(_ runs: DurableRuns, network: SimulatedNetwork, tokens: FCMAccessTokens, wrap: WorkloadWrapper?,
                                       summary: CampaignSummary) throws {
        let requests = runs.servers.values.reduce(0) { $0 + $1.requests.values.reduce(0, +) }
        let results = runs.storage.contents(resultsPath)
        let (durability, sink) = try runs.open(resuming: true)
        let again = try runOnce(runs.scenario, servers: runs.servers, network: network, tokens: tokens, wrap: wrap, sink: sink,
                                durability: durability, crashAfter: nil)
        runs.storage.endProcess()
        if runs.servers.values.reduce(0, { $0 + $1.requests.values.reduce(0, +) }) != requests {
            runs.ledger.violations.append("a resume of the finished campaign sent something")
        }
        if runs.storage.contents(resultsPath) != results { runs.ledger.violations.append("a resume of the finished campaign changed the results") }
        if OutcomeKind.allCases.contains(where: { again.summary.outcomes[$0] != summary.outcomes[$0] }) || again.summary.stoppedBecause != nil {
            runs.ledger.violations.append("a resume of the finished campaign says otherwise: \(again.summary.text)")
        }
    }
}

extension CampaignSummary {
    init(stoppedBecause: String) {
        self.init()
        self.stoppedBecause = stoppedBecause
    }
}

extension JournalState {
    /// The resume bent as `mutation` says (a planted bug).
    mutating func bend(_ mutation: ResumeMutation) {
        switch mutation {
        case .forgetsDispatchMarks:
            dispatched = [:]
        case .distrustsDispatchMarks:
            for (feed, mark) in dispatchedMarks { uncleanMarks[feed] = max(uncleanMarks[feed, default: 0], mark) }
            dispatched = [:]
            dispatchedMarks = [:]
        }
    }
}
