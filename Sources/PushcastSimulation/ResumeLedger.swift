import PushcastCore
import PushcastEngine

/// What the resume must keep across the stops of one seed, checked against the files that
/// survived each stop and the servers' ledgers (what the end-to-end kill matrix checks, in
/// memory):
/// 1. a row recorded in the results when a run stopped keeps that outcome to the end;
/// 2. a token a server delivered before a stop is never sent again (a row whose record was lost
///    is written off `unknown`);
/// 3. a process death writes off as unknown at most what was in flight: connections × the
///    stream limit (a power loss falls back to the synced reservations, and may write off more);
/// 4. a disk fault (EIO, ENOSPC) stops the run with a diagnosis, exit 2 (or 3, resumable, for a
///    full disk found by a reservation), and the journal stays resumable;
/// 5. a resume writes off as unknown no more rows than the surviving journal, read here on its
///    own, says may have gone out.
struct ResumeLedger {
    struct Stop {
        enum Kind: String { case processDeath = "process death", powerLoss = "power loss", diskFault = "disk fault", breaker }
        var kind: Kind
        var recorded: [Int: OutcomeKind]
        /// Requests per delivered token, per provider, when the run stopped.
        var delivered: [ProviderID: [String: Int]]
        /// Rows written off as unknown so far: recorded so, and those a resume would record.
        var writtenOff: Int
        /// Of those, the rows already recorded `InterruptedInFlight`, and the rows the journal
        /// says may have gone out (what the next resume may add).
        var recordedInFlight = 0
        var mayHaveGoneOut = 0
    }

    /// The most rows one process death may write off.
    let bound: Int
    var stops: [Stop] = []
    var violations: [String] = []
    var breakerStops: Int { stops.filter { $0.kind == .breaker }.count }

    init(bound: Int) { self.bound = bound }

    mutating func noteStop(_ kind: Stop.Kind, storage: SimulatedStorage, boot: String, servers: [ProviderID: SimulatedServer]) {
        let path = CampaignSimulator.resultsPath
        var recorded: [Int: OutcomeKind] = [:]
        var unknown = 0
        var stop = Stop(kind: kind, recorded: [:], delivered: [:], writtenOff: 0)
        var mayHaveGoneOut = 0
        for (id, server) in servers { stop.delivered[id] = server.requests.filter { server.deliveries[$0.key, default: 0] > 0 } }
        do {
            let results = try RecoveredResults.read(storage.contents(path) ?? [], format: .ndjson, path: path, columns: .standard) { record in
                recorded[record.row] = record.outcome
                if record.reason == OutcomeReason.interruptedInFlight { unknown += 1 }
            }
            let journalPath = CampaignDurability.journalPath(results: path)
            if let journal = storage.contents(journalPath), !journal.isEmpty {
                let earlier = try JournalState.parse(journal, path: journalPath, boot: boot)
                mayHaveGoneOut = CampaignDurability.Preview(recovered: results, earlier: earlier).unsettled.mayHaveGoneOut
            }
        } catch {
            violations.append("after a \(kind.rawValue), the files cannot be resumed: \(error.description)")
        }
        stop.recorded = recorded
        checkResumeWroteOff(recordedInFlight: unknown, since: stops.last)
        stop.recordedInFlight = unknown
        stop.mayHaveGoneOut = mayHaveGoneOut
        unknown += mayHaveGoneOut
        stop.writtenOff = unknown
        let before = stops.last?.writtenOff ?? 0
        if kind == .processDeath && unknown - before > bound {
            violations.append("a process death wrote off \(unknown - before) rows as unknown, over connections × streams = \(bound)")
        }
        stops.append(stop)
    }

    /// Rule 5: the `InterruptedInFlight` records added since `previous` (by the resume after it)
    /// are at most what its journal said may have gone out.
    mutating func checkResumeWroteOff(recordedInFlight: Int, since previous: Stop?) {
        guard let previous else { return }
        let added = recordedInFlight - previous.recordedInFlight
        if added > previous.mayHaveGoneOut {
            violations.append("the resume after the \(previous.kind.rawValue) wrote off \(added) rows as unknown; "
                + "its journal says at most \(previous.mayHaveGoneOut) may have gone out")
        }
    }

    /// A run in which a disk fault fired: EIO stops it with exit 2, a full disk with 2 or 3 (or
    /// not at all, when what was reserved sufficed); the reason names the fault.
    mutating func checkDiskStop(_ summary: CampaignSummary, fired: [String]) {
        let eio = fired.contains { $0.hasPrefix("EIO") }
        guard let reason = summary.stoppedBecause else {
            if eio { violations.append("\(fired.joined(separator: ", ")), but the run went on and ended by itself") }
            return
        }
        let status = summary.exitStatus
        if eio ? status != 2 : !(status == 2 || status == 3) {
            violations.append("\(fired.joined(separator: ", ")): the run stopped with exit status \(status) (\(reason))")
        }
        let named = ["Input/output error", "No space left on device", "the disk is full"].contains { reason.contains($0) }
        if !named { violations.append("\(fired.joined(separator: ", ")): the stop does not name the fault: \(reason)") }
    }

    /// Against the final results and the servers' final ledgers.
    func check(records: [OutcomeRecord], servers: [ProviderID: SimulatedServer], into found: inout [String]) {
        var ledger = self
        ledger.checkResumeWroteOff(recordedInFlight: records.filter { $0.reason == OutcomeReason.interruptedInFlight }.count, since: stops.last)
        found += ledger.violations
        let finalOutcomes = Dictionary(records.map { ($0.row, $0.outcome) }, uniquingKeysWith: { a, _ in a })
        for (number, stop) in stops.enumerated() {
            let name = "the \(stop.kind.rawValue) (stop \(number + 1))"
            for (row, outcome) in stop.recorded.sorted(by: { $0.key < $1.key }) where finalOutcomes[row] != outcome {
                found.append("row \(row) was recorded \(outcome.rawValue) before \(name), \(finalOutcomes[row]?.rawValue ?? "nothing") at the end")
                break
            }
            for (id, requests) in stop.delivered {
                guard let server = servers[id] else { continue }
                for (token, count) in requests.sorted(by: { $0.key < $1.key }) where server.requests[token, default: 0] > count {
                    found.append("\(id.rawValue) token \(token.prefix(12))… was delivered before \(name) and sent again after the resume")
                    break
                }
            }
        }
    }
}
