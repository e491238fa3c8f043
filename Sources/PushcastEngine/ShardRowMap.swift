import PushcastCore
import PushcastInput

/// Which rows of a file one shard owns, one bit a row, as the first read decided it: the send's
/// readers then skip another shard's row without looking at its token again (the first read
/// already normalised and hashed it). The bits live in an unlinked scratch file (1.25 MB per 10M
/// rows), written and read through 64 KiB buffers, so memory stays flat.
public final class ShardRowMap: @unchecked Sendable {
    private let bits: any ScratchStorage
    private var pending: [UInt64] = []
    private var word: UInt64 = 0
    /// Rows marked so far (rows are numbered from 1, marked in order).
    public private(set) var rows = 0
    public private(set) var owned = 0
    /// The first read found every record on one line of its own (CSV, no quoted line end, none
    /// too long): the send's readers may then pass over another shard's line unread.
    public var linesAreRows = false
    static let wordsPerBuffer = 8192

    public init(files: any FileStorage, directory: String) throws {
        bits = try files.makeScratch(in: directory)
        pending.reserveCapacity(Self.wordsPerBuffer)
    }

    /// Marks the next row (`row` must be `rows + 1`).
    public func mark(row: Int, owned isOwned: Bool) throws {
        precondition(row == rows + 1, "rows are marked in order")
        if isOwned {
            word |= 1 << UInt64((row - 1) & 63)
            owned += 1
        }
        rows = row
        if row & 63 == 0 {
            pending.append(word)
            word = 0
            if pending.count == Self.wordsPerBuffer { try spill() }
        }
    }

    /// Writes what is buffered; call once every row is marked, before reading.
    public func finish() throws {
        if rows & 63 != 0 { pending.append(word) }
        word = 0
        try spill()
    }

    private func spill() throws {
        guard !pending.isEmpty else { return }
        try pending.withUnsafeBytes { try bits.append($0) }
        pending.removeAll(keepingCapacity: true)
    }

    /// A reader's walk through the bits (rows asked in increasing order).
    public func cursor() -> ShardRowCursor { ShardRowCursor(bits: bits, rows: rows) }
}

/// Reads a `ShardRowMap`'s bits for rows asked in increasing order, a buffer at a time.
public final class ShardRowCursor: RowSkipping {
    private let bits: any ScratchStorage
    private let rows: Int
    private var buffer = [UInt64](repeating: 0, count: ShardRowMap.wordsPerBuffer)
    private var firstWord = -1
    private var words = 0

    init(bits: any ScratchStorage, rows: Int) {
        self.bits = bits
        self.rows = rows
    }

    /// Whether the shard owns `row`; rows beyond the map (a file that grew) are not owned... by
    /// the map: the caller decides them itself.
    @inline(__always)
    public func owns(row: Int) -> Bool? {
        guard row >= 1 && row <= rows else { return nil }
        let index = (row - 1) >> 6
        if index < firstWord || index >= firstWord + words { load(index) }
        return buffer[index - firstWord] & (1 << UInt64((row - 1) & 63)) != 0
    }

    private func load(_ index: Int) {
        let read = (try? buffer.withUnsafeMutableBytes { try bits.read(at: index * 8, into: $0) }) ?? 0
        firstWord = index
        words = read / 8
        precondition(words > 0, "a shard map shorter than its rows")
    }
}

extension InputRecord {
    /// The record's 1-based data-row number, well-formed or not.
    @inline(__always)
    var row: Int {
        switch self {
        case .row(let view): view.row
        case .malformed(let row, _): row
        }
    }
}
