import PushcastCommandLine
import PushcastEngine
import PushcastSystem

/// Every file one `send` reads or writes, by role. Before anything is opened for writing, no two
/// roles may name the same file (through a link, `./`, another spelling, or stdin redirected from
/// the export): one would truncate or overwrite the other, and the export may be a user's only
/// copy. `--force` never overrides this.
extension SendCommand {
    struct FileRole {
        var role: String
        var path: String
        var identity: FileIdentity?
    }

    /// The roles as the options and their defaults name them (`{shard}` expanded).
    static func fileRoles(_ parsed: ParsedArguments) throws -> [FileRole] {
        let shard = try shardSpec(parsed)
        let file = parsed.positional("file")
        let fromDatabase = parsed.value("from") != nil
        let given = parsed.value("results").map { shard.expand($0) }
        let input = fromDatabase ? given.map(DatabaseInput.spoolPath(results:)) : file
        let base = input == nil || input == "-" ? "stdin" : input!
        let results = given ?? shard.expand(base + (shard.isSplit ? ".shard-{shard}" : "") + ".results.ndjson")
        var roles: [FileRole] = []
        func add(_ role: String, _ path: String?) {
            guard let path else { return }
            roles.append(FileRole(role: role, path: path, identity: FileIdentity(path: path)))
        }
        if let input, input != "-" {
            add(fromDatabase ? "the database snapshot" : "the input", input)
        } else if input == "-", let identity = FileIdentity(descriptor: 0) {
            roles.append(FileRole(role: "the input (stdin)", path: "<stdin>", identity: identity))
        }
        add("--results", results)
        add("the journal (<results>.journal)", CampaignDurability.journalPath(results: results))
        add("the timeline (<results>.timeline)", results + ".timeline")
        add("--prune", shard.expand(parsed.value("prune") ?? base + (shard.isSplit ? ".shard-{shard}" : "") + ".prune.csv"))
        add("--summary", parsed.value("summary").map { shard.expand($0) })
        add("--metrics-file", parsed.value("metrics-file").map { shard.expand($0) })
        return roles
    }

    /// Exit 2 naming both roles when two of them are one file; nothing has been written yet.
    static func refuseSharedFiles(_ parsed: ParsedArguments) throws {
        let roles = try fileRoles(parsed)
        for (index, role) in roles.enumerated() {
            // A path whose directory is missing is left to the open that will name it.
            guard let identity = role.identity else { continue }
            for earlier in roles[..<index] where earlier.identity == identity {
                let same = earlier.path == role.path ? "" : " (\(role.path) is \(earlier.path))"
                throw CommandFailure("\(role.role) and \(earlier.role) are the same file\(same): one would overwrite the other, "
                    + "so nothing was opened for writing; give each its own path (--force does not change this)")
            }
        }
    }
}
