import Foundation
import PushcastCommandLine
import PushcastCore
import PushcastEngine
import PushcastInput
import PushcastSystem

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
        /// Each routed provider's servers and their rows.
        var routes: [ProviderID: RouteTable] = [:]
    }

    /// `--shard I/N`, `auto` or `auto/N` (the environment read here, parsed by `ShardSpec`);
    /// the whole campaign without it.
    static func shardSpec(_ parsed: ParsedArguments) throws -> ShardSpec {
        guard let text = parsed.value("shard") else { return .whole }
        do { return try ShardSpec.parse(text, environment: Environment.all) } catch {
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

/// What the first read of an export saw (its file's identity and size, its chunk hashes), for
/// the reads that send to check against.
final class FirstReadWitness {
    var identity: (file: FileIdentity, size: Int)?
    var recorder: ChunkRecordingByteSource?

    /// The export opened again, refused when it is another file or another size than the first
    /// read's, and verified chunk by chunk as it is read.
    func verifiedSource(path: String) throws -> ByteSource {
        let file = try InputFile(path: path)
        if let seen = identity, let now = file.identity {
            guard now.file == seen.file else {
                throw InputChangedError(offset: 0, what: "another file now has its name (replaced, or moved over)")
            }
            guard now.size == seen.size else {
                throw InputChangedError(offset: min(now.size, seen.size), what: "its size went from \(seen.size) to \(now.size) bytes")
            }
        }
        guard let recorder else { return InputFileSource(file) }
        return ChunkVerifyingByteSource(InputFileSource(file), plan: recorder.plan)
    }
}
