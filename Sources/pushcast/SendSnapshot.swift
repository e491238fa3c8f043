import Foundation
import PushcastCommandLine
import PushcastCore
import PushcastDatabase
import PushcastEngine
import PushcastReactor
import PushcastSystem

/// `send --from URL --query SQL` and `check --from …`: the query's rows are read once into a
/// snapshot (a CSV spool beside the results file, mode 0600), and the campaign runs from that
/// snapshot exactly as from a CSV file. `--resume` never queries again: it runs from the
/// snapshot the first run took (the journal holds its fingerprint and the query).
enum DatabaseInput {
    static let options: [OptionSpec] = [
        .value("from", metavar: "URL",
               help: "read the rows from a database instead of a file: sqlite:PATH, postgres://user@host:port/db, mysql://user@host:port/db "
                   + "(TLS required off loopback); needs --results"),
        .value("query", metavar: "SQL", help: "with --from: the query; its columns are the rows' columns, as a CSV header would be"),
        .value("query-file", metavar: "FILE", help: "with --from: read the query from this file"),
        .value("db-password-env", metavar: "VAR", help: "environment variable holding the database password",
               defaultDescription: "$PGPASSWORD (postgres), $MYSQL_PWD (mysql)"),
    ]

    /// A snapshot to run from, and what the journal records of where it came from.
    struct Snapshot {
        var path: String
        var source: String
        /// `check`'s own snapshot, removed when it is done.
        var temporary: Bool

        func cleanUp() {
            if temporary { FileSystem.removeFile(path) }
        }
    }

    /// Where a campaign's snapshot lives: beside its results.
    static func spoolPath(results: String) -> String { results + ".snapshot.csv" }

    /// The snapshot to run from, taking it now unless a resume finds the earlier one; nil
    /// without --from.
    static func prepare(_ parsed: ParsedArguments, sending: Bool) throws -> Snapshot? {
        guard let from = parsed.value("from") else {
            if parsed.value("query") != nil || parsed.value("query-file") != nil { throw parsed.error("--query needs --from URL") }
            return nil
        }
        if parsed.positional("file") != nil { throw parsed.error("give either a token file or --from URL, not both") }
        if parsed.value("format") != nil { throw parsed.error("--format is for token files; --from reads the query's columns") }
        let url: DatabaseURL
        do { url = try DatabaseURL(parsing: from) } catch { throw parsed.error("--from: \(error.description)") }
        let query = try queryText(parsed)
        let source = "\(url) \(query)"
        // Credentials and templates that cannot be read stop the run now, not after a long query.
        for setup in try SendCommand.configureProviders(parsed) {
            if let path = parsed.value(setup.template.option) { _ = try SendCommand.readTemplate(path, what: "--\(setup.template.option) template") }
        }
        let resume = parsed.flag("resume")
        guard let results = parsed.value("results") else {
            if sending || resume { throw parsed.error("--from needs --results FILE: the snapshot of the query's rows is kept beside it") }
            return try checkSnapshot(url: url, query: query, source: source, parsed)
        }
        let expanded = try SendCommand.shardSpec(parsed).expand(results)
        let spool = spoolPath(results: expanded)
        let journalHolds = (FileSystem.size(CampaignDurability.journalPath(results: expanded)) ?? 0) > 0
        if sending { try lockCampaign(results: expanded) }
        if resume && journalHolds && !parsed.flag("force") {
            guard FileSystem.size(spool) != nil else {
                throw CommandFailure("--resume: the snapshot \(spool) that this campaign ran from is gone, so the rows it sent "
                    + "cannot be told apart: --force queries again and starts the campaign over")
            }
            if !parsed.flag("quiet") { Console.error("pushcast: resuming from the snapshot \(spool) (the database is not queried again)") }
            return Snapshot(path: spool, source: source, temporary: false)
        }
        if !sending { return try checkSnapshot(url: url, query: query, source: source, parsed) }
        if journalHolds && (FileSystem.size(expanded) ?? 0) > 0 && !parsed.flag("force") {
            throw CommandFailure("\(expanded) already holds results: --resume goes on with this campaign from its snapshot, "
                + "--force queries again and starts it over (and truncates the file)")
        }
        try take(url: url, query: query, to: spool, parsed)
        return Snapshot(path: spool, source: source, temporary: false)
    }

    /// The campaign's journal lock, taken before the query and held to the end of the process:
    /// a second sender of the same campaign stops here, before it could replace the snapshot this
    /// one reads. (A process's record locks are its own: the engine's lock on the same journal
    /// later is the same lock, and this descriptor is never closed, which would drop it.)
    nonisolated(unsafe) private static var campaignLock: JournalFile?

    private static func lockCampaign(results: String) throws {
        do { campaignLock = try JournalFile(path: CampaignDurability.journalPath(results: results)) } catch {
            throw CommandFailure(error.description)
        }
    }

    private static func checkSnapshot(url: DatabaseURL, query: String, source: String, _ parsed: ParsedArguments) throws -> Snapshot {
        let path = Environment.temporaryDirectory + "pushcast-check-\(CurrentProcess.id).snapshot.csv"
        try take(url: url, query: query, to: path, parsed)
        return Snapshot(path: path, source: source, temporary: true)
    }

    static func queryText(_ parsed: ParsedArguments) throws -> String {
        switch (parsed.value("query"), parsed.value("query-file")) {
        case (let text?, nil): return text
        case (nil, let file?): return try SendCommand.readTemplate(file, what: "query file")
        case (nil, nil): throw parsed.error("--from needs --query SQL or --query-file FILE")
        default: throw parsed.error("give --query or --query-file, not both")
        }
    }

    /// The password for `url`: from --db-password-env VAR, else the client's own variable.
    static func password(_ parsed: ParsedArguments, for url: DatabaseURL) throws -> String? {
        if let variable = parsed.value("db-password-env") {
            guard let value = Environment.value(variable) else {
                throw CommandFailure("--db-password-env: the environment variable \(variable) is not set")
            }
            return value
        }
        // libpq reads $PGPASSWORD (and ~/.pgpass) by itself.
        return url.kind == .mysql ? Environment.value("MYSQL_PWD") : nil
    }

    /// Runs the query once into `path` (written to `path.partial`, synced, then renamed, so a
    /// snapshot is whole or absent). A stop signal ends it as an interruption before sending.
    static func take(url: DatabaseURL, query: String, to path: String, _ parsed: ParsedArguments) throws {
        let partial = path + ".partial-\(CurrentProcess.id)"
        let started = Machine.real.monotonicClock().nowNanoseconds()
        let rows: Int
        do {
            let session = try Database.connect(url, password: try password(parsed, for: url), readOnly: true)
            defer { session.close() }
            let file = try OutputFile(path: partial, bufferBytes: 256 * 1024)
            let spool = CSVSpoolWriter { bytes in try file.append(bytes) }
            rows = try session.export(query: query, into: spool) { StopSignals.received > 0 }
            try file.flush()
            try file.sync()
        } catch {
            FileSystem.removeFile(partial)
            if StopSignals.received > 0 { throw SendCommand.Interrupted() }
            throw CommandFailure("--from: \(error)")
        }
        do { try FileSystem.rename(partial, to: path) } catch { throw CommandFailure("cannot rename the snapshot to \(path): \(error)") }
        if !parsed.flag("quiet") {
            Console.error(String(format: "pushcast: %@: %d rows read into the snapshot %@ (%.1f s)", url.description, rows, path,
                                 Double(Machine.real.monotonicClock().nowNanoseconds() - started) / 1e9))
        }
    }
}
