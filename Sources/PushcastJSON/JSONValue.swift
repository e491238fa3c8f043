// JSONValue: a whole JSON document as a tree, built by `JSONScanner.parse`. For Google's formats
// (service-account files, the JWT parts, the token endpoint's answers, FCM request and error bodies
// in the mock): objects keep their members in order (FCM names a bad `data` entry by its index) and
// lookups take the last of duplicate keys, as Google does. Nesting depth and input size are bounded
// so that a hostile body costs little; none of this is on a per-notification hot path of the client.

public indirect enum JSONValue: Sendable, Equatable {
    case object([Member])
    case array([JSONValue])
    case string(String)
    /// The number's text exactly as written.
    case number(String)
    case bool(Bool)
    case null

    public struct Member: Sendable, Equatable {
        public let key: String
        public let value: JSONValue
    }

    /// The value of the last member named `key`, when this is an object.
    public subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members.last(where: { $0.key == key })?.value
    }

    public var stringValue: String? {
        if case .string(let text) = self { return text }
        return nil
    }

    /// An integer number (no fraction or exponent) that fits in 64 bits.
    public var int64Value: Int64? {
        if case .number(let text) = self { return Int64(text) }
        return nil
    }

    public var members: [Member]? {
        if case .object(let members) = self { return members }
        return nil
    }

    /// A number as a Double (any JSON number).
    public var doubleValue: Double? {
        if case .number(let text) = self { return Double(text) }
        return nil
    }

    /// A number that is a whole value and fits an Int (`3` and `3.0`, not `3.5`).
    public var intValue: Int? {
        guard case .number(let text) = self else { return nil }
        if let value = Int(text) { return value }
        guard let value = Double(text), value.rounded() == value, abs(value) < 9.0e15 else { return nil }
        return Int(value)
    }

    public var boolValue: Bool? {
        if case .bool(let value) = self { return value }
        return nil
    }

    /// An object whose every member is a whole number, as a dictionary (the last of repeated
    /// keys); nil for anything else.
    public var intMembers: [String: Int]? {
        guard case .object(let members) = self else { return nil }
        var out: [String: Int] = [:]
        for member in members {
            guard let value = member.value.intValue else { return nil }
            out[member.key] = value
        }
        return out
    }

    /// An array's elements; nil for anything else.
    public var elements: [JSONValue]? {
        if case .array(let values) = self { return values }
        return nil
    }
}

extension JSONScanner {
    /// How deep `parse` lets containers nest.
    public static let treeDepthMax = 32
    /// The largest document `parse` reads.
    public static let treeInputBytesMax = 1 << 20

    public static func parse(_ bytes: [UInt8]) -> Result<JSONValue, JSONSyntaxError> {
        bytes.withUnsafeBufferPointer { parse($0) }
    }

    /// Parses exactly one JSON value surrounded by optional whitespace into a tree. Strings are
    /// decoded; a \u escape that is an unpaired surrogate is an error.
    public static func parse(_ bytes: UnsafeBufferPointer<UInt8>) -> Result<JSONValue, JSONSyntaxError> {
        guard bytes.count <= treeInputBytesMax else {
            return .failure(JSONSyntaxError(offset: treeInputBytesMax, message: "document larger than 1 MiB"))
        }
        var scanner = JSONScanner(bytes, depthMax: treeDepthMax)
        do throws(JSONSyntaxError) {
            scanner.skipWhitespace()
            let value = try scanner.parseValue(depth: 0)
            scanner.skipWhitespace()
            if !scanner.isAtEnd { throw scanner.fail("unexpected data after the JSON value") }
            return .success(value)
        } catch {
            return .failure(error)
        }
    }

    private mutating func parseValue(depth: Int) throws(JSONSyntaxError) -> JSONValue {
        guard let byte = peek() else { throw fail("unexpected end of input, expected a value") }
        let start = index
        switch byte {
        case UInt8(ascii: "{"):
            try enter(depth + 1)
            var members: [JSONValue.Member] = []
            try scanContainer(close: UInt8(ascii: "}")) { (scanner: inout JSONScanner) throws(JSONSyntaxError) in
                let key = try scanner.parseString()
                try scanner.scanColon()
                members.append(JSONValue.Member(key: key, value: try scanner.parseValue(depth: depth + 1)))
            }
            return .object(members)
        case UInt8(ascii: "["):
            try enter(depth + 1)
            var elements: [JSONValue] = []
            try scanContainer(close: UInt8(ascii: "]")) { (scanner: inout JSONScanner) throws(JSONSyntaxError) in
                elements.append(try scanner.parseValue(depth: depth + 1))
            }
            return .array(elements)
        case UInt8(ascii: "\""):
            return .string(try parseString())
        case UInt8(ascii: "t"), UInt8(ascii: "f"), UInt8(ascii: "n"):
            try skipValue()
            return byte == UInt8(ascii: "n") ? .null : .bool(byte == UInt8(ascii: "t"))
        default:
            try skipValue()
            return .number(String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self))
        }
    }

    /// A string token from its opening quote, validated and decoded in full.
    private mutating func parseString() throws(JSONSyntaxError) -> String {
        let start = index
        try scanString()
        guard let text = Self.decodeString(bytes, start, index, bytesMax: .max, strict: true) else {
            throw fail("unpaired surrogate in a \\u escape", at: start)
        }
        return text
    }
}
