import Foundation
import PushcastCommandLine
import PushcastCore
import PushcastDatabase
import PushcastEngine
import PushcastInput
import PushcastSystem

/// `pushcast prune-apply`: a campaign's prune file written back to the table its tokens came
/// from, in batches, each one transaction; only prunes; idempotent.
enum PruneApplyCommand {
    static let spec = CommandSpec(
        name: "pushcast prune-apply",
        summary: "Apply a prune file to a database table: deactivate (--set) or --delete the rows of dead tokens, once.",
        options: [
            .value("to", metavar: "URL", help: "the database: sqlite:PATH, postgres://user@host:port/db, mysql://user@host:port/db (TLS required off loopback)"),
            .value("table", metavar: "TABLE", help: "the table holding the tokens (schema.table allowed)"),
            .value("token-column", metavar: "COLUMN", help: "the table's token column"),
            .value("set", metavar: "\"COLUMN = VALUE\"", help: "set a column on each pruned row (repeatable): VALUE is true, false, null, "
                   + "an integer, or {unregistered_at} (the prune line's time, else --since, else now)", isRepeatable: true),
            .flag("delete", help: "delete the pruned rows instead"),
            .value("sql", metavar: "SQL", help: "run this statement once per token instead, the token bound to its one ? (UPDATE … WHERE token = ?)"),
            .value("updated-column", metavar: "COLUMN",
                   help: "leave alone a row whose COLUMN is newer than the prune line's time (the token re-registered)"),
            .value("since", metavar: "TIME", help: "the time for prune lines without unregistered_at (FCM's): when the campaign started "
                   + "(ISO 8601 UTC or epoch seconds); needed with --updated-column"),
            .value("batch", metavar: "N", help: "tokens per transaction", defaultDescription: "10000"),
            .flag("dry-run", help: "print the statements, their plan and the counts, and roll every batch back"),
            .value("db-password-env", metavar: "VAR", help: "environment variable holding the database password",
                   defaultDescription: "$PGPASSWORD (postgres), $MYSQL_PWD (mysql)"),
        ],
        positionals: [PositionalSpec("prune-file", help: "a prune file (token,provider,reason,unregistered_at,id), a campaign's or a merged one")])

    static func run(_ parsed: ParsedArguments) throws -> ExitStatus {
        guard let path = parsed.positional("prune-file") else { throw parsed.error("missing the prune file") }
        let url: DatabaseURL
        do { url = try DatabaseURL(parsing: try parsed.requiredValue("to")) } catch let error as DatabaseError {
            throw parsed.error("--to: \(error.description)")
        }
        let dialect = SQLDialect(kind: url.kind)
        let plan: PruneApplyPlan
        let updated: SQLIdentifier?
        do {
            let table = try parsed.value("table").map { try SQLIdentifier($0, dotted: true, what: "--table") }
            let token = try parsed.value("token-column").map { try SQLIdentifier($0, what: "--token-column") }
            updated = try parsed.value("updated-column").map { try SQLIdentifier($0, what: "--updated-column") }
            plan = try PruneApplyPlan(table: table, tokenColumn: token, updatedColumn: updated, action: try action(parsed), dialect: dialect)
        } catch let error as DatabaseError {
            throw parsed.error(error.description)
        }
        let (entries, lines) = try readPruneFile(path, since: try since(parsed), needsTime: updated != nil)
        StopSignals.install()
        let dryRun = parsed.flag("dry-run")
        let session: DatabaseSession
        do { session = try Database.connect(url, password: try DatabaseInput.password(parsed, for: url)) } catch let error as DatabaseError {
            throw CommandFailure(error.description)
        }
        defer { session.close() }
        do {
            if dryRun { show(plan) }
            let batch = try parsed.int("batch", default: PruneApplier.batchSizeDefault, range: 1...1_000_000)
            let explain: (([String]) -> Void)? = dryRun ? { lines in
                Console.out("plan (first batch loaded):")
                for line in lines { Console.out("  \(line)") }
            } : nil
            let summary = try PruneApplier.run(plan, session: session, entries: entries, lines: lines, dryRun: dryRun, batchSize: batch,
                                               explain: explain) { StopSignals.received > 0 }
            Console.out(summary.text(dryRun: dryRun))
            return .success
        } catch let error as DatabaseError {
            Console.error("pushcast: prune-apply: \(error.description)")
            return StopSignals.received > 0 ? .interrupted : .stopped
        }
    }

    static func action(_ parsed: ParsedArguments) throws -> PruneAction {
        let sets = parsed.values("set"), delete = parsed.flag("delete"), sql = parsed.value("sql")
        switch (sets.isEmpty, delete, sql) {
        case (false, false, nil): return .set(try sets.map { try SetClause(parsing: $0) })
        case (true, true, nil): return .delete
        case (true, false, let text?): return .sql(text)
        case (true, false, nil): throw parsed.error("say what to do: --set \"is_active = false\", --delete, or --sql \"UPDATE … WHERE token = ?\"")
        default: throw parsed.error("choose one of --set, --delete and --sql")
        }
    }

    static func since(_ parsed: ParsedArguments) throws -> String? {
        guard let text = parsed.value("since") else { return nil }
        guard let time = PruneTime.normalize(text) else {
            throw parsed.error("--since '\(text)': expected ISO 8601 UTC (2026-01-02T03:04:05Z) or epoch seconds")
        }
        return time
    }

    /// The prune file's distinct tokens (the first line of each), each with its time: the line's
    /// unregistered_at, else --since, else now. A line without a usable time stops the run when
    /// --updated-column needs one.
    static func readPruneFile(_ path: String, since: String?, needsTime: Bool) throws -> ([PruneEntry], Int) {
        let now = PruneTime.format(epochSeconds: Int64(Machine.real.wallClockSeconds()))
        let reader: TokenFileReader
        do { reader = try TokenFileReader(source: InputFileSource(try InputFile(path: path)), format: .csv, fileName: path) } catch {
            throw CommandFailure("\(error)")
        }
        guard let tokenColumn = reader.columnIndex("token"), let atColumn = reader.columnIndex("unregistered_at") else {
            throw CommandFailure("\(path): not a prune file (its header needs token and unregistered_at)")
        }
        var seen = Set<String>()
        var entries: [PruneEntry] = []
        var lines = 0
        while let record = try reader.next() {
            guard case .row(let view) = record else {
                if case .malformed(_, let problem) = record { throw CommandFailure(problem.description) }
                continue
            }
            lines += 1
            guard let token = view.string(tokenColumn), !token.isEmpty else {
                throw CommandFailure(InputProblem(file: path, line: view.line, field: "token", message: "missing").description)
            }
            let text = view.string(atColumn) ?? ""
            var at = since
            if !text.isEmpty {
                guard let time = PruneTime.normalize(text) else {
                    throw CommandFailure(InputProblem(file: path, line: view.line, field: "unregistered_at", message: "not a time: '\(text)'").description)
                }
                at = time
            } else if since == nil && needsTime {
                throw CommandFailure(InputProblem(file: path, line: view.line, field: "unregistered_at",
                                                  message: "empty, and --updated-column needs a time for every line: give --since TIME "
                                                      + "(when the campaign started)").description)
            }
            if seen.insert(token).inserted { entries.append(PruneEntry(token: token, at: at ?? now)) }
        }
        return (entries, lines)
    }

    /// --dry-run: the statements each batch runs, and the database's plan for the prune.
    static func show(_ plan: PruneApplyPlan) {
        Console.out("prune-apply --dry-run: each batch runs, in one transaction (rolled back on a dry run):")
        var statements = [plan.dialect.createPruneTable, "DELETE FROM \(SQLDialect.pruneTable)",
                          "(the batch's tokens and times loaded into \(SQLDialect.pruneTable) as data: "
                              + (plan.dialect.kind == .postgres ? "COPY … FROM STDIN" : "a prepared INSERT") + ")"]
        statements += plan.dialect.analyzePruneTable.map { [$0] } ?? []
        if plan.indexCheckStatement != nil {
            statements.append("(when the token column leads an index) " + PruneApplyPlan.indexJoinSettings.joined(separator: "; "))
        }
        statements += plan.countStatement.map { [$0] } ?? []
        if case .sql(let text) = plan.action { statements.append("\(text)   -- prepared, once per token") }
        if let apply = plan.applyStatement { statements.append(apply) }
        for statement in statements { Console.out("  \(statement)") }
    }
}
