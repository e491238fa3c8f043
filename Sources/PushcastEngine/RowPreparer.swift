import PushcastAPNs
import PushcastCore
import PushcastInput

/// One notification ready to send: everything the worker needs, computed once on the reader side.
public struct PreparedNotification: Sendable {
    public var row: Int
    public var id: String?
    /// The normalised hex token.
    public var token: String
    public var apnsID: String
    public var payload: [UInt8]
    /// Attempts made so far (counted ones: 429/5xx and unknown fates retried).
    public var attempts = 0
    /// When the first attempt was handed out (monotonic ns), for latency.
    public var firstSentNanoseconds: UInt64 = 0

    public init(row: Int, id: String?, token: String, apnsID: String, payload: [UInt8]) {
        self.row = row
        self.id = id
        self.token = token
        self.apnsID = apnsID
        self.payload = payload
    }
}

/// Where the preparer finds things in each row.
public struct RowLayout: Sendable {
    public var tokenColumn: Int
    public var providerColumn: Int?
    public var idColumn: Int?
    public var defaultProvider: ProviderID

    /// Finds the columns by name: `token` (required), `platform` or `provider`, and the identity
    /// column (`idColumn`, or `device_id` when present).
    public init(columns: [String], idColumn: String?, defaultProvider: ProviderID, fileName: String) throws(CampaignError) {
        func find(_ name: String) -> Int? {
            columns.firstIndex(of: name) ?? columns.firstIndex { $0.lowercased() == name.lowercased() }
        }
        guard let token = find("token") else {
            throw CampaignError.input("\(fileName): no 'token' column (columns: \(columns.joined(separator: ", ")))")
        }
        tokenColumn = token
        providerColumn = find("platform") ?? find("provider")
        if let idColumn {
            guard let index = find(idColumn) else {
                throw CampaignError.options("--id-column \(idColumn): no such column in \(fileName) (columns: \(columns.joined(separator: ", ")))")
            }
            self.idColumn = index
        } else {
            self.idColumn = find("device_id")
        }
        self.defaultProvider = defaultProvider
    }
}

/// What became of one input record on the reader side.
public enum PreparedRow {
    case send(PreparedNotification)
    case finished(OutcomeRecord)
    /// Maybe a duplicate: settled after the input ends, by a second read (`resolve`).
    case deferred
}

/// How a run finds repeated tokens.
public enum DuplicateDetection: Sendable {
    /// An exact table in memory: 12 bytes a row. For input that cannot be read twice (stdin).
    case exact(expectedRows: Int)
    /// A Bloom filter of 16 bits a row says "new" or "maybe seen"; maybe-seen rows wait until the
    /// input ends and are settled exactly by reading the file a second time. Memory grows with the
    /// duplicates (and the filter's ~0.05 % false alarms), not with the rows.
    case filtered(expectedRows: Int)
}

/// Turns rows into notifications, or into final outcomes when they cannot be sent (malformed,
/// invalid token, duplicate, payload too large, provider not configured). Single-threaded, on the
/// reader thread; the per-row work is byte-level (design.md 6: no JSON serialisation per row).
public struct RowPreparer {
    public let layout: RowLayout
    public let template: PayloadTemplate
    public let payloadBytesMax: Int
    public let campaign: String
    public let fileName: String
    /// Providers that have credentials in this run.
    public let configuredProviders: Set<ProviderID>
    private let duplicates: DuplicateIndex?
    private let filter: DuplicateFilter?
    /// Filtered mode: tokens that may have been seen before, and the rows that held them.
    private var suspects: [String: [Int]] = [:]
    private var suspectRowMax = 0
    /// Filtered mode, second read: the first row of each suspect token.
    private var firstRows: [String: Int] = [:]
    /// One SHA-256 context for the reader thread's apns-id derivations.
    private let apnsIDs: APNsIDGenerator
    private var payload: [UInt8] = []

    public init(layout: RowLayout, template: PayloadTemplate, payloadBytesMax: Int, campaign: String, fileName: String,
                configuredProviders: Set<ProviderID>, duplicates detection: DuplicateDetection) {
        self.layout = layout
        self.template = template
        self.payloadBytesMax = payloadBytesMax
        self.campaign = campaign
        self.fileName = fileName
        self.configuredProviders = configuredProviders
        switch detection {
        case .exact(let rows):
            duplicates = DuplicateIndex(expected: rows)
            filter = nil
        case .filtered(let rows):
            duplicates = nil
            filter = DuplicateFilter(expected: rows)
        }
        apnsIDs = APNsIDGenerator(campaign: campaign)
        payload.reserveCapacity(payloadBytesMax * 2)
    }

    public mutating func prepare(_ record: InputRecord) -> PreparedRow {
        switch record {
        case .malformed(let row, let problem):
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
        case done(OutcomeRecord)
        case valid(id: String?, provider: ProviderID, token: APNsDeviceToken)
    }

    public mutating func prepare(_ view: RowView) -> PreparedRow {
        switch check(view) {
        case .done(let outcome):
            return .finished(outcome)
        case .valid(let id, let provider, let token):
            var hex = token.hex
            if let duplicates {
                let firstRow = hex.withUTF8 { duplicates.insert(UnsafeRawBufferPointer($0), row: view.row) }
                if let firstRow {
                    return .finished(OutcomeRecord(row: view.row, id: id, token: token.hex, provider: provider, outcome: .duplicate,
                                                   reason: OutcomeReason.duplicate, duplicateOf: firstRow))
                }
            } else if let filter, hex.withUTF8({ filter.insert(UnsafeRawBufferPointer($0)) }) {
                suspects[token.hex, default: []].append(view.row)
                suspectRowMax = max(suspectRowMax, view.row)
                return .deferred
            }
            return render(view, id: id, provider: provider, token: token)
        }
    }

    /// Rows deferred as possible duplicates, waiting for `resolve`.
    public var hasSuspects: Bool { !suspects.isEmpty }

    /// The second read (filtered mode): feed every record again, from the first row. Returns the
    /// final fate of each deferred row as its record comes by (nil for every other record); stop
    /// once `resolveFinished(after:)` says so.
    public mutating func resolve(_ record: InputRecord) -> PreparedRow? {
        guard case .row(let view) = record, view.row <= suspectRowMax,
              case .valid(let id, let provider, let token) = check(view), let rows = suspects[token.hex] else { return nil }
        if let first = firstRows[token.hex] {
            guard rows.contains(view.row) else { return nil }
            return .finished(OutcomeRecord(row: view.row, id: id, token: token.hex, provider: provider, outcome: .duplicate,
                                           reason: OutcomeReason.duplicate, duplicateOf: first))
        }
        firstRows[token.hex] = view.row
        // The first row with this token was itself deferred: the filter's false alarm. Send it.
        return rows.contains(view.row) ? render(view, id: id, provider: provider, token: token) : nil
    }

    /// True once the second read has passed the last deferred row.
    public func resolveFinished(after row: Int) -> Bool { row >= suspectRowMax }

    private func check(_ view: RowView) -> Checked {
        let id = layout.idColumn.flatMap { view.string($0) }
        var provider = layout.defaultProvider
        if let column = layout.providerColumn, let value = view.field(column), value.count > 0 {
            guard let parsed = ProviderID(columnBytes: value) else {
                let text = String(decoding: value, as: UTF8.self)
                return .done(OutcomeRecord(row: view.row, id: id, token: view.string(layout.tokenColumn) ?? "", provider: nil,
                                           outcome: .invalid, reason: OutcomeReason.unknownProvider,
                                           error: problem(view, field: "platform", "unknown platform '\(text)' (expected ios/apns or android/fcm)")))
            }
            provider = parsed
        }
        guard let rawToken = view.field(layout.tokenColumn), rawToken.contains(where: { $0 != 0x20 && $0 != 0x09 }) else {
            return .done(OutcomeRecord(row: view.row, id: id, token: "", provider: provider, outcome: .invalid,
                                       reason: OutcomeReason.missingToken, error: problem(view, field: "token", "missing")))
        }
        guard configuredProviders.contains(provider) else {
            return .done(OutcomeRecord(row: view.row, id: id, token: String(decoding: rawToken, as: UTF8.self), provider: provider,
                                       outcome: .failed, reason: OutcomeReason.providerNotConfigured,
                                       error: problem(view, field: "platform", "\(provider.rawValue) is not configured in this run")))
        }
        do {
            return .valid(id: id, provider: provider, token: try APNsDeviceToken.normalize(rawToken))
        } catch {
            return .done(OutcomeRecord(row: view.row, id: id, token: String(decoding: rawToken, as: UTF8.self), provider: provider,
                                       outcome: .invalid, reason: OutcomeReason.invalidToken,
                                       error: problem(view, field: "token", error.description)))
        }
    }

    private mutating func render(_ view: RowView, id: String?, provider: ProviderID, token: APNsDeviceToken) -> PreparedRow {
        payload.removeAll(keepingCapacity: true)
        let size = template.render(into: &payload) { view.field($0) }
        guard size <= payloadBytesMax else {
            return .finished(OutcomeRecord(row: view.row, id: id, token: token.hex, provider: provider, outcome: .invalid,
                                           reason: OutcomeReason.payloadTooLarge,
                                           error: problem(view, field: nil, "payload is \(size) bytes; the limit is \(payloadBytesMax)")))
        }
        let apnsID = apnsIDs.derive(token: token.hex)
        // Exactly `size` bytes: Array(payload[0..<size]) would keep the render buffer's 8 KiB
        // capacity in every in-flight notification (massif: 7 KB each, 25 MB at 4 x 250 streams).
        let exact = [UInt8](unsafeUninitializedCapacity: size) { buffer, count in
            payload.withUnsafeBufferPointer { source in
                buffer.baseAddress!.initialize(from: source.baseAddress!, count: size)
            }
            count = size
        }
        return .send(PreparedNotification(row: view.row, id: id, token: token.hex, apnsID: apnsID, payload: exact))
    }

    /// Distinct tokens recorded so far (exact mode).
    public var distinctTokens: Int? { duplicates?.count }
}


/// Why a campaign could not start or had to stop (exit status 2).
public enum CampaignError: Error, CustomStringConvertible {
    case options(String)
    case input(String)
    case credentials(String)
    case output(String)
    case transport(String)
    /// The provider rejected the credential: the run stopped.
    case rejected(String)

    public var description: String {
        switch self {
        case .options(let m), .input(let m), .credentials(let m), .output(let m), .transport(let m), .rejected(let m): return m
        }
    }
}
