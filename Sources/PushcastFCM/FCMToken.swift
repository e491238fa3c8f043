// FCM registration tokens (docs/PROTOCOL.md §2.1, §2.4). Unlike APNs device tokens they are opaque,
// case-sensitive strings of no documented alphabet or length (typically ~150-200 characters of
// `[A-Za-z0-9_:-]`), so normalisation only trims the surrounding ASCII whitespace a CSV or NDJSON
// field may carry and changes nothing else: never the APNs hex rules (lower-casing would break
// every token). The checks keep out what cannot be a token and would otherwise corrupt the
// request body or the results file: whitespace and control characters inside, `"` and `\`
// (they need JSON escaping), non-ASCII bytes, and more than 4096 bytes (the request-body bound).

/// Why a token field is not a usable FCM token. The row is `invalid` and is never sent.
public enum FCMTokenError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Nothing left after trimming whitespace.
    case empty
    /// More than `FCMToken.bytesMax` bytes after trimming.
    case tooLong(bytes: Int)
    /// A space, tab, line break or other control character (0x00-0x1F, 0x7F) inside the token,
    /// at this 1-based byte position of the raw field.
    case whitespaceOrControl(position: Int)
    /// A `"` or `\` at this 1-based byte position of the raw field.
    case quoteOrBackslash(position: Int)
    /// A byte of 0x80 or above at this 1-based byte position of the raw field.
    case nonASCII(position: Int)

    public var description: String {
        switch self {
        case .empty: return "empty FCM token"
        case .tooLong(let bytes): return "FCM token too long (\(bytes) bytes, at most \(FCMToken.bytesMax))"
        case .whitespaceOrControl(let position): return "FCM token has whitespace or a control character at position \(position)"
        case .quoteOrBackslash(let position): return "FCM token has a quote or backslash at position \(position)"
        case .nonASCII(let position): return "FCM token has a non-ASCII byte at position \(position)"
        }
    }
}

public enum FCMToken {
    /// The longest token accepted, in bytes.
    public static let bytesMax = 4096

    /// Trims surrounding ASCII whitespace (space, tab, CR, LF, VT, FF) and checks what is left;
    /// the token is returned byte for byte otherwise. One pass over the field.
    public static func normalize(_ raw: UnsafeRawBufferPointer) throws(FCMTokenError) -> String {
        String(decoding: UnsafeRawBufferPointer(rebasing: raw[try trimmedRange(raw)]), as: UTF8.self)
    }

    /// The same, into `output` (emptied first): no allocation once the buffer has grown.
    public static func normalize(_ raw: UnsafeRawBufferPointer, into output: inout [UInt8]) throws(FCMTokenError) {
        let range = try trimmedRange(raw)
        output.removeAll(keepingCapacity: true)
        output.append(contentsOf: UnsafeRawBufferPointer(rebasing: raw[range]))
    }

    /// The token's bytes within the field, checked.
    static func trimmedRange(_ raw: UnsafeRawBufferPointer) throws(FCMTokenError) -> Range<Int> {
        var start = 0, end = raw.count
        while start < end && isASCIIWhitespace(raw[start]) { start += 1 }
        while end > start && isASCIIWhitespace(raw[end - 1]) { end -= 1 }
        if start == end { throw .empty }
        if end - start > bytesMax { throw .tooLong(bytes: end - start) }
        for index in start..<end {
            let byte = raw[index]
            if byte <= 0x20 || byte == 0x7F { throw .whitespaceOrControl(position: index + 1) }
            if byte >= 0x80 { throw .nonASCII(position: index + 1) }
            if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") { throw .quoteOrBackslash(position: index + 1) }
        }
        return start..<end
    }

    /// The same, over a `String` (tests and tools; readers pass the field's bytes).
    public static func normalize(_ raw: String) throws(FCMTokenError) -> String {
        var raw = raw
        let result = raw.withUTF8 { bytes in
            Result { () throws(FCMTokenError) in try normalize(UnsafeRawBufferPointer(bytes)) }
        }
        return try result.get()
    }

    @inline(__always)
    static func isASCIIWhitespace(_ byte: UInt8) -> Bool {
        byte == 0x20 || (byte >= 0x09 && byte <= 0x0D)
    }
}
