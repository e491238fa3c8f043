#if canImport(Glibc)
import Glibc
#endif
import CPostgres

/// PostgreSQL through libpq. The query streams out as `COPY (query) TO STDOUT (FORMAT csv,
/// HEADER)`: the server writes RFC 4180 CSV (NULL as an empty field), one row per message,
/// straight into the spool. Prunes go in with `COPY … FROM STDIN` into a temporary table.
final class PostgresSession: DatabaseSession {
    private var conn: OpaquePointer?
    let dialect = SQLDialect(kind: .postgres)

    init(url: DatabaseURL, password: String?) throws(DatabaseError) {
        var parameters: [(String, String)] = [("host", url.host), ("dbname", url.database), ("application_name", "pushcast"),
                                              ("connect_timeout", url.parameters["connect_timeout"] ?? "10"),
                                              // A server that goes silent is noticed within about 25 s.
                                              ("keepalives", "1"), ("keepalives_idle", "10"), ("keepalives_interval", "5"),
                                              ("keepalives_count", "3")]
        if let port = url.port { parameters.append(("port", String(port))) }
        if let user = url.user { parameters.append(("user", user)) }
        if let password { parameters.append(("password", password)) }
        if let root = url.parameters["sslrootcert"] { parameters.append(("sslrootcert", root)) }
        // Off this machine, TLS is required: a URL may ask for more (verify-ca, verify-full), not less.
        if let mode = try url.postgresSSLMode() { parameters.append(("sslmode", mode)) }
        conn = Self.connect(parameters)
        guard PQstatus(conn) == CONNECTION_OK else {
            let message = Self.message(PQerrorMessage(conn))
            PQfinish(conn)
            conn = nil
            throw DatabaseError("\(url): cannot connect: \(message)")
        }
        // The server's notices ("relation … already exists, skipping") are not for the user.
        PQsetNoticeProcessor(conn, { _, _ in }, nil)
    }

    private static func connect(_ parameters: [(String, String)]) -> OpaquePointer? {
        let keys = parameters.map { strdup($0.0) }
        let values = parameters.map { strdup($0.1) }
        defer {
            keys.forEach { free($0) }
            // The password's copy is wiped before it is freed.
            values.forEach { if let p = $0 { memset(p, 0, strlen(p)); free(p) } }
        }
        var keyPointers: [UnsafePointer<CChar>?] = keys.map { UnsafePointer($0) } + [nil]
        var valuePointers: [UnsafePointer<CChar>?] = values.map { UnsafePointer($0) } + [nil]
        return keyPointers.withUnsafeMutableBufferPointer { k in
            valuePointers.withUnsafeMutableBufferPointer { v in PQconnectdbParams(k.baseAddress, v.baseAddress, 0) }
        }
    }

    deinit { close() }

    func close() {
        if let conn { PQfinish(conn) }
        conn = nil
    }

    static func message(_ text: UnsafePointer<CChar>?) -> String {
        guard let text else { return "unknown error" }
        return String(cString: text).split(separator: "\n").map { $0.trimmingSpaces }.filter { !$0.isEmpty }.joined(separator: "; ")
    }

    private func failure(_ what: String, _ result: OpaquePointer?) -> DatabaseError {
        let text = result.map { Self.message(PQresultErrorMessage($0)) } ?? ""
        return DatabaseError("postgres: \(what): \(text.isEmpty ? Self.message(PQerrorMessage(conn)) : text)")
    }

    /// Runs one statement and checks its status; the caller clears the result.
    private func run(_ sql: String, expecting status: ExecStatusType) throws(DatabaseError) -> OpaquePointer {
        guard let result = PQexec(conn, sql) else { throw failure("no answer", nil) }
        guard PQresultStatus(result) == status else {
            let error = failure("statement failed", result)
            PQclear(result)
            throw error
        }
        return result
    }

    func export(query: String, into spool: CSVSpoolWriter, shouldStop: () -> Bool) throws(DatabaseError) -> Int {
        var text = Substring(query)
        while let last = text.last, last == ";" || last == " " || last == "\n" || last == "\t" || last == "\r" { text = text.dropLast() }
        // On lines of its own: a query that ends in a -- comment keeps its closing parenthesis.
        let started = try run("COPY (\n\(text)\n) TO STDOUT (FORMAT csv, HEADER true)", expecting: PGRES_COPY_OUT)
        PQclear(started)
        var messages = 0
        while true {
            var buffer: UnsafeMutablePointer<CChar>? = nil
            let length = PQgetCopyData(conn, &buffer, 0)
            if length == -1 { break }
            guard length >= 0, let buffer else { throw failure("the query's rows stopped coming", nil) }
            defer { PQfreemem(buffer) }
            try spool.raw(UnsafeRawBufferPointer(start: buffer, count: Int(length)))
            messages += 1
            if messages & 0x3FFF == 0 && shouldStop() { throw DatabaseError("interrupted while reading the query's rows") }
        }
        let finished = try run(expectingEndOf: "the query")
        PQclear(finished)
        spool.addRows(max(0, messages - 1))
        try spool.flush()
        return spool.rows
    }

    /// The final result after COPY: COMMAND_OK, or the server's error.
    private func run(expectingEndOf what: String) throws(DatabaseError) -> OpaquePointer {
        guard let result = PQgetResult(conn) else { throw failure("\(what) ended without a status", nil) }
        defer { while let extra = PQgetResult(conn) { PQclear(extra) } }
        guard PQresultStatus(result) == PGRES_COMMAND_OK else {
            let error = failure("\(what) failed", result)
            PQclear(result)
            throw error
        }
        return result
    }

    @discardableResult
    func execute(_ sql: String) throws(DatabaseError) -> Int {
        let result = try run(sql, expecting: PGRES_COMMAND_OK)
        defer { PQclear(result) }
        return Int(String(cString: PQcmdTuples(result))) ?? 0
    }

    func integers(_ sql: String) throws(DatabaseError) -> [Int] {
        let result = try run(sql, expecting: PGRES_TUPLES_OK)
        defer { PQclear(result) }
        guard PQntuples(result) > 0 else { return [] }
        return (0..<PQnfields(result)).map { Int(String(cString: PQgetvalue(result, 0, $0))) ?? 0 }
    }

    func lines(_ sql: String) throws(DatabaseError) -> [String] {
        let result = try run(sql, expecting: PGRES_TUPLES_OK)
        defer { PQclear(result) }
        return (0..<PQntuples(result)).map { row in
            (0..<PQnfields(result)).map { String(cString: PQgetvalue(result, row, $0)) }.joined(separator: " | ")
        }
    }

    func load(_ entries: ArraySlice<PruneEntry>) throws(DatabaseError) {
        let started = try run("COPY \(SQLDialect.pruneTable) (token, at) FROM STDIN (FORMAT csv)", expecting: PGRES_COPY_IN)
        PQclear(started)
        var failed: DatabaseError? = nil
        let spool = CSVSpoolWriter { [conn] bytes in
            if PQputCopyData(conn, bytes.baseAddress?.assumingMemoryBound(to: CChar.self), Int32(bytes.count)) != 1 {
                throw DatabaseError("postgres: cannot send the prune rows: \(PostgresSession.message(PQerrorMessage(conn)))")
            }
        }
        do throws(DatabaseError) {
            for entry in entries {
                var token = entry.token, at = entry.at
                token.withUTF8 { spool.field(UnsafeRawBufferPointer($0)) }
                at.withUTF8 { spool.field(UnsafeRawBufferPointer($0)) }
                try spool.endRow()
            }
            try spool.flush()
        } catch { failed = error }
        PQputCopyEnd(conn, failed == nil ? nil : "pushcast stopped")
        let finished = try run(expectingEndOf: "loading the prune table")
        PQclear(finished)
        if let failed { throw failed }
    }

    func executeForEach(_ sql: String, tokens: ArraySlice<PruneEntry>) throws(DatabaseError) -> Int {
        let numbered = sql.replacingFirst("?", with: "$1")
        guard let prepared = PQprepare(conn, "pushcast_each", numbered, 1, nil) else { throw failure("cannot prepare --sql", nil) }
        guard PQresultStatus(prepared) == PGRES_COMMAND_OK else {
            let error = failure("cannot prepare --sql", prepared)
            PQclear(prepared)
            throw error
        }
        PQclear(prepared)
        defer { PQclear(PQexec(conn, "DEALLOCATE pushcast_each")) }
        var changed = 0
        for entry in tokens {
            let result = entry.token.withCString { token in
                var values: [UnsafePointer<CChar>?] = [token]
                return PQexecPrepared(conn, "pushcast_each", 1, &values, nil, nil, 0)
            }
            guard let result, PQresultStatus(result) == PGRES_COMMAND_OK else {
                let error = failure("--sql failed", result)
                PQclear(result)
                throw error
            }
            changed += Int(String(cString: PQcmdTuples(result))) ?? 0
            PQclear(result)
        }
        return changed
    }
}

extension String {
    func replacingFirst(_ target: Character, with replacement: String) -> String {
        guard let index = firstIndex(of: target) else { return self }
        return String(self[..<index]) + replacement + String(self[self.index(after: index)...])
    }
}
