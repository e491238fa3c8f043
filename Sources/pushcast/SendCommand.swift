import Foundation
import PushcastAPNs
import PushcastCommandLine
import PushcastCore
import PushcastEngine
import PushcastProviderKit
import PushcastProviders
import PushcastFCM
import PushcastInput
import PushcastJSON
import PushcastProviderKit
import PushcastReactor
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

        subscript<T>(dynamicMember path: WritableKeyPath<CampaignPlan, T>) -> T {
            get { core[keyPath: path] }
            set { core[keyPath: path] = newValue }
        }

        subscript<T>(dynamicMember path: KeyPath<CampaignPlan, T>) -> T { core[keyPath: path] }
    }

    static func run(_ parsed: ParsedArguments, checkOnly: Bool) throws -> ExitStatus {
        let sending = !(checkOnly || parsed.flag("dry-run"))
        // A stop signal while planning (the first read of a big file takes seconds) ends the run
        // before anything is sent: interrupted, resumable.
        if sending { StopSignals.install() }
        // Before anything is opened for writing (the database snapshot and the journal lock too).
        if sending { try refuseSharedFiles(parsed) }
        if sending && parsed.flag("resume") && parsed.positional("file") == "-" {
            throw CommandFailure("--resume needs the input file again, and stdin cannot be read twice: save the export to a file")
        }
        var plan: Plan
        let snapshot: DatabaseInput.Snapshot?
        do { snapshot = try DatabaseInput.prepare(parsed, sending: sending) } catch is Interrupted { return interruptedBeforeSending() }
        defer { snapshot?.cleanUp() }
        do { plan = try makePlan(parsed, inputPath: snapshot?.path, campaignInput: snapshot?.source) } catch is Interrupted {
            return interruptedBeforeSending()
        }
        plan.inputSource = snapshot?.source ?? ""
        if !sending { return try check(plan, parsed) }
        if StopSignals.received > 0 { return interruptedBeforeSending() }
        return try send(plan, parsed)
    }

    /// Thrown by the planning steps when a stop signal arrived.
    struct Interrupted: Error {}

    static func interruptedBeforeSending() -> ExitStatus {
        Console.error("pushcast: interrupted by \(StopSignals.lastName) before sending: nothing was sent (exit 3; run again to start)")
        return .interrupted
    }

    // MARK: - Plan (everything that can fail before the first send)

    static func inputFormat(_ parsed: ParsedArguments, path: String) throws -> InputFormat {
        if let name = try parsed.choice("format", from: ["csv", "ndjson"]) { return InputFormat(rawValue: name)! }
        if let guessed = InputFormat.guess(path: path) { return guessed }
        if path == "-" { throw parsed.error("reading stdin needs --format csv|ndjson") }
        throw parsed.error("cannot tell the format of \(path) from its extension; pass --format csv|ndjson")
    }

    /// A regular file's first read: its repeated tokens, its fingerprint, every NDJSON key, and
    /// how to open it again. Stdin is read once: none of these.
    static func firstRead(_ parsed: ParsedArguments, input: InputFile, path: String, format: InputFormat, reader: TokenFileReader,
                          configured: Set<ProviderID>, campaign: String, defaultProvider: ProviderID, shard: ShardSpec,
                          templateTexts: [String]) throws -> (FirstRead, (() throws -> TokenFileReader)?) {
        let fileName = reader.fileName
        guard path != "-" && input.isRegularFile else {
            // NDJSON read once (stdin): a placeholder's key may first appear on any line; it is a
            // column from the start, and rows without it render it empty.
            reader.declareColumns(templateTexts.flatMap { PayloadTemplate.placeholderNames(in: $0) })
            return (FirstRead(plan: nil, columns: [], inputHash: "stdin", shardRows: nil), nil)
        }
        // A first read finds the repeated tokens (and counts the rows for the progress line),
        // with memory that stays flat whatever the file's size. It also sees every NDJSON key:
        // the readers that send declare them all, so a key first seen on line 2 is a column
        // from row 1, and a template's placeholders are checked against the whole file.
        let witness = FirstReadWitness()
        let hashing: () throws -> (TokenFileReader, HashingByteSource) = {
            let file = try InputFile(path: path)
            witness.identity = file.identity
            let recorder = ChunkRecordingByteSource(InputFileSource(file))
            witness.recorder = recorder
            let source = HashingByteSource(recorder)
            return (try TokenFileReader(source: source, format: format, fileName: fileName), source)
        }
        let first = try planDuplicates(parsed, path: path, open: hashing, configured: configured,
                                       campaign: campaign, defaultProvider: defaultProvider, shard: shard)
        reader.declareColumns(first.columns)
        let reopen = {
            let again = try TokenFileReader(source: try witness.verifiedSource(path: path), format: format, fileName: fileName)
            again.declareColumns(first.columns)
            return again
        }
        return (first, reopen)
    }

    /// Each configured provider's template compiled against the input's columns.
    static func renderings(_ setups: [any ProviderSetup], templates: [(path: String, text: String)],
                           columns: [String]) throws -> [ProviderID: any ProviderRendering] {
        var renderings: [ProviderID: any ProviderRendering] = [:]
        for (setup, template) in zip(setups, templates) {
            renderings[setup.id] = try setup.rendering(template: template.text, path: template.path, columns: columns)
        }
        return renderings
    }

    /// What each provider's module gets from the command: the secret-file reader, the
    /// environment, the clocks, --ca-file's trust, stderr, and one-off requests on a fresh
    /// connection (an OAuth2 token exchange).
    static func providerContext(_ parsed: ParsedArguments) throws -> ProviderContext {
        var trust = TLSConfiguration()
        trust.additionalCAFile = parsed.value("ca-file")
        return ProviderContext(
            files: SecretFile.read, environment: { ProcessInfo.processInfo.environment[$0] }, wallClock: SystemWallClock(),
            monotonicClock: SystemMonotonicClock(), trust: trust, notice: { Console.error($0) },
            sendOne: { endpoint, tls, request in
                do {
                    let tuning = try ConnectionTuning(parsed)
                    return SingleRequest.perform(request, client: try client(endpoint, tls: tls, connections: 1, streams: 1, tuning)).mapError { $0 }
                } catch {
                    return .failure(error)
                }
            })
    }

    /// Each provider's option group, read by its module: the configured ones, in catalog order.
    static func configureProviders(_ parsed: ParsedArguments) throws -> [any ProviderSetup] {
        let context = try providerContext(parsed)
        let setups = try StandardProviders.commandLines.compactMap { try $0.configure(parsed, context: context) }
        guard !setups.isEmpty else {
            throw parsed.error("no provider to send to: give APNs credentials (--apns-key... or --apns-cert) with --payload, "
                + "and/or an FCM service account (--fcm-credentials) with --fcm-payload")
        }
        return setups
    }

    /// `inputPath` and `campaignInput`: a database snapshot's path, and its query, which names the
    /// campaign instead of the path (each shard's snapshot has a path of its own).
    static func makePlan(_ parsed: ParsedArguments, inputPath: String? = nil, campaignInput: String? = nil) throws -> Plan {
        guard let path = inputPath ?? parsed.positional("file") else { throw parsed.error("missing the token file (or --from URL --query SQL)") }
        let format = try inputFormat(parsed, path: path)
        let catalog = ProviderCatalog.standard
        let defaultProvider = catalog.provider(named: try parsed.choice("provider", from: catalog.ids.map(\.rawValue)) ?? "apns")!

        // Credentials first: a key that cannot be read stops the run before anything else.
        let setups = try configureProviders(parsed)

        let input: InputFile
        do { input = try InputFile(path: path) } catch { throw CommandFailure(error.description) }
        let fileName = path == "-" ? "<stdin>" : path
        let reader: TokenFileReader
        do {
            reader = try TokenFileReader(source: InputFileSource(input), format: format, fileName: fileName)
        } catch {
            throw CommandFailure("\(error)")
        }
        if format == .csv { _ = try strictLayout(reader, parsed, defaultProvider, fileName) }

        let templates = try setups.map { try templateFile(parsed, $0.template) }
        let templateTexts = templates.map(\.text)
        let campaign = parsed.value("campaign") ?? defaultCampaign(template: templateTexts.joined(separator: "\u{0}"), input: campaignInput ?? fileName)
        let configured = Set(setups.map(\.id))

        let shard = try shardSpec(parsed)
        let (first, reopen) = try firstRead(parsed, input: input, path: path, format: format, reader: reader, configured: configured,
                                            campaign: campaign, defaultProvider: defaultProvider, shard: shard, templateTexts: templateTexts)
        let duplicatePlan = first.plan
        // Every read that sends opens the file again, verified chunk by chunk against the first
        // read; the reader opened for the header is not one of them.
        let sending = try reopen.map { reopen in
            do { return try reopen() } catch { throw CommandFailure("cannot read \(fileName): \(error)") }
        } ?? reader
        let layout = reopen != nil || format == .csv ? try strictLayout(sending, parsed, defaultProvider, fileName)
            : RowLayout(growing: sending.columns, idColumn: parsed.value("id-column"), defaultProvider: defaultProvider)

        let renderings = try renderings(setups, templates: templates, columns: sending.columns)
        var core = CampaignPlan(inputPath: path, fileName: fileName, format: format, reader: sending, layout: layout, renderings: renderings,
                                catalog: catalog, campaign: campaign)
        core.totalRows = first.shardRows
        core.reopen = reopen
        core.duplicatePlan = duplicatePlan
        var plan = Plan(core: core, setups: setups)
        plan.inputFingerprint = first.inputHash
        plan.shard = shard
        plan.inputRows = duplicatePlan?.rows
        plan.shardMap = first.map
        var fingerprint = ContentHash()
        let fixed = templateTexts + StandardProviders.commandLines.flatMap { $0.fingerprintLines(parsed) }
        for text in fixed { Array((text + "\u{0}").utf8).withUnsafeBytes { fingerprint.add($0) } }
        plan.templatesFingerprint = fingerprint.hex
        return plan
    }

    /// The layout a header (CSV) or the whole file's keys (NDJSON read twice) must give: a token
    /// column, and the --id-column when one is named.
    static func strictLayout(_ reader: TokenFileReader, _ parsed: ParsedArguments, _ defaultProvider: ProviderID,
                             _ fileName: String) throws -> RowLayout {
        do {
            return try RowLayout(columns: reader.columns, idColumn: parsed.value("id-column"), defaultProvider: defaultProvider, fileName: fileName)
        } catch {
            throw CommandFailure(error.description)
        }
    }

    /// A template option's file and its text.
    static func templateFile(_ parsed: ParsedArguments, _ option: TemplateOption) throws -> (path: String, text: String) {
        guard let path = parsed.value(option.option) else { throw parsed.error(option.missing) }
        return (path, try readTemplate(path, what: option.what))
    }

    /// The first read of a regular file: its duplicate plan, and every column (NDJSON key) it holds.
    static func planDuplicates(_ parsed: ParsedArguments, path: String, open: () throws -> (TokenFileReader, HashingByteSource),
                               configured: Set<ProviderID>, campaign: String,
                               defaultProvider: ProviderID, shard: ShardSpec) throws -> FirstRead {
        do {
            var (first, source) = try open()
            let reader = first
            var keyer = RowPreparer(layout: RowLayout(growing: reader.columns, idColumn: nil, defaultProvider: defaultProvider),
                                    renderings: [:], campaign: campaign, fileName: reader.fileName, sends: configured,
                                    recordsUnroutable: true, duplicates: .exact(expectedRows: 0), configured: configured, catalog: .standard)
            keyer.shard = shard
            var owned = 0
            let map = shard.isSplit ? try ShardRowMap(directory: NSTemporaryDirectory()) : nil
            // A compressed export holds more rows than its size says: size the plan for 8:1.
            let size = (FileSystem.size(path) ?? 0) * (isCompressed(path) ? 8 : 1)
            // A big file takes seconds: say what happens before the first send.
            let tell = size > 32 << 20 && !parsed.flag("quiet")
            let started = Reactor.nowNanoseconds()
            if tell { Console.error("pushcast: reading \(path) once to find repeated tokens before sending…") }
            var rows = 0
            let duplicatePlan = try DuplicatePlan.build(reader: &first, expectedRows: max(1, size / 32), directory: NSTemporaryDirectory(),
                                                        malformed: { row in
                                                            if shard.owns(row: row) { owned += 1 }
                                                            try map?.mark(row: row, owned: shard.owns(row: row))
                                                        }) { view throws in
                rows += 1
                if rows & 0xFFFF == 0 && StopSignals.received > 0 { throw Interrupted() }
                keyer.follow(reader)
                let key = keyer.planKey(view)
                if key.owned { owned += 1 }
                try map?.mark(row: view.row, owned: key.owned)
                return key.hashes
            }
            if tell {
                Console.error(String(format: "pushcast: %d rows, %d repeated tokens (%.1f s)", duplicatePlan.rows,
                                     duplicatePlan.duplicateCount, Double(Reactor.nowNanoseconds() - started) / 1e9))
            }
            map?.linesAreRows = reader.format == .csv && reader.irregularRecords == 0
            try map?.finish()
            return FirstRead(plan: duplicatePlan, columns: reader.columns, inputHash: source.hash.hex, shardRows: owned, map: map)
        } catch is Interrupted {
            throw Interrupted()
        } catch let error as DecompressionError {
            throw CommandFailure("cannot read \(error)")
        } catch let error as InputProblem {
            throw CommandFailure("cannot read \(path): \(error)")
        } catch {
            throw CommandFailure("\(path): cannot plan the duplicates before sending (a first read of the file into scratch files in \(NSTemporaryDirectory())): \(error)")
        }
    }

    /// Whether the file starts with a gzip or zstd magic.
    static func isCompressed(_ path: String) -> Bool {
        guard let file = try? InputFile(path: path) else { return false }
        var prefix = [UInt8](repeating: 0, count: 4)
        let n = (try? file.read(into: &prefix)) ?? 0
        return InputCompression.sniff(prefix.prefix(n)) != .none
    }

    static func readTemplate(_ path: String, what: String) throws -> String {
        guard let data = (try? readWholeFile(path)) ?? nil else { throw CommandFailure("cannot read the \(what) \(path)") }
        return String(decoding: data, as: UTF8.self)
    }

    /// A stable campaign id: 16 hex digits of a hash of the template and the input's name.
    static func defaultCampaign(template: String, input: String) -> String {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in Array(template.utf8) + [0] + Array(input.utf8) {
            h ^= UInt64(byte)
            h &*= 0x0000_0100_0000_01B3
        }
        let hex = String(h, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }

    // MARK: - check

    /// A device token as pushcast prints it outside the results and prune files: its first 8
    /// characters and its length, enough to recognise it and too little to send to it.
    static func redacted(_ token: String) -> String {
        token.count <= 8 ? "<\(token.count) chars>" : "\(token.prefix(8))…<\(token.count) chars>"
    }

    /// What `check` counts over the whole input.
    struct CheckTally {
        var resumeCounts = (finished: 0, unknown: 0)
        var summary = CampaignSummary()
        var toSend: [ProviderID: Int] = [:]
        var largest: [ProviderID: Int] = [:]
        var samples: [ProviderID: PreparedNotification] = [:]
        var unconfigured: [ProviderID: (rows: Int, first: Int)] = [:]

        mutating func add(_ prepared: PreparedRow, preview: CampaignDurability.Preview?) {
            switch prepared {
            case .send(let n):
                switch preview?.verdict(row: n.row, provider: n.provider) ?? .send {
                case .skip: resumeCounts.finished += 1; return
                case .unknown: resumeCounts.unknown += 1; return
                case .send: break
                }
                toSend[n.provider, default: 0] += 1
                largest[n.provider] = max(largest[n.provider] ?? 0, n.payload.count)
                if samples[n.provider] == nil { samples[n.provider] = n }
            case .finished(let outcome):
                if preview?.recovered.isFinished(outcome.row) == true { resumeCounts.finished += 1; return }
                summary.record(outcome)
                if outcome.reason == OutcomeReason.providerNotConfigured, let provider = outcome.provider {
                    let seen = unconfigured[provider]
                    unconfigured[provider] = ((seen?.rows ?? 0) + 1, seen?.first ?? outcome.row)
                } else if let error = outcome.error {
                    Console.error("pushcast check: row \(outcome.row): \(error)")
                }
            case .skipped:
                break
            }
        }
    }

    static func check(_ plan: Plan, _ parsed: ParsedArguments) throws -> ExitStatus {
        var preparer = plan.core.preparer(sends: Set(plan.renderings.keys), recordsUnroutable: true)
        let preview = parsed.flag("resume") && plan.inputPath != "-" ? try resumePreview(plan, resultsPath: resultsPath(plan, parsed),
            format: ResultsFormat(rawValue: try parsed.choice("results-format", from: ["ndjson", "csv"]) ?? "ndjson")!) : nil
        var tally = CheckTally()
        let reader = plan.reader
        plan.core.skipOtherShards(reader)
        while true {
            let record: InputRecord?
            do { record = try reader.next() } catch { throw CommandFailure("cannot read \(plan.fileName): \(error)") }
            guard let record else { break }
            preparer.follow(reader)
            tally.add(preparer.prepare(record), preview: preview)
        }
        Console.out("input: \(plan.fileName) (\(plan.format.rawValue)), columns: \(plan.reader.columns.joined(separator: ", "))"
            + ", fingerprint \(plan.inputFingerprint)" + (plan.shard.isSplit ? ", shard \(plan.shard): \(plan.totalRows ?? 0) of \(plan.inputRows ?? 0) rows" : ""))
        printProviders(plan, tally)
        if preview != nil || parsed.flag("resume") {
            Console.out("resume: \(tally.resumeCounts.finished) rows finished, \(tally.resumeCounts.unknown) would be recorded unknown "
                + "(InterruptedInFlight: they may have gone out; --retry-unknown sends them), the rest below to send")
        }
        let summary = tally.summary
        Console.out("would not send: " + [OutcomeKind.invalid, .duplicate, .failed].map { "\($0.rawValue) \(summary.outcomes[$0])" }.joined(separator: ", "))
        if !summary.reasons.isEmpty {
            Console.out("reasons: " + summary.reasons.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))
        }
        // Proves the credentials work by signing with them or loading them; nothing connects, and
        // no secret is printed.
        for setup in plan.setups { for line in try setup.credentialLines() { Console.out(line) } }
        guard tally.unconfigured.isEmpty else {
            for (provider, seen) in tally.unconfigured.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
                let flags = StandardProviders.commandLines.first { $0.id == provider }?.credentialHint ?? "its options"
                Console.error("pushcast check: \(seen.rows) rows need \(provider.rawValue), which has no credentials "
                    + "(first: data row \(seen.first) of \(plan.fileName)); give \(flags)")
            }
            return .stopped
        }
        return .success
    }

    /// Per provider: what would be sent, and the first request and body (tokens redacted).
    static func printProviders(_ plan: Plan, _ tally: CheckTally) {
        for setup in plan.setups {
            let provider = setup.id
            Console.out("would send: \(tally.toSend[provider] ?? 0) notifications to \(plan.catalog[provider].displayName) "
                + "(largest body \(tally.largest[provider] ?? 0) bytes), campaign \(plan.campaign)")
            let sample = tally.samples[provider]
            if let line = setup.firstRequestLine(sample: sample.map { (redacted($0.token), $0.messageID) }) { Console.out(line) }
            if let sample {
                // A body may carry the token (FCM's message does): printed redacted, like every
                // token outside the results and prune files.
                let body = String(decoding: sample.payload, as: UTF8.self)
                Console.out("first \(setup.bodyName): " + (sample.token.isEmpty ? body : body.replacingOccurrences(of: sample.token, with: redacted(sample.token))))
            }
        }
    }

    // MARK: - send

    static func resultsPath(_ plan: Plan, _ parsed: ParsedArguments) -> String {
        let base = plan.inputPath == "-" ? "stdin" : plan.inputPath
        return plan.shard.expand(parsed.value("results") ?? base + (plan.shard.isSplit ? ".shard-{shard}" : "") + ".results.ndjson")
    }

    static func retryPolicy(_ parsed: ParsedArguments) throws -> RetryPolicy {
        RetryPolicy(attemptsMax: try parsed.int("max-attempts", default: 5, range: 1...100))
    }

    /// What every connection of a send reads from the options.
    struct ConnectionTuning {
        var reactor: ReactorConfiguration
        var requestTimeoutNanoseconds: UInt64
        var stallNanoseconds: UInt64

        init(_ parsed: ParsedArguments) throws {
            reactor = try CommonOptions.reactorConfiguration(parsed)
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
            retryUnknown: parsed.flag("retry-unknown"), rates: rates, pacer: pacer,
            startJitter: try parsed.duration("start-jitter", range: .zero...(.seconds(86_400))))
        tuning.retryAfterMaxNanoseconds = CommonOptions.nanoseconds(try parsed.duration("max-retry-after", default: .seconds(60),
                                                                                       range: .zero...(.seconds(86_400))))
        return tuning
    }

    static func client(_ endpoint: Endpoint, tls: TLSContext, connections: Int, streams: Int, _ tuning: ConnectionTuning) throws -> ClientConfiguration {
        let address: String
        do { address = try AddressResolution.resolve(host: endpoint.host) } catch { throw CommandFailure(error.description) }
        var client = ClientConfiguration(endpoint: endpoint, address: address, tls: tls, limits: Limits(), reactor: tuning.reactor)
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
            let connection = try setup.connection()
            let client = try client(connection.endpoint, tls: connection.tls, connections: connection.connections,
                                    streams: connection.streams, tuning.connection)
            let factory = try setup.start { message in stopBox.stop(message) }
            started.append(setup)
            let limiter = tuning.rates[setup.id].map { ProviderRateLimiter(ratePerSecond: $0, nowNanoseconds: now) }
            lanes.append(ProviderLane(provider: setup.id, client: client, connections: connection.connections, workers: tuning.workers,
                                      policy: tuning.policy(limiter: limiter), factory: factory))
        }
        return lanes
    }

    static func sendOutput(_ plan: Plan, _ parsed: ParsedArguments) throws -> CampaignOutput {
        let base = plan.inputPath == "-" ? "stdin" : plan.inputPath
        try requireShardPlaceholders(plan, parsed)
        var output = CampaignOutput(
            resultsPath: resultsPath(plan, parsed),
            resultsFormat: ResultsFormat(rawValue: try parsed.choice("results-format", from: ["ndjson", "csv"]) ?? "ndjson")!,
            prunePath: plan.shard.expand(parsed.value("prune") ?? base + (plan.shard.isSplit ? ".shard-{shard}" : "") + ".prune.csv"),
            summaryPath: parsed.value("summary").map { plan.shard.expand($0) },
            progress: OperatorOptions.redrawnProgress(parsed))
        output.identity = CampaignIdentity(shard: plan.shard.isSplit ? plan.shard : nil, campaign: plan.campaign, input: plan.inputFingerprint,
                                           inputRows: plan.inputRows)
        return output
    }

    /// `--start-jitter`: a random 0…TIME pause after the lanes are set up, before any worker starts.
    static func startJitter(_ jitter: Duration?, quiet: Bool) {
        guard let jitter, jitter > .zero else { return }
        let delay = SplitMix64(seed: Reactor.nowNanoseconds() ^ UInt64(CurrentProcess.id)).next(below: CommonOptions.nanoseconds(jitter) + 1)
        if !quiet { Console.error(String(format: "pushcast: starting in %.1f s (--start-jitter)", Double(delay) / 1e9)) }
        Reactor.sleep(nanoseconds: delay)
    }

    static func send(_ plan: Plan, _ parsed: ParsedArguments) throws -> ExitStatus {
        for setup in plan.setups { try setup.requireSendable() }
        let output = try sendOutput(plan, parsed)
        let view = ParsedArgumentsView(resume: parsed.flag("resume"), force: parsed.flag("force"), retryUnknown: parsed.flag("retry-unknown"),
                                       quiet: parsed.flag("quiet"), fsync: try parsed.choice("fsync", from: ["batch", "always", "never"]) ?? "batch")
        let durability = try prepareDurability(plan, view, output: output)
        let now = Reactor.nowNanoseconds()
        let tuning = try tuning(plan, parsed, now: now)
        let stopBox = StopSignal()
        var started: [any ProviderSetup] = []
        defer { for setup in started { _ = setup.finish() } }
        let lanes = try self.lanes(plan, tuning, now: now, stopBox: stopBox, started: &started)
        let feeds: [CampaignFeed]
        do {
            try plan.core.validate(lanes: lanes)
            feeds = try plan.core.feeds(providers: lanes.map(\.provider))
        } catch {
            throw CommandFailure(error.description)
        }
        startJitter(tuning.startJitter, quiet: parsed.flag("quiet"))
        let run = CampaignRun(feeds: feeds, lanes: lanes, output: output, totalRows: plan.totalRows,
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
