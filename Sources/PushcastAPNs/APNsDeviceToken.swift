// Device tokens as APNs wants them in `:path` (§1.2, §1.7): lower-case hex of the token bytes.
// Apple says tokens are of variable length, so the rule is "even-length hex", bounded to 64...200
// digits (32...100 bytes) as the issue specifies, not "exactly 64".

/// A normalised APNs device token: 64...200 lower-case hex digits, even in number.
public struct APNsDeviceToken: Sendable, Hashable, CustomStringConvertible {
    public static let digitsMin = 64
    public static let digitsMax = 200

    /// The lower-case hex text, as it goes into `:path` and the results file.
    public let hex: String

    public var description: String { hex }

    /// `/3/device/<hex>`, the request's `:path`.
    public var requestPath: String { "/3/device/" + hex }

    /// Strips spaces and the `<` `>` of the old iOS `description` format, lower-cases the hex, and
    /// checks the shape. Reads the input twice at most and allocates only the output.
    public static func normalize(_ raw: String) throws(APNsTokenProblem) -> APNsDeviceToken {
        var raw = raw
        return try raw.withUTF8 { bytes throws(APNsTokenProblem) in try normalize(UnsafeRawBufferPointer(bytes)) }
    }

    /// The same, over the raw bytes of a field (for example a slice of a CSV reader's buffer).
    public static func normalize(_ raw: UnsafeRawBufferPointer) throws(APNsTokenProblem) -> APNsDeviceToken {
        var digits = 0
        for index in 0..<raw.count {
            let byte = raw[index]
            if byte == 0x20 || byte == UInt8(ascii: "<") || byte == UInt8(ascii: ">") { continue }
            guard isHexDigit(byte) else { throw .notHex(position: index + 1) }
            digits += 1
        }
        if digits == 0 { throw .empty }
        if digits & 1 == 1 { throw .oddLength(digits: digits) }
        if digits < digitsMin { throw .tooShort(digits: digits) }
        if digits > digitsMax { throw .tooLong(digits: digits) }
        let hex = String(unsafeUninitializedCapacity: digits) { output in
            var written = 0
            for byte in raw where byte != 0x20 && byte != UInt8(ascii: "<") && byte != UInt8(ascii: ">") {
                output[written] = byte | 0x20  // ASCII A-F → a-f; digits already have the bit set
                written += 1
            }
            return written
        }
        return APNsDeviceToken(uncheckedHex: hex)
    }

    /// Wraps text already known to be a normalised token.
    init(uncheckedHex: String) { hex = uncheckedHex }

    @inline(__always)
    static func isHexDigit(_ byte: UInt8) -> Bool {
        switch byte {
        case 0x30...0x39, 0x41...0x46, 0x61...0x66: return true
        default: return false
        }
    }
}

/// Why a token field is not a usable APNs token. The row is `invalid` and goes to the prune file.
public enum APNsTokenProblem: Error, Sendable, Equatable, CustomStringConvertible {
    /// Nothing left after stripping spaces and `<` `>`.
    case empty
    /// A byte that is not a hex digit, at this 1-based byte position of the raw field.
    case notHex(position: Int)
    case oddLength(digits: Int)
    case tooShort(digits: Int)
    case tooLong(digits: Int)

    public var description: String {
        switch self {
        case .empty: return "empty token"
        case .notHex(let position): return "not hex at position \(position)"
        case .oddLength(let digits): return "odd length (\(digits) digits)"
        case .tooShort(let digits): return "too short (\(digits) digits)"
        case .tooLong(let digits): return "too long (\(digits) digits)"
        }
    }
}
