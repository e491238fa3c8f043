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

// `send` and `check`: everything that can fail before the first send. The providers' option
// groups are read by their modules (ProviderCommandLine); the input is read once to plan
// duplicates and shards.
extension SendCommand {
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
            files: SecretFile.read, environment: { Environment.value($0) }, wallClock: SystemWallClock(),
            monotonicClock: SystemClock.Monotonic(), threads: SystemThreads(), trust: trust, notice: { Console.error($0) },
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
            throw parsed.error("no provider to send to: give "
                + StandardProviders.commandLines.map(\.credentialHint).joined(separator: ", and/or "))
        }
        return setups
    }

    /// `inputPath` and `campaignInput`: a database snapshot's path, and its query, which names the
    /// campaign instead of the path (each shard's snapshot has a path of its own).
    static func makePlan(_ parsed: ParsedArguments, options: SendOptions, inputPath: String? = nil, campaignInput: String? = nil) throws -> Plan {
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
            : RowLayout(growing: sending.columns, idColumn: parsed.value("id-column"), defaultProvider: defaultProvider, catalog: catalog)

        let renderings = try renderings(setups, templates: templates, columns: sending.columns)
        var core = CampaignPlan(inputPath: path, fileName: fileName, format: format, reader: sending, layout: layout, renderings: renderings,
                                catalog: catalog, campaign: campaign)
        core.totalRows = first.shardRows
        core.reopen = reopen
        core.duplicatePlan = duplicatePlan
        core.routes = first.routes
        var plan = Plan(core: core, setups: setups, options: options)
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
            return try RowLayout(columns: reader.columns, idColumn: parsed.value("id-column"), defaultProvider: defaultProvider, fileName: fileName,
                                 catalog: .standard)
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
            var keyer = RowPreparer(layout: RowLayout(growing: reader.columns, idColumn: nil, defaultProvider: defaultProvider, catalog: .standard),
                                    renderings: [:], campaign: campaign, fileName: reader.fileName, sends: configured,
                                    recordsUnroutable: true, duplicates: .exact(expectedRows: 0), configured: configured, catalog: .standard)
            keyer.shard = shard
            keyer.collectRoutes(max: CampaignPlan.routesMax)
            var owned = 0
            let map = shard.isSplit ? try ShardRowMap(files: Machine.real.files, directory: Environment.temporaryDirectory) : nil
            // A compressed export holds more rows than its size says: size the plan for 8:1.
            let size = (FileSystem.size(path) ?? 0) * (isCompressed(path) ? 8 : 1)
            // A big file takes seconds: say what happens before the first send.
            let tell = size > 32 << 20 && !parsed.flag("quiet")
            let started = Machine.real.monotonicClock().nowNanoseconds()
            if tell { Console.error("pushcast: reading \(path) once to find repeated tokens before sending…") }
            var rows = 0
            let duplicatePlan = try DuplicatePlan.build(reader: &first, expectedRows: max(1, size / 32), files: Machine.real.files, directory: Environment.temporaryDirectory,
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
                                     duplicatePlan.duplicateCount, Double(Machine.real.monotonicClock().nowNanoseconds() - started) / 1e9))
            }
            map?.linesAreRows = reader.format == .csv && reader.irregularRecords == 0
            try map?.finish()
            if keyer.routesRefused > 0 {
                throw CommandFailure("\(path): its rows go to more than \(CampaignPlan.routesMax) servers of one provider "
                    + "(\(keyer.routesRefused) rows past them); a campaign opens a lane per server: split the export by server")
            }
            return FirstRead(plan: duplicatePlan, columns: reader.columns, inputHash: source.hash.hex, shardRows: owned, map: map,
                             routes: keyer.routesFound)
        } catch is Interrupted {
            throw Interrupted()
        } catch let error as CommandFailure {
            throw error
        } catch let error as DecompressionError {
            throw CommandFailure("cannot read \(error)")
        } catch let error as InputProblem {
            throw CommandFailure("cannot read \(path): \(error)")
        } catch {
            throw CommandFailure("\(path): cannot plan the duplicates before sending (a first read of the file into scratch files in \(Environment.temporaryDirectory)): \(error)")
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
}
