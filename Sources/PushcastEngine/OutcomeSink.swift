import PushcastCore

/// Where every finished row goes. The run hands each outcome record to its sinks exactly once,
/// in the order outcomes arrive, on the reader thread; the sinks decide how it is kept. The
/// results and prune files are one sink (`ResultFilesSink`); a journal, shard files and database
/// prunes plug in beside it.
public protocol OutcomeSink: AnyObject {
    /// What the sink writes, for messages ("the results file out.ndjson").
    var name: String { get }
    /// Takes one finished row. The record is the caller's to move from: a sink that keeps its
    /// strings swaps them out.
    func record(_ record: inout OutcomeRecord)
    /// Hands what is buffered to the kernel once it has grown (`final`: all of it).
    func flush(final: Bool) throws(CampaignError)
    /// Makes sure `rows` more outcomes can be recorded even if the disk fills: false when the
    /// space cannot be had. A run that hears false stops sending new rows, and the rows in flight
    /// still land in the reserved space. `rowsLeft`: how many rows the run may still record at
    /// most (nil: unknown), so that nothing is reserved past what the run can write.
    func reserve(rows: Int, rowsLeft: Int?) -> Bool
    /// After a `reserve` that failed: how much space was needed, and how much is free.
    var shortfall: String? { get }
    /// Hands everything buffered to the kernel now, and with `durable` makes it survive power
    /// loss (fdatasync).
    func sync(durable: Bool) throws(CampaignError)
    /// Writes the rest and gives back unused reservations.
    func close() throws(CampaignError)
    /// The process died (only a simulated crash does this): what a killed process would lose,
    /// the sink loses; nothing more is written.
    func processDied()
}

extension OutcomeSink {
    public func processDied() {}
    public var shortfall: String? { nil }
}

/// The results file (one line per row, NDJSON or CSV) and the prune file (dead and invalid
/// tokens), both 0600. Lines are encoded into buffers and go to the files once they outgrow the
/// files' own buffers (handing over less would copy every line a second time).
public final class ResultFilesSink: OutcomeSink {
    /// Bytes reserved per outcome in the results file, and in the prune file, until 64 rows
    /// have been written: a line with an APNs token, an id and an error text fits twice over.
    /// From then on, twice the lines' measured average (at least 64 and 16 bytes).
    public static let bytesPerRowReserved = 512
    public static let pruneBytesPerRowReserved = 128
    /// Reservations grow by at most this much at once, and never past what the rows left need.
    public static let reserveStepMax = 16 << 20

    private let results: any AppendableFile
    private let prune: any AppendableFile
    private let format: ResultsFormat
    private let columns: ResultColumns
    private var encoded = ByteBuffer(capacity: 256 * 1024)
    private var pruneEncoded = ByteBuffer(capacity: 16 * 1024)
    /// Set by the first failed write: nothing more is written (a retry could repeat the part of
    /// a buffer that did reach the file).
    private var broken = false
    /// That write's error: every later `sync` and `close` throws it, so that a run whose lines
    /// did not all reach the file never marks its stop clean in the journal (a resume would send
    /// again the rows whose lines were lost).
    private var failure: CampaignError?
    public let name: String
    /// Rows recorded and bytes encoded by this run, for the measured line sizes.
    private var rowsRecorded = 0
    private var resultsBytes = 0
    private var pruneBytes = 0
    public private(set) var shortfall: String?

    /// Creates both files (and writes their headers). With `resuming`, the results file keeps
    /// its lines and new ones follow them; the prune file is written anew, starting with
    /// `restoredPrune` (the prune lines of the rows already finished).
    public init(resultsPath: String, format: ResultsFormat, prunePath: String, resuming: Bool = false,
                restoredPrune: ByteBuffer? = nil, columns: ResultColumns, files: any FileStorage) throws(CampaignError) {
        self.format = format
        self.columns = columns
        name = "the results file \(resultsPath) and the prune file \(prunePath)"
        do {
            results = try files.createForAppending(resultsPath, bufferBytes: 256 * 1024, append: resuming, dropsSyncedPages: true)
            prune = try files.createForAppending(prunePath)
            if format == .csv && !(resuming && results.size > 0) { try results.append(columns.csvHeader) }
            try prune.append(ResultEncoding.pruneHeader)
            if let restoredPrune, !restoredPrune.isEmpty { try prune.append(restoredPrune.bytes) }
        } catch {
            throw .output(error.description)
        }
    }

    public func record(_ record: inout OutcomeRecord) {
        let before = (encoded.count, pruneEncoded.count)
        ResultEncoding.appendLine(record, format: format, columns: columns, to: &encoded)
        if record.belongsInPruneFile { ResultEncoding.appendPruneLine(record, to: &pruneEncoded) }
        rowsRecorded += 1
        resultsBytes += encoded.count - before.0
        pruneBytes += pruneEncoded.count - before.1
    }

    public func flush(final: Bool) throws(CampaignError) {
        guard !broken else { return }
        do {
            if encoded.count > results.bufferBytes || (final && !encoded.isEmpty) {
                try results.append(encoded.bytes)
                encoded.removeAll()
            }
            if pruneEncoded.count > prune.bufferBytes || (final && !pruneEncoded.isEmpty) {
                try prune.append(pruneEncoded.bytes)
                pruneEncoded.removeAll()
            }
        } catch {
            broken = true
            failure = .output(error.description)
            throw .output(error.description)
        }
    }

    public func reserve(rows: Int, rowsLeft: Int?) -> Bool {
        let measured = rowsRecorded >= 64
        let perRow = measured ? max(64, 2 * resultsBytes / rowsRecorded) : Self.bytesPerRowReserved
        let prunePerRow = measured ? max(16, 2 * pruneBytes / rowsRecorded) : Self.pruneBytesPerRowReserved
        let covered = min(rows, rowsLeft ?? rows)
        let resultsNeed = covered * perRow + encoded.count
        let pruneNeed = covered * prunePerRow + pruneEncoded.count
        // Never past what the rows left can write: the last reservations shrink to fit.
        let resultsCeiling = rowsLeft.map { $0 * perRow + encoded.count }
        let pruneCeiling = rowsLeft.map { $0 * prunePerRow + pruneEncoded.count }
        if !results.reserve(headroom: resultsNeed, step: Self.reserveStepMax, ceiling: resultsCeiling) {
            shortfall = Self.shortfall(results, needed: resultsNeed)
            return false
        }
        if !prune.reserve(headroom: pruneNeed, step: 1 << 20, ceiling: pruneCeiling) {
            shortfall = Self.shortfall(prune, needed: pruneNeed)
            return false
        }
        return true
    }

    private static func shortfall(_ file: any AppendableFile, needed: Int) -> String {
        func megabytes(_ bytes: Int) -> String { NumberText.fixed(Double(bytes) / 1e6, places: 1) + " MB" }
        return "\(file.path) needs \(megabytes(needed)) more, and \(file.freeBytes.map(megabytes) ?? "an unknown amount") is free"
    }

    public func sync(durable: Bool) throws(CampaignError) {
        try flush(final: true)
        if let failure { throw failure }
        guard !broken else { return }
        do {
            try results.flush()
            try prune.flush()
            if durable {
                try results.sync()
                try prune.sync()
            }
        } catch {
            broken = true
            failure = .output(error.description)
            throw .output(error.description)
        }
    }

    public func close() throws(CampaignError) {
        try flush(final: true)
        if let failure { throw failure }
        guard !broken else { return }
        do {
            try results.flush()
            try prune.flush()
        } catch {
            throw .output(error.description)
        }
        results.releaseReservation()
        prune.releaseReservation()
    }

    public func processDied() {
        broken = true
        encoded.removeAll()
        pruneEncoded.removeAll()
        results.dropBuffered()
        prune.dropBuffered()
    }
}

