import Foundation
import PushcastCommandLine
import PushcastCore
import PushcastEngine
import PushcastProviderKit
import PushcastProviders
import PushcastInput
import PushcastJSON
import PushcastProviderKit
import PushcastReactor
import PushcastSystem
import PushcastTransport
import PushcastWire

/// `pushcast send` and `pushcast check`: one campaign from a token file.
enum SendCommand {
    /// The options before and after the providers' groups.
    static let leading: [OptionSpec] = [
        .value("format", metavar: "csv|ndjson", help: "input format", defaultDescription: "from the file extension"),
        .value("provider", metavar: ProviderCatalog.standard.ids.map(\.rawValue).joined(separator: "|"),
               help: "provider for rows without a platform/provider column", defaultDescription: "apns"),
        .value("id-column", metavar: "NAME", help: "column copied into the results as the row's identity", defaultDescription: "device_id when present"),
        .value("campaign", metavar: "ID", help: "campaign id; apns-id is derived from (campaign, token)", defaultDescription: "hash of the template and the input name"),
    ]

    static let trailing: [OptionSpec] = [
        CommonOptions.caFile,
        .value("rate", metavar: "apns=N/s,fcm=N/s", help: "per-provider rate limits (also N/m, N/h); each halves on a quota 429 and recovers",
               defaultDescription: "fcm=10000/s (the 600k/min project quota), APNs unlimited"),
        .value("duration", metavar: "TIME", help: "spread the campaign evenly over this window (10m, 1h), from the line count"),
        .value("start-jitter", metavar: "TIME", help: "wait a random time up to this before the first send (avoid the top-of-the-hour spike)"),
        CommonOptions.workers,
        .value("max-attempts", metavar: "N", help: "attempts per notification for 429 and 5xx answers", defaultDescription: "5"),
        .flag("retry-unknown", help: "also retry requests whose fate is unknown (connection lost after sending, timeout)"),
        .value("request-timeout", metavar: "TIME", help: "deadline of each request, and of each row's retries and resends together", defaultDescription: "30s"),
        .value("max-retry-after", metavar: "TIME", help: "the longest Retry-After honoured, for a row and for a provider-wide pause (a longer one is cut to this)",
               defaultDescription: "60s (FCM's quota is counted per minute)"),
        .value("max-resends", metavar: "N", help: "resends per notification that the server never processed (REFUSED_STREAM, GOAWAY, never sent); then it is failed",
               defaultDescription: "10"),
        .value("drain-timeout", metavar: "TIME", help: "after SIGINT/SIGTERM, how long answers in flight may take before the run stops (exit 3)",
               defaultDescription: "20s"),
        .value("stall-timeout", metavar: "TIME", help: "stop a provider's lane with a diagnosis when nothing is answered for this long while requests wait",
               defaultDescription: "30s"),
        .value("resolve", metavar: "HOST:PORT:ADDRESS",
               help: "connect to ADDRESS for HOST:PORT instead of resolving HOST (curl's; the name still goes in SNI, certificate checks and :authority)",
               isRepeatable: true),
        .value("connect-to", metavar: "HOST:PORT:ADDRESS:PORT2",
               help: "connect to ADDRESS:PORT2 for HOST:PORT (as curl's --connect-to; the name and port still go in SNI, certificate checks, "
                   + ":authority and the VAPID audience)",
               isRepeatable: true),
        .value("results", metavar: "FILE", help: "results file, one line per input row", defaultDescription: "<input>.results.ndjson"),
        .value("results-format", metavar: "ndjson|csv", help: "results file format", defaultDescription: "ndjson"),
        .value("prune", metavar: "FILE", help: "prune file of dead and invalid tokens", defaultDescription: "<input>.prune.csv"),
        .value("summary", metavar: "FILE", help: "also write the summary as JSON"),
        .value("shard", metavar: "I/N|auto|auto/N",
               help: "send only shard I of N (rows by a hash of provider and token; {shard} in --results, --prune, --summary is I; "
                   + "--rate and --duration stay campaign-wide); auto reads JOB_COMPLETION_INDEX or SLURM_ARRAY_TASK_ID/_MIN/_COUNT"),
        .flag("resume", help: "go on with this campaign where its results and journal say it stopped (the same command line); starts it when it never ran"),
        .flag("force", help: "start the campaign over: truncate a results file that already holds lines"),
        .value("fsync", metavar: "batch|always|never", help: "how often results and the journal are made durable on disk", defaultDescription: "batch (every 100 ms)"),
        .flag("progress", help: "show progress on stderr even when it is not a terminal (then as a whole line every --progress-interval)"),
        .flag("quiet", help: "no progress line"),
        .flag("dry-run", help: "check everything without connecting (same as pushcast check)"),
        CommonOptions.io,
    ]

    /// Every option: the campaign's, each provider's group from its module, then the run's.
    static let options: [OptionSpec] = leading + StandardProviders.commandLines.flatMap(\.options) + trailing
        + OperatorOptions.options + DatabaseInput.options

    static let spec = CommandSpec(
        name: "pushcast send",
        summary: "Send one campaign to every token in a CSV or NDJSON file; write results and prune files.",
        options: options,
        positionals: [PositionalSpec("file", help: "token file (CSV with a header row, or NDJSON); - reads stdin; none with --from URL",
                                     arity: .optional)])

    static let checkSpec = CommandSpec(
        name: "pushcast check",
        summary: "Check the input, template, keys and payload sizes without connecting; print what send would do.",
        options: options.filter { $0.name != "dry-run" },
        positionals: [PositionalSpec("file", help: "token file (CSV with a header row, or NDJSON); - reads stdin; none with --from URL",
                                     arity: .optional)])

    /// Everything decided before the first row is read for sending: the engine's
    /// `CampaignPlan` (its fields read through this one), and each configured provider's setup
    /// (its credentials and endpoints), which its module read from its option group.
    @dynamicMemberLookup
    struct Plan {
        var core: CampaignPlan
        /// The configured providers, in catalog order.
        var setups: [any ProviderSetup]
        /// The run's switches and outputs.
        var options: SendOptions

        subscript<T>(dynamicMember path: WritableKeyPath<CampaignPlan, T>) -> T {
            get { core[keyPath: path] }
            set { core[keyPath: path] = newValue }
        }

        subscript<T>(dynamicMember path: KeyPath<CampaignPlan, T>) -> T { core[keyPath: path] }
    }

    static func run(_ parsed: ParsedArguments, checkOnly: Bool) throws -> ExitStatus {
        let options = try SendOptions(parsed, checkOnly: checkOnly)
        let sending = options.sending
        // A stop signal while planning (the first read of a big file takes seconds) ends the run
        // before anything is sent: interrupted, resumable.
        if sending { StopSignals.install() }
        // Before anything is opened for writing (the database snapshot and the journal lock too).
        if sending { try refuseSharedFiles(parsed) }
        if sending && options.resume && parsed.positional("file") == "-" {
            throw CommandFailure("--resume needs the input file again, and stdin cannot be read twice: save the export to a file")
        }
        var plan: Plan
        let snapshot: DatabaseInput.Snapshot?
        do { snapshot = try DatabaseInput.prepare(parsed, sending: sending) } catch is Interrupted { return interruptedBeforeSending() }
        defer { snapshot?.cleanUp() }
        do { plan = try makePlan(parsed, options: options, inputPath: snapshot?.path, campaignInput: snapshot?.source) } catch is Interrupted {
            return interruptedBeforeSending()
        }
        plan.inputSource = snapshot?.source ?? ""
        if !sending { return try check(plan) }
        if StopSignals.received > 0 { return interruptedBeforeSending() }
        return try send(plan, parsed)
    }

    /// Thrown by the planning steps when a stop signal arrived.
    struct Interrupted: Error {}

    static func interruptedBeforeSending() -> ExitStatus {
        Console.error("pushcast: interrupted by \(StopSignals.lastName) before sending: nothing was sent (exit 3; run again to start)")
        return .interrupted
    }

    // MARK: - send

    static func resultsPath(_ plan: Plan) -> String {
        let base = plan.inputPath == "-" ? "stdin" : plan.inputPath
        return plan.shard.expand(plan.options.results ?? base + (plan.shard.isSplit ? ".shard-{shard}" : "") + ".results.ndjson")
    }

    static func retryPolicy(_ parsed: ParsedArguments) throws -> RetryPolicy {
        RetryPolicy(attemptsMax: try parsed.int("max-attempts", default: 5, range: 1...100))
    }

    /// What every connection of a send reads from the options.
    struct ConnectionTuning {
        var reactor: ReactorConfiguration
        var requestTimeoutNanoseconds: UInt64
        var stallNanoseconds: UInt64
        /// `--resolve` and `--connect-to`: addresses (and ports) given for host and port.
        var resolve: AddressOverrides

        init(_ parsed: ParsedArguments) throws {
            reactor = try CommonOptions.reactorConfiguration(parsed)
            do { resolve = try AddressOverrides(parsed.values("resolve"), connectTo: parsed.values("connect-to")) } catch {
                throw parsed.error(error.description)
            }
            requestTimeoutNanoseconds = CommonOptions.nanoseconds(try parsed.duration("request-timeout", default: .seconds(30)))
            stallNanoseconds = CommonOptions.nanoseconds(try parsed.duration("stall-timeout", default: .seconds(30),
                                                                             range: .milliseconds(100)...(.seconds(86_400))))
        }
    }

    /// What `send` reads from the options once, before it builds the lanes.
    struct SendTuning {
        var connection: ConnectionTuning
        var requestTimeoutNanoseconds: UInt64 { connection.requestTimeoutNanoseconds }
        var drainNanoseconds: UInt64
        var resendsMax: Int
        var workers: Int
        var retry: RetryPolicy
        var retryUnknown: Bool
        /// Per provider (--rate); FCM's project quota by default.
        var rates: [ProviderID: Double]
        /// The campaign's pace (--duration), shared by every lane.
        var pacer: ProviderRateLimiter?
        var startJitter: Duration?
        var retryAfterMaxNanoseconds = SendPolicy.retryAfterMaxDefaultNanoseconds

        func policy(limiter: ProviderRateLimiter?) -> SendPolicy {
            var policy = SendPolicy(retry: retry, retryUnknown: retryUnknown, limiter: limiter, pacer: pacer, resendsMax: resendsMax,
                                    rowDeadlineNanoseconds: requestTimeoutNanoseconds)
            policy.retryAfterMaxNanoseconds = retryAfterMaxNanoseconds
            return policy
        }
    }

    static func tuning(_ plan: Plan, _ parsed: ParsedArguments, now: UInt64) throws -> SendTuning {
        var given: [ProviderID: Double] = [:]
        if let text = parsed.value("rate") {
            do { given = try RateSpec.parse(text, providers: plan.catalog.ids) } catch { throw parsed.error("--rate: \(error.description)") }
        }
        // Rates describe the whole campaign: each of N shards takes its 1/N share (FCM's default
        // project quota included). The pacer below spreads this shard's own rows over the window.
        let rates = plan.core.shardRates(given)
        var pacer: ProviderRateLimiter? = nil
        if let window = try parsed.duration("duration", range: .milliseconds(1)...(.seconds(31 * 86_400))) {
            guard let rows = plan.totalRows else { throw parsed.error("--duration needs a file to count its rows (not stdin)") }
            let seconds = Double(window.components.seconds) + Double(window.components.attoseconds) / 1e18
            pacer = ProviderRateLimiter(ratePerSecond: max(Double(rows), 1) / seconds, nowNanoseconds: now)
        }
        var tuning = SendTuning(
            connection: try ConnectionTuning(parsed),
            drainNanoseconds: CommonOptions.nanoseconds(try parsed.duration("drain-timeout", default: .seconds(20), range: .zero...(.seconds(3_600)))),
            resendsMax: try parsed.int("max-resends", default: 10, range: 0...1000),
            workers: try CommonOptions.workers(parsed),
            retry: try retryPolicy(parsed),
            retryUnknown: plan.options.retryUnknown, rates: rates, pacer: pacer,
            startJitter: try parsed.duration("start-jitter", range: .zero...(.seconds(86_400))))
        tuning.retryAfterMaxNanoseconds = CommonOptions.nanoseconds(try parsed.duration("max-retry-after", default: .seconds(60),
                                                                                       range: .zero...(.seconds(86_400))))
        return tuning
    }

    static func client(_ endpoint: Endpoint, tls: TLSContext, connections: Int, streams: Int, _ tuning: ConnectionTuning) throws -> ClientConfiguration {
        let address: String
        if let given = tuning.resolve.address(for: endpoint) {
            address = given
        } else {
            do { address = try AddressResolution.resolve(host: endpoint.host) } catch { throw CommandFailure(error.description) }
        }
        var client = ClientConfiguration(endpoint: endpoint, address: address, tls: tls, limits: Limits(), reactor: tuning.reactor)
        client.connectPort = tuning.resolve.port(for: endpoint)
        client.limits.connectionsMax = connections
        client.limits.streamsPerConnectionMax = streams
        client.limits.requestTimeoutNanoseconds = tuning.requestTimeoutNanoseconds
        client.limits.responseHeadersKeptOnSuccess = false
        client.stallNanoseconds = tuning.stallNanoseconds
        return client
    }

    /// One lane per configured provider that has rows to send, in catalog order. Each
    /// provider's `start` runs here (FCM fetches its first access token), before anything is sent.
    static func lanes(_ plan: Plan, _ tuning: SendTuning, now: UInt64, stopBox: StopSignal,
                      started: inout [any ProviderSetup]) throws -> [ProviderLane] {
        var lanes: [ProviderLane] = []
        for setup in plan.setups where plan.activeProviders.contains(setup.id) {
            let factory = try setup.start { message in stopBox.stop(message) }
            started.append(setup)
            let provider = plan.catalog[setup.id]
            guard provider.isRouted else {
                lanes.append(try lane(setup, try setup.connection(), factory: factory, tuning, now: now))
                continue
            }
            for route in plan.core.routes[setup.id]?.routes ?? [] {
                var routed = try lane(setup, try setup.connection(route: route), factory: try setup.adapters(route: route), tuning, now: now)
                routed.route = LaneRoute(prefix: route) { provider.routeLength(token: $0) }
                lanes.append(routed)
            }
        }
        return lanes
    }

    /// One lane of `setup`'s provider: its connections, rate limiter and adapters.
    static func lane(_ setup: any ProviderSetup, _ connection: ProviderConnection, factory: any AdapterFactory, _ tuning: SendTuning,
                     now: UInt64) throws -> ProviderLane {
        var client = try client(connection.endpoint, tls: connection.tls, connections: connection.connections,
                                streams: connection.streams, tuning.connection)
        client.limits.responseHeadersKept = connection.responseHeaders
        client.limits.responseHeadersKeptOnSuccess = connection.responseHeadersOnSuccess
        let limiter = tuning.rates[setup.id].map { ProviderRateLimiter(ratePerSecond: $0, nowNanoseconds: now) }
        return ProviderLane(provider: setup.id, client: client, connections: connection.connections, workers: tuning.workers,
                            policy: tuning.policy(limiter: limiter), factory: factory)
    }

    static func sendOutput(_ plan: Plan, _ parsed: ParsedArguments) throws -> CampaignOutput {
        let base = plan.inputPath == "-" ? "stdin" : plan.inputPath
        try requireShardPlaceholders(plan, parsed)
        var output = CampaignOutput(
            resultsPath: resultsPath(plan),
            resultsFormat: plan.options.resultsFormat,
            prunePath: plan.shard.expand(plan.options.prune ?? base + (plan.shard.isSplit ? ".shard-{shard}" : "") + ".prune.csv"),
            summaryPath: plan.options.summary.map { plan.shard.expand($0) },
            progress: OperatorOptions.redrawnProgress(parsed))
        output.identity = CampaignIdentity(shard: plan.shard.isSplit ? plan.shard : nil, campaign: plan.campaign, input: plan.inputFingerprint,
                                           inputRows: plan.inputRows)
        return output
    }

    /// `--start-jitter`: a random 0…TIME pause after the lanes are set up, before any worker starts.
    static func startJitter(_ jitter: Duration?, quiet: Bool) {
        guard let jitter, jitter > .zero else { return }
        let delay = SplitMix64(seed: Machine.real.monotonicClock().nowNanoseconds() ^ UInt64(CurrentProcess.id)).next(below: CommonOptions.nanoseconds(jitter) + 1)
        if !quiet { Console.error(String(format: "pushcast: starting in %.1f s (--start-jitter)", Double(delay) / 1e9)) }
        SystemClock.sleep(nanoseconds: delay)
    }

    static func send(_ plan: Plan, _ parsed: ParsedArguments) throws -> ExitStatus {
        for setup in plan.setups { try setup.requireSendable() }
        let output = try sendOutput(plan, parsed)
        let durability = try prepareDurability(plan, plan.options, output: output)
        let now = Machine.real.monotonicClock().nowNanoseconds()
        let tuning = try tuning(plan, parsed, now: now)
        let stopBox = StopSignal()
        var started: [any ProviderSetup] = []
        defer { for setup in started { _ = setup.finish() } }
        let lanes = try self.lanes(plan, tuning, now: now, stopBox: stopBox, started: &started)
        let feeds: [CampaignFeed]
        do {
            try plan.core.validate(lanes: lanes)
            feeds = try plan.core.feeds(providers: lanes.reduce(into: []) { if !$0.contains($1.provider) { $0.append($1.provider) } })
        } catch {
            throw CommandFailure(error.description)
        }
        startJitter(tuning.startJitter, quiet: plan.options.quiet)
        let run = CampaignRun(feeds: feeds, lanes: lanes, output: output, machine: .real, totalRows: plan.totalRows,
                              started: { stopBox.attach($0) }, log: Console.engineLog(redrawnLine: output.progress))
        run.durability = durability
        run.observers = try OperatorOptions.observers(parsed, output: output, durability: durability, shard: plan.shard)
        run.notes = { StandardStream.failureNotes }
        // SIGINT/SIGTERM from here on: a graceful stop (Kubernetes, Slurm and systemd send
        // SIGTERM, then SIGKILL after a grace period: 30 s by default in Kubernetes).
        run.interruption = Interruption(signals: { StopSignals.received }, signalName: { StopSignals.lastName },
                                        drainNanoseconds: tuning.drainNanoseconds)
        let summary: CampaignSummary
        do { summary = try run.run() } catch { throw CommandFailure(error.description) }
        Console.summary(summary)
        for setup in started { if let line = setup.finish() { Console.error(line) } }
        Console.error("results: \(output.resultsPath)\nprune:   \(output.prunePath)")
        if let reason = summary.stoppedBecause { Console.error("pushcast: stopped: \(reason)") }
        return ExitStatus(rawValue: summary.exitStatus) ?? .stopped
    }
}

/// Carries a stop request from a thread that starts before the run (the FCM token refresher) to
/// the run's outcome channel, once there is one.
final class StopSignal: @unchecked Sendable {
    private let lock = NSLock()
    private var channel: OutcomeChannel?
    private var pending: String?

    func attach(_ channel: OutcomeChannel) {
        lock.lock()
        self.channel = channel
        let reason = pending
        lock.unlock()
        if let reason { channel.stop(reason: reason) }
    }

    func stop(_ reason: String) {
        lock.lock()
        let channel = self.channel
        if channel == nil { pending = reason }
        lock.unlock()
        channel?.stop(reason: reason)
    }
}
