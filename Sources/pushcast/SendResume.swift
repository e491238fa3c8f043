import PushcastCore
import PushcastEngine
import PushcastReactor

/// `send --resume`, `--force` and the journal: what a run finds of the runs before it.
extension SendCommand {
    /// Where a campaign's journal lives: beside its results.
    static func journalPath(results: String) -> String { results + ".journal" }

    /// The journal locked for this run, and what the earlier runs left. Refuses (exit 2, before
    /// anything is sent) a results file that holds lines without --resume or --force, a resume
    /// of stdin, a resume whose campaign differs, and damaged files.
    static func prepareDurability(_ plan: Plan, _ parsed: ParsedArgumentsView, output: CampaignOutput) throws -> CampaignDurability {
        let policy = SyncPolicy(rawValue: parsed.fsync) ?? .batch
        let fingerprint = CampaignFingerprint(campaign: plan.campaign, input: plan.inputFingerprint, templates: plan.templatesFingerprint,
                                              providers: plan.renderings.keys.map(\.rawValue).sorted().joined(separator: ","),
                                              resultsFormat: output.resultsFormat.rawValue)
        let file: JournalFile
        let journalBytes: [UInt8]
        let resultsBytes: [UInt8]?
        do {
            // The lock first: a second sender of this campaign stops here, before touching a file.
            file = try JournalFile(path: journalPath(results: output.resultsPath))
            journalBytes = try file.readAll()
            resultsBytes = try readWholeFile(output.resultsPath)
        } catch {
            throw CommandFailure(error.description)
        }
        let holdsLines = (resultsBytes?.count ?? 0) > (output.resultsFormat == .csv ? ResultEncoding.csvHeader.utf8.count : 0)
        guard parsed.resume && !journalBytes.isEmpty && !parsed.force else {
            if holdsLines && !parsed.force && parsed.resume {
                throw CommandFailure("\(output.resultsPath) holds results but there is no journal beside it, so nothing tells which "
                    + "rows may have gone out: --force starts the campaign over (and truncates the file)")
            }
            if holdsLines && !parsed.force {
                throw CommandFailure("\(output.resultsPath) already holds results: --resume goes on with this campaign, "
                    + "--force starts it over (and truncates the file)")
            }
            if holdsLines { do { try truncateFile(output.resultsPath, to: 0) } catch { throw CommandFailure(error.description) } }
            let journal = try campaignJournal(file, fingerprint, fresh: true, policy)
            return CampaignDurability(journal: journal, policy: policy, recovered: nil, earlier: nil, retryUnknown: parsed.retryUnknown,
                                      summary: CampaignSummary(), restoredPrune: nil)
        }
        return try resume(file: file, journalBytes: journalBytes, resultsBytes: resultsBytes ?? [], fingerprint: fingerprint,
                          policy: policy, parsed: parsed, output: output)
    }

    private static func resume(file: JournalFile, journalBytes: [UInt8], resultsBytes: [UInt8], fingerprint: CampaignFingerprint,
                               policy: SyncPolicy, parsed: ParsedArgumentsView, output: CampaignOutput) throws -> CampaignDurability {
        let earlier: JournalState
        var summary = CampaignSummary()
        var prune = ByteBuffer(capacity: 16 * 1024)
        let recovered: RecoveredResults
        do {
            earlier = try JournalState.parse(journalBytes, path: file.path)
            let changed = fingerprint.differences(from: earlier.fingerprint)
            guard changed.isEmpty else {
                throw CommandFailure("--resume: this is not the campaign \(file.path) recorded: \(changed.joined(separator: ", ")) "
                    + "changed. Run it with the same command line and files, or start over with --force")
            }
            recovered = try RecoveredResults.read(resultsBytes, format: output.resultsFormat, path: output.resultsPath) { record in
                summary.record(record)
                if record.belongsInPruneFile { ResultEncoding.appendPruneLine(record, to: &prune) }
            }
            if recovered.tornBytes > 0 { try truncateFile(output.resultsPath, to: recovered.validLength) }
        } catch let error as CampaignError {
            throw CommandFailure(error.description)
        } catch let error as ReactorError {
            throw CommandFailure(error.description)
        }
        if !parsed.quiet {
            Console.error("pushcast: resuming: \(recovered.count) rows already finished"
                + (recovered.tornBytes > 0 ? " (a torn last line of \(recovered.tornBytes) bytes dropped)" : ""))
        }
        let journal = try campaignJournal(file, fingerprint, fresh: false, policy)
        return CampaignDurability(journal: journal, policy: policy, recovered: recovered, earlier: earlier,
                                  retryUnknown: parsed.retryUnknown, summary: summary, restoredPrune: prune)
    }

    private static func campaignJournal(_ file: JournalFile, _ fingerprint: CampaignFingerprint, fresh: Bool,
                                        _ policy: SyncPolicy) throws -> CampaignJournal {
        do { return try CampaignJournal(file: file, fingerprint: fingerprint, fresh: fresh, policy: policy) } catch {
            throw CommandFailure(error.description)
        }
    }

    /// `check --resume`: what a resume would do, touching nothing (no lock, no truncation).
    static func resumePreview(_ plan: Plan, resultsPath: String, format: ResultsFormat) throws -> CampaignDurability.Preview? {
        let journalBytes: [UInt8]?
        let resultsBytes: [UInt8]?
        do {
            journalBytes = try readWholeFile(journalPath(results: resultsPath))
            resultsBytes = try readWholeFile(resultsPath)
        } catch {
            throw CommandFailure(error.description)
        }
        guard let journalBytes, !journalBytes.isEmpty else { return nil }
        do {
            let earlier = try JournalState.parse(journalBytes, path: journalPath(results: resultsPath))
            let recovered = try RecoveredResults.read(resultsBytes ?? [], format: format, path: resultsPath) { _ in }
            return CampaignDurability.Preview(recovered: recovered, earlier: earlier)
        } catch {
            throw CommandFailure(error.description)
        }
    }
}

/// The options the durability code reads, taken from the command line once.
struct ParsedArgumentsView {
    var resume: Bool
    var force: Bool
    var retryUnknown: Bool
    var quiet: Bool
    var fsync: String
}
