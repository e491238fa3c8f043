import PushcastCore
import PushcastProviderKit

/// Results file formats.
public enum ResultsFormat: String, Sendable, CaseIterable {
    case ndjson
    case csv
}

/// Byte-level encoders for results and prune lines: no Foundation, no JSON serialisation per row.
/// Byte literals, made once.
enum Literal {
    static let hex: [UInt8] = Array("0123456789abcdef".utf8)
}

/// Where the encoders write: a `[UInt8]`, or a `ByteBuffer` (the results writer's: no uniqueness
/// check and no generic copy per piece).
public protocol ByteSink {
    mutating func append(_ byte: UInt8)
    mutating func append(bytes: UnsafeBufferPointer<UInt8>)
}

extension Array: ByteSink where Element == UInt8 {
    @inline(__always)
    public mutating func append(bytes: UnsafeBufferPointer<UInt8>) { append(contentsOf: bytes) }
}

/// A growable byte buffer for encoded lines, reused between flushes.
public final class ByteBuffer: ByteSink {
    private var base: UnsafeMutablePointer<UInt8>
    public private(set) var count = 0
    private var capacity: Int

    public init(capacity: Int) {
        self.capacity = max(capacity, 64)
        base = .allocate(capacity: self.capacity)
    }

    deinit { base.deallocate() }

    public var isEmpty: Bool { count == 0 }

    /// The bytes written so far, valid until the next write.
    public var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base, count: count) }

    public func removeAll() { count = 0 }

    @inline(__always)
    public func append(_ byte: UInt8) {
        if count == capacity { grow(to: count + 1) }
        base[count] = byte
        count += 1
    }

    @inline(__always)
    public func append(bytes: UnsafeBufferPointer<UInt8>) {
        guard let source = bytes.baseAddress else { return }
        if count + bytes.count > capacity { grow(to: count + bytes.count) }
        (base + count).update(from: source, count: bytes.count)
        count += bytes.count
    }

    private func grow(to needed: Int) {
        let grown = UnsafeMutablePointer<UInt8>.allocate(capacity: max(needed, capacity * 2))
        grown.update(from: base, count: count)
        base.deallocate()
        base = grown
        capacity = max(needed, capacity * 2)
    }
}

/// The results' columns for a catalog of providers: the fixed ones, and each provider's
/// message-id column (`PushProvider.messageIDField`) in catalog order. For the standard catalog:
/// `row,id,token,provider,outcome,status,reason,apns_id,fcm_name,location,unregistered_at,attempts,latency_ms,duplicate_of,error`.
public struct ResultColumns: Sendable {
    public let catalog: ProviderCatalog
    /// The message-id columns.
    public let fields: [String]
    /// By provider position: the index in `fields` of that provider's column (-1: none).
    let fieldOf: [Int]
    public let csvHeader: String

    public init(_ catalog: ProviderCatalog) {
        self.catalog = catalog
        fields = catalog.messageIDFields
        var fieldOf = [Int](repeating: -1, count: ProviderID.positionsMax)
        for provider in catalog.providers { fieldOf[provider.id.position] = fields.firstIndex(of: provider.messageIDField)! }
        self.fieldOf = fieldOf
        csvHeader = (["row", "id", "token", "provider", "outcome", "status", "reason"] + fields
            + ["unregistered_at", "attempts", "latency_ms", "duplicate_of", "error"]).joined(separator: ",") + "\n"
    }

    @inline(__always)
    func field(of provider: ProviderID?) -> Int { provider.map { fieldOf[$0.position] } ?? -1 }
}

public enum ResultEncoding {
    public static let pruneHeader = "token,provider,reason,unregistered_at,id\n"

    /// Appends one results line for `record`.
    public static func appendLine<Sink: ByteSink>(_ record: OutcomeRecord, format: ResultsFormat, columns: ResultColumns,
                                                  to out: inout Sink) {
        switch format {
        case .ndjson: appendJSONLine(record, columns: columns, to: &out)
        case .csv: appendCSVLine(record, columns: columns, to: &out)
        }
    }

    static func appendJSONLine<Sink: ByteSink>(_ r: OutcomeRecord, columns: ResultColumns, to out: inout Sink) {
        appendLiteral("{\"row\":", to: &out)
        appendInteger(r.row, to: &out)
        appendLiteral(",\"id\":", to: &out)
        appendJSONString(r.id, to: &out)
        appendLiteral(",\"token\":", to: &out)
        appendJSONString(r.packedToken, to: &out)
        appendLiteral(",\"provider\":", to: &out)
        appendJSONString(r.provider?.rawValue, to: &out)
        appendLiteral(",\"outcome\":\"", to: &out)
        var outcome = r.outcome.rawValue
        outcome.withUTF8 { out.append(bytes: $0) }
        appendLiteral("\",\"status\":", to: &out)
        if let status = r.status { appendInteger(status, to: &out) } else { appendLiteral("null", to: &out) }
        appendLiteral(",\"reason\":", to: &out)
        appendJSONString(r.reason, to: &out)
        appendMessageIDs(r, columns: columns, to: &out)
        appendLiteral(",\"unregistered_at\":", to: &out)
        appendJSONString(r.unregisteredAt, to: &out)
        appendLiteral(",\"attempts\":", to: &out)
        appendInteger(r.attempts, to: &out)
        appendLiteral(",\"latency_ms\":", to: &out)
        if let latency = r.latencyMilliseconds { appendMilliseconds(latency, to: &out) } else { appendLiteral("null", to: &out) }
        if let first = r.duplicateOf {
            appendLiteral(",\"duplicate_of\":", to: &out)
            appendInteger(first, to: &out)
        }
        if let error = r.error {
            appendLiteral(",\"error\":", to: &out)
            appendJSONString(error, to: &out)
        }
        appendLiteral("}\n", to: &out)
    }

    /// The first message-id column is on every line (null where it does not apply), the others
    /// only on their own provider's lines: `"apns_id"` on all, `"fcm_name"` on FCM's.
    private static func appendMessageIDs<Sink: ByteSink>(_ r: OutcomeRecord, columns: ResultColumns, to out: inout Sink) {
        let own = columns.field(of: r.provider)
        for (index, field) in columns.fields.enumerated() where index == 0 || index == own {
            out.append(0x2C)
            appendJSONString(field, to: &out)
            out.append(0x3A)
            appendJSONString(index == own ? r.packedMessageID : nil, to: &out)
        }
    }

    static func appendCSVLine<Sink: ByteSink>(_ r: OutcomeRecord, columns: ResultColumns, to out: inout Sink) {
        appendInteger(r.row, to: &out)
        out.append(0x2C)
        appendCSVField(r.id, to: &out)
        out.append(0x2C)
        appendCSVField(r.packedToken, to: &out)
        out.append(0x2C)
        appendCSVField(r.provider?.rawValue, to: &out)
        out.append(0x2C)
        var outcome = r.outcome.rawValue
        outcome.withUTF8 { out.append(bytes: $0) }
        out.append(0x2C)
        if let status = r.status { appendInteger(status, to: &out) }
        out.append(0x2C)
        appendCSVField(r.reason, to: &out)
        out.append(0x2C)
        let own = columns.field(of: r.provider)
        for index in columns.fields.indices {
            if index == own { appendCSVField(r.packedMessageID, to: &out) }
            out.append(0x2C)
        }
        appendCSVField(r.unregisteredAt, to: &out)
        out.append(0x2C)
        appendInteger(r.attempts, to: &out)
        out.append(0x2C)
        if let latency = r.latencyMilliseconds { appendMilliseconds(latency, to: &out) }
        out.append(0x2C)
        if let first = r.duplicateOf { appendInteger(first, to: &out) }
        out.append(0x2C)
        appendCSVField(r.error, to: &out)
        out.append(0x0A)
    }

    /// Appends one prune line (`token,provider,reason,unregistered_at,id`).
    public static func appendPruneLine<Sink: ByteSink>(_ r: OutcomeRecord, to out: inout Sink) {
        appendCSVField(r.packedToken, to: &out)
        out.append(0x2C)
        appendCSVField(r.provider?.rawValue, to: &out)
        out.append(0x2C)
        appendCSVField(r.reason, to: &out)
        out.append(0x2C)
        appendCSVField(r.unregisteredAt, to: &out)
        out.append(0x2C)
        appendCSVField(r.id, to: &out)
        out.append(0x0A)
    }

    // MARK: - Pieces

    /// Appends a literal's bytes in one copy.
    @inline(__always)
    static func appendLiteral<Sink: ByteSink>(_ literal: StaticString, to out: inout Sink) {
        out.append(bytes: UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
    }

    static func appendInteger<Sink: ByteSink>(_ value: Int, to out: inout Sink) {
        if value < 0 {
            out.append(0x2D)
            appendInteger(-value, to: &out)
            return
        }
        if value < 10 {
            out.append(0x30 + UInt8(value))
            return
        }
        var digits: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
                     UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) =
            (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        var n = value, count = 0
        withUnsafeMutableBytes(of: &digits) { buffer in
            while n > 0 {
                buffer[count] = 0x30 + UInt8(n % 10)
                n /= 10
                count += 1
            }
            for i in stride(from: count - 1, through: 0, by: -1) { out.append(buffer[i]) }
        }
    }

    /// Milliseconds with one decimal.
    static func appendMilliseconds<Sink: ByteSink>(_ value: Double, to out: inout Sink) {
        let tenths = Int((max(0, value) * 10).rounded())
        appendInteger(tenths / 10, to: &out)
        out.append(0x2E)
        out.append(0x30 + UInt8(tenths % 10))
    }

    static func appendJSONString<Sink: ByteSink>(_ value: String?, to out: inout Sink) {
        guard let value else {
            appendLiteral("null", to: &out)
            return
        }
        out.append(0x22)
        withUTF8(of: value) { utf8 in
            // Fast path: most values (tokens, ids, reasons, UUIDs) need no escaping at all.
            if !needsJSONEscape(utf8) {
                out.append(bytes: utf8)
                return
            }
            for byte in utf8 {
                switch byte {
                case 0x22: out.append(0x5C); out.append(0x22)
                case 0x5C: out.append(0x5C); out.append(0x5C)
                case 0x0A: out.append(0x5C); out.append(0x6E)
                case 0x0D: out.append(0x5C); out.append(0x72)
                case 0x09: out.append(0x5C); out.append(0x74)
                case 0..<0x20:
                    appendLiteral("\\u00", to: &out)
                    out.append(Literal.hex[Int(byte >> 4)])
                    out.append(Literal.hex[Int(byte & 0xF)])
                default: out.append(byte)
                }
            }
        }
        out.append(0x22)
    }

    /// A packed token or apns-id is hex digits and dashes: nothing to escape.
    static func appendJSONString<Sink: ByteSink>(_ value: PackedText?, to out: inout Sink) {
        guard let value else {
            appendLiteral("null", to: &out)
            return
        }
        guard value.isPacked else {
            appendJSONString(value.string, to: &out)
            return
        }
        out.append(0x22)
        value.withUTF8 { out.append(bytes: $0.assumingMemoryBound(to: UInt8.self)) }
        out.append(0x22)
    }

    /// A packed text never needs quotes in CSV.
    static func appendCSVField<Sink: ByteSink>(_ value: PackedText?, to out: inout Sink) {
        guard let value else { return }
        guard value.isPacked else {
            appendCSVField(value.string, to: &out)
            return
        }
        value.withUTF8 { out.append(bytes: $0.assumingMemoryBound(to: UInt8.self)) }
    }

    /// The string's UTF-8 bytes, read in place (a native string is contiguous; `withUTF8` would
    /// need a mutable copy, which costs a retain and a release).
    @inline(__always)
    static func withUTF8(of value: String, _ body: (UnsafeBufferPointer<UInt8>) -> Void) {
        let done: Void? = value.utf8.withContiguousStorageIfAvailable(body)
        if done == nil {
            var copy = value
            copy.withUTF8(body)
        }
    }

    /// Whether any byte is a control character, `"` or `\`: eight bytes at a time (a token, a
    /// UUID and most ids have none).
    @inline(__always)
    static func needsJSONEscape(_ utf8: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let base = utf8.baseAddress else { return false }
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        var i = 0
        while i + 8 <= utf8.count {
            let word = UnsafeRawPointer(base + i).loadUnaligned(as: UInt64.self)
            // A byte below 0x20 (bytes >= 0x80 are excluded by `& ~word`), or equal to 0x22 or 0x5C.
            let control = (word &- ones &* 0x20) & ~word & highs
            let quote = word ^ (ones &* 0x22)
            let backslash = word ^ (ones &* 0x5C)
            let hasQuote = (quote &- ones) & ~quote & highs
            let hasBackslash = (backslash &- ones) & ~backslash & highs
            if control | hasQuote | hasBackslash != 0 { return true }
            i += 8
        }
        while i < utf8.count {
            let byte = base[i]
            if byte < 0x20 || byte == 0x22 || byte == 0x5C { return true }
            i += 1
        }
        return false
    }

    /// RFC 4180: quote a field that holds a comma, quote, CR or LF; double the quotes.
    static func appendCSVField<Sink: ByteSink>(_ value: String?, to out: inout Sink) {
        guard let value else { return }
        withUTF8(of: value) { utf8 in
            let needsQuotes = utf8.contains { $0 == 0x2C || $0 == 0x22 || $0 == 0x0A || $0 == 0x0D }
            if !needsQuotes {
                out.append(bytes: utf8)
                return
            }
            out.append(0x22)
            for byte in utf8 {
                if byte == 0x22 { out.append(0x22) }
                out.append(byte)
            }
            out.append(0x22)
        }
    }
}
