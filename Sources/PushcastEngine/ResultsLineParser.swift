import PushcastCore
import PushcastProviderKit

/// Reads back a results line exactly as `ResultEncoding.appendJSONLine` writes it: the fields in
/// their order, strings without escapes, numbers as the encoder prints them. Anything else (a line
/// edited by hand, an escaped string) returns nil, and the resume parses that line with the
/// general JSON parser instead, so this path only has to be right for what pushcast writes. A
/// resume of 1,000,000 rows took 13 s through Foundation's JSON parser alone.
struct ResultsLineParser {
    private let line: UnsafeRawBufferPointer
    private var at = 0

    private init(_ line: UnsafeRawBufferPointer) { self.line = line }

    static func parse(_ line: UnsafeRawBufferPointer, _ columns: ResultColumns) -> OutcomeRecord? {
        var p = ResultsLineParser(line)
        return p.record(columns)
    }

    private mutating func record(_ columns: ResultColumns) -> OutcomeRecord? {
        guard literal("{\"row\":"), let row = integer(), row >= 1,
              literal(",\"id\":"), let id = string(),
              literal(",\"token\":"), let token = string(), let token,
              literal(",\"provider\":"), let providerName = string(),
              literal(",\"outcome\":"), let outcomeName = string(), let outcomeName,
              let outcome = OutcomeKind(rawValue: outcomeName),
              literal(",\"status\":"), let status = nullableInteger(),
              literal(",\"reason\":"), let reason = string() else { return nil }
        let provider = providerName.flatMap { columns.catalog.provider(named: $0) }
        // The message-id columns: the first on every line, the provider's own where it differs.
        var messageIDs = [String?](repeating: nil, count: columns.fields.count)
        while !peek(",\"unregistered_at\":") {
            guard literal(","), let key = string(), let key, literal(":"), let value = string(),
                  let index = columns.fields.firstIndex(of: key) else { return nil }
            messageIDs[index] = value
        }
        guard literal(",\"unregistered_at\":"), let unregisteredAt = string(),
              literal(",\"attempts\":"), let attempts = integer(),
              literal(",\"latency_ms\":"), let latency = nullableNumber() else { return nil }
        var duplicateOf: Int?
        if literal(",\"duplicate_of\":") {
            guard let first = integer() else { return nil }
            duplicateOf = first
        }
        var error: String?
        if literal(",\"error\":") {
            guard let text = string() else { return nil }
            error = text
        }
        guard literal("}"), at == line.count else { return nil }
        let field = columns.field(of: provider)
        return OutcomeRecord(row: row, id: id, token: token, provider: provider, outcome: outcome, status: status,
                             reason: reason, error: error, messageID: field >= 0 ? messageIDs[field] : nil,
                             unregisteredAt: unregisteredAt, duplicateOf: duplicateOf, attempts: attempts,
                             latencyMilliseconds: latency)
    }

    private func peek(_ text: StaticString) -> Bool {
        let n = text.utf8CodeUnitCount
        guard line.count - at >= n else { return false }
        return RawMemory.equal(line.baseAddress! + at, text.utf8Start, count: n)
    }

    private mutating func literal(_ text: StaticString) -> Bool {
        guard peek(text) else { return false }
        at += text.utf8CodeUnitCount
        return true
    }

    /// `null` → .some(nil); a string with no escape → its text; anything else → nil.
    private mutating func string() -> String?? {
        if literal("null") { return .some(nil) }
        guard at < line.count, line[at] == 0x22 else { return nil }
        let start = at + 1
        var end = start
        while end < line.count, line[end] != 0x22 {
            if line[end] == 0x5C || line[end] < 0x20 { return nil }
            end += 1
        }
        guard end < line.count else { return nil }
        guard let text = String(validating: UnsafeRawBufferPointer(rebasing: line[start..<end]), as: UTF8.self) else { return nil }
        at = end + 1
        return .some(text)
    }

    private mutating func integer() -> Int? {
        let negative = literal("-")
        var value = 0, digits = 0
        while at < line.count, line[at] >= 0x30, line[at] <= 0x39, digits < 18 {
            value = value * 10 + Int(line[at] - 0x30)
            at += 1
            digits += 1
        }
        guard digits > 0, !(at < line.count && line[at] >= 0x30 && line[at] <= 0x39) else { return nil }
        return negative ? -value : value
    }

    private mutating func nullableInteger() -> Int?? {
        if literal("null") { return .some(nil) }
        return integer().map { .some($0) }
    }

    /// The encoder's milliseconds: digits, a point, one digit (or null).
    private mutating func nullableNumber() -> Double?? {
        if literal("null") { return .some(nil) }
        let start = at
        while at < line.count, (line[at] >= 0x30 && line[at] <= 0x39) || line[at] == 0x2E { at += 1 }
        guard at > start, let text = String(validating: UnsafeRawBufferPointer(rebasing: line[start..<at]), as: UTF8.self),
              let value = Double(text) else { return nil }
        return .some(value)
    }
}
