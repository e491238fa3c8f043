import PushcastAPNs
import PushcastCore
import PushcastEngine
import PushcastFCM
import PushcastInput
import PushcastReactor
import PushcastTransport
import PushcastWire

/// What one seed's simulated campaign did, and every invariant it broke.
public struct SimulationReport: Sendable, CustomStringConvertible {
    public var seed: UInt64
    public var rows = 0
    public var requests = 0
    public var deliveries = 0
    public var virtualSeconds = 0.0
    public var outcomes: [OutcomeKind: Int] = [:]
    public var faults = ""
    public var violations: [String] = []

    public var description: String {
        let counts = OutcomeKind.allCases.compactMap { kind in outcomes[kind].map { "\(kind.rawValue) \($0)" } }.joined(separator: ", ")
        var text = "seed \(seed): \(rows) rows, \(requests) requests, \(deliveries) delivered, "
            + String(format: "%.1f s virtual", virtualSeconds) + " (\(counts))"
        if !violations.isEmpty { text += "\n  " + violations.prefix(10).joined(separator: "\n  ") }
        return text
    }
}

/// Runs whole campaigns in memory: the real reader, preparer, lanes, workloads, adapters and
/// outcome loop, against simulated APNs and FCM servers on a virtual clock (TigerBeetle's VOPR
/// is the model: docs/DESIGN.md). Then checks what the results say against what the servers
/// saw.
public enum CampaignSimulator {
    /// Wraps each lane's workload before it runs (a test injects a bug here to show the
    /// invariants catch it).
    public typealias WorkloadWrapper = @Sendable (any CampaignWorkload) -> any CampaignWorkload

    public static func run(_ scenario: SimulationScenario, wrap: WorkloadWrapper? = nil) -> SimulationReport {
        var report = SimulationReport(seed: scenario.seed)
        let clock = ManualClock()
        let servers: [ProviderID: SimulatedServer] = [
            .apns: SimulatedServer(provider: SimulatedAPNs(), model: scenario.faults[.apns]!, seed: scenario.seed &+ 1),
            .fcm: SimulatedServer(provider: SimulatedFCM(), model: scenario.faults[.fcm]!, seed: scenario.seed &+ 2),
        ]
        report.faults = "apns: \(servers[.apns]!.model); fcm: \(servers[.fcm]!.model)"
        let tokens = FCMAccessTokens(clock: ManualClock()) { .success(OAuthAccessToken(accessToken: "ya29.sim", expiresInSeconds: 86_400)) }
        do { try tokens.start { _ in } } catch {
            report.violations.append("cannot start the simulated FCM credential: \(error)")
            return report
        }
        defer { tokens.close() }
        let sink = RecordingSink()
        let summary: CampaignSummary
        var crew: SimulatedCrew?
        do {
            let run = try makeRun(scenario, tokens: tokens, wrap: wrap)
            summary = run.run(sinks: [sink]) { lanes, outcomes in
                let made = SimulatedCrew(lanes: lanes, outcomes: outcomes, servers: servers, clock: clock, seed: scenario.seed,
                                         crashAt: nil, timeLimit: 4 * 3600 * 1_000_000_000)
                crew = made
                return made
            }
        } catch {
            report.violations.append("cannot set up the campaign: \(error)")
            return report
        }
        report.virtualSeconds = Double(clock.nanoseconds) / 1e9
        if let cutShort = crew?.cutShort { report.violations.append("the run did not end by itself: \(cutShort)") }
        SimulationInvariants(scenario: scenario, servers: servers, records: sink.records, summary: summary).check(into: &report)
        return report
    }

    static func makeRun(_ scenario: SimulationScenario, tokens: FCMAccessTokens, wrap: WorkloadWrapper?) throws -> CampaignRun {
        let columns = ["token", "platform", "name"]
        let reader = try TokenFileReader(source: MemoryByteSource(scenario.csv), format: .csv, fileName: "sim.csv")
        let layout = try RowLayout(columns: reader.columns, idColumn: nil, defaultProvider: .apns, fileName: "sim.csv")
        let renderings: [ProviderID: ProviderRendering] = [
            .apns: .apns(template: try PayloadTemplate.compile(text: #"{"aps":{"alert":"Hello {{name}}"}}"#, columns: columns), payloadBytesMax: 4096),
            .fcm: .fcm(template: try FCMMessageTemplate.compile(text: #"{"notification":{"title":"Hello {{name}}"}}"#, columns: columns,
                                                                validateOnly: false, source: "sim.json")),
        ]
        let preparer = RowPreparer(layout: layout, renderings: renderings, campaign: "sim", fileName: "sim.csv", sends: [.apns, .fcm],
                                   recordsUnroutable: true, duplicates: .exact(expectedRows: scenario.rows.count))
        let lanes = try makeLanes(scenario, tokens: tokens, wrap: wrap)
        let output = CampaignOutput(resultsPath: "(memory)", resultsFormat: .ndjson, prunePath: "(memory)", summaryPath: nil, progress: false)
        return CampaignRun(feeds: [CampaignFeed(reader: reader, preparer: preparer)], lanes: lanes, output: output,
                           totalRows: scenario.rows.count, log: { _ in })
    }

    /// A lane's configuration carries a TLS context; the simulator never handshakes with it.
    private static let clientContext = Result { () throws(TLSError) in try TLSContext(role: .client, configuration: TLSConfiguration()) }

    static func makeLanes(_ scenario: SimulationScenario, tokens: FCMAccessTokens, wrap: WorkloadWrapper?) throws -> [ProviderLane] {
        var limits = Limits()
        limits.streamsPerConnectionMax = scenario.streamsPerConnection
        limits.requestTimeoutNanoseconds = scenario.requestTimeoutNanoseconds
        let context = try clientContext.get()
        func client(_ host: String) -> ClientConfiguration {
            ClientConfiguration(endpoint: Endpoint(host: host, port: 443), address: "127.0.0.1", tls: context, limits: limits,
                                reactor: ReactorConfiguration())
        }
        let policy = SendPolicy(retry: scenario.retry, retryUnknown: false, resendsMax: scenario.resendsMax,
                                rowDeadlineNanoseconds: scenario.rowDeadlineNanoseconds)
        let headers = try APNsCampaignHeaders(topic: "com.example.sim", nowEpochSeconds: 1_800_000_000)
        let apns = ProviderLane.apns(settings: APNsSendSettings(headers: headers, tokenSource: nil, authority: "api.sim.apple",
                                                                retry: scenario.retry, retryUnknown: false),
                                     policy: policy, client: client("api.sim.apple"), connections: scenario.connections[.apns]!,
                                     workers: scenario.workers[.apns]!)
        let fcm = ProviderLane.fcm(settings: FCMSendSettings(authority: "fcm.sim.google", project: "sim", tokens: tokens), policy: policy,
                                   client: client("fcm.sim.google"), connections: scenario.connections[.fcm]!, workers: scenario.workers[.fcm]!)
        guard let wrap else { return [apns, fcm] }
        return [apns, fcm].map { lane in
            let make = lane.makeWorkload
            return ProviderLane(provider: lane.provider, client: lane.client, connections: lane.connections, workers: lane.workers) { wrap(make($0)) }
        }
    }
}
