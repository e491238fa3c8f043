// Byte-level helpers shared by the readers: a word-at-a-time byte search, an ASCII check and a
// UTF-8 validator. They read 8 bytes at a time with unaligned loads and fall back to single bytes
// at the tail.

@inline(__always)
func loadWord(_ p: UnsafePointer<UInt8>) -> UInt64 {
    UInt64(littleEndian: UnsafeRawPointer(p).loadUnaligned(as: UInt64.self))
}

private let lowBits: UInt64 = 0x0101_0101_0101_0101
private let highBits: UInt64 = 0x8080_8080_8080_8080

/// The high bit of each byte of `word` that equals `byte` is set, plus possibly spurious bits
/// above the first real match (the classic "has zero byte" trick), so the lowest set bit is exact.
@inline(__always)
func matchBits(_ word: UInt64, _ byte: UInt8) -> UInt64 {
    let x = word ^ (lowBits &* UInt64(byte))
    return (x &- lowBits) & ~x & highBits
}

/// The index of the first `byte` in `p[from..<to]`, or nil (memchr).
func firstIndex(of byte: UInt8, in p: UnsafePointer<UInt8>, from: Int, to end: Int) -> Int? {
    var i = from
    while i + 8 <= end {
        let bits = matchBits(loadWord(p + i), byte)
        if bits != 0 { return i + bits.trailingZeroBitCount / 8 }
        i += 8
    }
    while i < end {
        if p[i] == byte { return i }
        i += 1
    }
    return nil
}

/// True when every byte of `p[0..<count]` is below 0x80.
func isASCII(_ p: UnsafePointer<UInt8>, count: Int) -> Bool {
    var i = 0
    var any: UInt64 = 0
    while i + 8 <= count {
        any |= loadWord(p + i)
        i += 8
    }
    while i < count {
        any |= UInt64(p[i])
        i += 1
    }
    return any & highBits == 0
}

@inline(__always)
private func isContinuation(_ b: UInt8) -> Bool { b & 0xC0 == 0x80 }

/// The offset of the first byte that starts an invalid UTF-8 sequence in `p[0..<count]` (overlong
/// forms, surrogates, values above U+10FFFF and truncated sequences are invalid), or nil when all of
/// it is valid.
func firstInvalidUTF8(_ p: UnsafePointer<UInt8>, count: Int) -> Int? {
    var i = 0
    while i < count {
        if i + 8 <= count && loadWord(p + i) & highBits == 0 {
            i += 8
            continue
        }
        let b = p[i]
        if b < 0x80 {
            i += 1
            continue
        }
        if b < 0xC2 { return i }
        if b < 0xE0 {
            guard i + 1 < count, isContinuation(p[i + 1]) else { return i }
            i += 2
            continue
        }
        if b < 0xF0 {
            guard i + 2 < count else { return i }
            let b1 = p[i + 1]
            let low: UInt8 = b == 0xE0 ? 0xA0 : 0x80
            let high: UInt8 = b == 0xED ? 0x9F : 0xBF
            guard b1 >= low && b1 <= high, isContinuation(p[i + 2]) else { return i }
            i += 3
            continue
        }
        if b < 0xF5 {
            guard i + 3 < count else { return i }
            let b1 = p[i + 1]
            let low: UInt8 = b == 0xF0 ? 0x90 : 0x80
            let high: UInt8 = b == 0xF4 ? 0x8F : 0xBF
            guard b1 >= low && b1 <= high, isContinuation(p[i + 2]), isContinuation(p[i + 3]) else { return i }
            i += 4
            continue
        }
        return i
    }
    return nil
}

/// The high bit of each byte of `word` below `limit` (at most 0x80) is set, plus possibly spurious
/// bits above the first real one, so the lowest set bit is exact.
@inline(__always)
func lessThanBits(_ word: UInt64, _ limit: UInt8) -> UInt64 {
    (word &- lowBits &* UInt64(limit)) & ~word & highBits
}

/// The index of the first byte in `p[from..<to]` equal to `a`, `b` or `c`, or `to` when none is.
@inline(__always)
func firstIndex(of a: UInt8, _ b: UInt8, _ c: UInt8, in p: UnsafePointer<UInt8>, from: Int, to end: Int) -> Int {
    var i = from
    while i + 8 <= end {
        let word = loadWord(p + i)
        let bits = matchBits(word, a) | matchBits(word, b) | matchBits(word, c)
        if bits != 0 { return i + bits.trailingZeroBitCount / 8 }
        i += 8
    }
    while i < end {
        let x = p[i]
        if x == a || x == b || x == c { return i }
        i += 1
    }
    return end
}

/// The index of the first byte in `p[from..<to]` equal to `a`, `b`, `c` or `d`, or `to` when none is.
@inline(__always)
func firstIndex(of a: UInt8, _ b: UInt8, _ c: UInt8, _ d: UInt8, in p: UnsafePointer<UInt8>,
                from: Int, to end: Int) -> Int {
    var i = from
    while i + 8 <= end {
        let word = loadWord(p + i)
        let bits = matchBits(word, a) | matchBits(word, b) | matchBits(word, c) | matchBits(word, d)
        if bits != 0 { return i + bits.trailingZeroBitCount / 8 }
        i += 8
    }
    while i < end {
        let x = p[i]
        if x == a || x == b || x == c || x == d { return i }
        i += 1
    }
    return end
}

/// The index of the first `"`, `\` or control byte (below 0x20) in `p[from..<to]`, or `to`.
@inline(__always)
func firstJSONStringSpecial(in p: UnsafePointer<UInt8>, from: Int, to end: Int) -> Int {
    var i = from
    while i + 8 <= end {
        let word = loadWord(p + i)
        let bits = matchBits(word, UInt8(ascii: "\"")) | matchBits(word, UInt8(ascii: "\\")) | lessThanBits(word, 0x20)
        if bits != 0 { return i + bits.trailingZeroBitCount / 8 }
        i += 8
    }
    while i < end {
        let x = p[i]
        if x == UInt8(ascii: "\"") || x == UInt8(ascii: "\\") || x < 0x20 { return i }
        i += 1
    }
    return end
}
