import PushcastCore
import PushcastEngine

/// What must hold after every simulated campaign, checked against the servers' ledgers (what
/// really reached devices) rather than against what pushcast believes:
/// 1. every input row has exactly one outcome;
/// 2. no notification reached a device twice;
/// 3. `delivered` means the device got it; a device that got it is `delivered` or `unknown`,
///    never `failed`; `pruned` means the provider really called the token dead;
/// 4. rows that cannot be sent (bad token, unknown platform, repeated token) never reach a server,
///    and every row goes to its own provider;
/// 5. no row was sent more often than its attempts plus resends allow (a budget per run);
/// 6. the summary says what the results say.
struct SimulationInvariants {
    let scenario: SimulationScenario
    let servers: [ProviderID: SimulatedServer]
    let records: [OutcomeRecord]
    let summary: CampaignSummary
    /// Runs stopped and resumed (crashes, power losses, disk faults, the breaker): each resume
    /// may spend a row's budget anew.
    let stops: Int

    func check(into report: inout SimulationReport) {
        report.rows = scenario.rows.count
        report.requests = servers.values.reduce(0) { $0 + $1.requests.values.reduce(0, +) }
        report.deliveries = servers.values.reduce(0) { $0 + $1.deliveries.values.reduce(0, +) }
        for record in records { report.outcomes[record.outcome, default: 0] += 1 }
        var found: [String] = []
        checkOneOutcomePerRow(&found)
        checkAgainstLedgers(&found)
        checkSummary(&found)
        report.violations += found
    }

    private func checkOneOutcomePerRow(_ found: inout [String]) {
        var seen = Set<Int>()
        for record in records where !seen.insert(record.row).inserted { found.append("row \(record.row) has two outcomes") }
        if records.count != scenario.rows.count {
            found.append("\(scenario.rows.count) rows in, \(records.count) outcomes out")
        }
    }

    private func checkAgainstLedgers(_ found: inout [String]) {
        // Each run may spend a row's budget: a row that came back unsent (429, 503, refused) when
        // its run stopped is sent again by the resume, from a fresh budget.
        let budget = (scenario.retry.attemptsMax + scenario.resendsMax) * (stops + 1)
        let byToken = Dictionary(records.filter { $0.outcome != .duplicate }.map { ($0.token, $0) }, uniquingKeysWith: { a, _ in a })
        for row in scenario.rows where row.kind != .duplicate {
            let record = byToken[row.token]
            let provider: ProviderID? = row.kind == .apns ? .apns : row.kind == .fcm ? .fcm : nil
            for (id, server) in servers where id != provider && server.requests[row.token] != nil {
                found.append("\(row.kind) token \(row.token.prefix(12))… reached the \(id.rawValue) server")
            }
            guard let provider, let server = servers[provider] else { continue }
            let delivered = server.deliveries[row.token] ?? 0
            let requests = server.requests[row.token] ?? 0
            let outcome = record?.outcome
            let name = "\(provider.rawValue) token \(row.token.prefix(12))… (\(outcome?.rawValue ?? "no outcome"), \(requests) requests)"
            if delivered > 1 { found.append("\(name) reached the device \(delivered) times") }
            if outcome == .delivered && delivered != 1 { found.append("\(name) recorded delivered, but the device got it \(delivered) times") }
            if delivered == 1 && outcome != .delivered && outcome != .unknown { found.append("\(name) reached the device") }
            if outcome == .pruned && !server.isDead(row.token) { found.append("\(name) pruned a live token") }
            if requests > budget { found.append("\(name): over the budget of \(budget) attempts and resends") }
        }
        for row in scenario.rows where row.kind == .duplicate {
            if let server = servers.values.first(where: { ($0.deliveries[row.token] ?? 0) > 1 }) {
                found.append("repeated token \(row.token.prefix(12))… reached the \(server.responder.provider.rawValue) device twice")
            }
        }
    }

    private func checkSummary(_ found: inout [String]) {
        if summary.rows != records.count { found.append("the summary counts \(summary.rows) rows, the results \(records.count)") }
        for kind in OutcomeKind.allCases {
            let counted = records.filter { $0.outcome == kind }.count
            if summary.outcomes[kind] != counted { found.append("the summary counts \(summary.outcomes[kind]) \(kind.rawValue), the results \(counted)") }
        }
        if let reason = summary.stoppedBecause { found.append("the run stopped early: \(reason)") }
    }
}
