import Foundation
import PushcastCommandLine
import PushcastCore
import PushcastEngine
import PushcastProviderKit
import PushcastProviders
import PushcastInput
import PushcastJSON
import PushcastProviderKit
import PushcastSystem
import PushcastTransport
import PushcastWire

// `pushcast check`: reads the whole input as `send` would, prints what it would send, and proves
// the credentials, without connecting.
extension SendCommand {
    /// A device token as pushcast prints it outside the results and prune files: its first 8
    /// characters and its length, enough to recognise it and too little to send to it.
    static func redacted(_ token: String) -> String {
        token.count <= 8 ? "<\(token.count) chars>" : "\(token.prefix(8))…<\(token.count) chars>"
    }

    /// What `check` counts over the whole input.
    struct CheckTally {
        var resumeCounts = (finished: 0, unknown: 0)
        var summary = CampaignSummary()
        var toSend: [ProviderID: Int] = [:]
        var largest: [ProviderID: Int] = [:]
        var samples: [ProviderID: PreparedNotification] = [:]
        var unconfigured: [ProviderID: (rows: Int, first: Int)] = [:]

        mutating func add(_ prepared: PreparedRow, preview: CampaignDurability.Preview?) {
            switch prepared {
            case .send(let n):
                switch preview?.verdict(row: n.row, provider: n.provider) ?? .send {
                case .skip: resumeCounts.finished += 1; return
                case .unknown: resumeCounts.unknown += 1; return
                case .send: break
                }
                toSend[n.provider, default: 0] += 1
                largest[n.provider] = max(largest[n.provider] ?? 0, n.payload.count)
                if samples[n.provider] == nil { samples[n.provider] = n }
            case .finished(let outcome):
                if preview?.recovered.isFinished(outcome.row) == true { resumeCounts.finished += 1; return }
                summary.record(outcome)
                if outcome.reason == OutcomeReason.providerNotConfigured, let provider = outcome.provider {
                    let seen = unconfigured[provider]
                    unconfigured[provider] = ((seen?.rows ?? 0) + 1, seen?.first ?? outcome.row)
                } else if let error = outcome.error {
                    Console.error("pushcast check: row \(outcome.row): \(error)")
                }
            case .skipped:
                break
            }
        }
    }

    static func check(_ plan: Plan) throws -> ExitStatus {
        var preparer = plan.core.preparer(sends: Set(plan.renderings.keys), recordsUnroutable: true)
        let options = plan.options
        let preview = options.resume && plan.inputPath != "-" ? try resumePreview(plan, resultsPath: resultsPath(plan), format: options.resultsFormat) : nil
        var tally = CheckTally()
        let reader = plan.reader
        plan.core.skipOtherShards(reader)
        while true {
            let record: InputRecord?
            do { record = try reader.next() } catch { throw CommandFailure("cannot read \(plan.fileName): \(error)") }
            guard let record else { break }
            preparer.follow(reader)
            tally.add(checked(preparer.prepare(record), plan), preview: preview)
        }
        Console.out("input: \(plan.fileName) (\(plan.format.rawValue)), columns: \(plan.reader.columns.joined(separator: ", "))"
            + ", fingerprint \(plan.inputFingerprint)" + (plan.shard.isSplit ? ", shard \(plan.shard): \(plan.totalRows ?? 0) of \(plan.inputRows ?? 0) rows" : ""))
        printProviders(plan, tally)
        if preview != nil || options.resume {
            Console.out("resume: \(tally.resumeCounts.finished) rows finished, \(tally.resumeCounts.unknown) would be recorded unknown "
                + "(InterruptedInFlight: they may have gone out; --retry-unknown sends them), the rest below to send")
        }
        let summary = tally.summary
        Console.out("would not send: " + [OutcomeKind.invalid, .duplicate, .failed].map { "\($0.rawValue) \(summary.outcomes[$0])" }.joined(separator: ", "))
        if !summary.reasons.isEmpty {
            Console.out("reasons: " + summary.reasons.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))
        }
        // Proves the credentials work by signing with them or loading them; nothing connects, and
        // no secret is printed.
        for setup in plan.setups { for line in try setup.credentialLines() { Console.out(line) } }
        guard tally.unconfigured.isEmpty else {
            for (provider, seen) in tally.unconfigured.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
                let flags = StandardProviders.commandLines.first { $0.id == provider }?.credentialHint ?? "its options"
                Console.error("pushcast check: \(seen.rows) rows need \(provider.rawValue), which has no credentials "
                    + "(first: data row \(seen.first) of \(plan.fileName)); give \(flags)")
            }
            return .stopped
        }
        return .success
    }

    /// A row that would be sent, unless its provider finds a problem in its body that only
    /// sending would meet: then it is counted and told `invalid`, with the provider's reason.
    static func checked(_ prepared: PreparedRow, _ plan: Plan) -> PreparedRow {
        guard case .send(let n) = prepared, let setup = plan.setups.first(where: { $0.id == n.provider }),
              let problem = setup.sendProblem(body: n.payload) else { return prepared }
        let error = "\(plan.fileName): " + (problem.field.map { "field '\($0)': " } ?? "") + problem.message
        return .finished(OutcomeRecord(row: n.row, id: n.id, token: n.packedToken, provider: n.provider, outcome: .invalid, reason: problem.reason,
                                       error: error))
    }

    /// Per provider: what would be sent, and the first request and body (tokens redacted).
    static func printProviders(_ plan: Plan, _ tally: CheckTally) {
        for setup in plan.setups {
            let provider = setup.id
            Console.out("would send: \(tally.toSend[provider] ?? 0) notifications to \(plan.catalog[provider].displayName) "
                + "(largest body \(tally.largest[provider] ?? 0) bytes), campaign \(plan.campaign)")
            let sample = tally.samples[provider]
            if let line = setup.firstRequestLine(sample: sample.map { (redacted($0.token), $0.messageID) }) { Console.out(line) }
            if let sample {
                // A body may carry the token (FCM's message does): printed redacted, like every
                // token outside the results and prune files.
                let body = setup.bodyText(sample.payload)
                Console.out("first \(setup.bodyName): " + (sample.token.isEmpty ? body : body.replacingOccurrences(of: sample.token, with: redacted(sample.token))))
            }
        }
    }
}
