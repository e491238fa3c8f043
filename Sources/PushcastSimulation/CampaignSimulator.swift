import PushcastAPNs
import PushcastCore
import PushcastEngine
import PushcastFCM
import PushcastInput
import PushcastJSON
import PushcastProviderKit
import PushcastProviders
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
    /// Runs cut short by a simulated crash or stopped by the breaker, each followed by a resume.
    public var crashes = 0
    /// Of those, the power losses.
    public var powerLosses = 0
    /// The disk faults that fired (EIO, a full disk), in words.
    public var diskFaults: [String] = []
    public var violations: [String] = []
    /// The results file's lines in row order, their time fields (latency) left out; only when
    /// the scenario `keepsResults`.
    public var results: [String] = []

    public var description: String {
        let counts = OutcomeKind.allCases.compactMap { kind in outcomes[kind].map { "\(kind.rawValue) \($0)" } }.joined(separator: ", ")
        var text = "seed \(seed): \(rows) rows, \(requests) requests, \(deliveries) delivered, "
            + NumberText.fixed(virtualSeconds, places: 1) + " s virtual" + (crashes > 0 ? ", \(crashes) stops resumed" : "") + (powerLosses > 0 ? " (\(powerLosses) power losses)" : "")
            + (diskFaults.isEmpty ? "" : "; disk: " + diskFaults.joined(separator: ", ")) + " (\(counts))"
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

    /// APNs's server rules, checking headers and payload; the simulated lanes send no provider token.
    public static func simulatedAPNs() -> any ProviderResponder { APNsResponder(authentication: .headersOnly) }

    /// FCM's server rules for the simulated lanes' project; their bearer comes from a token source
    /// of their own, so none is checked.
    public static func simulatedFCM() -> any ProviderResponder {
        var rules = FCMServerRules()
        rules.requiresBearer = false
        return FCMResponder(rules: rules, setup: FCMServerSetup(projectID: simulatedProject, verifiers: []))
    }

    static let simulatedProject = "sim"

    public static func run(_ scenario: SimulationScenario, wrap: WorkloadWrapper? = nil) -> SimulationReport {
        var report = SimulationReport(seed: scenario.seed)
        let servers: [ProviderID: SimulatedServer] = [
            .apns: SimulatedServer(responder: simulatedAPNs(), model: scenario.faults[.apns]!, seed: scenario.seed &+ 1),
            .fcm: SimulatedServer(responder: simulatedFCM(), model: scenario.faults[.fcm]!, seed: scenario.seed &+ 2),
        ]
        report.faults = "apns: \(servers[.apns]!.model); fcm: \(servers[.fcm]!.model); network: \(scenario.network)"
            + (scenario.crashes.isEmpty ? "" : "; crashes after " + scenario.crashes.map(\.description).joined(separator: ", "))
            + (scenario.storageFaults.isEmpty ? "" : "; disk: \(scenario.storageFaults)")
            + (scenario.durable ? "; --fsync \(scenario.syncPolicy.rawValue)" : "")
            + (scenario.serverDeath.map { "; the \($0.provider.rawValue) server dies at \($0.atNanoseconds / 1_000_000) ms\($0.closesAfterHandshake ? ", closing connections after the handshake" : "")" } ?? "")
        let tokens = FCMAccessTokens(clock: ManualClock(), threads: SystemThreads()) { .success(OAuthAccessToken(accessToken: "ya29.sim", expiresInSeconds: 86_400)) }
        defer { tokens.close() }
        let clock = ManualClock()
        let network = SimulatedNetwork(clock: clock, model: scenario.network, seed: scenario.seed &+ 3)
        defer { network.tearDown() }
        do {
            try tokens.start { _ in }
            if let death = scenario.serverDeath, let server = servers[death.provider] {
                network.schedule(at: death.atNanoseconds) {
                    if death.closesAfterHandshake {
                        server.closesAfterHandshakeUntil = network.now + death.lastsNanoseconds
                    } else {
                        server.startOutage(at: network.now, lasting: death.lastsNanoseconds)
                    }
                    network.resetEveryLink(to: server)
                }
            }
            var durable: DurableRuns?
            let (records, summary, cutShort, crashes): Ending
            if scenario.durable {
                let ran = try runDurably(scenario, servers: servers, network: network, tokens: tokens, wrap: wrap)
                (records, summary, cutShort, crashes) = ran.0
                durable = ran.1
            } else {
                (records, summary, cutShort, crashes) = try runInMemory(scenario, servers: servers, network: network, tokens: tokens, wrap: wrap)
            }
            report.virtualSeconds = Double(clock.nanoseconds) / 1e9
            report.crashes = crashes
            if let cutShort { report.violations.append("the run did not end by itself: \(cutShort)") }
            SimulationInvariants(scenario: scenario, servers: servers, records: records, summary: summary, stops: crashes).check(into: &report)
            if let durable {
                durable.ledger.check(records: records, servers: servers, into: &report.violations)
                report.diskFaults = durable.storage.fired
                report.powerLosses = durable.ledger.stops.filter { $0.kind == .powerLoss }.count
            }
            if scenario.keepsResults { report.results = resultLines(records) }
        } catch {
            report.violations.append("cannot run the campaign: \(error)")
        }
        return report
    }

    static func resultLines(_ records: [OutcomeRecord]) -> [String] {
        records.sorted { $0.row < $1.row }.map { record in
            var timeless = record
            timeless.latencyMilliseconds = nil
            var line: [UInt8] = []
            ResultEncoding.appendLine(timeless, format: .ndjson, columns: .standard, to: &line)
            return String(decoding: line, as: UTF8.self)
        }
    }

    typealias Ending = (records: [OutcomeRecord], summary: CampaignSummary, cutShort: String?, crashes: Int)

    /// One run, its outcomes kept in memory.
    private static func runInMemory(_ scenario: SimulationScenario, servers: [ProviderID: SimulatedServer], network: SimulatedNetwork,
                                    tokens: FCMAccessTokens, wrap: WorkloadWrapper?) throws -> Ending {
        let sink = RecordingSink()
        let (summary, cutShort) = try runOnce(scenario, servers: servers, network: network, tokens: tokens, wrap: wrap, sink: sink,
                                              durability: nil, crashAfter: nil)
        return (sink.records, summary, cutShort, 0)
    }

    /// One run of the campaign (one process's life) on the simulated crew.
    static func runOnce(_ scenario: SimulationScenario, servers: [ProviderID: SimulatedServer], network: SimulatedNetwork,
                                tokens: FCMAccessTokens, wrap: WorkloadWrapper?, sink: OutcomeSink, durability: CampaignDurability?,
                                crashAfter: UInt64?) throws -> (summary: CampaignSummary, cutShort: String?) {
        let run = try makeRun(scenario, tokens: tokens, wrap: wrap)
        run.durability = durability
        // Against a server that died, a working breaker stops the run within a minute or two; one
        // still running after a quarter of an hour retries a dead server instead of stopping.
        let limit: UInt64 = scenario.serverDeath == nil ? 4 * 3600 * 1_000_000_000 : 15 * 60 * 1_000_000_000
        return self.run(run, servers: servers, network: network, seed: scenario.seed, sink: sink, crashAfter: crashAfter,
                        mutation: scenario.mutation, timeLimit: limit)
    }

    /// Runs any campaign, its feeds and lanes built by the caller (for a provider of its own,
    /// say), on the simulated crew against `servers` (one per lane's provider), from `clock`'s
    /// time. `cutShort` says why the run did not end by itself (nil when it did): a crash after
    /// `crashAfter` ns, or four virtual hours gone.
    public static func run(_ run: CampaignRun, servers: [ProviderID: SimulatedServer], clock: ManualClock, seed: UInt64,
                           sink: OutcomeSink, crashAfter: UInt64? = nil, network model: NetworkModel = NetworkModel())
        -> (summary: CampaignSummary, cutShort: String?)
    {
        let network = SimulatedNetwork(clock: clock, model: model, seed: seed &+ 3)
        defer { network.tearDown() }
        return self.run(run, servers: servers, network: network, seed: seed, sink: sink, crashAfter: crashAfter, mutation: nil,
                        timeLimit: 4 * 3600 * 1_000_000_000)
    }

    static func run(_ run: CampaignRun, servers: [ProviderID: SimulatedServer], network: SimulatedNetwork, seed: UInt64,
                    sink: OutcomeSink, crashAfter: UInt64?, mutation: ClientWorkerMutation?, timeLimit: UInt64)
        -> (summary: CampaignSummary, cutShort: String?)
    {
        var crew: SimulatedCrew?
        let start = network.clock.nanoseconds
        let summary = run.run(sinks: [sink]) { lanes, outcomes in
            let made = SimulatedCrew(lanes: lanes, outcomes: outcomes, servers: servers, network: network, seed: seed &+ start,
                                     crashAt: crashAfter.map { start + $0 }, timeLimit: start + timeLimit, mutation: mutation)
            crew = made
            return made
        }
        return (summary, crew?.cutShort)
    }

    static func makeRun(_ scenario: SimulationScenario, tokens: FCMAccessTokens, wrap: WorkloadWrapper?) throws -> CampaignRun {
        let columns = ["token", "platform", "name"]
        let reader = try TokenFileReader(source: MemoryByteSource(scenario.csv), format: .csv, fileName: "sim.csv")
        let layout = try RowLayout(columns: reader.columns, idColumn: nil, defaultProvider: .apns, fileName: "sim.csv")
        let renderings: [ProviderID: any ProviderRendering] = [
            .apns: APNsRendering(template: try PayloadTemplate.compile(text: #"{"aps":{"alert":"Hello {{name}}"}}"#, columns: columns), payloadBytesMax: 4096),
            .fcm: FCMRendering(template: try FCMMessageTemplate.compile(text: #"{"notification":{"title":"Hello {{name}}"}}"#, columns: columns,
                                                                validateOnly: false, source: "sim.json")),
        ]
        let preparer = RowPreparer(layout: layout, renderings: renderings, campaign: "sim", fileName: "sim.csv", sends: [.apns, .fcm],
                                   recordsUnroutable: true, duplicates: .exact(expectedRows: scenario.rows.count), catalog: .standard)
        let lanes = try makeLanes(scenario, tokens: tokens, wrap: wrap)
        let output = CampaignOutput(resultsPath: "(memory)", resultsFormat: .ndjson, prunePath: "(memory)", summaryPath: nil, progress: false)
        return CampaignRun(feeds: [CampaignFeed(reader: reader, preparer: preparer)], lanes: lanes, output: output, machine: machine,
                           totalRows: scenario.rows.count, log: { _ in })
    }

    /// The machine a simulated run is given: the simulator's own files (the sinks and the
    /// journal are handed in; nothing else is opened) and a clock that never moves (the crew
    /// keeps the virtual time).
    static let machine = Machine(files: SimulatedStorage(seed: 0), monotonicClock: { ManualClock() }, wallClockSeconds: { 1_800_000_000 })

    /// A lane's configuration carries a TLS context; the simulator never handshakes with it, and
    /// it reads no file.
    private static let clientContext = Result { () throws(TLSError) in
        try TLSContext(role: .client, configuration: TLSConfiguration()) { _, _ throws(SecretFileError) in
            throw .cannotOpen(reason: "the simulator has no credential files")
        }
    }

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
        let apnsSettings = APNsSendSettings(headers: headers, tokenSource: nil, authority: "api.sim.apple")
        let apns = ProviderLane(provider: .apns, client: client("api.sim.apple"), connections: scenario.connections[.apns]!,
                                workers: scenario.workers[.apns]!, policy: policy) { APNsAdapter(settings: apnsSettings) }
        var fcmPolicy = policy
        fcmPolicy.limiter = scenario.fcmRatePerSecond.map { ProviderRateLimiter(ratePerSecond: $0, nowNanoseconds: 0) }
        let fcmSettings = FCMSendSettings(authority: "fcm.sim.google", project: simulatedProject, tokens: tokens)
        let fcm = ProviderLane(provider: .fcm, client: client("fcm.sim.google"), connections: scenario.connections[.fcm]!,
                               workers: scenario.workers[.fcm]!, policy: fcmPolicy) { FCMAdapter(settings: fcmSettings) }
        guard let wrap else { return [apns, fcm] }
        return [apns, fcm].map { lane in
            let make = lane.makeWorkload
            return ProviderLane(provider: lane.provider, client: lane.client, connections: lane.connections, workers: lane.workers) { wrap(make($0)) }
        }
    }
}
