import Foundation
import XCTest

/// Campaigns straight from a database and prunes straight back, against real servers
/// the tests start (DatabaseServers.swift) and `pushcast mock --fcm`: each database's results
/// are those of the same rows exported as CSV; `prune-apply` deactivates exactly the pruned
/// tokens, once; a token re-registered mid-campaign stays active.
final class DatabaseCampaignTests: XCTestCase {
    static let rowCount = 50_000
    static let fixture = DatabaseFixture(rows: rowCount)
    /// The CSV campaign's results by row, sent once for all three databases.
    nonisolated(unsafe) static var baseline: [Int: [String: Any]]?
    static let compared = ["provider", "outcome", "reason", "status", "id", "token"]

    var directory = ""

    override func setUpWithError() throws {
        try BinaryTests.requireBinary()
        directory = try DatabaseServers.makeDirectory("dbtest")
    }

    override func tearDown() { try? FileManager.default.removeItem(atPath: directory) }

    static func utc(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyy-MM-dd HH:mm:ss"
        return formatter.string(from: date)
    }

    func writeTemplates() throws -> (payload: String, message: String) {
        let payload = directory + "/payload.json", message = directory + "/message.json"
        try #"{"aps":{"alert":{"title":"Hi {{first_name}}","body":"v{{app_version}}"}}}"#.write(toFile: payload, atomically: true, encoding: .utf8)
        try #"{"notification":{"title":"Hi {{first_name}}"},"data":{"device":"{{device_id}}","v":"{{app_version}}"}}"#
            .write(toFile: message, atomically: true, encoding: .utf8)
        return (payload, message)
    }

    func sendArguments(_ input: [String], _ mock: FCMSendTests.Mock, results: String, prune: String) throws -> [String] {
        let (payload, message) = try writeTemplates()
        return ["send"] + input + ["--payload", payload, "--fcm-payload", message] + mock.sendFlags
            + ["--results", results, "--prune", prune, "--campaign", "issue14", "--quiet"]
    }

    /// pushcast with the database password in its environment.
    func pushcast(_ arguments: [String], _ database: TestDatabase, password: String? = nil, seconds: Double = 300) throws -> PushcastRun {
        var environment = ProcessInfo.processInfo.environment
        environment[database.passwordVariable] = password ?? database.password
        return try runProgram(BinaryTests.binary, arguments, environment: environment, seconds: seconds)
    }

    func baselineResults(_ mock: FCMSendTests.Mock) throws -> [Int: [String: Any]] {
        if let baseline = Self.baseline { return baseline }
        let csv = directory + "/export.csv"
        try Self.fixture.csv.write(toFile: csv, atomically: true, encoding: .utf8)
        let run = try runPushcast(try sendArguments([csv], mock, results: directory + "/csv.results.ndjson", prune: directory + "/csv.prune.csv"),
                                  seconds: 300)
        XCTAssertEqual(run.status, 0, run.stderr)
        let results = try resultsByRow(directory + "/csv.results.ndjson")
        XCTAssertEqual(results.count, Self.rowCount)
        Self.baseline = results
        return results
    }

    /// The table made and filled with `fixture`'s rows, and a mock to send to.
    func seeded(_ database: TestDatabase, kind: String, _ fixture: DatabaseFixture) throws -> FCMSendTests.Mock {
        try database.sql(DatabaseFixture.schema(kind))
        try database.sql(fixture.inserts)
        return try FCMSendTests.Mock(directory: directory, extra: [])
    }

    /// The acceptance run for one database.
    func campaignRoundTrip(_ database: TestDatabase, kind: String) throws {
        let mock = try seeded(database, kind: kind, Self.fixture)
        defer { _ = mock.stop() }
        let baseline = try baselineResults(mock)

        let results = directory + "/db.results.ndjson", prune = directory + "/db.prune.csv"
        let started = Date()
        let run = try pushcast(try sendArguments(["--from", database.url, "--query", DatabaseFixture.query], mock, results: results, prune: prune),
                               database)
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertFalse((run.stdout + run.stderr).contains(database.password), "the password appears in the output")
        let byRow = try resultsByRow(results)
        XCTAssertEqual(byRow.count, Self.rowCount)
        var differing = 0
        for (row, expected) in baseline {
            for key in Self.compared where "\(byRow[row]?[key] ?? "-")" != "\(expected[key] ?? "-")" {
                differing += 1
                if differing < 5 { XCTFail("row \(row) \(key): \(byRow[row]?[key] ?? "-") from \(kind), \(expected[key] ?? "-") from the CSV") }
            }
        }
        XCTAssertEqual(differing, 0, "results that differ from the CSV export's")
        try checkSnapshotAndJournal(results: results, database: database)
        try checkPruneApply(database, prune: prune, started: started)
    }

    func checkSnapshotAndJournal(results: String, database: TestDatabase) throws {
        let snapshot = results + ".snapshot.csv"
        XCTAssertEqual(try String(contentsOfFile: snapshot, encoding: .utf8), Self.fixture.csv, "the snapshot is the CSV export, byte for byte")
        let mode = try XCTUnwrap(FileManager.default.attributesOfItem(atPath: snapshot)[.posixPermissions] as? Int)
        XCTAssertEqual(mode & 0o777, 0o600)
        let journal = try String(contentsOfFile: results + ".journal", encoding: .utf8)
        let header = try XCTUnwrap(journal.split(separator: "\n").first)
        XCTAssertTrue(header.contains("source=") && header.contains("push_devices%20d%20LEFT%20JOIN"), String(header))
        XCTAssertFalse(journal.contains(database.password))
    }

    func prunedTokens(_ prune: String) throws -> Set<String> {
        let text = try String(contentsOfFile: prune, encoding: .utf8)
        // Tokens hold no comma, quote or newline (the invalid ones hold a space).
        return Set(text.split(separator: "\n").dropFirst().map { String($0.split(separator: ",", omittingEmptySubsequences: false)[0]) })
    }

    static func count(_ label: String, in output: String) -> Int? {
        for line in output.split(separator: "\n") where line.contains(label) {
            return Int(line.split(separator: " ").last ?? "")
        }
        return nil
    }

    func checkPruneApply(_ database: TestDatabase, prune: String, started: Date) throws {
        // Row 11 is an Android dead token whose device registers again while the campaign runs.
        let reregistered = Self.fixture.rows[10]
        XCTAssertTrue(reregistered.token.hasPrefix("dead") && reregistered.platform == "android")
        try database.sql("UPDATE push_devices SET updated_at = '\(Self.utc(started.addingTimeInterval(1)))' WHERE id = 11;")
        let apply = ["prune-apply", prune, "--to", database.url, "--table", "push_devices", "--token-column", "token",
                     "--set", "is_active = false", "--set", "pruned_at = {unregistered_at}", "--updated-column", "updated_at",
                     "--since", Self.utc(started)]
        let dry = try pushcast(apply + ["--dry-run"], database)
        XCTAssertEqual(dry.status, 0, dry.stderr)
        XCTAssertTrue(dry.stdout.contains("plan (first batch loaded):"), dry.stdout)
        XCTAssertEqual(try database.sql("SELECT COUNT(*) FROM push_devices WHERE NOT is_active;").trimmingCharacters(in: .whitespacesAndNewlines), "0")

        let first = try pushcast(apply, database)
        XCTAssertEqual(first.status, 0, first.stderr)
        let tokens = try prunedTokens(prune)
        XCTAssertGreaterThan(tokens.count, 1000)
        let inactive = Set(try database.sql("SELECT token FROM push_devices WHERE NOT is_active;").split(separator: "\n").map(String.init))
        XCTAssertEqual(inactive, tokens.subtracting([reregistered.token]), "exactly the pruned tokens, less the re-registered one")
        XCTAssertEqual(Self.count("rows changed:", in: first.stdout), inactive.count, first.stdout)
        XCTAssertEqual(Self.count("skipped, re-registered:", in: first.stdout), 1, first.stdout)
        XCTAssertEqual(Self.count("rows that would change:", in: dry.stdout), inactive.count, dry.stdout)
        XCTAssertEqual(try database.sql("SELECT COUNT(*) FROM push_devices WHERE NOT is_active AND pruned_at IS NULL;")
            .trimmingCharacters(in: .whitespacesAndNewlines), "0")

        let second = try pushcast(apply, database)
        XCTAssertEqual(second.status, 0, second.stderr)
        XCTAssertEqual(Self.count("rows changed:", in: second.stdout), 0, second.stdout)
        XCTAssertTrue(second.stdout.contains("nothing to change"), second.stdout)
        XCTAssertFalse((first.stdout + first.stderr + dry.stdout + dry.stderr).contains(database.password))
    }

    func testSQLiteCampaignMatchesTheCSVExportAndPrunesOnce() throws {
        let database = try SQLiteDatabase()
        defer { database.stop() }
        try campaignRoundTrip(database, kind: "sqlite")
    }

    func testPostgresCampaignMatchesTheCSVExportAndPrunesOnce() throws {
        let database = try PostgresServer()
        defer { database.stop() }
        try campaignRoundTrip(database, kind: "postgres")
    }

    func testMariaDBCampaignMatchesTheCSVExportAndPrunesOnce() throws {
        let database = try MariaDBServer()
        defer { database.stop() }
        try campaignRoundTrip(database, kind: "mysql")
    }

    /// SIGKILL in the middle of a PostgreSQL campaign, then the table changes: `--resume` runs
    /// from the snapshot (a changed or missing snapshot is refused), every row finishes exactly
    /// once, and no token is delivered twice.
    func testKilledDatabaseCampaignResumesFromItsSnapshot() throws {
        let database = try PostgresServer()
        defer { database.stop() }
        let fixture = DatabaseFixture(rows: 20_000, seed: 7)
        let mock = try seeded(database, kind: "postgres", fixture)
        defer { _ = mock.stop() }
        let results = directory + "/kill.results.ndjson", prune = directory + "/kill.prune.csv"
        let arguments = try sendArguments(["--from", database.url, "--query", DatabaseFixture.query], mock, results: results, prune: prune)
        var environment = ProcessInfo.processInfo.environment
        environment[database.passwordVariable] = database.password
        let process = Process()
        process.executableURL = URL(fileURLWithPath: BinaryTests.binary)
        process.arguments = arguments + ["--rate", "apns=4000/s,fcm=4000/s"]
        process.environment = environment
        process.standardError = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        let deadline = Date().addingTimeInterval(60)
        while process.isRunning && Date() < deadline
            && ((try? String(contentsOfFile: results, encoding: .utf8))?.split(separator: "\n").count ?? 0) < 3000 { usleep(20_000) }
        XCTAssertTrue(process.isRunning, "the campaign ended before it could be killed")
        // A second sender of the same campaign stops before it queries or touches the snapshot.
        let snapshotBefore = try Data(contentsOf: URL(fileURLWithPath: results + ".snapshot.csv"))
        let second = try pushcast(arguments + ["--resume"], database)
        XCTAssertEqual(second.status, 2, second.stderr)
        XCTAssertTrue(second.stderr.contains("is locked"), second.stderr)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: results + ".snapshot.csv")), snapshotBefore)
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        // The table changes after the kill: a query now would find no rows at all.
        try database.sql("UPDATE push_devices SET is_active = FALSE;")

        let snapshot = results + ".snapshot.csv"
        let saved = try Data(contentsOf: URL(fileURLWithPath: snapshot))
        try (saved + Data("99999,extra,android,,\n".utf8)).write(to: URL(fileURLWithPath: snapshot))
        let tampered = try pushcast(arguments + ["--resume"], database)
        XCTAssertEqual(tampered.status, 2, tampered.stderr)
        XCTAssertTrue(tampered.stderr.contains("input file's contents"), tampered.stderr)
        try FileManager.default.removeItem(atPath: snapshot)
        let gone = try pushcast(arguments + ["--resume"], database)
        XCTAssertEqual(gone.status, 2, gone.stderr)
        XCTAssertTrue(gone.stderr.contains("is gone"), gone.stderr)
        try saved.write(to: URL(fileURLWithPath: snapshot))
        let preview = try pushcast(["check"] + arguments.dropFirst() + ["--resume"], database)
        XCTAssertEqual(preview.status, 0, preview.stderr)
        XCTAssertTrue(FileManager.default.fileExists(atPath: snapshot), "check --resume left the snapshot in place")

        let resumed = try pushcast(arguments + ["--resume"], database)
        XCTAssertTrue([0, 1].contains(resumed.status), resumed.stderr)
        let byRow = try resultsByRow(results)
        XCTAssertEqual(byRow.count, fixture.rows.count, "every row of the snapshot finished exactly once")
        _ = mock.stop()
        var delivered: [String: Int] = [:]
        for entry in mock.log where entry["status"] as? Int == 200 {
            if let token = entry["token"] as? String { delivered[token, default: 0] += 1 }
        }
        XCTAssertEqual(delivered.values.filter { $0 > 1 }.count, 0, "a token delivered twice")
        // Every row recorded delivered was delivered (once); the mock delivered nothing else but
        // rows whose fate the kill left unknown (in flight then, never sent again).
        let recorded = Set(byRow.values.filter { $0["outcome"] as? String == "delivered" }.compactMap { $0["token"] as? String })
        let unknown = Set(byRow.values.filter { $0["outcome"] as? String == "unknown" }.compactMap { $0["token"] as? String })
        XCTAssertGreaterThan(recorded.count, 10_000)
        XCTAssertEqual(recorded.subtracting(delivered.keys), [], "rows recorded delivered that the mock never delivered")
        XCTAssertEqual(Set(delivered.keys).subtracting(recorded).subtracting(unknown), [], "deliveries no row records")
    }

    /// The other seed schema: Laravel's `device_tokens` (device_id unique, token string(100),
    /// device_type defaulting to ios, timestamps) on MariaDB. The app deletes dead tokens, so
    /// prune-apply --delete; an APNs token re-registered after Apple's 410 time stays.
    func testLaravelDeviceTokensDeleteOnMariaDB() throws {
        let database = try MariaDBServer()
        defer { database.stop() }
        try database.sql("""
            CREATE TABLE device_tokens (id INT UNSIGNED AUTO_INCREMENT PRIMARY KEY, device_id VARCHAR(255) NOT NULL UNIQUE,
              token VARCHAR(100) NOT NULL, device_type VARCHAR(255) NOT NULL DEFAULT 'ios', created_at TIMESTAMP NULL,
              updated_at TIMESTAMP NULL, KEY (token));
            """)
        let rows = Self.fixture.rows.filter { $0.platform == "ios" }.prefix(3000)
        let values = rows.map { "('dev-\($0.id)', \(DatabaseFixture.literal($0.token)), 'ios', NULL, \($0.id % 4 == 0 ? "NULL" : "'2026-01-01 00:00:00'"))" }
        try database.sql("INSERT INTO device_tokens (device_id, token, device_type, created_at, updated_at) VALUES "
            + values.joined(separator: ",") + ";")
        let mock = try FCMSendTests.Mock(directory: directory, extra: [])
        defer { _ = mock.stop() }
        let results = directory + "/laravel.results.ndjson", prune = directory + "/laravel.prune.csv"
        let run = try pushcast(try sendArguments(["--from", database.url, "--query",
                                                  "SELECT device_id, token, device_type AS platform, NULL AS app_version, NULL AS first_name FROM device_tokens ORDER BY id"],
                                                 mock, results: results, prune: prune), database)
        XCTAssertEqual(run.status, 0, run.stderr)
        let byRow = try resultsByRow(results)
        XCTAssertEqual(byRow.count, rows.count)
        XCTAssertEqual(byRow[1]?["id"] as? String, "dev-\(rows.first!.id)", "device_id is the rows' identity")
        let tokens = try prunedTokens(prune)
        let dead = try XCTUnwrap(rows.first { $0.token.hasPrefix("dead") })
        try database.sql("UPDATE device_tokens SET updated_at = UTC_TIMESTAMP() WHERE device_id = 'dev-\(dead.id)';")
        let apply = ["prune-apply", prune, "--to", database.url, "--table", "device_tokens", "--token-column", "token", "--delete",
                     "--updated-column", "updated_at", "--since", Self.utc(Date().addingTimeInterval(-600))]
        let first = try pushcast(apply, database)
        XCTAssertEqual(first.status, 0, first.stderr)
        let left = Set(try database.sql("SELECT token FROM device_tokens;").split(separator: "\n").map(String.init))
        XCTAssertEqual(Set(rows.map(\.token)).subtracting(left), tokens.subtracting([dead.token]), "exactly the pruned tokens' rows deleted")
        XCTAssertTrue(left.contains(dead.token))
        XCTAssertEqual(Self.count("skipped, re-registered:", in: first.stdout), 1, first.stdout)
        let second = try pushcast(apply, database)
        XCTAssertEqual(Self.count("rows changed:", in: second.stdout), 0, second.stdout)
        XCTAssertTrue(second.stdout.contains("nothing to change"), second.stdout)
    }

    /// Two shards each send from the same query (each takes a snapshot of its own; the campaign
    /// id comes from the query, not the snapshot's path), and `pushcast merge` finds every row once.
    func testShardsFromOneQueryMerge() throws {
        let database = try SQLiteDatabase()
        defer { database.stop() }
        let fixture = DatabaseFixture(rows: 6000, seed: 3)
        let mock = try seeded(database, kind: "sqlite", fixture)
        defer { _ = mock.stop() }
        let results = directory + "/shard-{shard}.results.ndjson", prune = directory + "/shard-{shard}.prune.csv"
        var arguments = try sendArguments(["--from", database.url, "--query", DatabaseFixture.query], mock, results: results, prune: prune)
        arguments.removeAll { $0 == "--campaign" || $0 == "issue14" }
        for shard in ["0/2", "1/2"] {
            let run = try pushcast(arguments + ["--shard", shard], database)
            XCTAssertEqual(run.status, 0, run.stderr)
        }
        let merged = try runPushcast(["merge", "--input", directory + "/shard-0.results.ndjson.snapshot.csv", "--shards", "2",
                                      "--results-pattern", results, "--results", directory + "/merged.results.ndjson"])
        XCTAssertEqual(merged.status, 0, merged.stdout + merged.stderr)
        let byRow = try resultsByRow(directory + "/merged.results.ndjson")
        XCTAssertEqual(byRow.count, fixture.rows.count)
    }
}
