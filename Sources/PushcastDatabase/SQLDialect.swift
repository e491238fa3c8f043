/// What differs between the three SQL dialects in the statements `prune-apply` runs. Table and
/// column names are checked as identifiers and quoted; values are keywords, numbers, or the
/// prune table's own columns: no statement holds text from a token or from a user's value.
public struct SQLDialect: Sendable {
    public var kind: DatabaseKind
    public static let pruneTable = "pushcast_prune"

    public init(kind: DatabaseKind) { self.kind = kind }

    /// `"name"` (PostgreSQL, SQLite) or `` `name` `` (MySQL); a dotted name (schema.table) is
    /// quoted part by part.
    public func quote(_ identifier: SQLIdentifier) -> String {
        identifier.parts.map { kind == .mysql ? "`\($0)`" : "\"\($0)\"" }.joined(separator: ".")
    }

    /// `a IS NOT DISTINCT FROM b`: equal, NULLs included.
    func same(_ a: String, _ b: String) -> String {
        kind == .mysql ? "\(a) <=> \(b)" : "\(a) IS NOT DISTINCT FROM \(b)"
    }

    public var createPruneTable: String {
        switch kind {
        case .sqlite: return "CREATE TEMP TABLE IF NOT EXISTS \(Self.pruneTable) (token TEXT PRIMARY KEY, at TEXT NOT NULL)"
        case .postgres: return "CREATE TEMP TABLE IF NOT EXISTS \(Self.pruneTable) (token text PRIMARY KEY, at timestamp NOT NULL)"
        case .mysql:
            return "CREATE TEMPORARY TABLE IF NOT EXISTS \(Self.pruneTable) (token VARCHAR(2048) NOT NULL, at DATETIME NOT NULL, KEY (token(255)))"
        }
    }

    /// Statistics for the freshly loaded prune table, so the planner drives the join from it
    /// (one index lookup per pruned token) rather than scanning the whole table.
    public var analyzePruneTable: String? {
        switch kind {
        case .sqlite: return "ANALYZE temp.\(Self.pruneTable)"
        case .postgres: return "ANALYZE \(Self.pruneTable)"
        case .mysql: return nil
        }
    }

    public var begin: String { kind == .mysql ? "START TRANSACTION" : "BEGIN" }
}

/// A table or column name as the user gave it: letters, digits, `_` and `$`, not starting with
/// a digit, at most 64 characters; `schema.table` for a table. Anything else is refused.
public struct SQLIdentifier: Sendable, Equatable, CustomStringConvertible {
    public var parts: [String]

    public init(_ text: String, dotted: Bool = false, what: String) throws(DatabaseError) {
        let parts = dotted ? text.split(separator: ".", omittingEmptySubsequences: false).map(String.init) : [text]
        guard parts.count <= 2 else { throw DatabaseError("\(what) '\(text)': at most schema.table") }
        for part in parts {
            let bytes = Array(part.utf8)
            let ok = !bytes.isEmpty && bytes.count <= 64 && !(bytes[0] >= 0x30 && bytes[0] <= 0x39)
                && bytes.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || $0 == 0x5F || $0 == 0x24 }
            guard ok else {
                throw DatabaseError("\(what) '\(text)' is not a plain SQL name (letters, digits, _ and $, not starting with a digit, at most 64)")
            }
        }
        self.parts = parts
    }

    public var description: String { parts.joined(separator: ".") }
}
