import PushcastCore
import PushcastProviderKit
import PushcastInput
import PushcastJSON

/// One notification ready to send: everything the worker needs, computed once on the reader side.
public struct PreparedNotification: Sendable, PackedTokenAndID {
    public var row: Int
    public var id: String?
    /// The token as sent (APNs's normalised hex, or FCM's opaque token, trimmed), packed: an
    /// APNs token is its 32 bytes, no String (`PackedText`).
    public var packedToken: PackedText
    /// The id the request carries (APNs: the apns-id derived from campaign and token, packed);
    /// nil for providers without one. Becomes the outcome's message id unless the answer names
    /// another.
    public var packedMessageID: PackedText?
    /// The request body: the APNs payload, or FCM's `{"message":{…}}`.
    public var payload: [UInt8]
    public var provider: ProviderID
    /// Attempts made so far (counted ones: 429/5xx and unknown fates retried).
    public var attempts = 0
    /// Resends that do not count as attempts (REFUSED_STREAM, GOAWAY-unprocessed, never sent),
    /// bounded by `SendPolicy.resendsMax`.
    public var resends: Int32 = 0
    /// Whether an earlier attempt may have reached the server (its fate was unknown and it was
    /// retried with --retry-unknown): such a row never ends `failed`, only `unknown` or better.
    public var mayHaveGoneOut = false
    /// When the first attempt was handed out (monotonic ns), for latency.
    public var firstSentNanoseconds: UInt64 = 0

    public init(row: Int, id: String?, token: PackedText, messageID: PackedText?, payload: [UInt8], provider: ProviderID = .apns) {
        self.provider = provider
        self.row = row
        self.id = id
        packedToken = token
        packedMessageID = messageID
        self.payload = payload
    }

    public init(row: Int, id: String?, token: String, messageID: String?, payload: [UInt8], provider: ProviderID = .apns) {
        self.init(row: row, id: id, token: PackedText(token), messageID: messageID.map(PackedText.init), payload: payload, provider: provider)
    }

    /// What a free slot of a send loop holds: no buffers of its own, so moving one in or out
    /// costs nothing.
    public static let vacant = PreparedNotification(row: 0, id: nil, token: PackedText.empty, messageID: nil, payload: [])

    /// Where `payload` sits in the struct (a prefetch hint reads its storage address in place).
    static let payloadOffset = MemoryLayout<PreparedNotification>.offset(of: \PreparedNotification.payload)!

    /// Starts loading the body that the request will be built from: the reader thread wrote it,
    /// so on the worker it is in another core's cache. (A packed token and apns-id lie in the
    /// notification itself.)
    @inline(__always)
    static func prefetchBuffers(of notification: UnsafePointer<PreparedNotification>) {
        Prefetch.storages(from: UnsafeRawPointer(notification), strings: (-1, -1, -1), array: payloadOffset)
    }

    /// Data rows are numbered from 1, so row 0 marks the vacant notification.
    public var isVacant: Bool { row == 0 }
}

/// Where the preparer finds things in each row.
///
/// Each role (token, platform, identity) has candidate columns: the exact name first, then
/// case-insensitive matches (`platform` before `provider`). A row takes the first candidate it
/// has. A CSV row has every column, so the first candidate always decides, as a header would;
/// an NDJSON row's columns are its own keys, so a row with `Token` where others have `token`
/// still finds its token, and each row routes by its own `platform`.
public struct RowLayout: Sendable {
    public var tokenColumns: [Int]
    public var providerColumns: [Int]
    public var idColumns: [Int]
    public var defaultProvider: ProviderID
    /// By token column (`tokenColumns`' order): the provider whose own column it is (a
    /// `PushProvider.tokenColumns` name), or nil for `token`.
    public var tokenColumnOwners: [ProviderID?]
    /// By token column (`tokenColumns`' order): its name as the header has it, for errors.
    public var tokenColumnNames: [String]
    /// The providers' own token columns by name, kept to resolve the layout again.
    public var providerTokenColumns: [(name: String, provider: ProviderID)]
    /// `--id-column`, kept to resolve the layout again when NDJSON columns grow.
    public var idColumnName: String?
    /// The column count this layout was resolved against.
    public var columnCount: Int

    public var tokenColumn: Int? { tokenColumns.first }
    public var providerColumn: Int? { providerColumns.first }
    public var idColumn: Int? { idColumns.first }

    /// Finds the columns by name: `token` (required), `platform` or `provider`, and the identity
    /// column (`idColumn`, or `device_id` when present).
    /// `catalog`: its providers' own token columns (`PushProvider.tokenColumns`) are further
    /// candidates after `token`.
    public init(columns: [String], idColumn: String?, defaultProvider: ProviderID, fileName: String,
                catalog: ProviderCatalog? = nil) throws(CampaignError) {
        self.init(growing: columns, idColumn: idColumn, defaultProvider: defaultProvider, catalog: catalog)
        guard !tokenColumns.isEmpty else {
            let names = (["token"] + providerTokenColumns.map(\.name)).map { "'\($0)'" }.joined(separator: " or ")
            throw CampaignError.input("\(fileName): no \(names) column (columns: \(columns.joined(separator: ", ")))")
        }
        if let idColumn, idColumns.isEmpty {
            throw CampaignError.options("--id-column \(idColumn): no such column in \(fileName) (columns: \(columns.joined(separator: ", ")))")
        }
    }

    /// The same, never failing: for NDJSON read once (stdin), whose keys may first appear on any
    /// line. Without a token column yet, every row is `MissingToken` until one appears.
    public init(growing columns: [String], idColumn: String?, defaultProvider: ProviderID, catalog: ProviderCatalog? = nil) {
        self.init(growing: columns, idColumn: idColumn, defaultProvider: defaultProvider,
                  providerTokenColumns: catalog?.providers.flatMap { p in p.tokenColumns.map { (name: $0, provider: p.id) } } ?? [])
    }

    init(growing columns: [String], idColumn: String?, defaultProvider: ProviderID, providerTokenColumns: [(name: String, provider: ProviderID)]) {
        func candidates(_ name: String) -> [Int] {
            let lowered = name.lowercased()
            let exact = columns.indices.filter { columns[$0] == name }
            return exact + columns.indices.filter { columns[$0] != name && columns[$0].lowercased() == lowered }
        }
        var tokens = candidates("token")
        var owners = [ProviderID?](repeating: nil, count: tokens.count)
        for (name, provider) in providerTokenColumns {
            let found = candidates(name).filter { !tokens.contains($0) }
            tokens += found
            owners += found.map { _ in provider }
        }
        tokenColumns = tokens
        tokenColumnOwners = owners
        tokenColumnNames = tokens.map { columns[$0] }
        self.providerTokenColumns = providerTokenColumns
        providerColumns = candidates("platform") + candidates("provider")
        idColumns = candidates(idColumn ?? "device_id")
        self.defaultProvider = defaultProvider
        idColumnName = idColumn
        columnCount = columns.count
    }

    /// The first candidate column the row has.
    @inline(__always)
    static func first(_ candidates: [Int], in view: RowView) -> Int? {
        for column in candidates where view.field(column) != nil { return column }
        return nil
    }

    /// The row's token column (by index into `tokenColumns`): the first candidate it fills, else
    /// the first it has (an empty CSV field is there, and blank). A mixed export leaves `token`
    /// empty on the rows whose token is in another provider's column.
    @inline(__always)
    func tokenCandidate(in view: RowView) -> Int? {
        var present: Int? = nil
        for (index, column) in tokenColumns.enumerated() {
            guard let value = view.field(column) else { continue }
            if value.contains(where: { $0 != 0x20 && $0 != 0x09 && $0 != 0x0D }) { return index }
            if present == nil { present = index }
        }
        return present
    }
}

/// What became of one input record on the reader side.
public enum PreparedRow {
    case send(PreparedNotification)
    case finished(OutcomeRecord)
    /// Another preparer's row (a different provider's feed): nothing to do here.
    case skipped
}

/// How a run finds repeated tokens.
public enum DuplicateDetection {
    /// An exact table in memory: 12 bytes a row. For input that cannot be read twice (stdin).
    case exact(expectedRows: Int)
    /// Repeats found by a first read of the file (`DuplicatePlan`): memory stays flat whatever
    /// the row count.
    case planned(DuplicatePlan)
}

/// Turns rows into notifications, or into final outcomes when they cannot be sent (malformed,
/// invalid token, duplicate, payload too large, provider not configured). Single-threaded, on the
/// reader thread; the per-row work is byte-level (docs/DESIGN.md §6: no JSON serialisation per row).
public struct RowPreparer {
    public private(set) var layout: RowLayout
    public let renderings: [ProviderID: any ProviderRendering]
    /// The providers rows may name, and what their tokens look like.
    public let catalog: ProviderCatalog
    /// By provider position: the `--shard` hash state after the provider's name and a 0 byte.
    private let shardSeeds: [UInt64]
    public let campaign: String
    public let fileName: String
    /// Providers that have credentials in this run (the keys of `renderings`).
    public let configuredProviders: Set<ProviderID>
    /// The providers whose rows this preparer turns into notifications; rows of the others are
    /// `.skipped` (another preparer, reading the same file for its own provider, takes them).
    public let sends: Set<ProviderID>
    /// The two sets as bits (1 << provider position): checked on every row without hashing.
    private let configuredBits: UInt8
    private let sendsBits: UInt8
    /// Whether this preparer records the rows no provider takes: malformed, unknown platform,
    /// provider not configured. Exactly one preparer of a run does.
    public let recordsUnroutable: Bool
    /// Each configured provider's renderer, by position.
    private let renderers: [(any NotificationRenderer)?]
    private let duplicates: DuplicateIndex?
    private let cursor: DuplicateCursor?
    private var payload: [UInt8] = []
    /// The duplicate key of the current row: a provider byte, then the token.
    private var key: [UInt8] = []
    /// The current row's token as sent (`PushProvider.normalize`): a String is made of it only
    /// for a row this preparer sends or records.
    private var tokenBytes: [UInt8] = []
    /// Where request bodies come from when the campaign loop has some to reuse (nil: each body
    /// is a new array).
    public var payloadPool: PayloadPool?
    /// The rows this preparer takes (`--shard`): others are `.skipped` before any work is done
    /// on them beyond finding their token.
    public var shard = ShardSpec.whole
    /// The shard's rows as the first read of a file decided them (`ShardRowMap`): another
    /// shard's row is skipped before its token is read again. Nil for stdin (read once).
    public var shardRows: ShardRowCursor?
    /// The routes of a routed provider this preparer sends (nil: all of them). A routed
    /// provider's rows are read by several feeds, each sending some of its routes.
    public var routeFilter: RouteTable?
    /// Whether this preparer records a routed provider's rows that have no route to filter on
    /// (a missing or invalid token): exactly one of the provider's feeds does.
    public var recordsRoutelessRows = true
    /// Routes of the valid rows `planKey` has seen, by provider (a routed provider's only),
    /// when it collects them (`collectRoutes(max:)`).
    public private(set) var routesFound: [ProviderID: RouteTable] = [:]
    private var routesMax = 0
    /// Rows whose route did not fit in `routesFound`.
    public private(set) var routesRefused = 0
    /// The routed providers as bits.
    private let routedBits: UInt8

    /// `configured` overrides the providers taken as configured (default: the keys of
    /// `renderings`): a preparer that only keys rows for the duplicate plan needs no templates.
    public init(layout: RowLayout, renderings: [ProviderID: any ProviderRendering], campaign: String, fileName: String,
                sends: Set<ProviderID>, recordsUnroutable: Bool, duplicates detection: DuplicateDetection,
                configured: Set<ProviderID>? = nil, catalog: ProviderCatalog) {
        self.layout = layout
        self.renderings = renderings
        self.catalog = catalog
        var seeds = [UInt64](repeating: 0, count: ProviderID.positionsMax)
        for provider in catalog.providers { seeds[provider.id.position] = ShardSpec.keySeed(provider: provider.id.rawValue) }
        shardSeeds = seeds
        self.campaign = campaign
        self.fileName = fileName
        self.configuredProviders = configured ?? Set(renderings.keys)
        self.sends = sends
        configuredBits = configuredProviders.reduce(0) { $0 | Self.bit($1) }
        sendsBits = sends.reduce(0) { $0 | Self.bit($1) }
        routedBits = catalog.providers.filter(\.isRouted).reduce(0) { $0 | Self.bit($1.id) }
        self.recordsUnroutable = recordsUnroutable
        var renderers = [(any NotificationRenderer)?](repeating: nil, count: ProviderID.positionsMax)
        for (provider, rendering) in renderings { renderers[provider.position] = rendering.makeRenderer(campaign: campaign) }
        self.renderers = renderers
        switch detection {
        case .exact(let rows):
            duplicates = DuplicateIndex(expected: rows)
            cursor = nil
        case .planned(let plan):
            duplicates = nil
            cursor = plan.cursor()
        }
        payload.reserveCapacity(renderers.reduce(4096) { max($0, $1?.bodyBytesMax ?? 0) } * 2)
        key.reserveCapacity(4200)
        tokenBytes.reserveCapacity(4200)
    }

    /// Whether a reader with this many columns has keys the layout has not seen (`follow`).
    @inline(__always)
    public func isBehind(columnCount: Int) -> Bool { columnCount != layout.columnCount }

    /// NDJSON keys new since the layout was resolved (a key first seen on a later line) become
    /// candidates now. Call before preparing each row of a reader whose columns may grow.
    @inline(__always)
    public mutating func follow(_ reader: any RowSource) {
        if isBehind(columnCount: reader.columnCount) {
            layout = RowLayout(growing: reader.columns, idColumn: layout.idColumnName, defaultProvider: layout.defaultProvider,
                               providerTokenColumns: layout.providerTokenColumns)
        }
    }

    public mutating func prepare(_ record: InputRecord) -> PreparedRow {
        if let shardRows, shardRows.owns(row: record.row) == false { return .skipped }
        switch record {
        case .malformed(let row, let problem):
            guard recordsUnroutable, shard.owns(row: row) else { return .skipped }
            return .finished(OutcomeRecord(row: row, id: nil, token: "", provider: nil, outcome: .invalid,
                                           reason: OutcomeReason.malformedRow, error: problem.description))
        case .row(let view):
            return prepare(view)
        }
    }

    private func problem(_ view: RowView, field: String?, _ message: String) -> String {
        InputProblem(file: fileName, line: view.line, field: field, message: message).description
    }

    /// What the checks before de-duplication make of a row.
    private enum Checked {
        /// Indirect: rows end here rarely, and the enum stays small enough to pass in registers
        /// (an inline record made every row's result a 200-byte memmove).
        indirect case done(OutcomeRecord)
        /// The normalised token is in `tokenBytes`.
        case valid(id: String?, provider: ProviderID)
        /// Another preparer's row.
        case skip
    }

    public mutating func prepare(_ view: RowView) -> PreparedRow {
        switch check(view, wantID: !shard.isSplit) {
        case .skip:
            return .skipped
        case .done(let outcome):
            return shard.owns(row: view.row) ? .finished(outcome) : .skipped
        case .valid(var id, let provider):
            if shard.isSplit {
                // Another shard's token: skipped before the duplicate check (its repeats are all
                // in that shard) and before its id is read.
                guard shard.owns(keyHash: tokenShardHash(provider)) else { return .skipped }
                id = rowID(view)
            }
            let token = tokenBytes.withUnsafeBytes { PackedText(utf8: $0) }
            if let duplicates {
                makeKey(provider)
                if let firstRow = key.withUnsafeBytes({ duplicates.insert($0, row: view.row) }) {
                    return .finished(OutcomeRecord(row: view.row, id: id, token: token, provider: provider, outcome: .duplicate,
                                                   reason: OutcomeReason.duplicate, duplicateOf: firstRow))
                }
            } else if let cursor {
                do {
                    if let firstRow = try cursor.firstRow(ofRow: view.row) {
                        return .finished(OutcomeRecord(row: view.row, id: id, token: token, provider: provider, outcome: .duplicate,
                                                       reason: OutcomeReason.duplicate, duplicateOf: firstRow))
                    }
                } catch {
                    return .finished(OutcomeRecord(row: view.row, id: id, token: token, provider: provider, outcome: .failed,
                                                   reason: OutcomeReason.internalError,
                                                   error: "cannot read the duplicate plan: \(error)"))
                }
            }
            return render(view, id: consume id, provider: provider, token: consume token)
        }
    }

    /// The two hashes a `DuplicatePlan` keeps of a row's key (its provider and normalised token);
    /// nil for rows that are never sent. Decides validity exactly as `prepare` does.
    public mutating func duplicateHashes(_ view: RowView) -> (UInt64, UInt32)? {
        planKey(view).hashes
    }

    /// What the duplicate plan's first read needs of a row: whether this preparer's shard owns
    /// it, and the hashes of its key when it is owned and would be sent.
    public mutating func planKey(_ view: RowView) -> (owned: Bool, hashes: (UInt64, UInt32)?) {
        switch check(view, wantID: false) {
        case .skip: return (false, nil)
        case .done: return (shard.owns(row: view.row), nil)
        case .valid(_, let provider):
            guard !shard.isSplit || shard.owns(keyHash: tokenShardHash(provider)) else { return (false, nil) }
            noteRoute(provider)
            makeKey(provider)
            return (true, key.withUnsafeBytes { bytes in
                (DuplicateIndex.hash(bytes), UInt32(truncatingIfNeeded: DuplicateIndex.hash(bytes, seed: 0x2545_F491_4F6C_DD1D) >> 32))
            })
        }
    }

    /// The `--shard` hash of a row's key (`ShardSpec`: XXH64 of the normalised token, seeded by
    /// the provider): the one place the preparer computes it.
    @inline(__always)
    func shardHash(_ provider: ProviderID, token: UnsafeRawBufferPointer) -> UInt64 {
        XXH64.hash(token, seed: shardSeeds[provider.position])
    }

    /// The same, of a token given as text (the fixed-vector tests).
    func shardHash(_ provider: ProviderID, _ token: String) -> UInt64 {
        var copy = token
        return copy.withUTF8 { shardHash(provider, token: UnsafeRawBufferPointer($0)) }
    }

    /// The same, of the current row's `tokenBytes`.
    @inline(__always)
    private func tokenShardHash(_ provider: ProviderID) -> UInt64 {
        tokenBytes.withUnsafeBytes { shardHash(provider, token: $0) }
    }

    private func rowID(_ view: RowView) -> String? {
        RowLayout.first(layout.idColumns, in: view).flatMap { view.string($0) }
    }

    private mutating func makeKey(_ provider: ProviderID) {
        key.removeAll(keepingCapacity: true)
        // The provider's position: distinct for every provider of the catalog.
        key.append(UInt8(provider.position))
        key.append(contentsOf: tokenBytes)
    }

    @inline(__always)
    private static func bit(_ provider: ProviderID) -> UInt8 { 1 << UInt8(provider.position) }

    /// `wantID: false` leaves the id of a valid row out (the duplicate plan needs none).
    private mutating func check(_ view: RowView, wantID: Bool = true) -> Checked {
        func rowID() -> String? { self.rowID(view) }
        let candidate = layout.tokenCandidate(in: view)
        let tokenColumn = candidate.map { layout.tokenColumns[$0] } ?? -1
        // The field an error names: the column the token came from (`endpoint` for Web Push).
        let tokenField = candidate.map { layout.tokenColumnNames[$0] } ?? "token"
        var provider = candidate.flatMap { layout.tokenColumnOwners[$0] } ?? layout.defaultProvider
        if let column = RowLayout.first(layout.providerColumns, in: view), let value = view.field(column),
           value.contains(where: { $0 != 0x20 && $0 != 0x09 && $0 != 0x0D }) {
            guard let parsed = catalog.provider(columnBytes: value) else {
                guard recordsUnroutable else { return .skip }
                let text = String(decoding: value, as: UTF8.self)
                return .done(OutcomeRecord(row: view.row, id: rowID(), token: view.string(tokenColumn) ?? "", provider: nil,
                                           outcome: .invalid, reason: OutcomeReason.unknownProvider,
                                           error: problem(view, field: "platform", "unknown platform '\(text)' (expected \(catalog.aliasHint))")))
            }
            provider = parsed
        }
        let bit = Self.bit(provider)
        let routed = configuredBits & bit != 0
        guard routed ? sendsBits & bit != 0 : recordsUnroutable else { return .skip }
        guard let rawToken = view.field(tokenColumn), rawToken.contains(where: { $0 != 0x20 && $0 != 0x09 }) else {
            if routedBits & bit != 0 && !recordsRoutelessRows { return .skip }
            return .done(OutcomeRecord(row: view.row, id: rowID(), token: "", provider: provider, outcome: .invalid,
                                       reason: OutcomeReason.missingToken, error: problem(view, field: tokenField, "missing")))
        }
        guard routed else {
            return .done(OutcomeRecord(row: view.row, id: rowID(), token: String(decoding: rawToken, as: UTF8.self), provider: provider,
                                       outcome: .failed, reason: OutcomeReason.providerNotConfigured,
                                       error: problem(view, field: "platform", "\(provider.rawValue) is not configured in this run")))
        }
        if let error = catalog[provider].normalize(token: rawToken, into: &tokenBytes) {
            if routedBits & bit != 0 && !recordsRoutelessRows { return .skip }
            return .done(OutcomeRecord(row: view.row, id: rowID(), token: String(decoding: rawToken, as: UTF8.self), provider: provider,
                                       outcome: .invalid, reason: OutcomeReason.invalidToken,
                                       error: problem(view, field: tokenField, error.description)))
        }
        if routedBits & bit != 0, let routeFilter, !routeFilter.contains(routeOf: tokenBytes, catalog[provider]) { return .skip }
        return .valid(id: wantID ? rowID() : nil, provider: provider)
    }

    /// `planKey` also counts each valid row's route, for routed providers, up to `max` routes
    /// per provider.
    public mutating func collectRoutes(max: Int) {
        routesMax = max
    }

    private mutating func noteRoute(_ provider: ProviderID) {
        guard routesMax > 0, routedBits & Self.bit(provider) != 0 else { return }
        let added = tokenBytes.withUnsafeBytes { token -> Bool in
            guard let length = catalog[provider].routeLength(token: token), length <= token.count else { return true }
            return routesFound[provider, default: RouteTable(routesMax: routesMax)].add(UnsafeRawBufferPointer(rebasing: token.prefix(length)))
        }
        if !added { routesRefused += 1 }
    }

    /// `consuming` id and token: they move into the notification instead of being copied. The
    /// token's bytes are still in `tokenBytes`.
    private mutating func render(_ view: RowView, id: consuming String?, provider: ProviderID, token: consuming PackedText) -> PreparedRow {
        guard let renderer = renderers[provider.position] else { preconditionFailure("\(provider) rows routed without a rendering") }
        payload.removeAll(keepingCapacity: true)
        let size = tokenBytes.withUnsafeBytes { tokenUTF8 in renderer.render(token: tokenUTF8, into: &payload) { view.field($0) } }
        if size == RowProblem.size {
            let why = renderer.rowProblem ?? RowProblem(reason: OutcomeReason.invalidToken, field: nil, message: "the row cannot make a \(renderer.bodyName)")
            return .finished(OutcomeRecord(row: view.row, id: id, token: token, provider: provider, outcome: .invalid, reason: why.reason,
                                           error: problem(view, field: why.field, why.message)))
        }
        guard size <= renderer.bodyBytesMax else {
            return .finished(OutcomeRecord(row: view.row, id: id, token: token, provider: provider, outcome: .invalid,
                                           reason: OutcomeReason.payloadTooLarge,
                                           error: problem(view, field: nil, "\(renderer.bodyName) is \(size) bytes; the limit is \(renderer.bodyBytesMax)")))
        }
        let messageID = tokenBytes.withUnsafeBytes { renderer.notificationID(token: $0) }
        // Exactly the body's bytes: Array(payload) would keep the render buffer's 8 KiB capacity
        // in every in-flight notification (massif: 7 KB each, 25 MB at 4 x 250 streams). A
        // reused array holds at most about twice the body (`PayloadPool`).
        // (Array(_:) of a buffer pointer is specialised; the unsafeUninitializedCapacity
        // initialiser looked up generic metadata on every row.)
        let exact = payload.withUnsafeBufferPointer { bytes in payloadPool?.make(copying: bytes) ?? Array(bytes) }
        return .send(PreparedNotification(row: view.row, id: consume id, token: consume token, messageID: messageID, payload: exact, provider: provider))
    }
}

/// Why a campaign could not start or had to stop (exit status 2).
public enum CampaignError: Error, CustomStringConvertible {
    case options(String)
    case input(String)
    case output(String)

    public var description: String {
        switch self {
        case .options(let m), .input(let m), .output(let m): return m
        }
    }
}
