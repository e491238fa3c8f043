import Foundation
import PushcastCommandLine
import PushcastCore
import PushcastEngine

/// `--shard`: which shard this process sends, and the per-shard file names.
extension SendCommand {
    /// What the first read of a file found: its duplicate plan, every column (NDJSON key), the
    /// fingerprint of its bytes, and the rows this shard owns (all rows when unsharded).
    struct FirstRead {
        var plan: DuplicatePlan?
        var columns: [String]
        var inputHash: String
        var shardRows: Int?
        var map: ShardRowMap? = nil
    }

    /// `--shard I/N`, `auto` or `auto/N` (the environment read here, parsed by `ShardSpec`);
    /// the whole campaign without it.
    static func shardSpec(_ parsed: ParsedArguments) throws -> ShardSpec {
        guard let text = parsed.value("shard") else { return .whole }
        do { return try ShardSpec.parse(text, environment: ProcessInfo.processInfo.environment) } catch {
            throw parsed.error(error.description)
        }
    }

    /// With several shards, every file a shard writes must name its shard, or the shards would
    /// write over each other's results: a path given without `{shard}` is refused.
    static func requireShardPlaceholders(_ plan: Plan, _ parsed: ParsedArguments) throws {
        guard plan.shard.isSplit else { return }
        for option in ["results", "prune", "summary"] {
            guard let path = parsed.value(option), !path.contains(ShardSpec.placeholder) else { continue }
            throw parsed.error("--shard \(plan.shard): --\(option) \(path) has no {shard}: every shard would write the same file. "
                + "Put {shard} where the index goes, e.g. --\(option) \(example(path))")
        }
    }

    private static func example(_ path: String) -> String {
        guard let dot = path.lastIndex(of: "."), !path[dot...].contains("/") else { return path + "-{shard}" }
        return path[..<dot] + "-{shard}" + path[dot...]
    }
}
