// PushcastEngine: turns rows into notifications and responses into outcomes. The reader side
// (RowPreparer) and the per-worker APNsWorkload are sans-I/O; CampaignRun wires them to threads,
// files and the transport.

/// Remembers every token of a run, to send each once. Open addressing over two flat arrays (a
/// 64-bit hash and the first row's number): 12 bytes a slot, sized at start-up from the line count
/// so that it never rehashes on a file; stdin grows it by doubling.
///
/// A class, not a struct: the run and the plan that built it share one table. As a struct, the
/// first insert after a copy duplicated the whole table (copy-on-write): twice the memory.
///
/// Two different tokens are treated as one only if their 64-bit hashes collide
/// entirely (about n²/2⁶⁵: 3 × 10⁻⁶ for ten million rows).
public final class DuplicateIndex {
    private var hashes: [UInt64]
    private var rows: [UInt32]
    private var mask: Int
    public private(set) var count = 0

    /// - Parameter expected: how many tokens to plan for (the input's line count).
    public init(expected: Int) {
        var capacity = 1024
        while capacity * 3 < max(expected, 1) * 4 { capacity <<= 1 }  // load factor ≤ 0.75
        hashes = [UInt64](repeating: 0, count: capacity)
        rows = [UInt32](repeating: 0, count: capacity)
        mask = capacity - 1
    }

    public var capacity: Int { hashes.count }

    /// Records `token` as seen on `row`. Returns nil the first time, else the first row's number.
    public func insert(_ token: UnsafeRawBufferPointer, row: Int) -> Int? {
        if (count + 1) * 4 > hashes.count * 3 { grow() }
        let h = Self.hash(token)
        var i = Int(truncatingIfNeeded: h ^ (h >> 29)) & mask
        while true {
            let slot = hashes[i]
            if slot == 0 {
                hashes[i] = h
                rows[i] = UInt32(truncatingIfNeeded: row)
                count += 1
                return nil
            }
            if slot == h { return Int(rows[i]) }
            i = (i + 1) & mask
        }
    }

    private func grow() {
        let oldHashes = hashes, oldRows = rows
        let capacity = hashes.count * 2
        hashes = [UInt64](repeating: 0, count: capacity)
        rows = [UInt32](repeating: 0, count: capacity)
        mask = capacity - 1
        for (j, h) in oldHashes.enumerated() where h != 0 {
            var i = Int(truncatingIfNeeded: h ^ (h >> 29)) & mask
            while hashes[i] != 0 { i = (i + 1) & mask }
            hashes[i] = h
            rows[i] = oldRows[j]
        }
    }

    /// 64-bit hash of the bytes, eight at a time (a multiply-xorshift mix per word, with a final
    /// avalanche); never 0, which marks an empty slot.
    /// Another `seed` gives another hash of the same bytes.
    static func hash(_ bytes: UnsafeRawBufferPointer, seed: UInt64 = 0xcbf2_9ce4_8422_2325) -> UInt64 {
        var h: UInt64 = seed ^ UInt64(bytes.count)
        var offset = 0
        while offset + 8 <= bytes.count {
            let word = bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
            h = (h ^ word) &* 0x9E37_79B9_7F4A_7C15
            h ^= h >> 32
            offset += 8
        }
        var tail: UInt64 = 0
        var shift: UInt64 = 0
        while offset < bytes.count {
            tail |= UInt64(bytes[offset]) << shift
            shift += 8
            offset += 1
        }
        h = (h ^ tail) &* 0x9E37_79B9_7F4A_7C15
        h ^= h >> 33
        h &*= 0xff51_afd7_ed55_8ccd
        h ^= h >> 33
        h &*= 0xc4ce_b9fe_1a85_ec53
        h ^= h >> 33
        return h == 0 ? 1 : h
    }
}
