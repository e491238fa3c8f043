// JSONScanner: pushcast's one JSON reader (RFC 8259), over bytes. Everything that reads JSON goes
// through it:
// - `scanDocument(visit:)` validates a whole document without allocating and reports every string
//   token (the payload template finds its placeholders this way); `JSONValidation` wraps it.
// - `parse(_:)` builds a `JSONValue` tree (service-account files, the JWT parts and the token
//   endpoint's answers, the mock's FCM request bodies).
// - `FlatObjectReader` reads the top-level members of an object up to the first error (APNs error
//   bodies, the JWT verifier).
// - The lenient, positional reads of JSONScanner+Lenient.swift (`members(ofObjectAt:)`,
//   `elements(ofArrayAt:)`, `string(_:bytesMax:)`) walk bodies that may be truncated or hostile
//   (FCM error envelopes) and templates already validated here.
// Nesting depth is bounded so hostile input cannot exhaust the stack, and every error carries the
// byte offset where it was found.

/// A syntax error at a byte offset (0-based) of the scanned text.
public struct JSONSyntaxError: Error, Sendable, Equatable {
    public let offset: Int
    public let message: String
}

/// Where a string token sits: `start` is the opening quote, `end` is one past the closing quote.
public struct JSONStringToken {
    public let start: Int
    public let end: Int
    public let isKey: Bool
}

public struct JSONScanner {
    public static let depthMax = 64

    public let bytes: UnsafeBufferPointer<UInt8>
    public var index: Int = 0
    /// Containers nested deeper than this are an error.
    public var depthMax: Int

    public init(_ bytes: UnsafeBufferPointer<UInt8>, depthMax: Int = JSONScanner.depthMax) {
        self.bytes = bytes
        self.depthMax = depthMax
    }

    public var isAtEnd: Bool { index >= bytes.count }

    @inline(__always) public func peek() -> UInt8? { index < bytes.count ? bytes[index] : nil }

    public func fail(_ message: String, at offset: Int? = nil) -> JSONSyntaxError {
        JSONSyntaxError(offset: offset ?? index, message: message)
    }

    public mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    /// Validates one whole document: a single value surrounded by optional whitespace.
    public mutating func scanDocument(visit: (JSONStringToken) throws(JSONSyntaxError) -> Void) throws(JSONSyntaxError) {
        skipWhitespace()
        try scanValue(depth: 0, visit: visit)
        skipWhitespace()
        if !isAtEnd { throw fail("unexpected data after the JSON value") }
    }

    public mutating func scanValue(depth: Int, visit: (JSONStringToken) throws(JSONSyntaxError) -> Void) throws(JSONSyntaxError) {
        guard let byte = peek() else { throw fail("unexpected end of input, expected a value") }
        switch byte {
        case UInt8(ascii: "{"): try scanObject(depth: depth + 1, visit: visit)
        case UInt8(ascii: "["): try scanArray(depth: depth + 1, visit: visit)
        case UInt8(ascii: "\""):
            let start = index
            try scanString()
            try visit(JSONStringToken(start: start, end: index, isKey: false))
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): try scanNumber()
        case UInt8(ascii: "t"): try scanLiteral("true")
        case UInt8(ascii: "f"): try scanLiteral("false")
        case UInt8(ascii: "n"): try scanLiteral("null")
        default: throw fail("unexpected character '\(Self.printable(byte))', expected a value")
        }
    }

    public mutating func skipValue() throws(JSONSyntaxError) {
        try scanValue(depth: 0) { (_: JSONStringToken) throws(JSONSyntaxError) in }
    }

    private mutating func scanObject(depth: Int, visit: (JSONStringToken) throws(JSONSyntaxError) -> Void) throws(JSONSyntaxError) {
        try enter(depth)
        try scanContainer(close: UInt8(ascii: "}")) { (scanner: inout JSONScanner) throws(JSONSyntaxError) in
            let start = scanner.index
            try scanner.scanString()
            try visit(JSONStringToken(start: start, end: scanner.index, isKey: true))
            try scanner.scanColon()
            try scanner.scanValue(depth: depth, visit: visit)
        }
    }

    private mutating func scanArray(depth: Int, visit: (JSONStringToken) throws(JSONSyntaxError) -> Void) throws(JSONSyntaxError) {
        try enter(depth)
        try scanContainer(close: UInt8(ascii: "]")) { (scanner: inout JSONScanner) throws(JSONSyntaxError) in
            try scanner.scanValue(depth: depth, visit: visit)
        }
    }

    func enter(_ depth: Int) throws(JSONSyntaxError) {
        if depth > depthMax { throw fail("nesting deeper than \(depthMax) levels") }
    }

    /// From an opening bracket to its closing one (`}` or `]`): `element` reads each entry (a key
    /// and its value, or a value) with the scanner on the entry's first byte.
    mutating func scanContainer(close: UInt8, element: (inout JSONScanner) throws(JSONSyntaxError) -> Void) throws(JSONSyntaxError) {
        let isObject = close == UInt8(ascii: "}")
        index += 1
        skipWhitespace()
        if peek() == close { index += 1; return }
        while true {
            skipWhitespace()
            if isObject && peek() != UInt8(ascii: "\"") { throw fail("expected a string key") }
            try element(&self)
            skipWhitespace()
            switch peek() {
            case UInt8(ascii: ","): index += 1
            case close: index += 1; return
            case nil: throw fail(isObject ? "unterminated object" : "unterminated array")
            default: throw fail(isObject ? "expected ',' or '}' in an object" : "expected ',' or ']' in an array")
            }
        }
    }

    /// The `:` after a key, with the whitespace around it.
    mutating func scanColon() throws(JSONSyntaxError) {
        skipWhitespace()
        guard peek() == UInt8(ascii: ":") else { throw fail("expected ':' after a key") }
        index += 1
        skipWhitespace()
    }

    /// Scans a string token starting at its opening quote; validates escapes and UTF-8.
    public mutating func scanString() throws(JSONSyntaxError) {
        let start = index
        index += 1
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                return
            case UInt8(ascii: "\\"):
                index += 1
                guard let escaped = peek() else { break }
                switch escaped {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"),
                     UInt8(ascii: "f"), UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                    index += 1
                case UInt8(ascii: "u"):
                    index += 1
                    for _ in 0..<4 {
                        guard let digit = peek(), Self.hexValue(digit) != nil else {
                            throw fail("invalid \\u escape, expected 4 hex digits")
                        }
                        index += 1
                    }
                default:
                    throw fail("invalid escape '\\\(Self.printable(escaped))'")
                }
            case 0x00..<0x20:
                throw fail("control character 0x\(String(byte, radix: 16)) must be escaped inside a string")
            case 0x80...:
                let length = utf8SequenceLength(bytes, index)
                if length == 0 { throw fail("invalid UTF-8") }
                index += length
            default:
                index += 1
            }
        }
        throw fail("unterminated string", at: start)
    }

    private mutating func scanNumber() throws(JSONSyntaxError) {
        if peek() == UInt8(ascii: "-") { index += 1 }
        guard let first = peek(), Self.isDigit(first) else { throw fail("invalid number, expected a digit") }
        index += 1
        if first != UInt8(ascii: "0") {
            while let byte = peek(), Self.isDigit(byte) { index += 1 }
        }
        if peek() == UInt8(ascii: ".") {
            index += 1
            guard let byte = peek(), Self.isDigit(byte) else { throw fail("invalid number, expected a digit after '.'") }
            while let byte = peek(), Self.isDigit(byte) { index += 1 }
        }
        if peek() == UInt8(ascii: "e") || peek() == UInt8(ascii: "E") {
            index += 1
            if peek() == UInt8(ascii: "+") || peek() == UInt8(ascii: "-") { index += 1 }
            guard let byte = peek(), Self.isDigit(byte) else { throw fail("invalid number, expected an exponent digit") }
            while let byte = peek(), Self.isDigit(byte) { index += 1 }
        }
    }

    private mutating func scanLiteral(_ word: StaticString) throws(JSONSyntaxError) {
        let count = word.utf8CodeUnitCount
        let matches = index + count <= bytes.count && (0..<count).allSatisfy { bytes[index + $0] == word.utf8Start[$0] }
        guard matches else { throw fail("invalid literal, expected '\(word)'") }
        index += count
    }

    @inline(__always) public static func isDigit(_ byte: UInt8) -> Bool { byte >= 0x30 && byte <= 0x39 }

    @inline(__always) public static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case 0x30...0x39: return byte - 0x30
        case 0x41...0x46: return byte - 0x41 + 10
        case 0x61...0x66: return byte - 0x61 + 10
        default: return nil
        }
    }

    /// Decodes a string token that `scanString` accepted (quotes included in `start..<end`), at
    /// most `bytesMax` UTF-8 bytes. `strict`: a \u escape that is an unpaired surrogate makes it
    /// nil; otherwise it becomes U+FFFD, as do sequences cut by `bytesMax`.
    public static func decodeString(_ bytes: UnsafeBufferPointer<UInt8>, _ start: Int, _ end: Int, bytesMax: Int, strict: Bool) -> String? {
        var out: [UInt8] = []
        out.reserveCapacity(min(end - start, bytesMax) + 4)
        var index = start + 1
        let stop = end - 1
        while index < stop && out.count < bytesMax {
            let byte = bytes[index]
            if byte != UInt8(ascii: "\\") {
                out.append(byte)
                index += 1
                continue
            }
            let escaped = bytes[index + 1]
            index += 2
            switch escaped {
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = hex4(bytes, index)
                index += 4
                if (0xD800..<0xDC00).contains(scalar), index + 6 <= stop,
                   bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u"),
                   case let low = hex4(bytes, index + 2), (0xDC00..<0xE000).contains(low) {
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    index += 6
                }
                guard let unicode = Unicode.Scalar(scalar) else {
                    if strict { return nil }
                    out.append(contentsOf: [0xEF, 0xBF, 0xBD] as [UInt8])
                    continue
                }
                out.append(contentsOf: Array(String(unicode).utf8))
            default: out.append(escaped)  // " \ /
            }
        }
        if out.count > bytesMax {
            out.removeLast(out.count - bytesMax)
        }
        // Ill-formed or cut sequences become U+FFFD.
        return String(decoding: out, as: UTF8.self)
    }

    private static func hex4(_ bytes: UnsafeBufferPointer<UInt8>, _ index: Int) -> UInt32 {
        var value: UInt32 = 0
        for offset in 0..<4 { value = value << 4 | UInt32(hexValue(bytes[index + offset]) ?? 0) }
        return value
    }

    public static func printable(_ byte: UInt8) -> String {
        byte >= 0x20 && byte < 0x7F ? String(UnicodeScalar(byte)) : "0x" + String(byte, radix: 16)
    }
}

/// The length of the well-formed UTF-8 sequence that starts at `index` (1...4), or 0 when it is
/// ill-formed (stray continuation, overlong form, surrogate, beyond U+10FFFF, or truncated).
/// Follows the table in Unicode 15 §3.9 (Table 3-7).
@inline(__always)
public func utf8SequenceLength(_ bytes: UnsafeBufferPointer<UInt8>, _ index: Int) -> Int {
    let lead = bytes[index]
    if lead < 0x80 { return 1 }
    let remaining = bytes.count - index
    @inline(__always) func continuation(_ offset: Int, _ low: UInt8 = 0x80, _ high: UInt8 = 0xBF) -> Bool {
        offset < remaining && bytes[index + offset] >= low && bytes[index + offset] <= high
    }
    switch lead {
    case 0xC2...0xDF:
        return continuation(1) ? 2 : 0
    case 0xE0:
        return continuation(1, 0xA0) && continuation(2) ? 3 : 0
    case 0xE1...0xEC, 0xEE...0xEF:
        return continuation(1) && continuation(2) ? 3 : 0
    case 0xED:
        return continuation(1, 0x80, 0x9F) && continuation(2) ? 3 : 0
    case 0xF0:
        return continuation(1, 0x90) && continuation(2) && continuation(3) ? 4 : 0
    case 0xF1...0xF3:
        return continuation(1) && continuation(2) && continuation(3) ? 4 : 0
    case 0xF4:
        return continuation(1, 0x80, 0x8F) && continuation(2) && continuation(3) ? 4 : 0
    default:
        return 0
    }
}

/// A scalar member value read by `FlatObjectReader`.
public enum JSONScalar: Equatable {
    case string(String)
    /// The number's text exactly as written.
    case number(String)
    case bool(Bool)
    case null
    /// An object or array, skipped (validated, not kept).
    case nested
}

/// Reads the top-level members of a JSON object, decoding string values. Tolerant by design:
/// `read` returns the members seen before the first syntax error together with that error, so a
/// truncated or hostile body still yields whatever it said up to that point. Strings longer than
/// `stringBytesMax` are cut (on a UTF-8 boundary) rather than kept whole.
public enum FlatObjectReader {
    public static let stringBytesMax = 512

    /// The first member named `name` when it is a string (a JWT's claims).
    public static func string(_ members: [(key: String, value: JSONScalar)], _ name: String) -> String? {
        guard let member = members.first(where: { $0.key == name }), case .string(let value) = member.value else { return nil }
        return value
    }

    /// The first member named `name` when it is an integer that fits 64 bits.
    public static func integer(_ members: [(key: String, value: JSONScalar)], _ name: String) -> Int64? {
        guard let member = members.first(where: { $0.key == name }), case .number(let text) = member.value else { return nil }
        return Int64(text)
    }

    public static func read(_ bytes: UnsafeBufferPointer<UInt8>) -> (members: [(key: String, value: JSONScalar)], error: JSONSyntaxError?) {
        var scanner = JSONScanner(bytes)
        var members: [(key: String, value: JSONScalar)] = []
        do throws(JSONSyntaxError) {
            scanner.skipWhitespace()
            guard scanner.peek() == UInt8(ascii: "{") else { throw scanner.fail("expected a JSON object") }
            try scanner.scanContainer(close: UInt8(ascii: "}")) { (scanner: inout JSONScanner) throws(JSONSyntaxError) in
                let keyStart = scanner.index
                try scanner.scanString()
                let key = JSONScanner.decodeString(bytes, keyStart, scanner.index, bytesMax: stringBytesMax, strict: false)!
                try scanner.scanColon()
                let valueStart = scanner.index
                let value: JSONScalar
                switch scanner.peek() {
                case UInt8(ascii: "\""):
                    try scanner.scanString()
                    value = .string(JSONScanner.decodeString(bytes, valueStart, scanner.index, bytesMax: stringBytesMax, strict: false)!)
                case UInt8(ascii: "{"), UInt8(ascii: "["):
                    try scanner.skipValue()
                    value = .nested
                case UInt8(ascii: "t"), UInt8(ascii: "f"):
                    try scanner.skipValue()
                    value = .bool(bytes[valueStart] == UInt8(ascii: "t"))
                case UInt8(ascii: "n"):
                    try scanner.skipValue()
                    value = .null
                default:
                    try scanner.skipValue()
                    value = .number(String(decoding: UnsafeBufferPointer(rebasing: bytes[valueStart..<scanner.index]), as: UTF8.self))
                }
                members.append((key, value))
            }
            return (members, nil)
        } catch {
            return (members, error)
        }
    }
}

/// Whole-document JSON validation for other modules (the mock checks request bodies with it).
public enum JSONValidation {
    /// Whether `bytes` is exactly one valid JSON object (RFC 8259, UTF-8), with optional
    /// surrounding whitespace.
    public static func isObject(_ bytes: UnsafeRawBufferPointer) -> Bool {
        firstError(bytes, requireObject: true) == nil
    }

    /// The byte offset and message of the first error, or nil when `bytes` is valid JSON (and an
    /// object, when `requireObject`).
    public static func firstError(_ bytes: UnsafeRawBufferPointer, requireObject: Bool) -> (offset: Int, message: String)? {
        var scanner = JSONScanner(bytes.bindMemory(to: UInt8.self))
        scanner.skipWhitespace()
        if requireObject && scanner.peek() != UInt8(ascii: "{") { return (scanner.index, "expected a JSON object") }
        do throws(JSONSyntaxError) {
            try scanner.scanDocument { (_: JSONStringToken) throws(JSONSyntaxError) in }
            return nil
        } catch {
            return (error.offset, error.message)
        }
    }
}
