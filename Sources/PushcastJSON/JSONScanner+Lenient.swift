// The lenient, positional half of JSONScanner: reads the structure of JSON bytes without
// validating them in full: the members of an object, the elements of an array, a string value
// decoded and bounded. Built for two callers: response bodies that may be truncated or hostile
// (everything up to the first damage is returned, nothing traps, nesting and counts are bounded),
// and the FCM message template's rule checks, which run on text `scanDocument` already validated
// (the nesting bound is the scanner's, so a valid template always reads).

extension JSONScanner {
    public static let membersMax = 256
    public static let elementsMax = 64
    public static let keyBytesMax = 256

    /// An object member found by `members(ofObjectAt:)`.
    public struct Member {
        public let key: String
        /// The key's string token, quotes included.
        public let keyRange: Range<Int>
        /// The value, from its first byte to one past its last.
        public let value: Range<Int>
    }

    /// The first byte at or after `start` that is not whitespace.
    public func skipWhitespace(_ start: Int) -> Int {
        var index = start
        while index < bytes.count, bytes[index] == 0x20 || bytes[index] == 0x09 || bytes[index] == 0x0A || bytes[index] == 0x0D {
            index += 1
        }
        return index
    }

    /// The byte range of the first value in the text (leading whitespace skipped), if complete.
    public func firstValue() -> Range<Int>? {
        let start = skipWhitespace(0)
        guard let end = valueEnd(start) else { return nil }
        return start..<end
    }

    /// Where the top-level object starts (leading whitespace skipped), complete or not.
    public func rootObject() -> Int? {
        let start = skipWhitespace(0)
        return start < bytes.count && bytes[start] == UInt8(ascii: "{") ? start : nil
    }

    /// One past the string token whose opening quote is at `start`, or nil when unterminated.
    public func stringEnd(_ start: Int) -> Int? {
        guard start < bytes.count, bytes[start] == UInt8(ascii: "\"") else { return nil }
        var index = start + 1
        while index < bytes.count {
            switch bytes[index] {
            case UInt8(ascii: "\""): return index + 1
            case UInt8(ascii: "\\"): index += 2
            default: index += 1
            }
        }
        return nil
    }

    /// One past the value starting at `start`, or nil when it is malformed, cut short or nested
    /// deeper than `depthMax`. Objects and arrays are skipped by counting brackets outside strings.
    public func valueEnd(_ start: Int) -> Int? {
        guard start < bytes.count else { return nil }
        switch bytes[start] {
        case UInt8(ascii: "\""):
            return stringEnd(start)
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            var depth = 0
            var index = start
            while index < bytes.count {
                switch bytes[index] {
                case UInt8(ascii: "\""):
                    guard let end = stringEnd(index) else { return nil }
                    index = end
                    continue
                case UInt8(ascii: "{"), UInt8(ascii: "["):
                    depth += 1
                    if depth > depthMax { return nil }
                case UInt8(ascii: "}"), UInt8(ascii: "]"):
                    depth -= 1
                    if depth == 0 { return index + 1 }
                default:
                    break
                }
                index += 1
            }
            return nil
        default:
            // A number or literal: up to the next delimiter.
            var index = start
            while index < bytes.count {
                switch bytes[index] {
                case UInt8(ascii: ","), UInt8(ascii: "}"), UInt8(ascii: "]"), UInt8(ascii: ":"), UInt8(ascii: "{"), UInt8(ascii: "["),
                     UInt8(ascii: "\""), 0x20, 0x09, 0x0A, 0x0D:
                    return index > start ? index : nil
                default:
                    index += 1
                }
            }
            return index > start ? index : nil
        }
    }

    /// The members of the object whose `{` is at `start`, up to the first damage and at most
    /// `limit`; empty when `start` is not an object. A member whose value is an object or array
    /// cut short by the end of the text is kept, ending there (its own complete members can still
    /// be read); a cut string, number or literal is not.
    public func members(ofObjectAt start: Int, limit: Int = membersMax) -> [Member] {
        var members: [Member] = []
        guard start < bytes.count, bytes[start] == UInt8(ascii: "{") else { return members }
        var index = skipWhitespace(start + 1)
        while index < bytes.count, bytes[index] == UInt8(ascii: "\""), members.count < limit {
            guard let keyEnd = stringEnd(index) else { break }
            let colon = skipWhitespace(keyEnd)
            guard colon < bytes.count, bytes[colon] == UInt8(ascii: ":") else { break }
            let valueStart = skipWhitespace(colon + 1)
            let end = valueEnd(valueStart) ?? (isContainer(valueStart) ? bytes.count : nil)
            guard let valueEnd = end else { break }
            members.append(Member(key: string(index..<keyEnd, bytesMax: Self.keyBytesMax) ?? "", keyRange: index..<keyEnd, value: valueStart..<valueEnd))
            let next = skipWhitespace(valueEnd)
            guard next < bytes.count, bytes[next] == UInt8(ascii: ",") else { break }
            index = skipWhitespace(next + 1)
        }
        return members
    }

    /// The value of the first member named `key` of the object whose `{` is at `start`.
    public func member(_ key: String, ofObjectAt start: Int) -> Range<Int>? {
        members(ofObjectAt: start).first { $0.key == key }?.value
    }

    private func isContainer(_ index: Int) -> Bool {
        index < bytes.count && (bytes[index] == UInt8(ascii: "{") || bytes[index] == UInt8(ascii: "["))
    }

    /// The elements of the array whose `[` is at `start`, up to the first damage and at most
    /// `elementsMax`; empty when `start` is not an array. A cut object or array is kept as for
    /// `members`.
    public func elements(ofArrayAt start: Int) -> [Range<Int>] {
        var elements: [Range<Int>] = []
        guard start < bytes.count, bytes[start] == UInt8(ascii: "[") else { return elements }
        var index = skipWhitespace(start + 1)
        while index < bytes.count, bytes[index] != UInt8(ascii: "]"), elements.count < Self.elementsMax {
            guard let end = valueEnd(index) ?? (isContainer(index) ? bytes.count : nil) else { break }
            elements.append(index..<end)
            let next = skipWhitespace(end)
            guard next < bytes.count, bytes[next] == UInt8(ascii: ",") else { break }
            index = skipWhitespace(next + 1)
        }
        return elements
    }

    /// The string token at `range` decoded, at most `bytesMax` UTF-8 bytes (cut on a scalar
    /// boundary), with C0/C1 control characters turned into spaces and ill-formed UTF-8 into
    /// U+FFFD; nil when `range` is not a string, or its escapes are invalid.
    public func string(_ range: Range<Int>, bytesMax: Int) -> String? {
        guard range.count >= 2, bytes[range.lowerBound] == UInt8(ascii: "\""), bytes[range.upperBound - 1] == UInt8(ascii: "\"") else {
            return nil
        }
        let content = (range.lowerBound + 1)..<(range.upperBound - 1)
        let decoded: String
        if !bytes[content].contains(UInt8(ascii: "\\")) {
            // No escapes (nearly every string FCM sends): the bytes are the text.
            decoded = String(decoding: bytes[content.lowerBound..<min(content.upperBound, content.lowerBound + bytesMax + 4)], as: UTF8.self)
        } else {
            // Escapes: a string token is a JSON document of its own, so `parse` decodes it (an
            // unpaired surrogate or a bad escape makes it nil).
            guard case .success(.string(let text)) = JSONScanner.parse(UnsafeBufferPointer(rebasing: bytes[range])) else { return nil }
            decoded = text
        }
        var result = String.UnicodeScalarView()
        var used = 0
        for scalar in decoded.unicodeScalars {
            let kept: Unicode.Scalar = scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) ? " " : scalar
            let width = UTF8.width(kept)
            if used + width > bytesMax { break }
            used += width
            result.append(kept)
        }
        return String(result)
    }

    /// ASCII letters, digits and `_`: the bytes of identifiers and of plain JSON-path keys.
    public static func isWordByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "_"):
            return true
        default:
            return false
        }
    }
}
