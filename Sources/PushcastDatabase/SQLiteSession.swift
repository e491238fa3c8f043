import CSQLite

/// SQLite through libsqlite3: the query is stepped row by row (memory stays flat), the prune
/// table is filled through one prepared INSERT.
final class SQLiteSession: DatabaseSession {
    private var db: OpaquePointer?
    let dialect = SQLDialect(kind: .sqlite)
    /// SQLITE_TRANSIENT: SQLite copies bound text before the call returns.
    private static let transient = unsafeBitCast(OpaquePointer(bitPattern: -1), to: sqlite3_destructor_type.self)

    init(path: String, readOnly: Bool) throws(DatabaseError) {
        // Never CREATE: a mistyped path is an error, not a new empty database.
        let status = sqlite3_open_v2(path, &db, (readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE) | SQLITE_OPEN_NOMUTEX, nil)
        guard status == SQLITE_OK else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "error \(status)"
            sqlite3_close(db)
            db = nil
            throw DatabaseError("sqlite:\(path): cannot open: \(message)")
        }
        sqlite3_busy_timeout(db, 10_000)
    }

    deinit { close() }

    func close() {
        if let db { sqlite3_close_v2(db) }
        db = nil
    }

    private func failure(_ what: String) -> DatabaseError {
        DatabaseError("sqlite: \(what): \(db.map { String(cString: sqlite3_errmsg($0)) } ?? "closed")")
    }

    private func prepare(_ sql: String) throws(DatabaseError) -> OpaquePointer {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(db, sql, -1, &statement, nil) == SQLITE_OK, let statement else {
            throw failure("cannot prepare the statement")
        }
        return statement
    }

    func export(query: String, into spool: CSVSpoolWriter, shouldStop: () -> Bool) throws(DatabaseError) -> Int {
        let statement = try prepare(query)
        defer { sqlite3_finalize(statement) }
        let count = Int(sqlite3_column_count(statement))
        guard count > 0 else { throw DatabaseError("sqlite: the query returns no columns") }
        try spool.header((0..<count).map { String(cString: sqlite3_column_name(statement, Int32($0))) })
        while true {
            let status = sqlite3_step(statement)
            if status == SQLITE_DONE { break }
            guard status == SQLITE_ROW else { throw failure("the query failed") }
            for column in 0..<Int32(count) {
                if sqlite3_column_type(statement, column) == SQLITE_NULL {
                    spool.field(nil)
                    continue
                }
                let text = sqlite3_column_text(statement, column)
                let length = Int(sqlite3_column_bytes(statement, column))
                spool.field(UnsafeRawBufferPointer(start: text, count: length))
            }
            try spool.endRow()
            if spool.rows & 0x3FFF == 0 && shouldStop() { throw DatabaseError("interrupted while reading the query's rows") }
        }
        try spool.flush()
        return spool.rows
    }

    @discardableResult
    func execute(_ sql: String) throws(DatabaseError) -> Int {
        let statement = try prepare(sql)
        defer { sqlite3_finalize(statement) }
        var status = sqlite3_step(statement)
        while status == SQLITE_ROW { status = sqlite3_step(statement) }
        guard status == SQLITE_DONE else { throw failure("statement failed") }
        return Int(sqlite3_changes(db))
    }

    func integers(_ sql: String) throws(DatabaseError) -> [Int] {
        let statement = try prepare(sql)
        defer { sqlite3_finalize(statement) }
        guard sqlite3_step(statement) == SQLITE_ROW else { throw failure("query failed") }
        return (0..<sqlite3_column_count(statement)).map { Int(sqlite3_column_int64(statement, $0)) }
    }

    func lines(_ sql: String) throws(DatabaseError) -> [String] {
        let statement = try prepare(sql)
        defer { sqlite3_finalize(statement) }
        var out: [String] = []
        while sqlite3_step(statement) == SQLITE_ROW {
            out.append((0..<sqlite3_column_count(statement)).map { column in
                sqlite3_column_text(statement, column).map { String(cString: $0) } ?? "NULL"
            }.joined(separator: " | "))
        }
        return out
    }

    func load(_ entries: ArraySlice<PruneEntry>) throws(DatabaseError) {
        let statement = try prepare("INSERT OR IGNORE INTO \(SQLDialect.pruneTable) (token, at) VALUES (?, ?)")
        defer { sqlite3_finalize(statement) }
        for entry in entries {
            sqlite3_reset(statement)
            sqlite3_bind_text(statement, 1, entry.token, -1, Self.transient)
            sqlite3_bind_text(statement, 2, entry.at, -1, Self.transient)
            guard sqlite3_step(statement) == SQLITE_DONE else { throw failure("cannot load the prune table") }
        }
    }

    func executeForEach(_ sql: String, tokens: ArraySlice<PruneEntry>) throws(DatabaseError) -> Int {
        let statement = try prepare(sql)
        defer { sqlite3_finalize(statement) }
        var changed = 0
        for entry in tokens {
            sqlite3_reset(statement)
            sqlite3_bind_text(statement, 1, entry.token, -1, Self.transient)
            guard sqlite3_step(statement) == SQLITE_DONE else { throw failure("--sql failed") }
            changed += Int(sqlite3_changes(db))
        }
        return changed
    }
}
