import Foundation
import PushcastAPNs
import PushcastCommandLine
import PushcastCore
import PushcastEngine
import PushcastInput
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
        CommonOptions.caFile,
        .value("connections", metavar: "N", help: "connections to the provider", defaultDescription: "4"),
        .value("streams", metavar: "N", help: "cap on concurrent streams per connection (the server's SETTINGS may lower it)", defaultDescription: "1000"),
        CommonOptions.workers,
        .value("max-attempts", metavar: "N", help: "attempts per notification for 429 and 5xx answers", defaultDescription: "5"),
        .flag("retry-unknown", help: "also retry requests whose fate is unknown (connection lost after sending, timeout)"),
        .value("request-timeout", metavar: "TIME", help: "per-request deadline", defaultDescription: "30s"),
        .value("results", metavar: "FILE", help: "results file, one line per input row", defaultDescription: "<input>.results.ndjson"),
        .value("results-format", metavar: "ndjson|csv", help: "results file format", defaultDescription: "ndjson"),
        .value("prune", metavar: "FILE", help: "prune file of dead and invalid tokens", defaultDescription: "<input>.prune.csv"),
        .value("summary", metavar: "FILE", help: "also write the summary as JSON"),
        .flag("progress", help: "show progress on stderr even when it is not a terminal"),
        .flag("quiet", help: "no progress line"),
        .flag("dry-run", help: "check everything without connecting (same as pushcast check)"),
        CommonOptions.io,
    ]

    static let spec = CommandSpec(
        name: "pushcast send",
        summary: "Send one campaign to every token in a CSV or NDJSON file; write results and prune files.",
        options: options,
        positionals: [PositionalSpec("file", help: "token file (CSV with a header row, or NDJSON); - reads stdin")])

    static let checkSpec = CommandSpec(
        name: "pushcast check",
        summary: "Check the input, template, keys and payload sizes without connecting; print what send would do.",
        options: options.filter { $0.name != "dry-run" },
        positionals: [PositionalSpec("file", help: "token file (CSV with a header row, or NDJSON); - reads stdin")])

    /// Everything decided before the first row is read for sending.
    struct Plan {
        var inputPath: String
        var fileName: String
        var format: InputFormat
        var reader: TokenFileReader
        var totalRows: Int?
        var preparer: RowPreparer
        var settings: APNsSendSettings?
        var campaign: String
        /// Opens the input again from its first row (nil for stdin, which is read once).
        var reopen: (() throws -> TokenFileReader)?
    }

    static func run(_ parsed: ParsedArguments, checkOnly: Bool) throws -> ExitStatus {
        let plan = try makePlan(parsed)
        if checkOnly || parsed.flag("dry-run") { return try check(plan) }
        return try send(plan, parsed)
    }

    // MARK: - Plan (everything that can fail before the first send)

    static func makePlan(_ parsed: ParsedArguments) throws -> Plan {
        guard let path = parsed.positional("file") else { throw parsed.error("missing the token file") }
        let format: InputFormat
        if let name = try parsed.choice("format", from: ["csv", "ndjson"]) {
            format = InputFormat(rawValue: name)!
        } else if let guessed = InputFormat.guess(path: path) {
            format = guessed
        } else if path == "-" {
            throw parsed.error("reading stdin needs --format csv|ndjson")
        } else {
            throw parsed.error("cannot tell the format of \(path) from its extension; pass --format csv|ndjson")
        }
        let defaultProvider = ProviderID(rawValue: try parsed.choice("provider", from: ["apns", "fcm"]) ?? "apns")!

        // Credentials first: a key that cannot be read stops the run before anything else.
        let tokenSource = try makeTokenSource(parsed)
        let hasCertificate = parsed.value("apns-cert") != nil
        if tokenSource != nil && hasCertificate { throw parsed.error("choose token auth (--apns-key) or certificate auth (--apns-cert), not both") }

        let input: InputFile
        do { input = try InputFile(path: path) } catch { throw CommandFailure(error.description) }
        var totalRows: Int? = nil
        if path != "-" && input.isRegularFile {  // counting stdin would consume it
            do {
                totalRows = try countLines(source: InputFileSource(try InputFile(path: path)), format: format)
            } catch {
                throw CommandFailure("cannot read \(path): \(error)")
            }
        }
        let fileName = path == "-" ? "<stdin>" : path
        let reader: TokenFileReader
        do {
            reader = try TokenFileReader(source: InputFileSource(input), format: format, fileName: fileName)
        } catch {
            throw CommandFailure("\(error)")
        }
        let layout: RowLayout
        do {
            layout = try RowLayout(columns: reader.columns, idColumn: parsed.value("id-column"), defaultProvider: defaultProvider, fileName: fileName)
        } catch {
            throw CommandFailure(error.description)
        }

        guard let payloadPath = parsed.value("payload") else { throw parsed.error("--payload FILE is required (the APNs payload template)") }
        guard let payloadData = FileManager.default.contents(atPath: payloadPath) else {
            throw CommandFailure("cannot read the payload template \(payloadPath)")
        }
        let templateText = String(decoding: payloadData, as: UTF8.self)
        let template: PayloadTemplate
        do {
            template = try PayloadTemplate.compile(text: templateText, columns: reader.columns)
        } catch {
            throw CommandFailure("\(payloadPath): \(error.description)")
        }

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

        let campaign = parsed.value("campaign") ?? defaultCampaign(template: templateText, input: fileName)
        var configured: Set<ProviderID> = []
        if tokenSource != nil || hasCertificate { configured.insert(.apns) }
        let preparer = RowPreparer(layout: layout, template: template, payloadBytesMax: pushType.payloadBytesMax, campaign: campaign,
                                   fileName: fileName, configuredProviders: configured,
                                   duplicates: path == "-" ? .exact(expectedRows: 1 << 20) : .filtered(expectedRows: totalRows ?? 1 << 20))
        let reopen: (() throws -> TokenFileReader)? = path == "-" ? nil : {
            try TokenFileReader(source: InputFileSource(try InputFile(path: path)), format: format, fileName: fileName)
        }
        let endpoint = try endpoint(parsed)
        let retry = RetryPolicy(attemptsMax: try parsed.int("max-attempts", default: 5, range: 1...100))
        let settings = APNsSendSettings(headers: headers, tokenSource: tokenSource, authority: endpoint.authority, retry: retry,
                                        retryUnknown: parsed.flag("retry-unknown"))
        return Plan(inputPath: path, fileName: fileName, format: format, reader: reader, totalRows: totalRows, preparer: preparer,
                    settings: settings, campaign: campaign, reopen: reopen)
    }

    static func makeTokenSource(_ parsed: ParsedArguments) throws -> APNsTokenSource? {
        let key = parsed.value("apns-key"), keyID = parsed.value("apns-key-id"), team = parsed.value("apns-team-id")
        if key == nil && keyID == nil && team == nil { return nil }
        guard let key, let keyID, let team else {
            throw parsed.error("token auth needs --apns-key, --apns-key-id and --apns-team-id together")
        }
        do {
            return try APNsTokenSource(keyFile: key, keyID: keyID, teamID: team, clock: SystemWallClock())
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

    static func check(_ plan: Plan) throws -> ExitStatus {
        var preparer = plan.preparer
        var summary = CampaignSummary()
        var toSend = 0
        var largest = 0
        var sample: PreparedNotification? = nil
        func tally(_ prepared: PreparedRow?) {
            switch prepared {
            case .send(let n)?:
                toSend += 1
                largest = max(largest, n.payload.count)
                if sample == nil { sample = n }
            case .finished(let outcome)?:
                summary.record(outcome)
                if let error = outcome.error { Console.error("pushcast check: row \(outcome.row): \(error)") }
            case .deferred?, nil:
                break
            }
        }
        var reader = plan.reader
        var resolving = false
        while true {
            let record: InputRecord?
            do { record = try reader.next() } catch { throw CommandFailure("cannot read \(plan.fileName): \(error)") }
            guard let record else {
                // Possible duplicates wait for a second read that settles them exactly.
                guard !resolving, preparer.hasSuspects, let reopen = plan.reopen else { break }
                do { reader = try reopen() } catch { throw CommandFailure("cannot read \(plan.fileName) again: \(error)") }
                resolving = true
                continue
            }
            if resolving {
                tally(preparer.resolve(record))
                if case .row(let view) = record, preparer.resolveFinished(after: view.row) { break }
            } else {
                tally(preparer.prepare(record))
            }
        }
        Console.out("input: \(plan.fileName) (\(plan.format.rawValue)), columns: \(plan.reader.columns.joined(separator: ", "))")
        Console.out("would send: \(toSend) notifications to APNs (largest payload \(largest) bytes), campaign \(plan.campaign)")
        Console.out("would not send: " + [OutcomeKind.invalid, .duplicate, .failed].map { "\($0.rawValue) \(summary.outcomes[$0] ?? 0)" }.joined(separator: ", "))
        if !summary.reasons.isEmpty {
            Console.out("reasons: " + summary.reasons.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))
        }
        if let sample, let settings = plan.settings {
            Console.out("first request: POST /3/device/\(sample.token) apns-id \(sample.apnsID), headers: "
                + settings.headers.fixedHeaders.map { "\($0.name): \($0.value)" }.joined(separator: ", "))
            Console.out("first payload: " + String(decoding: sample.payload, as: UTF8.self))
        }
        if let source = plan.settings?.tokenSource {
            // Signing proves the key works; the token itself is a secret and is not printed.
            _ = source.current()
            Console.out("provider token: signed with key \(source.keyID), team \(source.teamID)")
        }
        return .success
    }

    // MARK: - send

    static func send(_ plan: Plan, _ parsed: ParsedArguments) throws -> ExitStatus {
        guard let settings = plan.settings, settings.tokenSource != nil || parsed.value("apns-cert") != nil else {
            throw parsed.error("APNs credentials are required: --apns-key/--apns-key-id/--apns-team-id, or --apns-cert")
        }
        let endpoint = try endpoint(parsed)
        var tlsConfiguration = TLSConfiguration()
        tlsConfiguration.additionalCAFile = parsed.value("ca-file")
        if let certificate = parsed.value("apns-cert") {
            var passphrase: String? = nil
            if let variable = parsed.value("apns-cert-password-env") {
                guard let value = ProcessInfo.processInfo.environment[variable] else {
                    throw CommandFailure("--apns-cert-password-env: the environment variable \(variable) is not set")
                }
                passphrase = value
            }
            if certificate.lowercased().hasSuffix(".p12") || certificate.lowercased().hasSuffix(".pfx") {
                tlsConfiguration.clientCertificate = .pkcs12(file: certificate, passphrase: passphrase ?? "")
            } else {
                tlsConfiguration.clientCertificate = .pem(certificateFile: certificate, privateKeyFile: certificate, passphrase: passphrase)
            }
        }
        let tls: TLSContext
        do { tls = try TLSContext(role: .client, configuration: tlsConfiguration) } catch { throw CommandFailure(error.description) }
        let address: String
        do { address = try AddressResolution.resolve(host: endpoint.host) } catch { throw CommandFailure(error.description) }

        var client = ClientConfiguration(endpoint: endpoint, address: address, tls: tls, limits: Limits(),
                                         reactor: try CommonOptions.reactorConfiguration(parsed))
        let connections = try parsed.int("connections", default: 4, range: 1...1024)
        client.limits.connectionsMax = connections
        client.limits.streamsPerConnectionMax = try parsed.int("streams", default: 1000, range: 1...100_000)
        let timeout = try parsed.duration("request-timeout", default: .seconds(30))
        client.limits.requestTimeoutNanoseconds = UInt64(timeout.components.seconds) * 1_000_000_000
            + UInt64(timeout.components.attoseconds / 1_000_000_000)

        let base = plan.inputPath == "-" ? "stdin" : plan.inputPath
        let output = CampaignOutput(
            resultsPath: parsed.value("results") ?? base + ".results.ndjson",
            resultsFormat: ResultsFormat(rawValue: try parsed.choice("results-format", from: ["ndjson", "csv"]) ?? "ndjson")!,
            prunePath: parsed.value("prune") ?? base + ".prune.csv",
            summaryPath: parsed.value("summary"),
            progress: !parsed.flag("quiet") && (parsed.flag("progress") || isatty(2) != 0))
        let run = CampaignRun(reader: plan.reader, preparer: plan.preparer, settings: settings, client: client,
                              connections: connections, workers: try CommonOptions.workers(parsed), output: output,
                              totalRows: plan.totalRows, reopen: plan.reopen, log: { FileHandle.standardError.write(Data($0.utf8)) })
        let summary: CampaignSummary
        do { summary = try run.run() } catch { throw CommandFailure(error.description) }
        Console.error(summary.text)
        Console.error("results: \(output.resultsPath)\nprune:   \(output.prunePath)")
        if let reason = summary.stoppedBecause { Console.error("pushcast: stopped: \(reason)") }
        return ExitStatus(rawValue: summary.exitStatus) ?? .stopped
    }
}
