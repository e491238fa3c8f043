import PushcastCore
import PushcastProviderKit

/// Reads a results file as a stream, in fixed-size chunks, handing each line's record to a
/// visitor: memory stays flat whatever the file's size. For `pushcast report`, which also reads
/// files still being written (a running or interrupted campaign): a last line without its
/// newline is left out, as a resume leaves it out. NDJSON lines take a fast path that reads only
/// the fields a report needs (row, provider, outcome, status, reason, attempts, latency_ms) and
/// skips the rest without decoding it; any line it is not sure of goes through the recovery
/// parser (`RecoveredResults.parseNDJSON`), as CSV lines always do (`parseCSV`).
public struct ResultsStream {
    public let path: String
    public let format: ResultsFormat
    public let columns: ResultColumns
    private let files: any FileStorage
    /// Lines read, and bytes of a last line without its newline.
    public private(set) var lines = 0
    public private(set) var tornBytes = 0
    public static let chunkBytes = 1 << 20
    private var reasons = ReasonStrings()

    public init(path: String, format: ResultsFormat, columns: ResultColumns, files: any FileStorage) {
        self.path = path
        self.files = files
        self.format = format
        self.columns = columns
    }

    /// The format a results file's name or first byte says.
    public static func format(of path: String, firstByte: UInt8?) -> ResultsFormat {
        if path.hasSuffix(".csv") { return .csv }
        if path.hasSuffix(".ndjson") || path.hasSuffix(".jsonl") || firstByte == UInt8(ascii: "{") { return .ndjson }
        return .csv
    }

    /// Reads the whole file; a damaged line throws, naming the file and line.
    public mutating func read(visit: (OutcomeRecord) -> Void) throws(CampaignError) {
        let file: any ReadableFile
        do { file = try files.openForReading(path) } catch { throw .input(error.description) }
        var buffer = [UInt8](repeating: 0, count: Self.chunkBytes)
        var carry: [UInt8] = []
        while true {
            let count: Int
            do { count = try buffer.withUnsafeMutableBytes { try file.read(into: $0) } } catch { throw .input("\(path): \(error)") }
            if count == 0 { break }
            try buffer.withUnsafeBufferPointer { (chunk) throws(CampaignError) in
                var start = 0
                let base = chunk.baseAddress!
                while start < count, let found = RawMemory.find(0x0A, in: base + start, count: count - start) {
                    let index = base.distance(to: found.assumingMemoryBound(to: UInt8.self))
                    if carry.isEmpty {
                        try line(UnsafeBufferPointer(rebasing: chunk[start..<index]), visit)
                    } else {
                        carry.append(contentsOf: chunk[start..<index])
                        try carry.withUnsafeBufferPointer { (whole) throws(CampaignError) in try line(whole, visit) }
                        carry.removeAll(keepingCapacity: true)
                    }
                    start = index + 1
                }
                carry.append(contentsOf: chunk[start..<count])
            }
        }
        tornBytes = carry.count
    }

    private mutating func line(_ bytes: UnsafeBufferPointer<UInt8>, _ visit: (OutcomeRecord) -> Void) throws(CampaignError) {
        lines += 1
        if format == .csv && lines == 1 { return }  // the header
        if bytes.isEmpty { return }
        if format == .ndjson, let record = Self.fastNDJSON(bytes, columns.catalog, &reasons) {
            visit(record)
            return
        }
        let text = String(decoding: bytes, as: UTF8.self)
        guard let record = format == .csv ? RecoveredResults.parseCSV(text, columns) : RecoveredResults.parseNDJSON(text, columns) else {
            throw .input("\(path):\(lines): damaged results line")
        }
        visit(record)
    }

    /// One flat JSON object's members, the needed ones decoded; nil (take the slow path) for
    /// anything unusual: a nested value, an escape in a needed string, a number it cannot read.
    static func fastNDJSON(_ b: UnsafeBufferPointer<UInt8>, _ catalog: ProviderCatalog, _ reasons: inout ReasonStrings) -> OutcomeRecord? {
        var fields = FastFields()
        var i = 0
        let n = b.count
        func skipSpace() { while i < n && (b[i] == 0x20 || b[i] == 0x09 || b[i] == 0x0D) { i += 1 } }
        skipSpace()
        guard i < n && b[i] == UInt8(ascii: "{") else { return nil }
        i += 1
        while true {
            skipSpace()
            guard i < n else { return nil }
            if b[i] == UInt8(ascii: "}") { break }
            if b[i] == UInt8(ascii: ",") { i += 1; skipSpace() }
            guard i < n && b[i] == UInt8(ascii: "\"") else { return nil }
            let keyStart = i + 1
            i += 1
            while i < n && b[i] != UInt8(ascii: "\"") { if b[i] == UInt8(ascii: "\\") { return nil }; i += 1 }
            let key = UnsafeBufferPointer(rebasing: b[keyStart..<min(i, n)])
            i += 1
            skipSpace()
            guard i < n && b[i] == UInt8(ascii: ":") else { return nil }
            i += 1
            skipSpace()
            guard i < n else { return nil }
            var escaped = false
            let valueStart = i
            if b[i] == UInt8(ascii: "\"") {
                i += 1
                // The closing quote by memchr (tokens are long); a backslash before it means escapes: byte by byte.
                guard let quote = RawMemory.find(0x22, in: b.baseAddress! + i, count: n - i) else { return nil }
                let end = b.baseAddress!.distance(to: quote.assumingMemoryBound(to: UInt8.self))
                if RawMemory.find(0x5C, in: b.baseAddress! + i, count: end - i) == nil {
                    i = end
                } else {
                    while i < n && b[i] != UInt8(ascii: "\"") {
                        if b[i] == UInt8(ascii: "\\") { escaped = true; i += 1 }
                        i += 1
                    }
                }
                guard i < n else { return nil }
                i += 1
            } else {
                if b[i] == UInt8(ascii: "{") || b[i] == UInt8(ascii: "[") { return nil }
                while i < n && b[i] != UInt8(ascii: ",") && b[i] != UInt8(ascii: "}") { i += 1 }
            }
            guard fields.take(key, UnsafeBufferPointer(rebasing: b[valueStart..<i]), escaped: escaped, catalog, &reasons) else { return nil }
        }
        return fields.record
    }
}

/// The fields the fast path keeps from one line.
struct FastFields {
    var row: Int?
    var provider: ProviderID?
    var outcome: OutcomeKind?
    var status: Int?
    var reason: String?
    var attempts = 0
    var latency: Double?

    var record: OutcomeRecord? {
        guard let row, row >= 1, let outcome else { return nil }
        return OutcomeRecord(row: row, id: nil, token: "", provider: provider, outcome: outcome, status: status, reason: reason,
                             attempts: attempts, latencyMilliseconds: latency)
    }

    /// Takes one member; false when its value is not what the fast path can read.
    mutating func take(_ key: UnsafeBufferPointer<UInt8>, _ value: UnsafeBufferPointer<UInt8>, escaped: Bool, _ catalog: ProviderCatalog,
                       _ reasons: inout ReasonStrings) -> Bool {
        let isNull = value.count == 4 && value[value.startIndex] == UInt8(ascii: "n")
        switch Self.field(key) {
        case .row: row = Self.integer(value); return row != nil
        case .provider:
            if isNull { return true }
            guard !escaped, value.count >= 2 else { return false }
            let name = UnsafeBufferPointer(rebasing: value[(value.startIndex + 1)..<(value.endIndex - 1)])
            provider = catalog.ids.first { $0.rawValue.utf8.elementsEqual(name) }
            return provider != nil
        case .outcome:
            outcome = Self.outcomes.first { Self.same($0.quoted, value) }?.kind
            return outcome != nil
        case .status: status = Self.integer(value); return isNull || status != nil
        case .reason:
            if isNull { return true }
            guard !escaped, value.count >= 2 else { return false }
            reason = reasons.text(UnsafeBufferPointer(rebasing: value[(value.startIndex + 1)..<(value.endIndex - 1)]))
            return true
        case .attempts: attempts = Self.integer(value) ?? 0; return true
        case .latency:
            if isNull { return true }
            latency = Self.milliseconds(value)
            return latency != nil
        case .other: return true
        }
    }

    enum Field { case row, provider, outcome, status, reason, attempts, latency, other }
    static let names: [(Field, [UInt8])] = [(.row, Array("row".utf8)), (.provider, Array("provider".utf8)), (.outcome, Array("outcome".utf8)),
                                            (.status, Array("status".utf8)), (.reason, Array("reason".utf8)), (.attempts, Array("attempts".utf8)),
                                            (.latency, Array("latency_ms".utf8))]

    /// Which needed field a key names (compared byte for byte; most keys are skipped by length).
    @inline(__always)
    static func field(_ key: UnsafeBufferPointer<UInt8>) -> Field {
        for (field, name) in names where name.count == key.count && same(name, key) { return field }
        return .other
    }

    @inline(__always)
    static func same(_ name: [UInt8], _ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        name.count == bytes.count && name.withUnsafeBufferPointer { RawMemory.equal($0.baseAddress!, bytes.baseAddress!, count: name.count) }
    }

    /// Each outcome's JSON string, quotes included.
    static let outcomes: [(kind: OutcomeKind, quoted: [UInt8])] = OutcomeKind.allCases.map { ($0, Array("\"\($0.rawValue)\"".utf8)) }

    static func integer(_ bytes: UnsafeBufferPointer<UInt8>) -> Int? {
        guard !bytes.isEmpty, bytes.count <= 18 else { return nil }
        var value = 0
        for byte in bytes {
            guard byte >= 0x30 && byte <= 0x39 else { return nil }
            value = value * 10 + Int(byte - 0x30)
        }
        return value
    }

    /// `123.4` as pushcast writes it (tenths); other shapes: nil.
    static func milliseconds(_ bytes: UnsafeBufferPointer<UInt8>) -> Double? {
        guard let dot = bytes.firstIndex(of: UInt8(ascii: ".")), dot == bytes.endIndex - 2,
              let whole = integer(UnsafeBufferPointer(rebasing: bytes[bytes.startIndex..<dot])),
              let tenth = integer(UnsafeBufferPointer(rebasing: bytes[(dot + 1)...])) else { return nil }
        return Double(whole * 10 + tenth) / 10
    }
}

/// Reasons repeat from line to line: the last few seen are kept, so a repeated one costs no new
/// string (a bounded cache: a stream of distinct reasons only cycles it).
struct ReasonStrings {
    private var recent: [(bytes: [UInt8], text: String)] = []
    static let kept = 32

    mutating func text(_ bytes: UnsafeBufferPointer<UInt8>) -> String {
        if let found = recent.first(where: { $0.bytes.elementsEqual(bytes) }) { return found.text }
        let text = String(decoding: bytes, as: UTF8.self)
        if recent.count >= Self.kept { recent.removeFirst() }
        recent.append((Array(bytes), text))
        return text
    }
}
