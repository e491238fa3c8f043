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
    static let options: [OptionSpec] = [
        .value("format", metavar: "csv|ndjson", help: "input format", defaultDescription: "from the file extension"),
        .value("provider", metavar: "apns|fcm", help: "provider for rows without a platform/provider column", defaultDescription: "apns"),
        .value("id-column", metavar: "NAME", help: "column copied into the results as the row's identity", defaultDescription: "device_id when present"),
        .value("payload", metavar: "FILE", help: "APNs payload template (JSON; string values may hold {{column}} placeholders)"),
        .value("fcm-payload", metavar: "FILE", help: "FCM message template (the `message` object: notification, data, android, apns, webpush, fcm_options; same placeholders)"),
        .value("apns-topic", metavar: "BUNDLE_ID", help: "apns-topic (the push type's suffix is added when missing)"),
        .value("push-type", metavar: "TYPE", help: "alert, background, voip, complication, fileprovider, mdm, liveactivity, location, pushtotalk, widgets, controls",
               defaultDescription: "alert"),
        .value("priority", metavar: "10|5|1", help: "apns-priority (background forces 5)", defaultDescription: "10"),
        .value("expiration", metavar: "SECONDS|EPOCH", help: "seconds from now, or an absolute epoch; 0 means deliver once"),
        .value("collapse-id", metavar: "ID", help: "apns-collapse-id (at most 64 bytes)"),
        .value("campaign", metavar: "ID", help: "campaign id; apns-id is derived from (campaign, token)", defaultDescription: "hash of the template and the input name"),
        .value("apns-key", metavar: "FILE.p8", help: "token auth: the .p8 signing key (with --apns-key-id and --apns-team-id)"),
        .value("apns-key-id", metavar: "KID", help: "token auth: the 10-character key ID"),
        .value("apns-team-id", metavar: "TEAM", help: "token auth: the 10-character team ID"),
        .value("apns-cert", metavar: "FILE", help: "certificate auth: .p12 or .pem (certificate and key)"),
        .value("apns-cert-password-env", metavar: "VAR", help: "environment variable holding the certificate's passphrase"),
        .value("apns-environment", metavar: "production|sandbox", help: "api.push.apple.com or api.sandbox.push.apple.com", defaultDescription: "production"),
        .value("apns-endpoint", metavar: "URL", help: "https://host:port overriding the environment's host (mocks)"),
        .value("fcm-credentials", metavar: "FILE", help: "FCM: a service-account JSON (project_id, client_email, private_key, token_uri)",
               defaultDescription: "$GOOGLE_APPLICATION_CREDENTIALS when --fcm-payload is given"),
        .value("fcm-endpoint", metavar: "URL", help: "https://host:port overriding fcm.googleapis.com (mocks)"),
        .value("fcm-token-uri", metavar: "URL", help: "OAuth2 token endpoint overriding the service account's token_uri (mocks)"),
        .flag("fcm-validate-only", help: "FCM validates every message without delivering it (validate_only)"),
        CommonOptions.caFile,
        .value("connections", metavar: "N", help: "connections to APNs", defaultDescription: "4"),
        .value("streams", metavar: "N", help: "cap on concurrent streams per APNs connection (the server's SETTINGS may lower it)", defaultDescription: "1000"),
        .value("fcm-connections", metavar: "N", help: "connections to FCM", defaultDescription: "4"),
        .value("fcm-streams", metavar: "N", help: "cap on concurrent streams per FCM connection (the server's SETTINGS may lower it)", defaultDescription: "100"),
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
    ] + OperatorOptions.options + DatabaseInput.options

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
    /// `CampaignPlan` (its fields read through this one), and the providers' credentials and
    /// endpoints, which only this command knows how to get from options.
    @dynamicMemberLookup
    struct Plan {
        var core: CampaignPlan
        var settings: APNsSendSettings?
        /// The APNs endpoint (--endpoint or the environment's), parsed once.
        var apnsEndpoint: Endpoint?
        var fcm: FCMPlan?
        var hasCertificate: Bool

        subscript<T>(dynamicMember path: WritableKeyPath<CampaignPlan, T>) -> T {
            get { core[keyPath: path] }
            set { core[keyPath: path] = newValue }
        }

        subscript<T>(dynamicMember path: KeyPath<CampaignPlan, T>) -> T { core[keyPath: path] }
    }

    /// FCM's share of the plan: the service account (read and its key loaded) and the endpoints.
    struct FCMPlan {
        var account: FCMServiceAccount
        var signer: RS256Signer
        var endpoint: Endpoint
        var tokenURI: String
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

    /// Each configured provider's template compiled against the input's columns, and APNs's
    /// settings (headers, endpoint, retry policy).
    static func renderings(_ parsed: ParsedArguments, columns: [String], apnsTemplate: (path: String, text: String)?,
                           fcmTemplate: (path: String, text: String)?,
                           tokenSource: APNsTokenSource?) throws -> ([ProviderID: any ProviderRendering], APNsSendSettings?, Endpoint?) {
        var renderings: [ProviderID: any ProviderRendering] = [:]
        var settings: APNsSendSettings? = nil
        var apnsEndpoint: Endpoint? = nil
        if let apnsTemplate {
            let template: PayloadTemplate
            do {
                template = try PayloadTemplate.compile(text: apnsTemplate.text, columns: columns)
            } catch {
                throw CommandFailure("\(apnsTemplate.path): \(error.description)")
            }
            let headers = try makeHeaders(parsed)
            renderings[.apns] = APNsRendering(template: template, payloadBytesMax: headers.pushType.payloadBytesMax)
            let endpoint = try endpoint(parsed)
            apnsEndpoint = endpoint
            settings = APNsSendSettings(headers: headers, tokenSource: tokenSource, authority: endpoint.authority,
                                        retry: try retryPolicy(parsed), retryUnknown: parsed.flag("retry-unknown"))
        }
        if let fcmTemplate {
            do {
                renderings[.fcm] = FCMRendering(template: try FCMMessageTemplate.compile(text: fcmTemplate.text, columns: columns,
                                                                                validateOnly: parsed.flag("fcm-validate-only"), source: fcmTemplate.path))
            } catch {
                throw CommandFailure(error.description)
            }
        }
        return (renderings, settings, apnsEndpoint)
    }

    /// `inputPath` and `campaignInput`: a database snapshot's path, and its query, which names the
    /// campaign instead of the path (each shard's snapshot has a path of its own).
    static func makePlan(_ parsed: ParsedArguments, inputPath: String? = nil, campaignInput: String? = nil) throws -> Plan {
        guard let path = inputPath ?? parsed.positional("file") else { throw parsed.error("missing the token file (or --from URL --query SQL)") }
        let format = try inputFormat(parsed, path: path)
        let catalog = ProviderCatalog.standard
        let defaultProvider = catalog.provider(named: try parsed.choice("provider", from: catalog.ids.map(\.rawValue)) ?? "apns")!

        // Credentials first: a key that cannot be read stops the run before anything else.
        let tokenSource = try makeTokenSource(parsed)
        let hasCertificate = parsed.value("apns-cert") != nil
        if tokenSource != nil && hasCertificate { throw parsed.error("choose token auth (--apns-key) or certificate auth (--apns-cert), not both") }
        let apnsConfigured = tokenSource != nil || hasCertificate || parsed.value("payload") != nil
        let fcm = try makeFCMPlan(parsed)
        guard apnsConfigured || fcm != nil else {
            throw parsed.error("no provider to send to: give APNs credentials (--apns-key... or --apns-cert) with --payload, "
                + "and/or an FCM service account (--fcm-credentials) with --fcm-payload")
        }

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

        let apnsTemplate = try apnsConfigured ? templateFile(parsed, "payload", "payload template",
                                                             missing: "--payload FILE is required (the APNs payload template)") : nil
        let fcmTemplate = try fcm != nil ? templateFile(parsed, "fcm-payload", "FCM message template",
                                                        missing: "--fcm-payload FILE is required with FCM credentials (the FCM message template)") : nil
        let templateTexts = [apnsTemplate?.text, fcmTemplate?.text].compactMap { $0 }
        let campaign = parsed.value("campaign") ?? defaultCampaign(template: templateTexts.joined(separator: "\u{0}"), input: campaignInput ?? fileName)
        let configured = Set([apnsTemplate.map { _ in ProviderID.apns }, fcmTemplate.map { _ in ProviderID.fcm }].compactMap { $0 })

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

        let (renderings, settings, apnsEndpoint) = try renderings(parsed, columns: sending.columns, apnsTemplate: apnsTemplate,
                                                                  fcmTemplate: fcmTemplate, tokenSource: tokenSource)
        var core = CampaignPlan(inputPath: path, fileName: fileName, format: format, reader: sending, layout: layout, renderings: renderings,
                                catalog: catalog, campaign: campaign)
        core.totalRows = first.shardRows
        core.reopen = reopen
        core.duplicatePlan = duplicatePlan
        var plan = Plan(core: core, settings: settings, apnsEndpoint: apnsEndpoint, fcm: fcm, hasCertificate: hasCertificate)
        plan.inputFingerprint = first.inputHash
        plan.shard = shard
        plan.inputRows = duplicatePlan?.rows
        plan.shardMap = first.map
        var templates = ContentHash()
        let fixed = templateTexts + ["apns-topic", "push-type", "priority", "expiration", "collapse-id"].map { "\($0)=\(parsed.value($0) ?? "")" }
            + ["fcm-validate-only=\(parsed.flag("fcm-validate-only"))"]
        for text in fixed { Array((text + "\u{0}").utf8).withUnsafeBytes { templates.add($0) } }
        plan.templatesFingerprint = templates.hex
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
    static func templateFile(_ parsed: ParsedArguments, _ option: String, _ what: String, missing: String) throws -> (path: String, text: String) {
        guard let path = parsed.value(option) else { throw parsed.error(missing) }
        return (path, try readTemplate(path, what: what))
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

    static func makeHeaders(_ parsed: ParsedArguments) throws -> APNsCampaignHeaders {
        guard let topic = parsed.value("apns-topic") else { throw parsed.error("--apns-topic is required (the app's bundle ID)") }
        let pushType: APNsPushType
        if let name = parsed.value("push-type") {
            guard let parsedType = APNsPushType(rawValue: name) else {
                throw parsed.error("--push-type: unknown push type '\(name)' (expected one of \(APNsPushType.allCases.map(\.rawValue).joined(separator: ", ")))")
            }
            pushType = parsedType
        } else {
            pushType = .alert
        }
        let priorityValue = try parsed.int("priority", default: 10)
        guard let priority = APNsPriority(rawValue: priorityValue) else { throw parsed.error("--priority must be 10, 5 or 1") }
        let headers: APNsCampaignHeaders
        do {
            let expiration = try parsed.value("expiration").map { text throws(APNsHeaderError) in try APNsExpiration.parse(text) } ?? .unspecified
            headers = try APNsCampaignHeaders(topic: topic, pushType: pushType, priority: priority, expiration: expiration,
                                              collapseID: parsed.value("collapse-id"), nowEpochSeconds: Int64(Reactor.wallClockSeconds()))
        } catch {
            throw parsed.error(error.description)
        }
        for note in headers.notes { Console.error("pushcast: note: \(note)") }
        return headers
    }

    /// FCM is configured by `--fcm-credentials`, or by `--fcm-payload` with
    /// $GOOGLE_APPLICATION_CREDENTIALS (an APNs-only run ignores that variable).
    static func makeFCMPlan(_ parsed: ParsedArguments) throws -> FCMPlan? {
        var path = parsed.value("fcm-credentials")
        if path == nil, parsed.value("fcm-payload") != nil {
            path = ProcessInfo.processInfo.environment["GOOGLE_APPLICATION_CREDENTIALS"]
            if path == nil || path!.isEmpty {
                throw parsed.error("--fcm-payload needs a service account: --fcm-credentials FILE or $GOOGLE_APPLICATION_CREDENTIALS")
            }
        }
        guard let path else { return nil }
        let account: FCMServiceAccount
        let signer: RS256Signer
        do {
            account = try FCMServiceAccount.load(path: path, files: SecretFile.read)
            signer = try RS256Signer(account: account)
        } catch {
            throw CommandFailure(error.description)
        }
        var endpoint = Endpoint(host: FCMProvider.host, port: 443)
        if let url = parsed.value("fcm-endpoint") {
            do { endpoint = try Endpoint(url: url) } catch { throw parsed.error("--fcm-endpoint: \(error.description)") }
        }
        let tokenURI = parsed.value("fcm-token-uri") ?? account.tokenURI
        do { _ = try Endpoint.split(url: tokenURI) } catch {
            throw CommandFailure(parsed.value("fcm-token-uri") != nil ? "--fcm-token-uri: \(error.description)"
                                 : "\(path): token_uri: \(error.description)")
        }
        return FCMPlan(account: account, signer: signer, endpoint: endpoint, tokenURI: tokenURI)
    }

    static func makeTokenSource(_ parsed: ParsedArguments) throws -> APNsTokenSource? {
        let key = parsed.value("apns-key"), keyID = parsed.value("apns-key-id"), team = parsed.value("apns-team-id")
        if key == nil && keyID == nil && team == nil { return nil }
        guard let key, let keyID, let team else {
            throw parsed.error("token auth needs --apns-key, --apns-key-id and --apns-team-id together")
        }
        do {
            return try APNsTokenSource(keyFile: key, keyID: keyID, teamID: team, clock: SystemWallClock(), files: SecretFile.read)
        } catch {
            throw CommandFailure(error.description)
        }
    }

    static func endpoint(_ parsed: ParsedArguments) throws -> Endpoint {
        if let url = parsed.value("apns-endpoint") {
            do { return try Endpoint(url: url) } catch { throw parsed.error("--apns-endpoint: \(error.description)") }
        }
        switch try parsed.choice("apns-environment", from: ["production", "sandbox", "development"]) ?? "production" {
        case "production": return Endpoint(host: "api.push.apple.com", port: 443)
        default: return Endpoint(host: "api.sandbox.push.apple.com", port: 443)
        }
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
        try printCredentials(plan)
        if let certificate = parsed.value("apns-cert"), let settings = plan.settings {
            // Loading it proves the file and its passphrase; nothing connects.
            _ = try apnsTLSContext(parsed, caOnly: TLSConfiguration(), topic: settings.headers.topic)
            Console.out("APNs client certificate: \(certificate) loaded (topic \(settings.headers.topic))")
        }
        guard tally.unconfigured.isEmpty else {
            for (provider, seen) in tally.unconfigured.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
                let flags = provider == .apns ? "--apns-key/--apns-key-id/--apns-team-id or --apns-cert, with --payload"
                                              : "--fcm-credentials with --fcm-payload"
                Console.error("pushcast check: \(seen.rows) rows need \(provider.rawValue), which has no credentials "
                    + "(first: data row \(seen.first) of \(plan.fileName)); give \(flags)")
            }
            return .stopped
        }
        return .success
    }

    /// Per provider: what would be sent, and the first request and body (tokens redacted).
    static func printProviders(_ plan: Plan, _ tally: CheckTally) {
        for provider in plan.catalog.ids where plan.renderings[provider] != nil {
            let what = provider == .apns ? "payload" : "message"
            Console.out("would send: \(tally.toSend[provider] ?? 0) notifications to \(plan.catalog[provider].displayName) "
                + "(largest body \(tally.largest[provider] ?? 0) bytes), campaign \(plan.campaign)")
            if provider == .apns, let sample = tally.samples[.apns], let settings = plan.settings {
                Console.out("first APNs request: POST /3/device/\(redacted(sample.token)) apns-id \(sample.messageID ?? ""), headers: "
                    + settings.headers.fixedHeaders.map { "\($0.name): \($0.value)" }.joined(separator: ", "))
            }
            if provider == .fcm, let fcm = plan.fcm {
                Console.out("first FCM request: POST https://\(fcm.endpoint.authority)\(FCMProvider.sendPath(project: fcm.account.projectID))")
            }
            if let sample = tally.samples[provider] {
                // FCM's message carries the token: printed redacted, like every token outside the
                // results and prune files.
                let body = String(decoding: sample.payload, as: UTF8.self)
                Console.out("first \(what): " + (sample.token.isEmpty ? body : body.replacingOccurrences(of: sample.token, with: redacted(sample.token))))
            }
        }
    }

    /// Proves the credentials work by signing with them; nothing is sent, and no secret printed.
    static func printCredentials(_ plan: Plan) throws {
        if let source = plan.settings?.tokenSource {
            _ = source.current()
            Console.out("APNs provider token: signed with key \(source.keyID), team \(source.teamID)")
        }
        if let fcm = plan.fcm {
            do {
                _ = try OAuthAssertion.make(account: fcm.account, signer: fcm.signer, issuedAt: Int64(Reactor.wallClockSeconds()))
            } catch {
                throw CommandFailure(error.description)
            }
            Console.out("FCM service account: \(fcm.account.clientEmail), project \(fcm.account.projectID), token endpoint \(fcm.tokenURI)")
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

    /// What `send` reads from the options once, before it builds the lanes.
    struct SendTuning {
        var reactor: ReactorConfiguration
        var requestTimeoutNanoseconds: UInt64
        var stallNanoseconds: UInt64
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
        var caOnly = TLSConfiguration()
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
            reactor: try CommonOptions.reactorConfiguration(parsed),
            requestTimeoutNanoseconds: CommonOptions.nanoseconds(try parsed.duration("request-timeout", default: .seconds(30))),
            stallNanoseconds: CommonOptions.nanoseconds(try parsed.duration("stall-timeout", default: .seconds(30), range: .milliseconds(100)...(.seconds(86_400)))),
            drainNanoseconds: CommonOptions.nanoseconds(try parsed.duration("drain-timeout", default: .seconds(20), range: .zero...(.seconds(3_600)))),
            resendsMax: try parsed.int("max-resends", default: 10, range: 0...1000),
            workers: try CommonOptions.workers(parsed),
            retry: try plan.settings?.retry ?? retryPolicy(parsed),
            retryUnknown: parsed.flag("retry-unknown"), rates: rates, pacer: pacer,
            startJitter: try parsed.duration("start-jitter", range: .zero...(.seconds(86_400))))
        tuning.caOnly.additionalCAFile = parsed.value("ca-file")
        tuning.retryAfterMaxNanoseconds = CommonOptions.nanoseconds(try parsed.duration("max-retry-after", default: .seconds(60),
                                                                                       range: .zero...(.seconds(86_400))))
        return tuning
    }

    static func client(_ endpoint: Endpoint, tls: TLSContext, connections: Int, streams: Int, _ tuning: SendTuning) throws -> ClientConfiguration {
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

    static func apnsLane(_ plan: Plan, _ parsed: ParsedArguments, _ tuning: SendTuning, now: UInt64) throws -> ProviderLane? {
        guard let settings = plan.settings, let endpoint = plan.apnsEndpoint, plan.activeProviders.contains(.apns) else { return nil }
        let tls = try apnsTLSContext(parsed, caOnly: tuning.caOnly, topic: settings.headers.topic)
        let connections = try parsed.int("connections", default: 4, range: 1...1024)
        let apnsClient = try client(endpoint, tls: tls, connections: connections,
                                    streams: try parsed.int("streams", default: 1000, range: 1...100_000), tuning)
        let limiter = tuning.rates[.apns].map { ProviderRateLimiter(ratePerSecond: $0, nowNanoseconds: now) }
        return ProviderLane(provider: .apns, client: apnsClient, connections: connections, workers: tuning.workers,
                            policy: tuning.policy(limiter: limiter)) { APNsAdapter(settings: settings) }
    }

    /// The FCM lane, with its access tokens: the first one is fetched here, before anything is
    /// sent, so a refused service account stops the run now.
    static func fcmLane(_ plan: Plan, _ parsed: ParsedArguments, _ tuning: SendTuning, now: UInt64,
                        stopBox: StopSignal) throws -> (lane: ProviderLane, tokens: FCMAccessTokens)? {
        guard let fcm = plan.fcm, plan.activeProviders.contains(.fcm) else { return nil }
        let tls: TLSContext
        do { tls = try TLSContext(role: .client, configuration: tuning.caOnly, files: SecretFile.read) } catch { throw CommandFailure(error.description) }
        let connections = try parsed.int("fcm-connections", default: 4, range: 1...1024)
        let fcmClient = try client(fcm.endpoint, tls: tls, connections: connections,
                                   streams: try parsed.int("fcm-streams", default: 100, range: 1...100_000), tuning)
        let (tokenEndpoint, tokenPath) = try Endpoint.split(url: fcm.tokenURI)
        let tokenClient = try client(tokenEndpoint, tls: tls, connections: 1, streams: 1, tuning)
        let (account, signer) = (fcm.account, fcm.signer)
        let tokens = FCMAccessTokens(clock: SystemMonotonicClock()) {
            FCMTokenFetcher.fetch(account: account, signer: signer, endpoint: tokenClient.endpoint.description,
                                  authority: tokenClient.endpoint.authority, path: tokenPath,
                                  nowEpochSeconds: { Int64(Reactor.wallClockSeconds()) }) { SingleRequest.perform($0, client: tokenClient).mapError { $0 } }
        }
        do { try tokens.start { message in stopBox.stop(message) } } catch { throw CommandFailure(error.description) }
        let limiter = ProviderRateLimiter(ratePerSecond: tuning.rates[.fcm], nowNanoseconds: now)
        let settings = FCMSendSettings(authority: fcm.endpoint.authority, project: fcm.account.projectID, tokens: tokens)
        let lane = ProviderLane(provider: .fcm, client: fcmClient, connections: connections, workers: tuning.workers,
                                policy: tuning.policy(limiter: limiter)) { FCMAdapter(settings: settings) }
        return (lane, tokens)
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
        if let settings = plan.settings, settings.tokenSource == nil && !plan.hasCertificate {
            throw parsed.error("APNs credentials are required with --payload: --apns-key/--apns-key-id/--apns-team-id, or --apns-cert")
        }
        let output = try sendOutput(plan, parsed)
        let view = ParsedArgumentsView(resume: parsed.flag("resume"), force: parsed.flag("force"), retryUnknown: parsed.flag("retry-unknown"),
                                       quiet: parsed.flag("quiet"), fsync: try parsed.choice("fsync", from: ["batch", "always", "never"]) ?? "batch")
        let durability = try prepareDurability(plan, view, output: output)
        let now = Reactor.nowNanoseconds()
        let tuning = try tuning(plan, parsed, now: now)
        let stopBox = StopSignal()
        var lanes: [ProviderLane] = []
        if let lane = try apnsLane(plan, parsed, tuning, now: now) { lanes.append(lane) }
        let fcm = try fcmLane(plan, parsed, tuning, now: now, stopBox: stopBox)
        defer { fcm?.tokens.close() }
        if let fcm { lanes.append(fcm.lane) }
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
        if let tokens = fcm?.tokens { Console.error("fcm: \(tokens.fetchCount) access-token requests") }
        Console.error("results: \(output.resultsPath)\nprune:   \(output.prunePath)")
        if let reason = summary.stoppedBecause { Console.error("pushcast: stopped: \(reason)") }
        return ExitStatus(rawValue: summary.exitStatus) ?? .stopped
    }
}

extension SendCommand {
    /// The APNs client's TLS context: the --ca-file trust, plus with `--apns-cert` the certificate
    /// and key (.p12/.pfx, or PEM holding both) opened with the passphrase from
    /// `--apns-cert-password-env`. Messages name the variable, never its value; a certificate
    /// that APNs is bound to refuse (expired, for another topic) is warned about before connecting.
    static func apnsTLSContext(_ parsed: ParsedArguments, caOnly: TLSConfiguration, topic: String) throws -> TLSContext {
        var tlsConfiguration = caOnly
        let variable = parsed.value("apns-cert-password-env")
        if let certificate = parsed.value("apns-cert") {
            var passphrase: String? = nil
            if let variable {
                guard let value = ProcessInfo.processInfo.environment[variable] else {
                    throw CommandFailure("--apns-cert-password-env: the environment variable \(variable) is not set")
                }
                passphrase = value
            }
            tlsConfiguration.clientCertificate = .file(certificate, passphrase: passphrase)
        }
        let tls: TLSContext
        do { tls = try TLSContext(role: .client, configuration: tlsConfiguration, files: SecretFile.read) } catch {
            // A key or bundle the passphrase did not open (TLSCredentials says so): say where it came from.
            var text = error.description
            if tlsConfiguration.clientCertificate != nil && text.contains("passphrase") {
                text += variable.map { "; the passphrase was read from $\($0) (--apns-cert-password-env)" }
                    ?? "; give it in an environment variable named with --apns-cert-password-env VAR"
            }
            throw CommandFailure(text)
        }
        if let own = tls.ownCertificate {
            // APNs refuses the first in the handshake, and answers the second BadTopic unless the
            // certificate lists the topic among others.
            if let problem = own.verificationError { Console.error("pushcast: warning: --apns-cert: \(problem)") }
            if let uid = own.subjectUID, topic != uid && !topic.hasPrefix(uid + ".") {
                Console.error("pushcast: warning: --apns-topic \(topic) is not the certificate's topic (subject UID \(uid))")
            }
        }
        return tls
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
