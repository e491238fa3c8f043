import PushcastCommandLine
import PushcastCore
import PushcastEngine
import PushcastProviderKit
import PushcastProviders
import PushcastSystem

/// `send --resume`, `--force` and the journal: what a run finds of the runs before it.
extension SendCommand {
    static func journalPath(results: String) -> String { CampaignDurability.journalPath(results: results) }

    /// The journal locked for this run, and what the earlier runs left (the engine's
    /// `CampaignDurability.open`; a refusal exits 2 before anything is sent).
    static func prepareDurability(_ plan: Plan, _ parsed: SendOptions, output: CampaignOutput) throws -> CampaignDurability {
        let fingerprint = CampaignFingerprint(campaign: plan.campaign, input: plan.inputFingerprint, templates: plan.templatesFingerprint,
                                              providers: plan.renderings.keys.map(\.rawValue).sorted().joined(separator: ","),
                                              resultsFormat: output.resultsFormat.rawValue,
                                              shard: plan.shard.isSplit ? plan.shard.description : "", source: plan.inputSource)
        let request = ResumeRequest(resume: parsed.resume, force: parsed.force, retryUnknown: parsed.retryUnknown,
                                    policy: SyncPolicy(rawValue: parsed.fsync) ?? .batch, boot: FileSystem.bootID(),
                                    files: Machine.real.files)
        do {
            return try CampaignDurability.open(resultsPath: output.resultsPath, format: output.resultsFormat, columns: .standard,
                                               fingerprint: fingerprint,
                                               request: request) { note in if !parsed.quiet { Console.error("pushcast: " + note) } }
        } catch {
            throw CommandFailure(error.description)
        }
    }

    /// `check --resume`: what a resume would do, touching nothing (no lock, no truncation).
    static func resumePreview(_ plan: Plan, resultsPath: String, format: ResultsFormat) throws -> CampaignDurability.Preview? {
        let journalBytes: [UInt8]?
        do {
            journalBytes = try readWholeFile(journalPath(results: resultsPath))
        } catch {
            throw CommandFailure(error.description)
        }
        guard let journalBytes, !journalBytes.isEmpty else { return nil }
        do {
            let earlier = try JournalState.parse(journalBytes, path: journalPath(results: resultsPath), boot: FileSystem.bootID())
            let recovered = try RecoveredResults.read(path: resultsPath, format: format, columns: .standard, files: Machine.real.files) { _ in }
            return CampaignDurability.Preview(recovered: recovered, earlier: earlier)
        } catch {
            throw CommandFailure(error.description)
        }
    }
}

/// The switches and outputs of `send` and `check`, read from the command line once (the
/// providers' groups are read by their modules, the pacing by `tuning`).
struct SendOptions {
    var sending: Bool
    var resume: Bool
    var force: Bool
    var retryUnknown: Bool
    var quiet: Bool
    var fsync: String
    var results: String?
    var resultsFormat: ResultsFormat
    var prune: String?
    var summary: String?

    init(_ parsed: ParsedArguments, checkOnly: Bool) throws {
        sending = !(checkOnly || parsed.flag("dry-run"))
        resume = parsed.flag("resume")
        force = parsed.flag("force")
        retryUnknown = parsed.flag("retry-unknown")
        quiet = parsed.flag("quiet")
        fsync = try parsed.choice("fsync", from: ["batch", "always", "never"]) ?? "batch"
        results = parsed.value("results")
        resultsFormat = ResultsFormat(rawValue: try parsed.choice("results-format", from: ["ndjson", "csv"]) ?? "ndjson")!
        prune = parsed.value("prune")
        summary = parsed.value("summary")
    }
}
