import PushcastCore
import PushcastInput
import Synchronization

/// What identifies one campaign across runs: a resume must be of the very same campaign.
public struct CampaignFingerprint: Equatable, Sendable {
    public var campaign: String
    /// A hash of the input file's bytes (`ContentHash`).
    public var input: String
    /// A hash of the templates' texts and the fixed headers.
    public var templates: String
    /// The configured providers, comma-separated, in position order.
    public var providers: String
    public var resultsFormat: String
    /// `I/N` for one shard of a split campaign (`--shard`), empty for a whole campaign: a shard's
    /// journal records which shard it is, so resuming with another `--shard` is refused, and
    /// `pushcast merge` can tell shards of other campaigns.
    public var shard: String
    /// For a database campaign (`--from`): the URL (never a password) and the query its snapshot
    /// came from; the snapshot's own fingerprint is `input`. Empty for a file.
    public var source: String

    public init(campaign: String, input: String, templates: String, providers: String, resultsFormat: String, shard: String = "",
                source: String = "") {
        self.shard = shard
        self.source = source
        self.campaign = campaign
        self.input = input
        self.templates = templates
        self.providers = providers
        self.resultsFormat = resultsFormat
    }

    /// The journal's first line.
    var headerLine: String {
        "pushcast-journal 1 campaign=\(campaign) input=\(input) templates=\(templates) providers=\(providers) results=\(resultsFormat)"
            + (shard.isEmpty ? "" : " shard=\(shard)") + (source.isEmpty ? "" : " source=\(JournalText.escape(source))") + "\n"
    }

    /// The fields that differ from `other`, in words, for the refusal.
    public func differences(from other: CampaignFingerprint) -> [String] {
        var out: [String] = []
        if campaign != other.campaign { out.append("the campaign id (\(other.campaign) then, \(campaign) now)") }
        if input != other.input { out.append("the input file's contents") }
        if templates != other.templates { out.append("the templates or headers") }
        if providers != other.providers { out.append("the providers (\(other.providers) then, \(providers) now)") }
        if resultsFormat != other.resultsFormat { out.append("the results format") }
        if source != other.source { out.append("the database query (--from/--query)") }
        if shard != other.shard { out.append("the shard (\(other.shard.isEmpty ? "none" : other.shard) then, \(shard.isEmpty ? "none" : shard) now)") }
        return out
    }
}

/// A 64-bit hash of a byte stream, 8 bytes at a time (a fingerprint, not a defence: it tells a
/// changed input file from the same one).
public struct ContentHash: Sendable {
    private var state: UInt64 = 0x9E37_79B9_7F4A_7C15
    private var tail: UInt64 = 0
    private var tailCount = 0
    public private(set) var byteCount = 0

    public init() {}

    public mutating func add(_ bytes: UnsafeRawBufferPointer) {
        byteCount += bytes.count
        var i = 0
        // Bytes up to a word boundary of the stream, then whole words (big-endian, as the bytes
        // would have been shifted in one at a time: the same hash, 8 times fewer steps), then the rest.
        while i < bytes.count && tailCount != 0 { push(bytes[i]); i += 1 }
        if let base = bytes.baseAddress {
            while i + 8 <= bytes.count {
                mix(UInt64(bigEndian: (base + i).loadUnaligned(as: UInt64.self)))
                i += 8
            }
        }
        while i < bytes.count { push(bytes[i]); i += 1 }
    }

    @inline(__always)
    private mutating func push(_ byte: UInt8) {
        tail = tail << 8 | UInt64(byte)
        tailCount += 1
        if tailCount == 8 { mix(tail); tail = 0; tailCount = 0 }
    }

    private mutating func mix(_ word: UInt64) {
        state = (state ^ word) &* 0xBF58_476D_1CE4_E5B9
        state ^= state >> 31
    }

    /// The hash of everything added so far.
    public var value: UInt64 {
        var copy = self
        copy.mix(copy.tail ^ UInt64(copy.tailCount) << 56)
        copy.mix(UInt64(byteCount))
        return copy.state
    }

    public var hex: String {
        let text = String(value, radix: 16)
        return String(repeating: "0", count: 16 - text.count) + text
    }
}

/// The write-ahead journal beside the results file (`<results>.journal`). Text lines:
///
///     pushcast-journal 1 campaign=… input=… templates=… providers=… results=…
///     B boot=…               a run (the first, or a resume) begins, on this boot of the kernel
///     R apns 8192            the run may hand rows of feed `apns` below 8192 to the workers
///     D apns 0-63,80         rows a worker handed to a connection (unsynced, `DispatchLog`)
///     U apns 17              rows that came back unsent (429, 503, refused) to wait for a retry
///     S                      the run stopped cleanly: every row it handed out is in the results
///
/// A reservation is written and synced before any row it covers goes to a worker, in blocks, so a
/// crash at any moment leaves the journal saying which rows may have gone out: a row of a run
/// without `S`, below that run's reservation for its feed, with no results line. A worker writes
/// its `D` marks before the rows' bytes can reach a socket; they are never synced, so they are
/// believed only on the boot that wrote them (a process crash keeps unsynced writes, power loss
/// does not). A torn last line is dropped (it was never synced, so nothing it covered went out; a
/// torn `D` line's rows never reached a socket either).
public struct JournalState: Equatable {
    public var fingerprint: CampaignFingerprint
    /// For runs that did not stop cleanly and whose dispatch marks cannot be believed (another
    /// boot, an older pushcast, a damaged mark): the highest reservation of each feed.
    public var uncleanMarks: [String: Int] = [:]
    /// For runs of this boot that did not stop cleanly: each feed's rows handed to a connection.
    public var dispatched: [String: DispatchedRows] = [:]
    /// ... and each feed's highest reservation of those runs (rows below it without a mark never
    /// reached a socket).
    public var dispatchedMarks: [String: Int] = [:]
    /// Runs that did not stop cleanly whose marks were not believed, and why.
    public var distrusted: [String] = []
    public var runs = 0
    /// Whether the last run recorded its clean stop (`S`): false after a crash or a signal.
    public var lastRunClean = true

    /// Rows below this mark of `feed` may have gone out (if they have no results line).
    @inline(__always)
    public func mayHaveGoneOut(row: Int, feed: String) -> Bool {
        row < uncleanMarks[feed, default: 0] || dispatched[feed]?.contains(row) == true
    }

    /// One run's lines, as parsed.
    private struct Run {
        var boot: String? = nil
        var marks: [String: Int] = [:]
        var dispatched: [String: DispatchedRows] = [:]
        var damagedMark: String? = nil
        var clean = false
    }

    /// Parses a journal's bytes; a damaged line other than the last throws, naming it. `boot`:
    /// this boot's id (nil: unknown, so no dispatch mark is believed).
    public static func parse(_ bytes: [UInt8], path: String, boot: String? = nil) throws(CampaignError) -> JournalState {
        var lines = bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
        if bytes.last != UInt8(ascii: "\n") { lines.removeLast() }  // a torn last line (or no final newline)
        else if lines.last?.isEmpty == true { lines.removeLast() }
        guard let header = lines.first, let fingerprint = parseHeader(String(decoding: header, as: UTF8.self)) else {
            throw .input("\(path):1: not a pushcast journal")
        }
        var state = JournalState(fingerprint: fingerprint)
        var run: Run? = nil
        for (index, line) in lines.enumerated().dropFirst() {
            if let kind = line.first, kind == UInt8(ascii: "D") || kind == UInt8(ascii: "U"), line.count > 1,
               line[line.startIndex + 1] == UInt8(ascii: " ") {
                // A line written by a worker: one that does not parse makes its run's marks unbelievable.
                if run != nil { parseDispatch(line, into: &run!) }
                continue
            }
            let text = String(decoding: line, as: UTF8.self)
            let fields = text.split(separator: " ")
            switch (fields.first, fields.count) {
            case ("B", 1), ("B", 2):
                if let run { state.end(run, boot: boot) }
                state.runs += 1
                run = Run(boot: fields.count == 2 && fields[1].hasPrefix("boot=") ? String(fields[1].dropFirst(5)) : nil)
            case ("R", 3):
                if run == nil { run = Run() }
                guard let row = Int(fields[2]), row >= 0 else { throw .input("\(path):\(index + 1): damaged reservation '\(text)'") }
                run!.marks[String(fields[1])] = max(run!.marks[String(fields[1]), default: 0], row)
                run!.clean = false
            case ("S", 1):
                run?.clean = true
            default:
                throw .input("\(path):\(index + 1): damaged line '\(text)'")
            }
        }
        if let run { state.end(run, boot: boot) }
        return state
    }

    /// A `D` (handed out) or `U` (came back unsent) line's ranges, each below the run's
    /// reservation for its feed (a worker only hands out reserved rows); anything else is a
    /// damaged mark.
    private static func parseDispatch(_ line: ArraySlice<UInt8>, into run: inout Run) {
        let fields = line.split(separator: UInt8(ascii: " "), omittingEmptySubsequences: false)
        guard fields.count == 3, run.damagedMark == nil else {
            if run.damagedMark == nil { run.damagedMark = String(decoding: line, as: UTF8.self) }
            return
        }
        let feed = String(decoding: fields[1], as: UTF8.self)
        let mark = run.marks[feed, default: 0]
        for range in fields[2].split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false) {
            let ends = range.split(separator: UInt8(ascii: "-"), omittingEmptySubsequences: false)
            guard (1...2).contains(ends.count), let low = decimal(ends.first!), let high = decimal(ends.last!), low <= high, high < mark else {
                run.damagedMark = String(decoding: line, as: UTF8.self)
                return
            }
            if line.first == UInt8(ascii: "D") {
                run.dispatched[feed, default: DispatchedRows()].insert(low...high)
            } else {
                run.dispatched[feed]?.remove(low...high)
            }
        }
    }

    private static func decimal(_ digits: ArraySlice<UInt8>) -> Int? {
        guard !digits.isEmpty, digits.count <= 18 else { return nil }
        var value = 0
        for digit in digits {
            guard digit >= UInt8(ascii: "0") && digit <= UInt8(ascii: "9") else { return nil }
            value = value * 10 + Int(digit - UInt8(ascii: "0"))
        }
        return value
    }

    /// Folds a finished run in: a clean one leaves nothing; an unclean one leaves its marks when
    /// they can be believed, else its reservations.
    private mutating func end(_ run: Run, boot current: String?) {
        lastRunClean = run.clean
        guard !run.clean else { return }
        var why: String? = nil
        if run.boot == nil { why = "its run recorded no dispatch marks" }
        else if current == nil { why = "this machine's boot id cannot be read" }
        else if run.boot != current { why = "the machine restarted since (unsynced marks may be lost)" }
        else if let damaged = run.damagedMark { why = "a dispatch mark is damaged ('\(damaged.prefix(60))')" }
        if let why {
            distrusted.append(why)
            for (feed, mark) in run.marks { uncleanMarks[feed] = max(uncleanMarks[feed, default: 0], mark) }
            return
        }
        for (feed, mark) in run.marks { dispatchedMarks[feed] = max(dispatchedMarks[feed, default: 0], mark) }
        for (feed, rows) in run.dispatched { dispatched[feed, default: DispatchedRows()].formUnion(rows) }
    }

    public static func parseHeader(_ line: String) -> CampaignFingerprint? {
        let fields = line.split(separator: " ")
        guard (7...9).contains(fields.count), fields[0] == "pushcast-journal", fields[1] == "1" else { return nil }
        var values: [String: String] = [:]
        for field in fields.dropFirst(2) {
            let pair = field.split(separator: "=", maxSplits: 1)
            guard pair.count == 2 else { return nil }
            values[String(pair[0])] = String(pair[1])
        }
        guard let campaign = values["campaign"], let input = values["input"], let templates = values["templates"],
              let providers = values["providers"], let results = values["results"] else { return nil }
        return CampaignFingerprint(campaign: campaign, input: input, templates: templates, providers: providers, resultsFormat: results,
                                   shard: values["shard"] ?? "", source: values["source"].map(JournalText.unescape) ?? "")
    }
}

/// How hard the run makes its records durable (`--fsync`).
public enum SyncPolicy: String, Sendable {
    /// Results are synced every 100 ms, the journal before each reservation block goes out.
    case batch
    /// Results are synced after every batch of outcomes (each loop turn).
    case always
    /// Nothing is synced: a process crash loses nothing written, power loss may.
    case never
}

/// The journal of a running campaign: reservations ahead of the sends, in blocks.
public final class CampaignJournal {
    /// Rows reserved per block follow the send rate: a block used up within 100 ms doubles the
    /// next one (up to `blockRowsMax`), a block that lasted over a second halves it (down to
    /// `blockRowsMin`). A crash turns at most one block of never-sent rows (plus those in flight)
    /// into `unknown`, and the fsyncs stay near ten a second per feed at any rate.
    public static let blockRowsMin = 64
    public static let blockRowsMax = 4096

    private let file: any JournalStorage
    private let policy: SyncPolicy
    private var marks: [String: Int] = [:]
    /// Each feed's current block size and when its last block was reserved.
    private var blocks: [String: (rows: Int, at: UInt64)] = [:]

    /// This boot's id, recorded in the run's `B` line; nil: none can be read, so the workers
    /// write no dispatch marks (a resume could not believe them).
    public let boot: String?

    /// Takes over an open, locked journal file; `fresh` empties it and writes `fingerprint` as
    /// its header. Begins a run.
    public init(file: any JournalStorage, fingerprint: CampaignFingerprint, fresh: Bool, policy: SyncPolicy,
                boot: String?) throws(CampaignError) {
        self.file = ClosedAfterAFailedAppend(file)
        self.policy = policy
        self.boot = boot
        do {
            if fresh {
                try file.truncate()
                try file.append(fingerprint.headerLine)
            }
            try file.append(boot.map { "B boot=\($0)\n" } ?? "B\n")
            if policy != .never { try file.sync() }
        } catch {
            throw .output(error.description)
        }
    }

    /// Covers `row` of `feed` with a synced reservation before it goes out; returns the row
    /// below which no new reservation is needed.
    public func cover(row: Int, feed: String, nowNanoseconds now: UInt64) throws(CampaignError) -> Int {
        if row < marks[feed, default: 0] { return marks[feed, default: 0] }
        var block = blocks[feed] ?? (Self.blockRowsMin, now)
        if blocks[feed] != nil {
            let lasted = now &- block.at
            if lasted < 100_000_000 { block.rows = min(Self.blockRowsMax, block.rows * 2) }
            if lasted > 1_000_000_000 { block.rows = max(Self.blockRowsMin, block.rows / 2) }
        }
        blocks[feed] = (block.rows, now)
        let mark = row + block.rows
        do {
            try file.append("R \(feed) \(mark)\n")
            if policy != .never { try file.sync() }
        } catch {
            throw .output(error.description)
        }
        marks[feed] = mark
        return mark
    }

    /// Where the workers write their dispatch marks (`D` lines); nil without a boot id.
    public func dispatchLog(feedKeys: [String: String]) -> DispatchLog? {
        boot == nil ? nil : DispatchLog(file: file, feedKeys: feedKeys)
    }

    /// The run stopped with every row it handed out recorded in the (synced) results.
    public func markCleanStop() throws(CampaignError) {
        do {
            try file.append("S\n")
            if policy != .never { try file.sync() }
        } catch {
            throw .output(error.description)
        }
    }
}

/// The journal's file, closed to appends once one fails. A failed append may have left part of
/// its line (a full disk takes what fits), and a line appended after it (the clean stop's `S`,
/// once the results gave their reserved space back) would be glued to that part: a damaged line
/// in the middle, which no resume gets past (`DS`, `R apns 705S`). Left last, the torn part is
/// what a resume drops. Two workers may pass the check at once: one write can still follow a
/// failed one, when space came free between the two.
final class ClosedAfterAFailedAppend: JournalStorage {
    private let file: any JournalStorage
    private let failed = Atomic<Bool>(false)

    init(_ file: any JournalStorage) { self.file = file }

    var path: String { file.path }
    func readAll() throws(SystemError) -> [UInt8] { try file.readAll() }
    func truncate() throws(SystemError) { try file.truncate() }
    func sync() throws(SystemError) { try file.sync() }

    func append(_ text: String) throws(SystemError) {
        try checkOpen()
        do { try file.append(text) } catch {
            failed.store(true, ordering: .releasing)
            throw error
        }
    }

    func append(bytes: UnsafeRawBufferPointer) throws(SystemError) {
        try checkOpen()
        do { try file.append(bytes: bytes) } catch {
            failed.store(true, ordering: .releasing)
            throw error
        }
    }

    private func checkOpen() throws(SystemError) {
        if failed.load(ordering: .acquiring) { throw SystemError("cannot write \(path): an earlier write to it failed") }
    }
}

/// What a run knows of the runs before it (`send --resume`), and how it keeps its own promise.
public final class CampaignDurability {
    /// The journal this run reserves rows in (locked for the run).
    public var journal: CampaignJournal
    public var policy: SyncPolicy
    /// Rows the earlier runs finished: skipped.
    public var recovered: RecoveredResults?
    /// The earlier runs' journal: rows that may have gone out are recorded `unknown`
    /// (`InterruptedInFlight`) unless `retryUnknown`.
    public var earlier: JournalState?
    public var retryUnknown: Bool
    /// The earlier rows' outcomes, counted.
    public var summary: CampaignSummary
    /// The earlier rows' prune lines, for the prune file written anew.
    public var restoredPrune: ByteBuffer?

    public init(journal: CampaignJournal, policy: SyncPolicy, recovered: RecoveredResults?, earlier: JournalState?,
                retryUnknown: Bool, summary: CampaignSummary, restoredPrune: ByteBuffer?) {
        self.journal = journal
        self.policy = policy
        self.recovered = recovered
        self.earlier = earlier
        self.retryUnknown = retryUnknown
        self.summary = summary
        self.restoredPrune = restoredPrune
    }

    /// What becomes of a row the preparer would send: skipped (finished before), recorded as
    /// `unknown` (it may have gone out before), or sent.
    public enum Verdict { case skip, unknown, send }

    @inline(__always)
    public func verdict(row: Int, feed: String) -> Verdict {
        // Optional chaining reads in place: binding `recovered` would copy it (its bit array) per row.
        if recovered?.isFinished(row) == true { return .skip }
        if !retryUnknown && earlier?.mayHaveGoneOut(row: row, feed: feed) == true { return .unknown }
        return .send
    }
}

/// A byte source that hashes what passes through it (the input's fingerprint, taken during the
/// duplicate plan's first read at no extra pass).
public final class HashingByteSource: ByteSource {
    private let inner: ByteSource
    public private(set) var hash = ContentHash()

    public init(_ inner: ByteSource) { self.inner = inner }

    public func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        let count = try inner.read(into: buffer)
        hash.add(UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
        return count
    }
}

extension CampaignDurability {
    /// `check --resume`: what a resume would make of each row, from the files alone.
    public struct Preview {
        public let recovered: RecoveredResults
        public let earlier: JournalState

        public init(recovered: RecoveredResults, earlier: JournalState) {
            self.recovered = recovered
            self.earlier = earlier
        }

        /// As `CampaignDurability.verdict` without --retry-unknown; a file's feeds are keyed by
        /// their one provider.
        public func verdict(row: Int, provider: ProviderID) -> Verdict {
            if recovered.isFinished(row) { return .skip }
            return earlier.mayHaveGoneOut(row: row, feed: provider.rawValue) ? .unknown : .send
        }
    }
}

/// A journal field's text with no space or newline in it: `%`, space, `=` and control bytes as
/// `%XX` (a query is recorded so; it never holds a password).
enum JournalText {
    static func escape(_ text: String) -> String {
        var out: [UInt8] = []
        let hex = Array("0123456789ABCDEF".utf8)
        for byte in text.utf8 {
            if byte <= 0x20 || byte == 0x25 || byte == 0x3D || byte == 0x7F {
                out += [0x25, hex[Int(byte >> 4)], hex[Int(byte & 0xF)]]
            } else {
                out.append(byte)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    static func unescape(_ text: String) -> String {
        var out: [UInt8] = []
        var bytes = Array(text.utf8)[...]
        while let byte = bytes.popFirst() {
            if byte == 0x25, bytes.count >= 2, let value = UInt8(String(decoding: bytes.prefix(2), as: UTF8.self), radix: 16) {
                out.append(value)
                bytes = bytes.dropFirst(2)
            } else {
                out.append(byte)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
