// The payload template (APNs payloads, and FCM request bodies through FCMMessageTemplate): compiled once from JSON text, rendered per row by copying literal
// chunks and splicing JSON-escaped column bytes (docs/DESIGN.md §6: per-row JSON serialisation costs
// 4-26 µs; this costs well under one).
//
// Rules:
// - The template must be one JSON object, validated in full by our own scanner (RFC 8259).
// - `{{column}}` placeholders may appear only inside string *values*, any number per string;
//   spaces inside the braces are ignored (`{{ first_name }}`). A `{{` in a key is an error, not a
//   literal, so a typo cannot silently ship braces to every device.
// - The template's bytes are kept exactly as written (whitespace, escapes, key order, nested
//   objects and arrays); only placeholders change.
// - A column with no value for a row renders as the empty string.

/// Why a template cannot be compiled. Reported before the first send.
public enum PayloadTemplateError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Not valid JSON; `offset` is the 0-based byte offset of the first error.
    case invalidJSON(offset: Int, message: String)
    /// Valid JSON, but not an object.
    case notAnObject
    /// `{{name}}` names no column. `available` lists the columns there are.
    case unknownPlaceholder(name: String, offset: Int, available: [String])
    /// A `{{` with no `}}` before the end of its string.
    case unterminatedPlaceholder(offset: Int)
    /// `{{}}`, or a name containing `{`, `"` or `\`.
    case invalidPlaceholder(offset: Int)
    /// A placeholder inside an object key.
    case placeholderInKey(offset: Int)

    public var description: String {
        switch self {
        case .invalidJSON(let offset, let message):
            return "payload template is not valid JSON at byte \(offset): \(message)"
        case .notAnObject:
            return "payload template must be a JSON object ({...})"
        case .unknownPlaceholder(let name, let offset, let available):
            let list = available.isEmpty ? "none" : available.joined(separator: ", ")
            return "payload template placeholder {{\(name)}} at byte \(offset) names no input column (available: \(list))"
        case .unterminatedPlaceholder(let offset):
            return "payload template has an unterminated '{{' at byte \(offset)"
        case .invalidPlaceholder(let offset):
            return "payload template has an empty or malformed placeholder at byte \(offset)"
        case .placeholderInKey(let offset):
            return "payload template has a placeholder in an object key at byte \(offset); placeholders are allowed only in string values"
        }
    }
}

/// A compiled payload template. Immutable and `Sendable`: compile once, share with every worker.
public struct PayloadTemplate: Sendable {
    /// One step of rendering: copy `literal[literalStart..<literalEnd]`, then (when `column >= 0`)
    /// splice the escaped value of that column.
    struct Step: Sendable {
        let literalStart: Int
        let literalEnd: Int
        let column: Int
    }

    /// The template's bytes with every `{{...}}` removed.
    let literal: [UInt8]
    let steps: [Step]

    /// The column index of each placeholder, in template order (repeats included).
    public var placeholderColumns: [Int] { steps.compactMap { $0.column >= 0 ? $0.column : nil } }
    /// Bytes rendered when every placeholder is empty.
    public var literalByteCount: Int { literal.count }

    /// Compiles `text` against the input's column names (placeholder → index into `columns`).
    /// The names between `{{` and `}}` in a template's text, in order, each once. A rough scan
    /// (`compile` is the judge of where placeholders may stand): for declaring the columns that
    /// a template needs before an NDJSON stream has shown them.
    public static func placeholderNames(in text: String) -> [String] {
        let bytes = Array(text.utf8)
        var names: [String] = []
        var i = 0
        while i + 1 < bytes.count {
            guard bytes[i] == UInt8(ascii: "{") && bytes[i + 1] == UInt8(ascii: "{") else { i += 1; continue }
            var close = i + 2
            while close + 1 < bytes.count && !(bytes[close] == UInt8(ascii: "}") && bytes[close + 1] == UInt8(ascii: "}")) {
                if bytes[close] == UInt8(ascii: "\"") { break }
                close += 1
            }
            guard close + 1 < bytes.count, bytes[close] == UInt8(ascii: "}"), close > i + 2 else { i += 2; continue }
            let name = String(decoding: bytes[(i + 2)..<close], as: UTF8.self)
            if !names.contains(name) { names.append(name) }
            i = close + 2
        }
        return names
    }

    public static func compile(text: String, columns: [String]) throws(PayloadTemplateError) -> PayloadTemplate {
        let bytes = Array(text.utf8)
        return try bytes.withUnsafeBufferPointer { buffer throws(PayloadTemplateError) in
            try compile(buffer, columns: columns)
        }
    }

    static func compile(_ bytes: UnsafeBufferPointer<UInt8>, columns: [String]) throws(PayloadTemplateError) -> PayloadTemplate {
        var scanner = JSONScanner(bytes)
        scanner.skipWhitespace()
        guard scanner.peek() == UInt8(ascii: "{") else {
            // Say "invalid JSON" for garbage, "not an object" for a valid non-object.
            var check = JSONScanner(bytes)
            do throws(JSONSyntaxError) { try check.scanDocument { (_: JSONStringToken) throws(JSONSyntaxError) in } } catch {
                throw .invalidJSON(offset: error.offset, message: error.message)
            }
            throw .notAnObject
        }
        var columnIndex: [String: Int] = [:]
        for (index, name) in columns.enumerated() where columnIndex[name] == nil { columnIndex[name] = index }

        var literal: [UInt8] = []
        literal.reserveCapacity(bytes.count)
        var steps: [Step] = []
        var copiedUpTo = 0  // bytes[..<copiedUpTo] are in `literal` (minus placeholders)
        var placeholderError: PayloadTemplateError?

        do throws(JSONSyntaxError) {
            try scanner.scanDocument { (token: JSONStringToken) throws(JSONSyntaxError) in
                guard placeholderError == nil else { return }
                var index = token.start + 1
                let contentEnd = token.end - 1
                while index + 1 < contentEnd {
                    guard bytes[index] == UInt8(ascii: "{") && bytes[index + 1] == UInt8(ascii: "{") else { index += 1; continue }
                    let open = index
                    if token.isKey { placeholderError = .placeholderInKey(offset: open); return }
                    var close = open + 2
                    while close + 1 < contentEnd && !(bytes[close] == UInt8(ascii: "}") && bytes[close + 1] == UInt8(ascii: "}")) {
                        close += 1
                    }
                    guard close + 1 < contentEnd else { placeholderError = .unterminatedPlaceholder(offset: open); return }
                    var nameStart = open + 2, nameEnd = close
                    while nameStart < nameEnd && bytes[nameStart] == 0x20 { nameStart += 1 }
                    while nameEnd > nameStart && bytes[nameEnd - 1] == 0x20 { nameEnd -= 1 }
                    let nameBytes = UnsafeBufferPointer(rebasing: bytes[nameStart..<nameEnd])
                    guard !nameBytes.isEmpty, !nameBytes.contains(where: { $0 == UInt8(ascii: "{") || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) else {
                        placeholderError = .invalidPlaceholder(offset: open); return
                    }
                    let name = String(decoding: nameBytes, as: UTF8.self)
                    guard let column = columnIndex[name] else {
                        placeholderError = .unknownPlaceholder(name: name, offset: open, available: columns); return
                    }
                    let start = literal.count
                    literal.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[copiedUpTo..<open]))
                    steps.append(Step(literalStart: start, literalEnd: literal.count, column: column))
                    copiedUpTo = close + 2
                    index = copiedUpTo
                }
            }
        } catch {
            throw .invalidJSON(offset: error.offset, message: error.message)
        }
        if let placeholderError { throw placeholderError }
        let start = literal.count
        literal.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[copiedUpTo...]))
        steps.append(Step(literalStart: start, literalEnd: literal.count, column: -1))
        return PayloadTemplate(literal: literal, steps: steps)
    }

    /// Renders one payload into `buffer` (its previous contents are replaced; its capacity is
    /// kept, so a reused buffer stops allocating after the first rows) and returns the byte count.
    /// `value(column)` gives the raw UTF-8 bytes of a column for this row, or nil for none.
    @inline(__always)
    public func render(into buffer: inout [UInt8], value: (Int) -> UnsafeRawBufferPointer?) -> Int {
        buffer.removeAll(keepingCapacity: true)
        literal.withUnsafeBufferPointer { literal in
            for step in steps {
                if step.literalEnd > step.literalStart {
                    buffer.append(contentsOf: UnsafeBufferPointer(rebasing: literal[step.literalStart..<step.literalEnd]))
                }
                if step.column >= 0, let bytes = value(step.column), bytes.count > 0 {
                    JSONWriter.appendEscaped(bytes.assumingMemoryBound(to: UInt8.self), to: &buffer)
                }
            }
        }
        return buffer.count
    }

    /// Renders with `String` values (tests and tools; the hot path passes bytes).
    public func render(values: [String?]) -> [UInt8] {
        // All values in one array, so one pointer scope serves every column.
        var joined: [UInt8] = []
        var ranges: [Range<Int>?] = []
        for value in values {
            guard let value else { ranges.append(nil); continue }
            let start = joined.count
            joined.append(contentsOf: value.utf8)
            ranges.append(start..<joined.count)
        }
        var buffer: [UInt8] = []
        joined.withUnsafeBytes { all in
            _ = render(into: &buffer) { column in
                guard column < ranges.count, let range = ranges[column] else { return nil }
                return UnsafeRawBufferPointer(rebasing: all[range])
            }
        }
        return buffer
    }
}
