import PushcastCore
import PushcastInput

/// Every repeated token of a re-readable input, found before the send starts, with memory that
/// does not grow with the file (a constant few MiB for any row count):
///
/// 1. a first read writes one 16-byte record per valid row (a 64-bit hash of the provider and the
///    normalised token, 32 more bits of a second hash, the row) into hash partitions on disk;
/// 2. each partition (about 64 Ki records, in row order) goes through an open-addressing table in
///    memory: a record whose hashes are already there repeats that first row; those (row, first
///    row) pairs go to a second scratch file, one segment per partition, in row order;
/// 3. during the send, each reader walks the segments in row order (a k-way merge), so deciding
///    a row costs a heap comparison and no lookup.
///
/// Two tokens are taken for one only if 96 bits of hash collide. Scratch files are unlinked at
/// creation: 16 bytes a row while planning, 8 bytes a repeat afterwards.
public final class DuplicatePlan: @unchecked Sendable {
    private let repeats: any ScratchStorage
    private let segments: [(offset: Int, count: Int)]
    /// Data rows the first read saw (valid or not): the run's total.
    public let rows: Int
    public let duplicateCount: Int

    static let recordsPerPartition = 1 << 16

    /// Reads `reader` to its end. `hashes` gives a row's key hashes, nil for rows that are never
    /// sent (invalid, unroutable); it must decide exactly as the send will. `malformed` hears the
    /// row number of each malformed record (a shard counts the ones it owns).
    public static func build(reader: inout some RowSource, expectedRows: Int, files: any FileStorage, directory: String,
                             malformed: (Int) throws -> Void = { _ in },
                             hashes: (RowView) throws -> (UInt64, UInt32)?) throws -> DuplicatePlan {
        let partitionCount = max(1, min(1024, expectedRows / recordsPerPartition + 1))
        let spill = try files.makeScratch(in: directory)
        // Partitions are written through small buffers, then laid out in the spill file as chunks.
        let chunkRecords = 512
        var buffers = [[UInt64]](repeating: [], count: partitionCount)
        for index in buffers.indices { buffers[index].reserveCapacity(chunkRecords * 2) }
        var chunks = [[Int]](repeating: [], count: partitionCount)  // offsets of each partition's full chunks
        var tails: [Int] = Array(repeating: 0, count: partitionCount)
        var rows = 0
        while let record = try reader.next() {
            rows += 1
            if case .malformed(let row, _) = record { try malformed(row) }
            guard case .row(let view) = record, let (h1, h2) = try hashes(view) else { continue }
            let partition = Int(h1.multipliedFullWidth(by: UInt64(partitionCount)).high)
            buffers[partition].append(h1)
            buffers[partition].append(UInt64(h2) << 32 | UInt64(UInt32(truncatingIfNeeded: view.row)))
            if buffers[partition].count == chunkRecords * 2 {
                chunks[partition].append(spill.size)
                try buffers[partition].withUnsafeBytes { try spill.append($0) }
                buffers[partition].removeAll(keepingCapacity: true)
            }
        }
        for index in 0..<partitionCount { tails[index] = buffers[index].count / 2 }

        // Each partition: its chunks and its tail, in row order; a record whose hashes came before is a repeat.
        let repeats = try files.makeScratch(in: directory)
        var segments: [(offset: Int, count: Int)] = []
        var duplicateCount = 0
        var entries: [UInt64] = []
        var pairs: [UInt64] = []
        var firstRows = FirstRowTable()
        for partition in 0..<partitionCount {
            entries.removeAll(keepingCapacity: true)
            entries.reserveCapacity(chunks[partition].count * chunkRecords * 2 + tails[partition] * 2)
            for offset in chunks[partition] {
                let start = entries.count
                entries.append(contentsOf: repeatElement(0, count: chunkRecords * 2))
                let read = try entries.withUnsafeMutableBytes { all in
                    try spill.read(at: offset, into: UnsafeMutableRawBufferPointer(rebasing: all[(start * 8)...]))
                }
                precondition(read == chunkRecords * 16, "short read of a scratch file")
            }
            entries.append(contentsOf: buffers[partition])
            buffers[partition] = []
            firstRows.group(entries, into: &pairs)
            segments.append((repeats.size, pairs.count))
            duplicateCount += pairs.count
            if !pairs.isEmpty { try pairs.withUnsafeBytes { try repeats.append($0) } }
        }
        return DuplicatePlan(repeats: repeats, segments: segments, rows: rows, duplicateCount: duplicateCount)
    }

    private init(repeats: any ScratchStorage, segments: [(offset: Int, count: Int)], rows: Int, duplicateCount: Int) {
        self.repeats = repeats
        self.segments = segments
        self.rows = rows
        self.duplicateCount = duplicateCount
    }

    /// A reader's walk through the repeats, in row order.
    public func cursor() -> DuplicateCursor { DuplicateCursor(plan: self) }

    fileprivate func read(segment: Int, from index: Int, into buffer: inout [UInt64]) throws -> Int {
        let (offset, count) = segments[segment]
        let n = min(buffer.count, count - index)
        guard n > 0 else { return 0 }
        let read = try buffer.withUnsafeMutableBytes { bytes in
            try repeats.read(at: offset + index * 8, into: UnsafeMutableRawBufferPointer(rebasing: bytes[0..<(n * 8)]))
        }
        precondition(read == n * 8, "short read of a scratch file")
        return n
    }

    fileprivate var segmentCount: Int { segments.count }
}

/// Finds the repeats of one partition in a single pass: an open-addressing table (linear probing,
/// at most half full) of indices into the partition's records, which arrive in row order, so the
/// first record with given hashes is its token's first row and the pairs come out sorted by row.
/// Reused from partition to partition; 4 bytes a slot.
struct FirstRowTable {
    private var slots: [UInt32] = []

    /// `entries` holds (hash, second hash << 32 | row) word pairs in row order; appends to `pairs`
    /// (emptied first) one `row << 32 | first row` for every repeat.
    mutating func group(_ entries: [UInt64], into pairs: inout [UInt64]) {
        pairs.removeAll(keepingCapacity: true)
        let count = entries.count / 2
        var capacity = 16
        while capacity < count * 2 { capacity <<= 1 }
        if slots.count != capacity { slots = Array(repeating: 0, count: capacity) } else { slots.withUnsafeMutableBufferPointer { $0.update(repeating: 0) } }
        let mask = capacity - 1
        entries.withUnsafeBufferPointer { words in
            slots.withUnsafeMutableBufferPointer { table in
                for record in 0..<count {
                    let hash = words[2 * record], tag = words[2 * record + 1]
                    var slot = Int(truncatingIfNeeded: hash) & mask
                    while table[slot] != 0 {
                        let first = Int(table[slot] - 1)
                        if words[2 * first] == hash && words[2 * first + 1] >> 32 == tag >> 32 {
                            pairs.append((tag & 0xFFFF_FFFF) << 32 | (words[2 * first + 1] & 0xFFFF_FFFF))
                            break
                        }
                        slot = (slot + 1) & mask
                    }
                    if table[slot] == 0 { table[slot] = UInt32(record + 1) }
                }
            }
        }
    }
}

/// Walks a `DuplicatePlan`'s repeats in row order: a k-way merge of its sorted segments, each
/// read through a small buffer.
public final class DuplicateCursor {
    private let plan: DuplicatePlan
    private var buffers: [[UInt64]]
    private var positions: [Int]       // within each buffer
    private var filled: [Int]          // entries in each buffer
    private var consumed: [Int]        // entries of each segment read so far
    private var heads: MinHeap<(pair: UInt64, segment: Int)>
    private var failure: Error?

    init(plan: DuplicatePlan) {
        self.plan = plan
        let k = plan.segmentCount
        buffers = Array(repeating: Array(repeating: 0, count: 256), count: k)
        positions = Array(repeating: 0, count: k)
        filled = Array(repeating: 0, count: k)
        consumed = Array(repeating: 0, count: k)
        heads = MinHeap(capacity: k) { $0.pair < $1.pair }
        for segment in 0..<k { advance(segment) }
    }

    private func advance(_ segment: Int) {
        if positions[segment] == filled[segment] {
            do {
                filled[segment] = try plan.read(segment: segment, from: consumed[segment], into: &buffers[segment])
            } catch {
                failure = error
                filled[segment] = 0
            }
            consumed[segment] += filled[segment]
            positions[segment] = 0
            guard filled[segment] > 0 else { return }
        }
        heads.push((buffers[segment][positions[segment]], segment))
        positions[segment] += 1
    }

    /// For rows asked in increasing order: the first row of the token this row repeats, or nil.
    public func firstRow(ofRow row: Int) throws -> Int? {
        if let failure { throw failure }
        let wanted = UInt64(UInt32(truncatingIfNeeded: row))
        while let head = heads.first, head.pair >> 32 < wanted {
            _ = heads.pop()
            advance(head.segment)
        }
        guard let head = heads.first, head.pair >> 32 == wanted else { return nil }
        _ = heads.pop()
        advance(head.segment)
        return Int(head.pair & 0xFFFF_FFFF)
    }
}
