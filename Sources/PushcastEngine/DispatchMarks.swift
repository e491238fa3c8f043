import PushcastCore

/// Where the workers record which rows they hand to a connection: `D` lines appended to the
/// campaign's journal, unsynced, before the requests' bytes can reach a socket.
///
/// A crashed process (SIGKILL, the OOM killer, a pod killed after its grace period) leaves
/// everything it wrote in the kernel's page cache, synced or not; only the kernel going (power
/// loss, a kernel crash) drops unsynced pages, and then the boot id changes. So on the same boot
/// a resume trusts these lines: a reserved row without a `D` mark never reached a socket and is
/// sent; after a reboot it falls back to the synced reservations (every reserved row without an
/// answer may have gone out).
public final class DispatchLog: Sendable {
    private let file: any JournalStorage
    /// The journal feed key of each lane (`ProviderLane.key`): the feed that hands it rows.
    private let feedOf: [String: String]

    public init(file: any JournalStorage, feedKeys: [String: String]) {
        self.file = file
        feedOf = feedKeys
    }

    /// The marks one worker of the lane `key` keeps; nil when no feed sends to it.
    public func marks(forLane key: String) -> DispatchMarks? {
        feedOf[key].map { DispatchMarks(log: self, feed: $0) }
    }

    /// One whole line, in one write (several workers append at once; O_APPEND keeps lines whole).
    func append(_ line: [UInt8]) throws(SystemError) {
        var failure: SystemError? = nil
        line.withUnsafeBytes { bytes in
            do throws(SystemError) { try file.append(bytes: bytes) } catch { failure = error }
        }
        if let failure { throw failure }
    }
}

/// One worker's dispatch marks: the rows it handed out since its last write (`D`), and before
/// them the rows that came back unsent to wait for another try (`U`: a 429 or 503, a refused
/// stream), as ranges of consecutive rows: `U apns 17` then `D apns 8192-8255,8300`, in one
/// write a loop turn. Between two writes the worker first hears answers (`U`), then hands out
/// requests (`D`), so a row in both went out again.
public struct DispatchMarks {
    private let log: DispatchLog
    private var handed: RowRanges
    private var returned: RowRanges
    private var line: [UInt8] = []

    init(log: DispatchLog, feed: String) {
        self.log = log
        handed = RowRanges(prefix: Array("D \(feed) ".utf8))
        returned = RowRanges(prefix: Array("U \(feed) ".utf8))
        line.reserveCapacity(512)
    }

    /// `row` goes to a connection this turn (again, for a resend: a repeat costs a few bytes).
    @inline(__always)
    public mutating func note(row: Int) { handed.add(row) }

    /// `row` came back unsent (the server said so) and waits to go again.
    public mutating func returned(row: Int) { returned.add(row) }

    /// Whether rows were noted since the last write.
    public var isEmpty: Bool { handed.isEmpty && returned.isEmpty }

    /// Appends the rows noted since the last write; a failure means the rows handed out must not
    /// go out (a crash would leave nothing saying that they did).
    public mutating func write() throws(SystemError) {
        guard !isEmpty else { return }
        returned.close(into: &line)
        handed.close(into: &line)
        defer { line.removeAll(keepingCapacity: true) }
        try log.append(line)
    }
}

/// Rows in the order noted, as one line of ranges of consecutive rows.
struct RowRanges {
    private let prefix: [UInt8]
    private var text: [UInt8] = []
    private var first = -1
    private var last = -1

    init(prefix: [UInt8]) {
        self.prefix = prefix
        text.reserveCapacity(256)
    }

    var isEmpty: Bool { first < 0 && text.isEmpty }

    @inline(__always)
    mutating func add(_ row: Int) {
        if row == last &+ 1 && first >= 0 {
            last = row
            return
        }
        closeRange()
        first = row
        last = row
    }

    /// Appends the line (with its newline) to `out` and starts over; nothing when empty.
    mutating func close(into out: inout [UInt8]) {
        closeRange()
        guard !text.isEmpty else { return }
        out += prefix
        out += text
        out.append(UInt8(ascii: "\n"))
        text.removeAll(keepingCapacity: true)
    }

    private mutating func closeRange() {
        guard first >= 0 else { return }
        if !text.isEmpty { text.append(UInt8(ascii: ",")) }
        appendDecimal(first)
        if last != first {
            text.append(UInt8(ascii: "-"))
            appendDecimal(last)
        }
        first = -1
        last = -1
    }

    private mutating func appendDecimal(_ value: Int) {
        var divisor = 1
        while value / divisor >= 10 { divisor *= 10 }
        while divisor > 0 {
            text.append(UInt8(ascii: "0") + UInt8(value / divisor % 10))
            divisor /= 10
        }
    }
}

/// The rows of one feed that runs of this boot handed to a connection, as bits.
public struct DispatchedRows: Equatable, Sendable {
    private var words: [UInt64] = []
    public private(set) var count = 0

    public init() {}

    @inline(__always)
    public func contains(_ row: Int) -> Bool {
        let word = row >> 6
        return row >= 0 && word < words.count && words[word] & (1 << UInt64(row & 63)) != 0
    }

    public mutating func insert(_ rows: ClosedRange<Int>) {
        let needed = (rows.upperBound >> 6) + 1
        if words.count < needed { words += [UInt64](repeating: 0, count: needed - words.count) }
        for row in rows where !contains(row) {
            words[row >> 6] |= 1 << UInt64(row & 63)
            count += 1
        }
    }

    public mutating func remove(_ rows: ClosedRange<Int>) {
        for row in rows where contains(row) {
            words[row >> 6] &= ~(1 << UInt64(row & 63))
            count -= 1
        }
    }

    public mutating func formUnion(_ other: DispatchedRows) {
        if words.count < other.words.count { words += [UInt64](repeating: 0, count: other.words.count - words.count) }
        for index in other.words.indices {
            count += (other.words[index] & ~words[index]).nonzeroBitCount
            words[index] |= other.words[index]
        }
    }
}
