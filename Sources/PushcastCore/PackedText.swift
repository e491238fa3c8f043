import Glibc

/// A short text that usually has one of two fixed shapes, kept without a heap allocation when it
/// does: 64 lower-case hex digits (an APNs device token) as its 32 bytes, or a canonical
/// lower-case UUID (an apns-id) as its 16. Any other text is kept as a String.
///
/// Why: every row of a campaign carried its token and its apns-id as two Strings, allocated on
/// the reader thread and freed there after its results line, thousands of rows later. Those
/// allocations found the allocator's free lists cold: in perf, the reader's `malloc`, `free` and
/// String building for them came to about 6 % of the client's samples at full rate.
///
/// Equality and hashing are by text: a String of either shape is always packed (`init(_:)`),
/// so one text has one representation.
public struct PackedText: Sendable, Hashable, CustomStringConvertible {
    @usableFromInline
    enum Storage: Sendable, Hashable {
        case text(String)
        case hex32(UInt64, UInt64, UInt64, UInt64)
        case uuid(UInt64, UInt64)
    }

    @usableFromInline
    var storage: Storage

    /// The empty text.
    public static let empty = PackedText(storage: .text(""))

    @inlinable
    init(storage: Storage) { self.storage = storage }

    /// Packs `text` when it has one of the two shapes; keeps it as it is otherwise.
    public init(_ text: String) {
        var copy = text
        let packed: Storage? = copy.withUTF8 { Self.pack(UnsafeRawBufferPointer($0)) }
        storage = packed ?? .text(text)
    }

    /// The text of `utf8` (valid UTF-8), packed when it has one of the two shapes.
    public init(utf8: UnsafeRawBufferPointer) {
        storage = Self.pack(utf8) ?? .text(String(decoding: utf8, as: UTF8.self))
    }

    /// The UUID of these 16 bytes (first byte first), formatted lower-case 8-4-4-4-12.
    public init(uuidBytes high: UInt64, _ low: UInt64) {
        storage = .uuid(high, low)
    }

    /// Whether the text is kept packed (no String behind it).
    public var isPacked: Bool {
        if case .text = storage { return false }
        return true
    }

    public var utf8Count: Int {
        switch storage {
        case .text(let text): return text.utf8.count
        case .hex32: return 64
        case .uuid: return 36
        }
    }

    public var isEmpty: Bool { utf8Count == 0 }

    /// The text as a String (a new one for a packed text).
    public var string: String {
        switch storage {
        case .text(let text): return text
        default: return withUTF8 { String(decoding: $0, as: UTF8.self) }
        }
    }

    public var description: String { string }

    /// Calls `body` with the text's UTF-8 bytes: a packed text is formatted on the stack.
    @inlinable
    public func withUTF8<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        switch storage {
        case .text(var text):
            return try text.withUTF8 { try body(UnsafeRawBufferPointer($0)) }
        case .hex32(let a, let b, let c, let d):
            return try withUnsafeTemporaryAllocation(byteCount: 64, alignment: 8) { out in
                Self.formatHex(a, into: out.baseAddress!)
                Self.formatHex(b, into: out.baseAddress! + 16)
                Self.formatHex(c, into: out.baseAddress! + 32)
                Self.formatHex(d, into: out.baseAddress! + 48)
                return try body(UnsafeRawBufferPointer(out))
            }
        case .uuid(let high, let low):
            return try withUnsafeTemporaryAllocation(byteCount: 36, alignment: 8) { out in
                Self.formatUUID(high, low, into: out.baseAddress!)
                return try body(UnsafeRawBufferPointer(out))
            }
        }
    }

    /// Whether the text equals `utf8`, compared without building a String.
    public func equals(utf8 other: UnsafeRawBufferPointer) -> Bool {
        withUTF8 { mine in mine.count == other.count && (mine.count == 0 || memcmp(mine.baseAddress!, other.baseAddress!, mine.count) == 0) }
    }

    // MARK: - Packing

    @usableFromInline
    static func pack(_ utf8: UnsafeRawBufferPointer) -> Storage? {
        if utf8.count == 64 {
            guard let a = hexWord(utf8, at: 0), let b = hexWord(utf8, at: 16), let c = hexWord(utf8, at: 32),
                  let d = hexWord(utf8, at: 48) else { return nil }
            return .hex32(a, b, c, d)
        }
        if utf8.count == 36 {
            let dash = UInt8(ascii: "-")
            guard utf8[8] == dash, utf8[13] == dash, utf8[18] == dash, utf8[23] == dash else { return nil }
            // 8-4-4-4-12: the first word is the first 8 digits and the next two groups of 4;
            // the second, the last group of 4 and the 12.
            var digits = (UInt64(0), UInt64(0), UInt64(0), UInt64(0))
            withUnsafeMutableBytes(of: &digits) { raw in
                let out = raw.baseAddress!
                out.copyMemory(from: utf8.baseAddress!, byteCount: 8)
                (out + 8).copyMemory(from: utf8.baseAddress! + 9, byteCount: 4)
                (out + 12).copyMemory(from: utf8.baseAddress! + 14, byteCount: 4)
                (out + 16).copyMemory(from: utf8.baseAddress! + 19, byteCount: 4)
                (out + 20).copyMemory(from: utf8.baseAddress! + 24, byteCount: 12)
            }
            return withUnsafeBytes(of: &digits) { raw -> Storage? in
                guard let high = hexWord(raw, at: 0), let low = hexWord(raw, at: 16) else { return nil }
                return .uuid(high, low)
            }
        }
        return nil
    }

    /// The 8 bytes of the 16 hex digits at `offset` (first digit in the high nibble of the word's
    /// top byte), or nil when one is not a lower-case hex digit.
    @usableFromInline
    static func hexWord(_ utf8: UnsafeRawBufferPointer, at offset: Int) -> UInt64? {
        guard let high = hexHalf(utf8.loadUnaligned(fromByteOffset: offset, as: UInt64.self)),
              let low = hexHalf(utf8.loadUnaligned(fromByteOffset: offset + 8, as: UInt64.self)) else { return nil }
        return high << 32 | low
    }

    /// 8 ASCII lower-case hex digits (loaded little-endian: the first digit in the lowest byte)
    /// as a 32-bit value, first digit most significant; nil when one is not such a digit.
    @usableFromInline
    static func hexHalf(_ x: UInt64) -> UInt64? {
        let high: UInt64 = 0x8080_8080_8080_8080
        func each(_ byte: UInt64) -> UInt64 { 0x0101_0101_0101_0101 &* byte }
        guard x & high == 0 else { return nil }
        // Per byte, with every byte below 0x80 no subtraction borrows across bytes: the top bit
        // of ((x | 0x80) - c) says x >= c, that of ((c | 0x80) - x) says c >= x.
        let isDigit = ((x | high) &- each(0x30)) & ((each(0x39) | high) &- x)
        let isLetter = ((x | high) &- each(0x61)) & ((each(0x66) | high) &- x)
        guard (isDigit | isLetter) & high == high else { return nil }
        // "0"..."9" are 0x30...0x39, "a"..."f" 0x61...0x66: the low nibble, plus 9 for letters.
        var y = ((x & each(0x0F)) &+ ((x >> 6) & each(0x01)) &* 9).byteSwapped
        y = (y | y >> 4) & 0x00FF_00FF_00FF_00FF
        y = (y | y >> 8) & 0x0000_FFFF_0000_FFFF
        y = (y | y >> 16) & 0x0000_0000_FFFF_FFFF
        return y
    }

    // MARK: - Formatting

    /// Writes the 16 lower-case hex digits of `value`, most significant first.
    @inlinable
    static func formatHex(_ value: UInt64, into out: UnsafeMutableRawPointer) {
        out.storeBytes(of: hexDigits(UInt32(truncatingIfNeeded: value >> 32)).littleEndian, as: UInt64.self)
        (out + 8).storeBytes(of: hexDigits(UInt32(truncatingIfNeeded: value)).littleEndian, as: UInt64.self)
    }

    /// The 8 hex digits of `value` as ASCII in a word whose lowest byte is the first digit.
    @inlinable
    static func hexDigits(_ value: UInt32) -> UInt64 {
        // One nibble per byte, the most significant nibble in the lowest byte.
        var x = UInt64(value)
        x = (x | x << 16) & 0x0000_FFFF_0000_FFFF
        x = (x | x << 8) & 0x00FF_00FF_00FF_00FF
        x = (x | x << 4) & 0x0F0F_0F0F_0F0F_0F0F
        x = x.byteSwapped
        // 0...9 to "0"..."9", 10...15 to "a"..."f".
        let letters = ((x &+ 0x0606_0606_0606_0606) >> 4) & 0x0101_0101_0101_0101
        return x &+ 0x3030_3030_3030_3030 &+ letters &* 39
    }

    @inlinable
    static func formatUUID(_ high: UInt64, _ low: UInt64, into out: UnsafeMutableRawPointer) {
        let dash = UInt8(ascii: "-")
        // 8 digits, then 4 and 4 from the same word.
        out.storeBytes(of: hexDigits(UInt32(truncatingIfNeeded: high >> 32)).littleEndian, as: UInt64.self)
        let second = hexDigits(UInt32(truncatingIfNeeded: high)).littleEndian
        out.storeBytes(of: dash, toByteOffset: 8, as: UInt8.self)
        (out + 9).storeBytes(of: UInt32(truncatingIfNeeded: second), as: UInt32.self)
        out.storeBytes(of: dash, toByteOffset: 13, as: UInt8.self)
        (out + 14).storeBytes(of: UInt32(truncatingIfNeeded: second >> 32), as: UInt32.self)
        let third = hexDigits(UInt32(truncatingIfNeeded: low >> 32)).littleEndian
        out.storeBytes(of: dash, toByteOffset: 18, as: UInt8.self)
        (out + 19).storeBytes(of: UInt32(truncatingIfNeeded: third), as: UInt32.self)
        out.storeBytes(of: dash, toByteOffset: 23, as: UInt8.self)
        (out + 24).storeBytes(of: UInt32(truncatingIfNeeded: third >> 32), as: UInt32.self)
        (out + 28).storeBytes(of: hexDigits(UInt32(truncatingIfNeeded: low)).littleEndian, as: UInt64.self)
    }
}
