/// A failure talking to a database: the server's message (or ours), never a password. Exit 2
/// before anything is sent.
public struct DatabaseError: Error, Sendable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// The three database families pushcast reads from and prunes into.
public enum DatabaseKind: String, Sendable {
    case sqlite, postgres, mysql
}

/// `sqlite:PATH`, `postgres://user@host:port/db?sslmode=…`, `mysql://user@host:port/db?socket=…`.
/// A password in the URL is refused (it would end up in shell history, `ps` and logs): it comes
/// from the environment ($PGPASSWORD, $MYSQL_PWD, or `--db-password-env VAR`). `description`
/// is safe to print.
public struct DatabaseURL: Sendable, CustomStringConvertible {
    public var kind: DatabaseKind
    /// SQLite: the database file.
    public var path = ""
    public var user: String?
    public var host = ""
    public var port: Int?
    public var database = ""
    /// Query parameters (percent-decoded): sslmode, sslrootcert (PostgreSQL); socket, sslmode, ssl-ca (MySQL).
    public var parameters: [String: String] = [:]

    static let allowedParameters: [DatabaseKind: Set<String>] = [
        .sqlite: [], .postgres: ["sslmode", "sslrootcert", "connect_timeout"], .mysql: ["socket", "sslmode", "ssl-ca", "connect_timeout"],
    ]

    public init(parsing text: String) throws(DatabaseError) {
        if text.hasPrefix("sqlite:") {
            kind = .sqlite
            var rest = String(text.dropFirst("sqlite:".count))
            if rest.hasPrefix("//") { rest = String(rest.dropFirst(2)) }
            guard !rest.isEmpty else { throw DatabaseError("sqlite: URL without a file path (sqlite:PATH)") }
            path = rest
            return
        }
        let schemes: [(String, DatabaseKind)] = [("postgres://", .postgres), ("postgresql://", .postgres), ("mysql://", .mysql), ("mariadb://", .mysql)]
        guard let (scheme, found) = schemes.first(where: { text.hasPrefix($0.0) }) else {
            throw DatabaseError("unsupported database URL scheme: use sqlite:PATH, postgres://user@host:port/db or mysql://user@host:port/db")
        }
        kind = found
        var rest = Substring(text.dropFirst(scheme.count))
        if let question = rest.firstIndex(of: "?") {
            try parseParameters(rest[rest.index(after: question)...])
            rest = rest[..<question]
        }
        let slash = rest.firstIndex(of: "/") ?? rest.endIndex
        database = try Self.decode(String(rest[slash...].dropFirst()))
        var authority = rest[..<slash]
        if let at = authority.lastIndex(of: "@") {
            let userInfo = authority[..<at]
            guard !userInfo.contains(":") else {
                throw DatabaseError("a password in the database URL is refused: put it in $\(kind == .postgres ? "PGPASSWORD" : "MYSQL_PWD") "
                    + "or in a variable named with --db-password-env VAR")
            }
            user = try Self.decode(String(userInfo))
            authority = authority[authority.index(after: at)...]
        }
        try parseHostPort(authority)
        guard !database.isEmpty else { throw DatabaseError("the database URL names no database (…/DBNAME)") }
    }

    private mutating func parseHostPort(_ authority: Substring) throws(DatabaseError) {
        var hostPart = authority
        var portPart: Substring? = nil
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { throw DatabaseError("database URL: unterminated [IPv6] host") }
            hostPart = authority[authority.index(after: authority.startIndex)..<close]
            let after = authority[authority.index(after: close)...]
            if after.hasPrefix(":") { portPart = after.dropFirst() }
        } else if let colon = authority.lastIndex(of: ":") {
            hostPart = authority[..<colon]
            portPart = authority[authority.index(after: colon)...]
        }
        host = hostPart.isEmpty ? "localhost" : String(hostPart)
        if let portPart {
            guard let value = Int(portPart), (1...65535).contains(value) else { throw DatabaseError("database URL: bad port '\(portPart)'") }
            port = value
        }
    }

    private mutating func parseParameters(_ query: Substring) throws(DatabaseError) {
        for pair in query.split(separator: "&") {
            let kv = pair.split(separator: "=", maxSplits: 1)
            let key = String(kv[0])
            guard Self.allowedParameters[kind]?.contains(key) == true else {
                throw DatabaseError("database URL: unknown parameter '\(key)' (known: \(Self.allowedParameters[kind]!.sorted().joined(separator: ", ")))")
            }
            parameters[key] = try Self.decode(kv.count == 2 ? String(kv[1]) : "")
        }
    }

    /// Percent-decoding of a URL component.
    static func decode(_ text: String) throws(DatabaseError) -> String {
        var out: [UInt8] = []
        var bytes = Array(text.utf8)[...]
        while let byte = bytes.popFirst() {
            guard byte == UInt8(ascii: "%") else { out.append(byte); continue }
            guard bytes.count >= 2, let value = UInt8(String(decoding: bytes.prefix(2), as: UTF8.self), radix: 16) else {
                throw DatabaseError("database URL: bad percent escape")
            }
            out.append(value)
            bytes = bytes.dropFirst(2)
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Whether the server is on this machine: a loopback address, `localhost` or a Unix socket.
    /// Anything else needs TLS.
    public var isLoopback: Bool {
        if kind == .sqlite || parameters["socket"] != nil || host.hasPrefix("/") { return true }
        return host == "localhost" || host == "::1" || host.hasPrefix("127.")
    }

    /// PostgreSQL's `sslmode`: off loopback `require` unless the URL asks for `verify-ca` or
    /// `verify-full` (a weaker one is refused); on loopback the URL's, else libpq's default.
    public func postgresSSLMode() throws(DatabaseError) -> String? {
        let mode = parameters["sslmode"]
        guard !isLoopback else { return mode }
        guard mode == nil || ["require", "verify-ca", "verify-full"].contains(mode!) else {
            throw DatabaseError("\(self): sslmode=\(mode!) refused for a server that is not on loopback (TLS is required)")
        }
        return mode ?? "require"
    }

    /// MySQL/MariaDB: whether the connection must be TLS with a verified server certificate
    /// (MYSQL_OPT_SSL_ENFORCE): always off loopback, and on loopback with `sslmode=require`.
    public func mysqlRequiresTLS() throws(DatabaseError) -> Bool {
        switch parameters["sslmode"] {
        case nil: return !isLoopback
        case "require": return true
        case let mode?:
            guard isLoopback else { throw DatabaseError("\(self): sslmode=\(mode) refused for a server that is not on loopback (TLS is required)") }
            guard mode == "disable" else { throw DatabaseError("\(self): sslmode is require or disable (loopback only)") }
            return false
        }
    }

    public var description: String {
        switch kind {
        case .sqlite: return "sqlite:\(path)"
        case .postgres, .mysql:
            let hostText = host.contains(":") ? "[\(host)]" : host
            return "\(kind == .postgres ? "postgres" : "mysql")://\(user.map { $0 + "@" } ?? "")\(hostText)\(port.map { ":\($0)" } ?? "")/\(database)"
        }
    }
}

/// Opens a session for a URL. `password` comes from the environment, never from the URL.
public enum Database {
    /// `readOnly`: a snapshot only reads (SQLite opens the file read-only, so a read-only file
    /// or replica will do); prune-apply writes.
    public static func connect(_ url: DatabaseURL, password: String?, readOnly: Bool = false) throws(DatabaseError) -> DatabaseSession {
        switch url.kind {
        case .sqlite: return try SQLiteSession(path: url.path, readOnly: readOnly)
        case .postgres: return try PostgresSession(url: url, password: password)
        case .mysql: return try MariaDBSession(url: url, password: password)
        }
    }
}
