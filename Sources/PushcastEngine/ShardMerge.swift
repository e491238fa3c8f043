import PushcastCore
import PushcastProviderKit
import PushcastInput

/// What `pushcast merge` is asked to do: shard k's files are `shardResults[k]` (and its prune
/// and summary files, when given); the outputs are one results file in row order, one prune file
/// and one summary.
public struct MergeRequest: Sendable {
    public var inputPath: String
    public var inputFormat: InputFormat
    public var shardResults: [String]
    public var shardPrunes: [String]?
    public var shardSummaries: [String]?
    public var resultsOut: String
    public var pruneOut: String?
    public var summaryOut: String?
    /// Where the sorted runs go (unlinked scratch files): as many bytes as the shards' results.
    public var scratchDirectory: String
    /// The providers the shards sent to (the results' columns, the summaries' figures).
    public var catalog: ProviderCatalog
    /// Where every file named here is.
    public var files: any FileStorage

    public init(inputPath: String, inputFormat: InputFormat, shardResults: [String], shardPrunes: [String]?, shardSummaries: [String]?,
                resultsOut: String, pruneOut: String?, summaryOut: String?, scratchDirectory: String, catalog: ProviderCatalog,
                files: any FileStorage) {
        self.catalog = catalog
        self.files = files
        self.inputPath = inputPath
        self.inputFormat = inputFormat
        self.shardResults = shardResults
        self.shardPrunes = shardPrunes
        self.shardSummaries = shardSummaries
        self.resultsOut = resultsOut
        self.pruneOut = pruneOut
        self.summaryOut = summaryOut
        self.scratchDirectory = scratchDirectory
    }
}

/// What a merge found.
public struct MergeReport: Sendable {
    public var inputRows = 0
    public var ledger = MergeLedger(inputRows: 0)
    /// Shards of another campaign, input or split (exit 2; nothing is written).
    public var mismatches: [String] = []
    /// Shard files that are not there, or shards whose last run did not finish (exit 1).
    public var incomplete: [String] = []
    public var summary: CampaignSummary?

    /// 2: a mismatch or doubled rows; 1: rows or files missing; 0: every row exactly once.
    public var exitStatus: Int32 {
        if !mismatches.isEmpty || ledger.doubled.rows > 0 || ledger.beyond.rows > 0 { return 2 }
        if ledger.missing.rows > 0 || !incomplete.isEmpty { return 1 }
        return 0
    }
}

/// `pushcast merge`: checks that the shards belong to one campaign and one input, then writes
/// the shards' results as one file in row order with memory that does not grow with the rows:
///
/// 1. each shard's results (in the order answers arrived) are cut into 16 MiB chunks, each chunk
///    sorted by row and written to an unlinked scratch file as a sorted run;
/// 2. the runs of all shards are merged (a min-heap of their heads, each read through a small
///    buffer), and `MergeLedger` sees every row in order: missing, doubled, beyond the input.
public enum ShardMerge {
    static let chunkBytes = 16 << 20
    /// The buffer a sorted chunk goes to the scratch file through.
    static let runWriteBytes = 1 << 20
    /// Read buffers of all runs together, in the merge.
    static let mergeBufferBudget = 24 << 20

    public static func run(_ request: MergeRequest, note: (String) -> Void) throws(CampaignError) -> MergeReport {
        var report = MergeReport()
        let (claims, format) = try shardClaims(request, report: &report)
        let (rows, fingerprint) = try readInput(request)
        report.inputRows = rows
        report.ledger = MergeLedger(inputRows: rows)
        report.mismatches += ShardClaim.mismatches(claims, input: fingerprint, format: format)
        guard report.mismatches.isEmpty else { return report }
        do {
            let scratch = try request.files.makeScratch(in: request.scratchDirectory)
            var runs: [SortedRun] = []
            for (k, path) in request.shardResults.enumerated() where claims[k] != nil {
                try sortIntoRuns(path: path, shard: k, format: format, files: request.files, scratch: scratch, runs: &runs, note: note)
            }
            try mergeRuns(runs, scratch: scratch, format: format, columns: ResultColumns(request.catalog), out: request.resultsOut,
                          files: request.files, ledger: &report.ledger)
            if let out = request.pruneOut, let prunes = request.shardPrunes {
                try concatenatePrunes(prunes, out: out, files: request.files, report: &report)
            }
        } catch let error as CampaignError {
            throw error
        } catch {
            throw .output("\(error)")
        }
        if let summaries = request.shardSummaries {
            try mergeSummaries(summaries, request: request, rows: rows, fingerprint: fingerprint, claims: claims,
                               out: request.summaryOut, report: &report)
        }
        return report
    }

    /// Each shard's claim (its journal's first line, else its summary's identity), and the
    /// results format. A shard whose results are missing has no claim and is named incomplete.
    static func shardClaims(_ request: MergeRequest, report: inout MergeReport) throws(CampaignError) -> ([ShardClaim?], ResultsFormat) {
        var claims: [ShardClaim?] = []
        for (k, path) in request.shardResults.enumerated() {
            guard request.files.exists(path) else {
                report.incomplete.append("shard \(k) of \(request.shardResults.count): its results file \(path) is missing")
                claims.append(nil)
                continue
            }
            let journalPath = CampaignDurability.journalPath(results: path)
            var journal: JournalState? = nil
            do {
                if let bytes = try request.files.readWholeFile(journalPath), !bytes.isEmpty { journal = try JournalState.parse(bytes, path: journalPath) }
            } catch { throw .input("\(error)") }
            if let journal {
                if !journal.lastRunClean {
                    report.incomplete.append("shard \(k) (\(path)): its last run did not finish (interrupted or killed): "
                        + "run it again with the same command line and --resume")
                }
                let f = journal.fingerprint
                claims.append(ShardClaim(campaign: f.campaign, input: f.input, shard: f.shard, resultsFormat: f.resultsFormat, source: journalPath))
            } else if let claim = try summaryClaim(request.shardSummaries?[k], catalog: request.catalog, files: request.files) {
                claims.append(claim)
            } else {
                report.mismatches.append("shard \(k) (\(path)): no journal beside it (\(journalPath)) and no summary: "
                    + "nothing says which campaign and input it is of")
                claims.append(nil)
            }
        }
        let named = claims.compactMap { $0?.resultsFormat }.first
        let format = named.flatMap(ResultsFormat.init(rawValue:))
            ?? (request.shardResults.first?.lowercased().hasSuffix(".csv") == true ? .csv : .ndjson)
        return (claims, format)
    }

    private static func summaryClaim(_ path: String?, catalog: ProviderCatalog, files: any FileStorage) throws(CampaignError) -> ShardClaim? {
        guard let path else { return nil }
        let bytes: [UInt8]?
        do { bytes = try files.readWholeFile(path) } catch { throw .input("\(error)") }
        guard let bytes, let identity = CampaignSummary.parse(bytes, catalog: catalog)?.identity else { return nil }
        return ShardClaim(campaign: identity.campaign, input: identity.input, shard: identity.shard?.description ?? "",
                          resultsFormat: nil, source: path)
    }

    /// The input's data rows and its fingerprint (the same `ContentHash` a send's journal keeps).
    static func readInput(_ request: MergeRequest) throws(CampaignError) -> (Int, String) {
        do {
            let source = HashingByteSource(InputFileSource(try request.files.openForReading(request.inputPath)))
            let reader = try TokenFileReader(source: source, format: request.inputFormat, fileName: request.inputPath)
            var rows = 0
            while try reader.next() != nil { rows += 1 }
            return (rows, source.hash.hex)
        } catch {
            throw .input("--input \(request.inputPath): \(error)")
        }
    }
}
