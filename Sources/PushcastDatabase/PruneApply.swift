import PushcastCore

/// `prune-apply`: what to do to the rows of pruned tokens, and how. Pure: it builds statements
/// and adds up counts; a `DatabaseSession` runs them.
public enum PruneAction: Sendable, Equatable {
    /// `--set "is_active = false"` (and more).
    case set([SetClause])
    /// `--delete`.
    case delete
    /// `--sql "UPDATE … WHERE token = ?"`: run once per token.
    case sql(String)
}

/// One `--set "column = value"`. The value is `true`, `false`, `null`, an integer, or
/// `{unregistered_at}` (the prune line's time): never text that would become SQL.
public struct SetClause: Sendable, Equatable {
    public var column: SQLIdentifier
    public var value: String

    public init(parsing text: String) throws(DatabaseError) {
        let pair = text.split(separator: "=", maxSplits: 1)
        guard pair.count == 2 else { throw DatabaseError("--set '\(text)': expected COLUMN = VALUE") }
        column = try SQLIdentifier(pair[0].trimmingSpaces, what: "--set column")
        let raw = pair[1].trimmingSpaces
        switch raw.lowercased() {
        case "true", "false", "null": value = raw.lowercased()
        case "{unregistered_at}": value = "{unregistered_at}"
        default:
            guard let number = Int(raw) else {
                throw DatabaseError("--set '\(text)': the value must be true, false, null, an integer or {unregistered_at}")
            }
            value = String(number)
        }
    }

    /// The value as SQL: a keyword, a number, or the prune table's `at` column.
    func sql(pruneAlias: String) -> String { value == "{unregistered_at}" ? "\(pruneAlias).at" : value }
}

extension Substring {
    var trimmingSpaces: String {
        String(drop(while: { $0 == " " || $0 == "\t" }).reversed().drop(while: { $0 == " " || $0 == "\t" }).reversed())
    }
}

/// The target of `prune-apply` and the statements it runs against each batch.
public struct PruneApplyPlan: Sendable {
    public var table: SQLIdentifier?
    public var tokenColumn: SQLIdentifier?
    public var updatedColumn: SQLIdentifier?
    public var action: PruneAction
    public var dialect: SQLDialect

    public init(table: SQLIdentifier?, tokenColumn: SQLIdentifier?, updatedColumn: SQLIdentifier?, action: PruneAction,
                dialect: SQLDialect) throws(DatabaseError) {
        self.table = table
        self.tokenColumn = tokenColumn
        self.updatedColumn = updatedColumn
        self.action = action
        self.dialect = dialect
        if case .sql(let text) = action {
            guard text.filter({ $0 == "?" }).count == 1 else { throw DatabaseError("--sql needs exactly one ? (the token)") }
        } else if table == nil || tokenColumn == nil {
            throw DatabaseError("--set and --delete need --table and --token-column")
        }
    }

    private var p: String { SQLDialect.pruneTable }
    private var t: String { dialect.quote(table!) }
    private func column(_ c: SQLIdentifier) -> String { "\(t).\(dialect.quote(c))" }
    private var join: String { "\(column(tokenColumn!)) = \(p).token" }

    /// Rows of the table that are not re-registered since the prune line's time.
    private var notReregistered: String {
        updatedColumn.map { "(\(column($0)) IS NULL OR \(column($0)) <= \(p).at)" } ?? "1 = 1"
    }

    /// Matched rows, rows skipped as re-registered, prune tokens not found: one pass, the prune
    /// table joined to the table (a token that matches nothing gives one row of NULLs).
    public var countStatement: String? {
        guard table != nil, tokenColumn != nil else { return nil }
        let reregistered = updatedColumn.map { "SUM(CASE WHEN \(column($0)) > \(p).at THEN 1 ELSE 0 END)" } ?? "0"
        return "SELECT COUNT(\(column(tokenColumn!))), COALESCE(\(reregistered), 0), "
            + "COALESCE(SUM(CASE WHEN \(column(tokenColumn!)) IS NULL THEN 1 ELSE 0 END), 0) FROM \(p) LEFT JOIN \(t) ON \(join)"
    }

    /// The one statement that prunes a batch (nil for --sql, which runs per token).
    public var applyStatement: String? {
        switch action {
        case .sql: return nil
        case .delete:
            return "DELETE FROM \(t) WHERE EXISTS (SELECT 1 FROM \(p) WHERE \(join) AND \(notReregistered))"
        case .set(let clauses):
            let unchanged = clauses.map { dialect.same(column($0.column), $0.sql(pruneAlias: p)) }.joined(separator: " AND ")
            let guardText = "\(notReregistered) AND NOT (\(unchanged))"
            switch dialect.kind {
            case .mysql:
                let sets = clauses.map { "\(column($0.column)) = \($0.sql(pruneAlias: p))" }.joined(separator: ", ")
                return "UPDATE \(t) JOIN \(p) ON \(join) SET \(sets) WHERE \(guardText)"
            case .postgres, .sqlite:
                // PostgreSQL and SQLite name the SET target without its table.
                let sets = clauses.map { "\(dialect.quote($0.column)) = \($0.sql(pruneAlias: p))" }.joined(separator: ", ")
                return "UPDATE \(t) SET \(sets) FROM \(p) WHERE \(join) AND \(guardText)"
            }
        }
    }

    /// PostgreSQL only: whether the token column leads an index. Its planner prices a batch's
    /// index lookups above one scan of the whole table and hashes it (three scans of a
    /// million-row table per batch, measured); with an index, each batch's transaction turns
    /// hash and merge joins off, so every pruned token is one index lookup. Without one the
    /// planner keeps its choice. (The names are checked identifiers, so the literal is safe.)
    public var indexCheckStatement: String? {
        guard dialect.kind == .postgres, table != nil, let tokenColumn else { return nil }
        return "SELECT COUNT(*) FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0] "
            + "WHERE i.indrelid = '\(t)'::regclass AND a.attname = '\(tokenColumn.parts[0])'"
    }

    public static let indexJoinSettings = ["SET LOCAL enable_hashjoin = off", "SET LOCAL enable_mergejoin = off"]

    /// The statement whose plan the dry run (and docs/BENCHMARKS.md) shows.
    public var explainStatement: String? {
        guard let apply = applyStatement else { return nil }
        switch dialect.kind {
        case .sqlite: return "EXPLAIN QUERY PLAN " + apply
        case .postgres, .mysql: return "EXPLAIN " + apply
        }
    }
}

/// What `prune-apply` did (or, with --dry-run, would do).
public struct PruneApplySummary: Sendable, Equatable {
    /// Prune lines read, and distinct tokens among them.
    public var lines = 0
    public var tokens = 0
    /// Table rows whose token is in the prune file.
    public var matched = 0
    /// Rows changed (updated or deleted).
    public var changed = 0
    /// Rows left alone because they re-registered after the prune line's time.
    public var reregistered = 0
    /// Prune tokens with no row in the table.
    public var notFound = 0
    public var batches = 0
    /// Whether the counts of matched rows, skips and misses are known (not with --sql alone).
    public var counted = true
    public init() {}

    /// Matched rows already in the pruned state (a second apply finds them all so).
    public var alreadyApplied: Int { max(0, matched - reregistered - changed) }

    public func text(dryRun: Bool) -> String {
        func line(_ label: String, _ value: Int) -> String { "  " + label + String(repeating: " ", count: max(1, 25 - label.count)) + "\(value)\n" }
        var out = "prune-apply: \(lines) prune lines, \(tokens) distinct tokens, \(batches) batches\n"
        let changedLabel = dryRun ? "rows that would change:" : "rows changed:"
        if counted {
            out += line("rows matched:", matched) + line(changedLabel, changed) + line("already pruned:", alreadyApplied)
                + line("skipped, re-registered:", reregistered) + line("tokens not found:", notFound)
        } else {
            out += line(changedLabel, changed)
        }
        if !dryRun && changed == 0 && lines > 0 { out += "nothing to change: the table already reflects this prune file" }
        return out.hasSuffix("\n") ? String(out.dropLast()) : out
    }
}

/// Runs a plan against a session, batch by batch, each batch one transaction (rolled back on a
/// dry run, so its counts are exact and nothing stays changed).
public enum PruneApplier {
    public static let batchSizeDefault = 10_000

    /// `explain` hears the database's plan for the apply statement, taken once the first batch
    /// is loaded (so the planner sees a real prune table).
    public static func run(_ plan: PruneApplyPlan, session: DatabaseSession, entries: [PruneEntry], lines: Int, dryRun: Bool,
                           batchSize: Int = batchSizeDefault, explain: (([String]) -> Void)? = nil,
                           shouldStop: () -> Bool) throws(DatabaseError) -> PruneApplySummary {
        var summary = PruneApplySummary()
        summary.lines = lines
        summary.tokens = entries.count
        summary.counted = plan.countStatement != nil
        try session.execute(plan.dialect.createPruneTable)
        let indexed = try plan.indexCheckStatement.map { sql throws(DatabaseError) in try session.integers(sql).first ?? 0 > 0 } ?? false
        var start = 0
        while start < entries.count {
            if shouldStop() { throw DatabaseError("interrupted after \(summary.batches) batches (each batch is one transaction: run it again)") }
            let batch = entries[start..<min(entries.count, start + batchSize)]
            try session.execute(plan.dialect.begin)
            do throws(DatabaseError) {
                if indexed { for setting in PruneApplyPlan.indexJoinSettings { try session.execute(setting) } }
                try apply(plan, batch: batch, session: session, into: &summary,
                          explain: summary.batches == 0 ? explain : nil)
                try session.execute(dryRun ? "ROLLBACK" : "COMMIT")
            } catch {
                _ = try? session.execute("ROLLBACK")
                throw error
            }
            summary.batches += 1
            start += batchSize
        }
        return summary
    }

    private static func apply(_ plan: PruneApplyPlan, batch: ArraySlice<PruneEntry>, session: DatabaseSession,
                              into summary: inout PruneApplySummary, explain: (([String]) -> Void)?) throws(DatabaseError) {
        try session.execute("DELETE FROM \(SQLDialect.pruneTable)")
        try session.load(batch)
        if let analyze = plan.dialect.analyzePruneTable { try session.execute(analyze) }
        if let explain, let statement = plan.explainStatement { explain(try session.lines(statement)) }
        if let count = plan.countStatement {
            let found = try session.integers(count)
            guard found.count == 3 else { throw DatabaseError("the count query returned \(found.count) columns") }
            summary.matched += found[0]
            summary.reregistered += found[1]
            summary.notFound += found[2]
        }
        switch plan.action {
        case .sql(let text): summary.changed += try session.executeForEach(text, tokens: batch)
        case .set, .delete: summary.changed += try session.execute(plan.applyStatement!)
        }
    }
}

/// Prune-file times as the databases compare them.
public enum PruneTime {
    /// `2026-01-02T03:04:05.678Z` (a prune line's unregistered_at), `2026-01-02 03:04:05`, or
    /// epoch seconds, as `2026-01-02 03:04:05` (UTC); nil when it is none of these.
    public static func normalize(_ text: String) -> String? {
        if let seconds = Int64(text) { return format(epochSeconds: seconds) }
        let bytes = Array(text.utf8)
        guard bytes.count >= 19, bytes[4] == 0x2D, bytes[7] == 0x2D, bytes[10] == 0x54 || bytes[10] == 0x20,
              bytes[13] == 0x3A, bytes[16] == 0x3A else { return nil }
        let digits = [0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18]
        guard digits.allSatisfy({ bytes[$0] >= 0x30 && bytes[$0] <= 0x39 }) else { return nil }
        let rest = bytes[19...]
        guard rest.isEmpty || rest.first == 0x2E || rest == [0x5A] || rest.last == 0x5A else { return nil }
        return String(decoding: bytes[0..<10], as: UTF8.self) + " " + String(decoding: bytes[11..<19], as: UTF8.self)
    }

    /// `YYYY-MM-DD HH:MM:SS` (UTC) of an epoch second.
    public static func format(epochSeconds: Int64) -> String {
        CivilTime(epochSeconds: epochSeconds).text(separator: " ")
    }
}
