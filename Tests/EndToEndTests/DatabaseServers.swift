import Foundation
import XCTest

/// Real database servers for the end-to-end tests, each started by the test in a temporary
/// directory on a free loopback port and always stopped (`stop()` in a `defer`, and again from
/// `deinit`). PostgreSQL refuses to run as root, so it runs as the `postgres` user (setpriv
/// execs it directly, so the server's pid is the child's). A server that cannot start fails the
/// test with its own log: nothing is skipped.
protocol TestDatabase: AnyObject {
    /// The URL `pushcast --from/--to` gets: the user, never the password.
    var url: String { get }
    var password: String { get }
    /// The variable the client library reads the password from.
    var passwordVariable: String { get }
    /// Runs SQL with the server's own command-line client; returns its output (tab-separated rows).
    @discardableResult
    func sql(_ text: String) throws -> String
    /// Kills the server abruptly (a server that goes away mid-stream).
    func crash()
    func stop()
}

/// Failures of the test servers, with what the tools printed.
struct ServerFailure: Error, CustomStringConvertible {
    var description: String
}

enum DatabaseServers {
    /// A TCP port on 127.0.0.1 that was free a moment ago.
    static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound else { throw ServerFailure(description: "cannot find a free port") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    static func makeDirectory(_ name: String) throws -> String {
        let directory = "/tmp/pushcast-\(name)-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        return directory
    }

    /// Runs a tool to completion; a failure throws with its output.
    @discardableResult
    static func tool(_ path: String, _ arguments: [String], environment: [String: String]? = nil, input: String? = nil,
                     seconds: Double = 120) throws -> String {
        var env = ProcessInfo.processInfo.environment
        for (key, value) in environment ?? [:] { env[key] = value }
        let inputPath: String?
        if let input {
            inputPath = NSTemporaryDirectory() + "pushcast-sql-\(UUID().uuidString).sql"
            try input.write(toFile: inputPath!, atomically: true, encoding: .utf8)
            try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: inputPath!)
        } else {
            inputPath = nil
        }
        defer { if let inputPath { try? FileManager.default.removeItem(atPath: inputPath) } }
        let run = try runProgram("/bin/sh", ["-c", "exec \"$0\" \"$@\"" + (inputPath.map { " < '\($0)'" } ?? ""), path] + arguments,
                                 environment: env, seconds: seconds)
        guard run.status == 0 else {
            throw ServerFailure(description: "\(path) \(arguments.joined(separator: " ")) exited \(run.status): \(run.stdout)\(run.stderr)")
        }
        return run.stdout
    }

    /// Waits until `ready` answers true (up to `seconds`), or the process dies.
    static func wait(for process: Process, seconds: Double, log: String, _ ready: () -> Bool) throws {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if !process.isRunning { break }
            if ready() { return }
            usleep(100_000)
        }
        let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        throw ServerFailure(description: "the database server did not start (\(process.isRunning ? "not ready in \(seconds) s" : "it exited")): \(text.suffix(3000))")
    }

    /// Stops a server process: `signal`, then SIGKILL after `grace` seconds.
    static func stop(_ process: Process, signal: Int32, grace: Double) {
        guard process.isRunning else { return }
        kill(process.processIdentifier, signal)
        let deadline = Date().addingTimeInterval(grace)
        while process.isRunning && Date() < deadline { usleep(50_000) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }

    static func start(_ executable: String, _ arguments: [String], log: String) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        FileManager.default.createFile(atPath: log, contents: nil)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
        process.standardOutput = handle
        process.standardError = handle
        process.standardInput = FileHandle.nullDevice
        try process.run()
        return process
    }
}

/// What the two server processes share: a temporary directory, a loopback port, the child, and
/// stopping it (`stopSignal`, then SIGKILL) and removing the directory, on every path.
class ServerChild {
    let directory: String
    let port: Int
    var process: Process?
    let stopSignal: Int32
    let crashSignal: Int32

    init(name: String, stopSignal: Int32, crashSignal: Int32) throws {
        directory = try DatabaseServers.makeDirectory(name)
        port = try DatabaseServers.freePort()
        self.stopSignal = stopSignal
        self.crashSignal = crashSignal
    }

    /// A self-signed certificate for 127.0.0.1 (the server's, and the CA a client trusts), made
    /// with the openssl tool: (certificate, key) paths in `directory/name-*.pem`.
    func makeCertificate(name: String = "server") throws -> (certificate: String, key: String) {
        let certificate = directory + "/\(name)-cert.pem", key = directory + "/\(name)-key.pem"
        try DatabaseServers.tool("/usr/bin/openssl", ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", certificate,
                                                      "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"])
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: key)
        return (certificate, key)
    }

    /// Runs `start`; when it fails, what it started is stopped before the error goes on.
    func launch(_ start: () throws -> Void) throws {
        do { try start() } catch {
            stop()
            throw error
        }
    }

    func crash() {
        if let process { DatabaseServers.stop(process, signal: crashSignal, grace: 10) }
    }

    func stop() {
        if let process { DatabaseServers.stop(process, signal: stopSignal, grace: 20) }
        process = nil
        try? FileManager.default.removeItem(atPath: directory)
    }

    deinit { stop() }
}

/// PostgreSQL from Debian's `postgresql` package: initdb into a temporary directory (password
/// authentication, scram-sha-256), the server on 127.0.0.1 as the `postgres` user.
final class PostgresServer: ServerChild, TestDatabase {
    let password = "pg-Secret-\(UUID().uuidString.prefix(6))"
    let passwordVariable = "PGPASSWORD"
    static let user = "pushcast"

    static var binDirectory: String {
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []
        let newest = versions.compactMap { Int($0) }.max().map(String.init) ?? "15"
        return "/usr/lib/postgresql/\(newest)/bin"
    }

    var url: String { "postgres://\(Self.user)@127.0.0.1:\(port)/push" }
    /// With `tls`: the server's certificate, which a client trusts as its CA.
    private(set) var certificate: String?

    init(tls: Bool = false) throws {
        // SIGINT: a fast shutdown; SIGQUIT: an immediate one, the backends die at once.
        try super.init(name: "pg", stopSignal: SIGINT, crashSignal: SIGQUIT)
        try launch { try start(tls: tls) }
    }

    private func asPostgres(_ tool: String) -> [String] {
        ["--reuid=postgres", "--regid=postgres", "--init-groups", "--", Self.binDirectory + "/" + tool]
    }

    private func start(tls: Bool) throws {
        let data = directory + "/data", passwordFile = directory + "/pw"
        try password.write(toFile: passwordFile, atomically: true, encoding: .utf8)
        var settings: [String] = []
        if tls {
            let (certificate, key) = try makeCertificate()
            self.certificate = certificate
            settings = ["-c", "ssl=on", "-c", "ssl_cert_file=" + certificate, "-c", "ssl_key_file=" + key]
        }
        _ = try DatabaseServers.tool("/bin/chown", ["-R", "postgres:postgres", directory])
        try DatabaseServers.tool("/usr/bin/setpriv", asPostgres("initdb") + ["-D", data, "-U", Self.user, "--pwfile=" + passwordFile,
                                                                             "--auth=scram-sha-256", "-E", "UTF8", "--locale=C.UTF-8", "--no-sync"])
        let log = directory + "/server.log"
        process = try DatabaseServers.start("/usr/bin/setpriv", asPostgres("postgres") + [
            "-D", data, "-p", String(port), "-k", directory, "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off",
            "-c", "synchronous_commit=off", "-c", "full_page_writes=off"] + settings, log: log)
        try DatabaseServers.wait(for: process!, seconds: 60, log: log) {
            (try? psql("SELECT 1", database: "postgres")) != nil
        }
        try psql("CREATE DATABASE push", database: "postgres")
    }

    @discardableResult
    func psql(_ text: String, database: String = "push") throws -> String {
        try DatabaseServers.tool(Self.binDirectory + "/psql", ["-X", "-q", "-A", "-t", "-F", "\t", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1",
                                                              "-p", String(port), "-U", Self.user, "-d", database],
                                 environment: ["PGPASSWORD": password], input: text)
    }

    func sql(_ text: String) throws -> String { try psql(text) }
}

/// MariaDB from Debian's `mariadb-server`: mariadb-install-db into a temporary directory,
/// mariadbd on 127.0.0.1 (and a socket in the directory, for the admin client), a `pushcast`
/// user with a password for the tests.
final class MariaDBServer: ServerChild, TestDatabase {
    let password = "my-Secret-\(UUID().uuidString.prefix(6))"
    let passwordVariable = "MYSQL_PWD"

    var url: String { "mysql://pushcast@127.0.0.1:\(port)/push" }
    var socket: String { directory + "/mysqld.sock" }
    /// With `tls`: the server's certificate, which a client trusts as its CA.
    private(set) var certificate: String?

    init(tls: Bool = false) throws {
        try super.init(name: "maria", stopSignal: SIGTERM, crashSignal: SIGKILL)
        try launch { try start(tls: tls) }
    }

    private func start(tls: Bool) throws {
        let data = directory + "/data"
        var settings: [String] = []
        if tls {
            let (certificate, key) = try makeCertificate()
            self.certificate = certificate
            settings = ["--ssl-cert=" + certificate, "--ssl-key=" + key]
        }
        try DatabaseServers.tool("/usr/bin/mariadb-install-db", ["--no-defaults", "--datadir=" + data, "--user=root", "--skip-test-db",
                                                                 "--skip-name-resolve"], seconds: 180)
        let log = directory + "/server.log"
        process = try DatabaseServers.start("/usr/sbin/mariadbd", [
            "--no-defaults", "--datadir=" + data, "--user=root", "--port=\(port)", "--bind-address=127.0.0.1", "--socket=" + socket,
            "--pid-file=" + directory + "/mysqld.pid", "--skip-name-resolve", "--innodb-buffer-pool-size=256M",
            "--innodb-flush-log-at-trx-commit=0", "--character-set-server=utf8mb4", "--collation-server=utf8mb4_bin"] + settings, log: log)
        try DatabaseServers.wait(for: process!, seconds: 60, log: log) { (try? admin("SELECT 1")) != nil }
        try admin("CREATE DATABASE push CHARACTER SET utf8mb4 COLLATE utf8mb4_bin; "
            + "CREATE USER 'pushcast'@'127.0.0.1' IDENTIFIED BY '\(password)'; GRANT ALL ON push.* TO 'pushcast'@'127.0.0.1';")
    }

    @discardableResult
    func admin(_ text: String, database: String? = nil) throws -> String {
        try DatabaseServers.tool("/usr/bin/mariadb", ["--no-defaults", "-S", socket, "-u", "root", "--batch", "--skip-column-names",
                                                      "--default-character-set=utf8mb4"] + (database.map { [$0] } ?? []), input: text)
    }

    func sql(_ text: String) throws -> String { try admin("SET SESSION sql_mode = CONCAT(@@sql_mode, ',NO_BACKSLASH_ESCAPES');\n" + text, database: "push") }
}

/// A SQLite file in a temporary directory, written with the sqlite3 command-line tool.
final class SQLiteDatabase: TestDatabase {
    let directory: String
    var path: String { directory + "/push.db" }
    let password = ""
    let passwordVariable = "UNUSED_PASSWORD"

    var url: String { "sqlite:" + path }

    init() throws {
        directory = try DatabaseServers.makeDirectory("sqlite")
        try sql("PRAGMA journal_mode = WAL;")
    }

    func sql(_ text: String) throws -> String {
        try DatabaseServers.tool("/usr/bin/sqlite3", ["-batch", "-bail", "-separator", "\t", path], input: text)
    }

    func crash() {}

    func stop() { try? FileManager.default.removeItem(atPath: directory) }

    deinit { stop() }
}
