import PushcastCore

/// How a run treats what earlier runs of its campaign left (`send --resume`, `--force`).
public struct ResumeRequest: Sendable {
    public var resume: Bool
    public var force: Bool
    public var retryUnknown: Bool
    public var policy: SyncPolicy
    /// This boot of the kernel's id (PushcastSystem's `FileSystem.bootID()`): the run records it, and a resume
    /// believes the dispatch marks of earlier runs only on the same boot. Nil: no marks.
    public var boot: String?
    /// Where the journal and the results are.
    public var files: any FileStorage

    public init(resume: Bool, force: Bool, retryUnknown: Bool, policy: SyncPolicy, boot: String? = nil, files: any FileStorage) {
        self.boot = boot
        self.files = files
        self.resume = resume
        self.force = force
        self.retryUnknown = retryUnknown
        self.policy = policy
    }
}

extension CampaignDurability {
    /// Where a campaign's journal lives: beside its results.
    public static func journalPath(results: String) -> String { results + ".journal" }

    /// The journal locked for this run, and what the earlier runs left. Refuses (before anything
    /// is sent) a results file that holds lines without --resume or --force, a resume whose
    /// campaign differs, and damaged files. `note` hears what a resume found.
    public static func open(resultsPath: String, format: ResultsFormat, columns: ResultColumns, fingerprint: CampaignFingerprint, request: ResumeRequest,
                            note: (String) -> Void) throws(CampaignError) -> CampaignDurability {
        let file: any JournalStorage
        let journalBytes: [UInt8]
        do {
            // The lock first: a second sender of this campaign stops here, before touching a file.
            file = try request.files.openJournal(journalPath(results: resultsPath))
            journalBytes = try file.readAll()
        } catch {
            throw .output(error.description)
        }
        // Its size says whether it holds lines: a fresh or forced run never reads it.
        let holdsLines = (request.files.size(resultsPath) ?? 0) > (format == .csv ? columns.csvHeader.utf8.count : 0)
        if holdsLines && request.resume && journalBytes.isEmpty && !request.force {
            return try resumeWithoutJournal(file: file, resultsPath: resultsPath, format: format, columns: columns, fingerprint: fingerprint,
                                            request: request, note: note)
        }
        guard request.resume && !journalBytes.isEmpty && !request.force else {
            if holdsLines && !request.force {
                throw .options("\(resultsPath) already holds results: --resume goes on with this campaign, "
                    + "--force starts it over (and truncates the file)")
            }
            if holdsLines { do { try request.files.truncate(resultsPath, to: 0) } catch { throw .output(error.description) } }
            let journal = try CampaignJournal(file: file, fingerprint: fingerprint, fresh: true, policy: request.policy, boot: request.boot)
            return CampaignDurability(journal: journal, policy: request.policy, recovered: nil, earlier: nil,
                                      retryUnknown: request.retryUnknown, summary: CampaignSummary(), restoredPrune: nil)
        }
        return try resume(file: file, journalBytes: journalBytes, resultsPath: resultsPath,
                          format: format, columns: columns, fingerprint: fingerprint, request: request, note: note)
    }

    /// The results survive but the journal is gone: the rows with a line are done; of the
    /// others nobody can tell which went out. Only with --retry-unknown (the user accepts that
    /// some of them may get it twice) are they sent; else nothing is, and the message says how
    /// many are at stake and what each way on costs.
    private static func resumeWithoutJournal(file: any JournalStorage, resultsPath: String, format: ResultsFormat, columns: ResultColumns,
                                             fingerprint: CampaignFingerprint, request: ResumeRequest,
                                             note: (String) -> Void) throws(CampaignError) -> CampaignDurability {
        var summary = CampaignSummary()
        var prune = ByteBuffer(capacity: 16 * 1024)
        let recovered = try RecoveredResults.read(path: resultsPath, format: format, columns: columns, files: request.files) { record in
            summary.record(record)
            if record.belongsInPruneFile { ResultEncoding.appendPruneLine(record, to: &prune) }
        }
        guard request.retryUnknown else {
            throw .options("\(resultsPath) holds \(recovered.count) results but its journal \(file.path) is gone, so nothing tells "
                + "which rows without a line went out. send --resume --retry-unknown keeps those \(recovered.count) rows and sends "
                + "every other row (one that went out before gets it twice); --force starts over and sends every row again")
        }
        if recovered.tornBytes > 0 {
            do { try request.files.truncate(resultsPath, to: recovered.validLength) } catch { throw .output(error.description) }
        }
        note("resuming without a journal: \(recovered.count) rows already finished; every other row is sent (--retry-unknown)")
        let journal = try CampaignJournal(file: file, fingerprint: fingerprint, fresh: true, policy: request.policy, boot: request.boot)
        return CampaignDurability(journal: journal, policy: request.policy, recovered: recovered, earlier: nil,
                                  retryUnknown: true, summary: summary, restoredPrune: prune)
    }

    private static func resume(file: any JournalStorage, journalBytes: [UInt8], resultsPath: String,
                               format: ResultsFormat, columns: ResultColumns, fingerprint: CampaignFingerprint, request: ResumeRequest,
                               note: (String) -> Void) throws(CampaignError) -> CampaignDurability {
        var summary = CampaignSummary()
        var prune = ByteBuffer(capacity: 16 * 1024)
        let earlier = try JournalState.parse(journalBytes, path: file.path, boot: request.boot)
        let changed = fingerprint.differences(from: earlier.fingerprint)
        guard changed.isEmpty else {
            throw .options("--resume: this is not the campaign \(file.path) recorded: \(changed.joined(separator: ", ")) "
                + "changed. Run it with the same command line and files, or start over with --force")
        }
        let recovered = try RecoveredResults.read(path: resultsPath, format: format, columns: columns, files: request.files) { record in
            summary.record(record)
            if record.belongsInPruneFile { ResultEncoding.appendPruneLine(record, to: &prune) }
        }
        if recovered.tornBytes > 0 {
            do { try request.files.truncate(resultsPath, to: recovered.validLength) } catch { throw .output(error.description) }
        }
        try cutTornLine(journalBytes, of: file, files: request.files)
        note("resuming: \(recovered.count) rows already finished"
            + (recovered.tornBytes > 0 ? " (a torn last line of \(recovered.tornBytes) bytes dropped)" : "")
            + Preview(recovered: recovered, earlier: earlier).writeOffNote(retryUnknown: request.retryUnknown))
        let journal = try CampaignJournal(file: file, fingerprint: fingerprint, fresh: false, policy: request.policy, boot: request.boot)
        return CampaignDurability(journal: journal, policy: request.policy, recovered: recovered, earlier: earlier,
                                  retryUnknown: request.retryUnknown, summary: summary, restoredPrune: prune)
    }
}

extension CampaignDurability {
    /// Cuts the journal's torn last line (a power loss or a full disk in mid-append), which the
    /// parse skipped: glued to the front of this run's `B` line, it would hide where this run
    /// begins, and its marks would be taken for the earlier run's (a later resume would then
    /// distrust them, or refuse a damaged line).
    static func cutTornLine(_ journalBytes: [UInt8], of file: any JournalStorage, files: any FileStorage) throws(CampaignError) {
        guard let last = journalBytes.last, last != UInt8(ascii: "\n") else { return }
        let kept = (journalBytes.lastIndex(of: UInt8(ascii: "\n")) ?? -1) + 1
        do { try files.truncate(file.path, to: kept) } catch { throw .output(error.description) }
    }
}

extension CampaignDurability.Preview {
    /// Rows without a results line that an earlier run may have sent (`unknown`), and reserved
    /// rows it never handed to a connection (sent now).
    public var unsettled: (mayHaveGoneOut: Int, neverSent: Int) {
        let feeds = Set(earlier.uncleanMarks.keys).union(earlier.dispatchedMarks.keys)
        var out = (mayHaveGoneOut: 0, neverSent: 0)
        for feed in feeds {
            let end = max(earlier.uncleanMarks[feed, default: 0], earlier.dispatchedMarks[feed, default: 0])
            for row in 0..<end where !recovered.isFinished(row) {
                if earlier.mayHaveGoneOut(row: row, feed: feed) { out.mayHaveGoneOut += 1 } else { out.neverSent += 1 }
            }
        }
        return out
    }

    /// What a resume says about the rows an interrupted run left without a line.
    public func writeOffNote(retryUnknown: Bool) -> String {
        let (unknown, neverSent) = unsettled
        var parts: [String] = []
        if unknown > 0 {
            let why = earlier.distrusted.isEmpty ? "they were handed to a connection before the earlier run was killed"
                : "the earlier run was killed with them reserved, and its marks of what reached a connection cannot be believed: "
                    + Array(Set(earlier.distrusted)).sorted().joined(separator: "; ")
            parts.append(retryUnknown
                ? "\(unknown) rows may have gone out (\(why)): sent again (--retry-unknown; a device may get it twice)"
                : "\(unknown) rows may have gone out (\(why)): recorded unknown, not sent again (--retry-unknown sends them, "
                    + "and a device that got one gets it twice)")
        }
        if neverSent > 0 { parts.append("\(neverSent) reserved rows never reached a connection: sent now") }
        return parts.isEmpty ? "" : "; " + parts.joined(separator: "; ")
    }
}
