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
        let result = raw.withUTF8 { bytes in
            Result { () throws(APNsTokenProblem) in try normalize(UnsafeRawBufferPointer(bytes)) }
        }
        return try result.get()
    }

    /// The same, over the raw bytes of a field (for example a slice of a CSV reader's buffer).
    public static func normalize(_ raw: UnsafeRawBufferPointer) throws(APNsTokenProblem) -> APNsDeviceToken {
        let skipped = try skippedBytes(raw)
        let digits = raw.count - skipped
        // Pass 2: copy, lower-casing.
        let hex = String(unsafeUninitializedCapacity: digits) { output in copyLowered(raw, skipped: skipped, into: output) }
        return APNsDeviceToken(uncheckedHex: hex)
    }

    /// The same, into `output` (emptied first) instead of a new String: no allocation once the
    /// buffer has grown, for the reader side's per-row work.
    public static func normalize(_ raw: UnsafeRawBufferPointer, into output: inout [UInt8]) throws(APNsTokenProblem) {
        let skipped = try skippedBytes(raw)
        output.removeAll(keepingCapacity: true)
        // The field's bytes in one copy, then the digits moved down over what is skipped and
        // lower-cased in place (`copyLowered` reads each byte before it writes at or below it).
        output.append(contentsOf: raw)
        let digits = output.withUnsafeMutableBufferPointer { copyLowered(UnsafeRawBufferPointer($0), skipped: skipped, into: $0) }
        output.removeLast(output.count - digits)
    }

    /// Checks the token's shape (pass 1) and says how many bytes (spaces, `<`, `>`) it skips.
    static func skippedBytes(_ raw: UnsafeRawBufferPointer) throws(APNsTokenProblem) -> Int {
        var skipped = 0
        var bad = 0
        if !allHexDigits(raw) {
            // Slow path (spaces, brackets or junk): count per byte, branch-free.
            for byte in raw {
                let skip = (byte == 0x20) || (byte == UInt8(ascii: "<")) || (byte == UInt8(ascii: ">"))
                let hex = (byte &- 0x30 < 10) || ((byte | 0x20) &- 0x61 < 6)
                skipped &+= skip ? 1 : 0
                bad &+= (hex || skip) ? 0 : 1
            }
        }
        if bad > 0 {
            let index = raw.firstIndex { !isHexDigit($0) && $0 != 0x20 && $0 != UInt8(ascii: "<") && $0 != UInt8(ascii: ">") }!
            throw .notHex(position: index + 1)
        }
        let digits = raw.count - skipped
        if digits == 0 { throw .empty }
        if digits & 1 == 1 { throw .oddLength(digits: digits) }
        if digits < digitsMin { throw .tooShort(digits: digits) }
        if digits > digitsMax { throw .tooLong(digits: digits) }
        return skipped
    }

    /// Copies the digits, lower-cased with one OR (A-F → a-f; digits already have bit 5 set), into
    /// `output` (room for them all); returns how many.
    @inline(__always)
    static func copyLowered(_ raw: UnsafeRawBufferPointer, skipped: Int, into output: UnsafeMutableBufferPointer<UInt8>) -> Int {
        let digits = raw.count - skipped
        if skipped == 0 {
            var index = 0
            while index + 8 <= digits {
                let word = raw.loadUnaligned(fromByteOffset: index, as: UInt64.self) | 0x2020_2020_2020_2020
                UnsafeMutableRawBufferPointer(output).storeBytes(of: word, toByteOffset: index, as: UInt64.self)
                index += 8
            }
            while index < digits { output[index] = raw[index] | 0x20; index += 1 }
            return digits
        }
        var written = 0
        for byte in raw where byte != 0x20 && byte != UInt8(ascii: "<") && byte != UInt8(ascii: ">") {
            output[written] = byte | 0x20
            written += 1
        }
        return written
    }

    /// Wraps text already known to be a normalised token.
    init(uncheckedHex: String) { hex = uncheckedHex }

    /// Whether every byte is 0-9, A-F or a-f, eight bytes at a time (SWAR). With every byte
    /// below 0x80, adding 0x80 − c to a byte sets its top bit exactly when the byte is ≥ c, and
    /// no carry crosses into the next byte.
    @inline(__always)
    static func allHexDigits(_ raw: UnsafeRawBufferPointer) -> Bool {
        let high: UInt64 = 0x8080_8080_8080_8080
        @inline(__always) func atLeast(_ word: UInt64, _ c: UInt64) -> UInt64 { word &+ (0x80 - c) &* 0x0101_0101_0101_0101 }
        @inline(__always) func wordIsHex(_ word: UInt64) -> Bool {
            guard word & high == 0 else { return false }
            let lower = word | 0x2020_2020_2020_2020
            let digit = atLeast(word, 0x30) & ~atLeast(word, 0x3A)
            let letter = atLeast(lower, 0x61) & ~atLeast(lower, 0x67)
            return (digit | letter) & high == high
        }
        var index = 0
        while index + 8 <= raw.count {
            if !wordIsHex(raw.loadUnaligned(fromByteOffset: index, as: UInt64.self)) { return false }
            index += 8
        }
        while index < raw.count {
            if !isHexDigit(raw[index]) { return false }
            index += 1
        }
        return true
    }

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
