import CMariaDB

/// MySQL and MariaDB through libmariadb. The query streams with `mysql_use_result` (rows come
/// off the socket one at a time, nothing is buffered whole); prunes go into a temporary table
/// through prepared multi-row INSERTs.
final class MariaDBSession: DatabaseSession {
    private var mysql: UnsafeMutablePointer<MYSQL>?
    let dialect = SQLDialect(kind: .mysql)
    /// Rows per prepared INSERT into the prune table.
    static let rowsPerInsert = 500

    init(url: DatabaseURL, password: String?) throws(DatabaseError) {
        guard let handle = mysql_init(nil) else { throw DatabaseError("mysql: out of memory") }
        mysql = handle
        var connectTimeout = UInt32(url.parameters["connect_timeout"].flatMap { UInt32($0) } ?? 10)
        // A server that goes silent mid-result is an error after this long, not a hang.
        var readTimeout: UInt32 = 60
        mysql_options(handle, MYSQL_OPT_CONNECT_TIMEOUT, &connectTimeout)
        mysql_options(handle, MYSQL_OPT_READ_TIMEOUT, &readTimeout)
        mysql_options(handle, MYSQL_SET_CHARSET_NAME, "utf8mb4")
        let requiresTLS: Bool
        do { requiresTLS = try url.mysqlRequiresTLS() } catch {
            close()
            throw error
        }
        if requiresTLS {
            // Off this machine, TLS is required (the connection fails without it), as with APNs.
            var enforce: Int8 = 1
            mysql_options(handle, MYSQL_OPT_SSL_ENFORCE, &enforce)
            mysql_options(handle, MYSQL_OPT_SSL_VERIFY_SERVER_CERT, &enforce)
        }
        if let ca = url.parameters["ssl-ca"] { mysql_options(handle, MYSQL_OPT_SSL_CA, ca) }
        let connected = mysql_real_connect(handle, url.parameters["socket"] == nil ? url.host : nil, url.user, password, url.database,
                                           UInt32(url.port ?? 0), url.parameters["socket"], 0)
        guard connected != nil else {
            let error = DatabaseError("\(url): cannot connect: \(String(cString: mysql_error(handle)))")
            close()
            throw error
        }
    }

    deinit { close() }

    func close() {
        if let mysql { mysql_close(mysql) }
        mysql = nil
    }

    private func failure(_ what: String) -> DatabaseError {
        DatabaseError("mysql: \(what): \(mysql.map { String(cString: mysql_error($0)) } ?? "closed")")
    }

    private func query(_ sql: String) throws(DatabaseError) {
        var copy = sql
        let status = copy.withUTF8 { utf8 in
            utf8.withMemoryRebound(to: CChar.self) { mysql_real_query(mysql, $0.baseAddress, UInt(utf8.count)) }
        }
        guard status == 0 else { throw failure("statement failed") }
    }

    func export(query sql: String, into spool: CSVSpoolWriter, shouldStop: () -> Bool) throws(DatabaseError) -> Int {
        try query(sql)
        guard let result = mysql_use_result(mysql) else { throw failure("the query returned no rows") }
        defer { mysql_free_result(result) }
        let count = Int(mysql_num_fields(result))
        let fields = mysql_fetch_fields(result)!
        try spool.header((0..<count).map { String(cString: fields[$0].name) })
        while let row = mysql_fetch_row(result) {
            let lengths = mysql_fetch_lengths(result)!
            for column in 0..<count {
                spool.field(row[column].map { UnsafeRawBufferPointer(start: $0, count: Int(lengths[column])) })
            }
            try spool.endRow()
            if spool.rows & 0x3FFF == 0 && shouldStop() { throw DatabaseError("interrupted while reading the query's rows") }
        }
        // The end of the rows, or an error (the server went away): mysql_fetch_row says nil to both.
        guard mysql_errno(mysql) == 0 else { throw failure("the query's rows stopped coming") }
        try spool.flush()
        return spool.rows
    }

    @discardableResult
    func execute(_ sql: String) throws(DatabaseError) -> Int {
        try query(sql)
        if let result = mysql_store_result(mysql) { mysql_free_result(result) }
        let changed = mysql_affected_rows(mysql)
        return changed == UInt64.max ? 0 : Int(changed)
    }

    private func rows(_ sql: String) throws(DatabaseError) -> [[String]] {
        try query(sql)
        guard let result = mysql_store_result(mysql) else { throw failure("the query returned no rows") }
        defer { mysql_free_result(result) }
        let count = Int(mysql_num_fields(result))
        var out: [[String]] = []
        while let row = mysql_fetch_row(result) {
            out.append((0..<count).map { row[$0].map { String(cString: $0) } ?? "NULL" })
        }
        return out
    }

    func integers(_ sql: String) throws(DatabaseError) -> [Int] {
        try rows(sql).first?.map { Int($0) ?? Int(Double($0) ?? 0) } ?? []
    }

    func lines(_ sql: String) throws(DatabaseError) -> [String] {
        try rows(sql).map { $0.joined(separator: " | ") }
    }

    func load(_ entries: ArraySlice<PruneEntry>) throws(DatabaseError) {
        var start = entries.startIndex
        while start < entries.endIndex {
            let chunk = entries[start..<min(entries.endIndex, start + Self.rowsPerInsert)]
            let sql = "INSERT INTO \(SQLDialect.pruneTable) (token, at) VALUES " + Array(repeating: "(?, ?)", count: chunk.count).joined(separator: ", ")
            _ = try executePrepared(sql, values: chunk.flatMap { [$0.token, $0.at] })
            start = chunk.endIndex
        }
    }

    func executeForEach(_ sql: String, tokens: ArraySlice<PruneEntry>) throws(DatabaseError) -> Int {
        var changed = 0
        for entry in tokens { changed += try executePrepared(sql, values: [entry.token]) }
        return changed
    }

    /// Prepares `sql`, binds `values` as strings (parameters, never SQL text), runs it, and
    /// returns the rows it changed.
    private func executePrepared(_ sql: String, values: [String]) throws(DatabaseError) -> Int {
        guard let statement = mysql_stmt_init(mysql) else { throw failure("out of memory") }
        defer { mysql_stmt_close(statement) }
        let bytes = values.map { Array($0.utf8) }
        let total = bytes.reduce(0) { $0 + $1.count }
        let blob = UnsafeMutableRawPointer.allocate(byteCount: max(1, total), alignment: 1)
        let lengths = UnsafeMutablePointer<UInt>.allocate(capacity: max(1, values.count))
        let binds = UnsafeMutablePointer<MYSQL_BIND>.allocate(capacity: max(1, values.count))
        binds.initialize(repeating: MYSQL_BIND(), count: max(1, values.count))
        defer { blob.deallocate(); lengths.deallocate(); binds.deallocate() }
        var offset = 0
        for (index, value) in bytes.enumerated() {
            value.withUnsafeBytes { (blob + offset).copyMemory(from: $0.baseAddress ?? UnsafeRawPointer(blob), byteCount: $0.count) }
            lengths[index] = UInt(value.count)
            binds[index].buffer_type = MYSQL_TYPE_STRING
            binds[index].buffer = blob + offset
            binds[index].buffer_length = UInt(value.count)
            binds[index].length = lengths + index
            offset += value.count
        }
        let statementError = { DatabaseError("mysql: statement failed: \(String(cString: mysql_stmt_error(statement)))") }
        guard mysql_stmt_prepare(statement, sql, UInt(sql.utf8.count)) == 0 else { throw statementError() }
        guard mysql_stmt_bind_param(statement, binds) == 0 else { throw statementError() }
        guard mysql_stmt_execute(statement) == 0 else { throw statementError() }
        let changed = mysql_stmt_affected_rows(statement)
        return changed == UInt64.max ? 0 : Int(changed)
    }
}
