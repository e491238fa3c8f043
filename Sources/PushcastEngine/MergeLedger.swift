import PushcastCore

/// The bookkeeping of `pushcast merge`, sans-I/O: rows come in row order (the k-way merge of the
/// shards' sorted runs); the ledger says which to write and remembers, in bounded memory, the
/// ranges of rows that are missing, doubled, or beyond the input.
public struct MergeLedger: Sendable {
    /// A run of consecutive rows with the shards involved.
    public struct RowRange: Sendable, Equatable, CustomStringConvertible {
        public var first: Int
        public var last: Int
        /// Doubled rows: the shards that hold them.
        public var shards: [Int]
        public var description: String { first == last ? "row \(first)" : "rows \(first)-\(last)" }
    }

    /// Ranges listed in the report, per kind; the counts cover all of them.
    public static let rangesListed = 20

    /// One kind of problem: how many rows, in how many ranges, the first few ranges.
    public struct RangeLog: Sendable {
        public private(set) var rows = 0
        public private(set) var rangeCount = 0
        private var listed: [RowRange] = []
        private var tail: RowRange?

        /// The first `rangesListed` ranges.
        public var ranges: [RowRange] { (listed + (tail.map { [$0] } ?? [])).prefix(MergeLedger.rangesListed).map { $0 } }

        mutating func add(_ first: Int, _ last: Int, shards: [Int]) {
            rows += last - first + 1
            if var t = tail, t.shards == shards, first <= t.last + 1 {
                t.last = max(t.last, last)
                tail = t
                return
            }
            if let t = tail, listed.count < MergeLedger.rangesListed { listed.append(t) }
            rangeCount += 1
            tail = RowRange(first: first, last: last, shards: shards)
        }

        func text(withShards: Bool) -> String {
            ranges.map { withShards ? "\($0) (shard\($0.shards.count > 1 ? "s" : "") \($0.shards.map(String.init).joined(separator: ", ")))" : $0.description }
                .joined(separator: ", ") + (rangeCount > ranges.count ? ", … (\(rangeCount - ranges.count) more ranges)" : "")
        }
    }

    public let inputRows: Int
    public private(set) var written = 0
    public private(set) var missing = RangeLog()
    public private(set) var doubled = RangeLog()
    public private(set) var beyond = RangeLog()
    /// The next row expected, and the shard of the last row written.
    private var next = 1
    private var lastShard = -1

    public init(inputRows: Int) { self.inputRows = inputRows }

    /// Takes the next row (rows arrive in non-decreasing order): true when it is to be written.
    public mutating func take(row: Int, shard: Int) -> Bool {
        if row > inputRows {
            beyond.add(row, row, shards: [shard])
            return false
        }
        if row < next {
            // Seen already: a second line for the row, in this shard or another.
            doubled.add(row, row, shards: Array(Set([lastShard, shard])).sorted())
            return false
        }
        if row > next { missing.add(next, row - 1, shards: []) }
        next = row + 1
        lastShard = shard
        written += 1
        return true
    }

    /// The input's rows after the last one any shard holds are missing too.
    public mutating func finish() {
        if next <= inputRows { missing.add(next, inputRows, shards: []) }
        next = inputRows + 1
    }

    /// Every row of the input appears exactly once, and no row is beyond it.
    public var isExact: Bool { missing.rows == 0 && doubled.rows == 0 && beyond.rows == 0 }

    /// The problems in words, one line each (empty when exact).
    public func report() -> [String] {
        var lines: [String] = []
        if missing.rows > 0 {
            lines.append("\(missing.rows) of \(inputRows) rows missing, in \(missing.rangeCount) range(s): " + missing.text(withShards: false))
        }
        if doubled.rows > 0 {
            lines.append("\(doubled.rows) rows appear more than once: " + doubled.text(withShards: true))
        }
        if beyond.rows > 0 {
            lines.append("\(beyond.rows) rows are beyond the input's \(inputRows) rows (results of another input?): " + beyond.text(withShards: true))
        }
        return lines
    }
}

/// The row number at the start of a results line: `{"row":N,` (NDJSON) or `N,` (CSV). Nil when
/// the line does not start so (damage, or a CSV header).
@inline(__always)
public func resultLineRow(_ line: UnsafeRawBufferPointer, format: ResultsFormat) -> Int? {
    var i = 0
    if format == .ndjson {
        let prefix: StaticString = "{\"row\":"
        guard line.count > prefix.utf8CodeUnitCount else { return nil }
        for k in 0..<prefix.utf8CodeUnitCount where line[k] != prefix.utf8Start[k] { return nil }
        i = prefix.utf8CodeUnitCount
    }
    var row = 0
    let start = i
    while i < line.count, line[i] >= 0x30, line[i] <= 0x39, i - start < 18 {
        row = row * 10 + Int(line[i] - 0x30)
        i += 1
    }
    guard i > start, i < line.count, line[i] == 0x2C, row >= 1 else { return nil }
    return row
}

/// What a shard's files say it is: from its journal's first line, or its summary.
public struct ShardClaim: Sendable, Equatable {
    public var campaign: String
    public var input: String
    /// `I/N`, or empty for an unsharded run.
    public var shard: String
    public var resultsFormat: String?
    /// Where the claim was read (for messages).
    public var source: String

    public init(campaign: String, input: String, shard: String, resultsFormat: String?, source: String) {
        self.campaign = campaign
        self.input = input
        self.shard = shard
        self.resultsFormat = resultsFormat
        self.source = source
    }

    /// The problems that make a set of shards unmergeable: a shard of another campaign, another
    /// input (against `input`, the fingerprint of --input), another split, or another format.
    /// `claims[k]` is shard k's (nil: its files are missing, reported elsewhere).
    public static func mismatches(_ claims: [ShardClaim?], input: String, format: ResultsFormat) -> [String] {
        var problems: [String] = []
        let count = claims.count
        var campaigns: [String: [Int]] = [:]
        for (k, claim) in claims.enumerated() {
            guard let claim else { continue }
            campaigns[claim.campaign, default: []].append(k)
            if claim.input != input {
                problems.append("shard \(k) (\(claim.source)) is of another input: its input fingerprint is \(claim.input), --input's is \(input)")
            }
            let expected = count > 1 ? "\(k)/\(count)" : ""
            if claim.shard != expected && !(count == 1 && claim.shard == "0/1") {
                problems.append("shard \(k) (\(claim.source)) was sent as " + (claim.shard.isEmpty ? "a whole campaign (no --shard)" : "--shard \(claim.shard)")
                    + ", not " + (expected.isEmpty ? "a whole campaign" : "--shard \(expected)"))
            }
            if let f = claim.resultsFormat, f != format.rawValue {
                problems.append("shard \(k) (\(claim.source)) wrote \(f) results, the others \(format.rawValue)")
            }
        }
        if campaigns.count > 1 {
            let groups = campaigns.sorted { $0.value[0] < $1.value[0] }
                .map { "shard\($0.value.count > 1 ? "s" : "") \($0.value.map(String.init).joined(separator: ", ")): campaign \($0.key)" }
            problems.insert("the shards are of different campaigns: " + groups.joined(separator: "; "), at: 0)
        }
        return problems
    }
}
