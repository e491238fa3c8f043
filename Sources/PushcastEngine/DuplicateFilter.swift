/// A Bloom filter over tokens (16 bits a planned row, 7 probes: about 0.05 % false alarms at the
/// planned size). `insert` says whether the token may have been inserted before; "no" is certain.
/// A class for the same reason as `DuplicateIndex`: one filter, however the preparer is copied.
public final class DuplicateFilter {
    private var words: [UInt64]
    private let bitCount: UInt64
    static let probes = 7

    public init(expected: Int) {
        let bits = max(1 << 16, max(expected, 1) * 16)
        let wordCount = (bits + 63) / 64
        words = [UInt64](repeating: 0, count: wordCount)
        bitCount = UInt64(wordCount * 64)
    }

    public var byteCount: Int { words.count * 8 }

    /// Sets the token's bits; returns true when all of them were already set (maybe seen).
    public func insert(_ token: UnsafeRawBufferPointer) -> Bool {
        let h1 = DuplicateIndex.hash(token)
        let h2 = (h1 >> 29 | h1 << 35) &* 0x9E37_79B9_7F4A_7C15 | 1
        var allSet = true
        var h = h1
        for _ in 0..<Self.probes {
            let bit = h.multipliedFullWidth(by: bitCount).high  // h mod bitCount, without a division
            let word = Int(bit >> 6), mask = UInt64(1) << (bit & 63)
            if words[word] & mask == 0 {
                allSet = false
                words[word] |= mask
            }
            h &+= h2
        }
        return allSet
    }
}
