import PushcastCommandLine
import PushcastDatabase
import PushcastSystem

/// `pushcast snapshot`: a query's rows written once to a CSV file (0600), the same snapshot
/// `send --from` takes. Shards of one campaign on several machines send from one such file, so
/// they all see the same rows.
enum SnapshotCommand {
    static let spec = CommandSpec(
        name: "pushcast snapshot",
        summary: "Write a database query's rows to a CSV file (the snapshot send --from takes), for shards or for a look first.",
        options: DatabaseInput.options + [
            .value("out", metavar: "FILE", help: "the CSV file to write (mode 0600; written whole or not at all)"),
            .flag("quiet", help: "no line about the rows read"),
        ],
        positionals: [])

    static func run(_ parsed: ParsedArguments) throws -> ExitStatus {
        StopSignals.install()
        guard let from = parsed.value("from") else { throw parsed.error("--from URL is required") }
        let out = try parsed.requiredValue("out")
        let url: DatabaseURL
        do { url = try DatabaseURL(parsing: from) } catch { throw parsed.error("--from: \(error.description)") }
        do {
            try DatabaseInput.take(url: url, query: try DatabaseInput.queryText(parsed), to: out, parsed)
        } catch is SendCommand.Interrupted {
            Console.error("pushcast: interrupted by \(StopSignals.lastName): no snapshot written (exit 3)")
            return .interrupted
        }
        return .success
    }
}
