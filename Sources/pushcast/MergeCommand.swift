import Foundation
import PushcastCommandLine
import PushcastCore
import PushcastEngine
import PushcastProviderKit
import PushcastProviders
import PushcastInput
import PushcastSystem

/// `pushcast merge`: the shards of one campaign (`send --shard I/N`) as one results file in row
/// order, one prune file and one summary, after checking that every input row appears exactly
/// once and that every shard is of the same campaign and input.
enum MergeCommand {
    static let spec = CommandSpec(
        name: "pushcast merge",
        summary: "Merge the shards of a campaign (send --shard I/N) into one results file, prune file and summary.",
        options: [
            .value("input", metavar: "FILE", help: "the campaign's input (token file): its rows and fingerprint are checked"),
            .value("format", metavar: "csv|ndjson", help: "input format", defaultDescription: "from the file extension"),
            .value("shards", metavar: "N", help: "how many shards (with --results-pattern)", defaultDescription: "the shard files given"),
            .value("results-pattern", metavar: "PATTERN", help: "each shard's results file, {shard} standing for the index"),
            .value("prune-pattern", metavar: "PATTERN", help: "each shard's prune file, {shard} standing for the index"),
            .value("summary-pattern", metavar: "PATTERN", help: "each shard's summary file, {shard} standing for the index"),
            .value("results", metavar: "FILE", help: "the merged results file (row order)"),
            .value("prune", metavar: "FILE", help: "the merged prune file (needs --prune-pattern)"),
            .value("summary", metavar: "FILE", help: "the merged summary (needs --summary-pattern)"),
            .value("tmpdir", metavar: "DIR", help: "where the sorted runs go while merging (as many bytes as the shards' results)",
                   defaultDescription: "$TMPDIR"),
            .flag("quiet", help: "print only problems"),
        ],
        positionals: [PositionalSpec("shard-results", help: "the shards' results files in shard order (instead of --results-pattern)",
                                     arity: .variadic)])

    static func run(_ parsed: ParsedArguments) throws -> ExitStatus {
        let request = try makeRequest(parsed)
        let report: MergeReport
        do {
            report = try ShardMerge.run(request) { Console.error("pushcast merge: " + $0) }
        } catch {
            throw CommandFailure(error.description)
        }
        let problems = report.mismatches + report.ledger.report() + report.incomplete
        for problem in problems { Console.error("pushcast merge: " + problem) }
        if !report.mismatches.isEmpty {
            Console.error("pushcast merge: nothing written: these shards are not of one campaign and input")
        } else if !parsed.flag("quiet") {
            Console.error("merged \(request.shardResults.count) shards: \(report.ledger.written) of \(report.inputRows) rows written to "
                + request.resultsOut + (report.ledger.isExact ? ", each exactly once" : ""))
            if let summary = report.summary { Console.error(summary.text) }
        }
        return ExitStatus(rawValue: report.exitStatus) ?? .stopped
    }

    static func makeRequest(_ parsed: ParsedArguments) throws -> MergeRequest {
        guard let input = parsed.value("input") else { throw parsed.error("--input FILE is required (the campaign's token file)") }
        guard let results = parsed.value("results") else { throw parsed.error("--results FILE is required (the merged results)") }
        let format: InputFormat
        if let name = try parsed.choice("format", from: ["csv", "ndjson"]) { format = InputFormat(rawValue: name)! } else {
            guard let guessed = InputFormat.guess(path: input) else {
                throw parsed.error("cannot tell the format of \(input) from its extension; pass --format csv|ndjson")
            }
            format = guessed
        }
        let listed = parsed.positionalValues("shard-results")
        let count: Int
        if let pattern = parsed.value("results-pattern") {
            guard listed.isEmpty else { throw parsed.error("give --results-pattern or the shard files, not both") }
            guard let n = try parsed.int("shards", range: 1...ShardSpec.countMax) else {
                throw parsed.error("--results-pattern needs --shards N")
            }
            count = n
            try requirePlaceholder(pattern, option: "results-pattern", count: count, parsed)
        } else {
            guard !listed.isEmpty else { throw parsed.error("give --results-pattern PATTERN with --shards N, or the shard results files") }
            count = listed.count
            if let n = try parsed.int("shards", range: 1...ShardSpec.countMax), n != count {
                throw parsed.error("--shards \(n), but \(count) shard files are given")
            }
        }
        let shardResults = parsed.value("results-pattern").map { paths($0, count: count) } ?? listed
        let prunes = try patternPaths("prune", parsed, count: count)
        let summaries = try patternPaths("summary", parsed, count: count)
        if parsed.value("prune") != nil && prunes == nil { throw parsed.error("--prune needs --prune-pattern (the shards' prune files)") }
        if parsed.value("summary") != nil && summaries == nil { throw parsed.error("--summary needs --summary-pattern (the shards' summaries)") }
        let outputs = [results, parsed.value("prune"), parsed.value("summary")].compactMap { $0 }
        let inputs = Set(shardResults + (prunes ?? []) + (summaries ?? []) + [input])
        if let clash = outputs.first(where: inputs.contains) { throw parsed.error("\(clash) is both a shard's file and an output") }
        return MergeRequest(inputPath: input, inputFormat: format, shardResults: shardResults, shardPrunes: prunes, shardSummaries: summaries,
                            resultsOut: results, pruneOut: parsed.value("prune"), summaryOut: parsed.value("summary"),
                            scratchDirectory: parsed.value("tmpdir") ?? Environment.temporaryDirectory, catalog: .standard,
                            files: Machine.real.files)
    }

    static func patternPaths(_ kind: String, _ parsed: ParsedArguments, count: Int) throws -> [String]? {
        guard let pattern = parsed.value("\(kind)-pattern") else { return nil }
        try requirePlaceholder(pattern, option: "\(kind)-pattern", count: count, parsed)
        return paths(pattern, count: count)
    }

    static func requirePlaceholder(_ pattern: String, option: String, count: Int, _ parsed: ParsedArguments) throws {
        if count > 1 && !pattern.contains(ShardSpec.placeholder) {
            throw parsed.error("--\(option) \(pattern) has no {shard}: with \(count) shards it must say where the index goes")
        }
    }

    static func paths(_ pattern: String, count: Int) -> [String] {
        (0..<count).map { ShardSpec(index: $0, count: count).expand(pattern) }
    }
}
