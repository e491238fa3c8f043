import PushcastCore
import PushcastReactor

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
    /// still land in the reserved space.
    func reserve(rows: Int) -> Bool
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
}

/// The results file (one line per row, NDJSON or CSV) and the prune file (dead and invalid
/// tokens), both 0600. Lines are encoded into buffers and go to the files once they outgrow the
/// files' own buffers (handing over less would copy every line a second time).
public final class ResultFilesSink: OutcomeSink {
    /// Bytes reserved per outcome in the results file, and in the prune file: a line with an
    /// APNs token, an id and an error text fits several times over. (A row with a 4 KiB FCM
    /// token takes more; the margin of the others covers a few such rows.)
    public static let bytesPerRowReserved = 1024
    public static let pruneBytesPerRowReserved = 512

    private let results: OutputFile
    private let prune: OutputFile
    private let format: ResultsFormat
    private let columns: ResultColumns
    private var encoded = ByteBuffer(capacity: 256 * 1024)
    private var pruneEncoded = ByteBuffer(capacity: 16 * 1024)
    /// Set by the first failed write: nothing more is written (a retry could repeat the part of
    /// a buffer that did reach the file).
    private var broken = false
    public let name: String

    /// Creates both files (and writes their headers). With `resuming`, the results file keeps
    /// its lines and new ones follow them; the prune file is written anew, starting with
    /// `restoredPrune` (the prune lines of the rows already finished).
    public init(resultsPath: String, format: ResultsFormat, prunePath: String, resuming: Bool = false,
                restoredPrune: ByteBuffer? = nil, columns: ResultColumns = .standard) throws(CampaignError) {
        self.format = format
        self.columns = columns
        name = "the results file \(resultsPath) and the prune file \(prunePath)"
        do {
            results = try OutputFile(path: resultsPath, bufferBytes: 256 * 1024, append: resuming, dropsSyncedPages: true)
            prune = try OutputFile(path: prunePath)
            if format == .csv && !(resuming && results.size > 0) { try results.append(columns.csvHeader) }
            try prune.append(ResultEncoding.pruneHeader)
            if let restoredPrune, !restoredPrune.isEmpty { try prune.append(restoredPrune.bytes) }
        } catch {
            throw .output(error.description)
        }
    }

    public func record(_ record: inout OutcomeRecord) {
        ResultEncoding.appendLine(record, format: format, columns: columns, to: &encoded)
        if record.belongsInPruneFile { ResultEncoding.appendPruneLine(record, to: &pruneEncoded) }
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
            throw .output(error.description)
        }
    }

    public func reserve(rows: Int) -> Bool {
        results.reserve(headroom: rows * Self.bytesPerRowReserved + encoded.count)
            && prune.reserve(headroom: rows * Self.pruneBytesPerRowReserved + pruneEncoded.count, step: 1 << 20)
    }

    public func sync(durable: Bool) throws(CampaignError) {
        try flush(final: true)
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
            throw .output(error.description)
        }
    }

    public func close() throws(CampaignError) {
        try flush(final: true)
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
