import Foundation
import XCTest

/// What goes wrong with a database: a wrong password, a missing table, a bad query and a server
/// that goes away mid-stream each end the run with exit 2 before anything is sent, with the
/// server's message and no password anywhere; and a database campaign killed with SIGKILL
/// resumes from its snapshot (never querying again), every row finishing exactly once.
final class DatabaseFailureTests: XCTestCase {
    var directory = ""

    override func setUpWithError() throws {
        try BinaryTests.requireBinary()
        directory = try DatabaseServers.makeDirectory("dbfail")
    }

    override func tearDown() { try? FileManager.default.removeItem(atPath: directory) }

    func pushcast(_ arguments: [String], _ database: TestDatabase, password: String? = nil, seconds: Double = 120) throws -> PushcastRun {
        var environment = ProcessInfo.processInfo.environment
        environment[database.passwordVariable] = password ?? database.password
        return try runProgram(BinaryTests.binary, arguments, environment: environment, seconds: seconds)
    }

    /// `check --from` with a query (check queries too, and needs no provider to be reachable;
    /// the FCM service account is one `pushcast mock` wrote).
    func check(url: String, query: String, environment: [String: String] = [:]) throws -> PushcastRun {
        let message = directory + "/message.json", credentials = directory + "/fcm-service-account.json"
        try #"{"notification":{"title":"x"}}"#.write(toFile: message, atomically: true, encoding: .utf8)
        if !FileManager.default.fileExists(atPath: credentials) {
            let mock = try FCMSendTests.Mock(directory: directory, extra: [])
            _ = mock.stop()
        }
        return try runProgram(BinaryTests.binary, ["check", "--from", url, "--query", query, "--provider", "fcm", "--fcm-payload", message,
                                                   "--fcm-credentials", credentials],
                              environment: ProcessInfo.processInfo.environment.merging(environment) { $1 })
    }

    func check(_ database: TestDatabase, query: String, password: String? = nil, url: String? = nil) throws -> PushcastRun {
        try check(url: url ?? database.url, query: query, environment: [database.passwordVariable: password ?? database.password])
    }

    func assertStopped(_ run: PushcastRun, mentions words: [String], passwords: [String], file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(run.status, 2, run.stderr, file: file, line: line)
        for word in words { XCTAssertTrue(run.stderr.lowercased().contains(word.lowercased()), "'\(word)' not in: \(run.stderr)", file: file, line: line) }
        for password in passwords where !password.isEmpty {
            XCTAssertFalse((run.stdout + run.stderr).contains(password), "a password in the output", file: file, line: line)
        }
    }

    func checkErrors(_ database: TestDatabase, kind: String) throws {
        try database.sql(DatabaseFixture.schema(kind))
        try database.sql(DatabaseFixture(rows: 100).inserts)
        let good = try check(database, query: "SELECT id AS device_id, token, platform FROM push_devices WHERE platform = 'android' AND token NOT LIKE 'has %'")
        XCTAssertEqual(good.status, 0, good.stderr)
        XCTAssertTrue(good.stderr.contains("65 rows read into the snapshot"), good.stderr)
        let passwords = [database.password, "Wr0ng-pa55word"]
        let prune = directory + "/p.csv"
        try "token,provider,reason,unregistered_at,id\nabc,fcm,UNREGISTERED,,1\n".write(toFile: prune, atomically: true, encoding: .utf8)
        if kind != "sqlite" {
            let refused = try check(database, query: "SELECT token FROM push_devices", password: "Wr0ng-pa55word")
            assertStopped(refused, mentions: [kind == "postgres" ? "password authentication failed" : "access denied"], passwords: passwords)
            let apply = try pushcast(["prune-apply", prune, "--to", database.url, "--table", "push_devices", "--token-column", "token",
                                      "--delete"], database, password: "Wr0ng-pa55word")
            assertStopped(apply, mentions: ["cannot connect"], passwords: passwords)
            // The test servers have no TLS: a URL that requires it (as one off loopback does) is refused by the client.
            let tls = try check(database, query: "SELECT token FROM push_devices", url: database.url + "?sslmode=require")
            assertStopped(tls, mentions: ["ssl"], passwords: passwords)
        }
        assertStopped(try check(database, query: "SELECT token FROM no_such_table"), mentions: ["no_such_table"], passwords: passwords)
        assertStopped(try check(database, query: "SELEC token FROM push_devices"), mentions: ["syntax", "--from"], passwords: passwords)
        let missing = try pushcast(["prune-apply", prune, "--to", database.url, "--table", "no_such_table",
                                    "--token-column", "token", "--set", "is_active = false"], database)
        assertStopped(missing, mentions: ["no_such_table"], passwords: passwords)
        let timeless = try pushcast(["prune-apply", prune, "--to", database.url, "--table", "push_devices", "--token-column", "token",
                                     "--set", "is_active = false", "--updated-column", "updated_at"], database)
        assertStopped(timeless, mentions: ["p.csv:2: field 'unregistered_at'", "--since"], passwords: passwords)
        try "token,provider,reason,unregistered_at,id\n\"abc,fcm\n".write(toFile: prune, atomically: true, encoding: .utf8)
        let torn = try pushcast(["prune-apply", prune, "--to", database.url, "--table", "push_devices", "--token-column", "token",
                                 "--delete"], database)
        assertStopped(torn, mentions: ["p.csv:2"], passwords: passwords)
    }

    /// What stops a query while its rows stream.
    enum MidStream { case serverGoesAway, sigterm }

    /// The server dies while the rows stream (exit 2), or pushcast gets SIGTERM (exit 3), in
    /// bounded time; no snapshot is left behind and nothing is sent.
    func checkStopMidStream(_ database: TestDatabase, query: String, _ what: MidStream) throws {
        let results = directory + "/gone.results.ndjson"
        let message = directory + "/message.json"
        try #"{"notification":{"title":"x"}}"#.write(toFile: message, atomically: true, encoding: .utf8)
        let mock = try FCMSendTests.Mock(directory: directory, extra: [])
        defer { _ = mock.stop() }
        var environment = ProcessInfo.processInfo.environment
        environment[database.passwordVariable] = database.password
        let process = Process()
        process.executableURL = URL(fileURLWithPath: BinaryTests.binary)
        process.arguments = ["send", "--from", database.url, "--query", query, "--provider", "fcm", "--fcm-payload", message]
            + ["--fcm-credentials", mock.fields["FCM_CREDENTIALS"]!, "--fcm-endpoint", mock.fields["FCM_ENDPOINT"]!, "--ca-file", mock.caFile,
               "--results", results]
        process.environment = environment
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        var partial: String { results + ".snapshot.csv.partial-\(process.processIdentifier)" }
        let deadline = Date().addingTimeInterval(60)
        while (FileManager.default.fileExists(atPath: partial) ? (try? FileManager.default.attributesOfItem(atPath: partial)[.size] as? Int) ?? 0 : 0) < 1 << 20
            && Date() < deadline && process.isRunning { usleep(20_000) }
        guard process.isRunning else {
            let text = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            return XCTFail("the query ended before it could be stopped: \(text)")
        }
        switch what {
        case .serverGoesAway: database.crash()
        case .sigterm: kill(process.processIdentifier, SIGTERM)
        }
        let stopBy = Date().addingTimeInterval(90)
        while process.isRunning && Date() < stopBy { usleep(50_000) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        let text = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        XCTAssertEqual(process.terminationStatus, what == .serverGoesAway ? 2 : 3, text)
        XCTAssertTrue(text.contains(what == .serverGoesAway ? "--from" : "interrupted by SIGTERM before sending"), text)
        XCTAssertFalse(text.contains(database.password))
        XCTAssertFalse(FileManager.default.fileExists(atPath: partial), "a torn snapshot was left")
        XCTAssertFalse(FileManager.default.fileExists(atPath: results + ".snapshot.csv"))
        XCTAssertTrue(mock.log.isEmpty, "nothing was sent")
    }

    func testSQLiteErrors() throws {
        let database = try SQLiteDatabase()
        defer { database.stop() }
        try checkErrors(database, kind: "sqlite")
        // Credentials that cannot be read stop the run before the query runs.
        let early = try runPushcast(["check", "--from", database.url, "--query", "SELECT token FROM no_such_table", "--provider", "fcm",
                                     "--fcm-payload", directory + "/message.json", "--fcm-credentials", directory + "/absent.json"])
        XCTAssertEqual(early.status, 2, early.stderr)
        XCTAssertTrue(early.stderr.contains("absent.json") && !early.stderr.contains("no_such_table"), early.stderr)
        let nowhere = try check(url: "sqlite:" + directory + "/absent.db", query: "SELECT 1")
        XCTAssertEqual(nowhere.status, 2, nowhere.stderr)
        XCTAssertTrue(nowhere.stderr.contains("unable to open") || nowhere.stderr.contains("cannot open"), nowhere.stderr)
        try checkStopMidStream(database, query: "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 100000000) "
            + "SELECT x AS device_id, 'tok' || x AS token FROM c", .sigterm)
    }

    func testPostgresErrorsAndAServerThatGoesAway() throws {
        let database = try PostgresServer()
        defer { database.stop() }
        try checkErrors(database, kind: "postgres")
        // Two small set-returning functions crossed: the rows stream (one big one would be materialised first).
        try checkStopMidStream(database, query: "SELECT a::bigint * 100000 + b AS device_id, 'tok' || a || '-' || b AS token "
            + "FROM generate_series(1, 100000) a, generate_series(1, 1000) b", .serverGoesAway)
    }

    func testMariaDBErrorsAndAServerThatGoesAway() throws {
        let database = try MariaDBServer()
        defer { database.stop() }
        try checkErrors(database, kind: "mysql")
        try checkStopMidStream(database, query: "SELECT seq AS device_id, CONCAT('tok', seq) AS token FROM seq_1_to_100000000", .serverGoesAway)
    }

    /// TLS that works: servers with a certificate for 127.0.0.1, reached with a URL that requires
    /// TLS and verifies the server against that certificate; a client trusting another CA is
    /// refused.
    func checkVerifiedTLS(_ database: TestDatabase & ServerChild, certificate: String, url: (String) -> String) throws {
        try database.sql("CREATE TABLE d (token VARCHAR(200)); INSERT INTO d VALUES ('fAAA'), ('fBBB');")
        let good = try check(database, query: "SELECT token FROM d", url: url(certificate))
        XCTAssertEqual(good.status, 0, good.stderr)
        XCTAssertTrue(good.stderr.contains("2 rows read into the snapshot"), good.stderr)
        let (other, _) = try database.makeCertificate(name: "other")
        let refused = try check(database, query: "SELECT token FROM d", url: url(other))
        assertStopped(refused, mentions: ["cannot connect", "certificate"], passwords: [database.password])
    }

    func testPostgresOverVerifiedTLS() throws {
        let database = try PostgresServer(tls: true)
        defer { database.stop() }
        try checkVerifiedTLS(database, certificate: try XCTUnwrap(database.certificate)) { "\(database.url)?sslmode=verify-full&sslrootcert=\($0)" }
    }

    func testMariaDBOverVerifiedTLS() throws {
        let database = try MariaDBServer(tls: true)
        defer { database.stop() }
        try checkVerifiedTLS(database, certificate: try XCTUnwrap(database.certificate)) { "\(database.url)?sslmode=require&ssl-ca=\($0)" }
    }

    /// TLS off loopback: a URL that would turn it off is refused before connecting.
    func testANetworkDatabaseNeedsTLS() throws {
        let run = try check(url: "postgres://app@192.0.2.1:5432/push?sslmode=disable", query: "SELECT 1")
        XCTAssertEqual(run.status, 2, run.stderr)
        XCTAssertTrue(run.stderr.contains("TLS is required"), run.stderr)
    }
}
