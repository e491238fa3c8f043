// Web Push subscriptions as Laravel's laravel-notification-channels/webpush package stores them:
// its `push_subscriptions` table, made as its migration makes it on MariaDB, PostgreSQL and
// SQLite, read with `pushcast send --from` and sent to `pushcast mock --webpush`, which decrypts
// every notification with the subscription's keys. Each row's outcome follows its endpoint's
// kind; rows with a missing or malformed key, or another content encoding, are `invalid` with the
// field named and never sent; `prune-apply --delete` then deletes exactly the gone and not-found
// subscriptions, once, and keeps one that registered again during the campaign.

import Foundation
import PushcastWebPush
import XCTest

/// The table's rows: mostly subscriptions the mock answers 201, some it answers 410 (`gone`), 404
/// (`nf`) and 413 (`big`), spread over two push services, and a few whose keys or encoding are wrong.
struct LaravelSubscriptions {
    struct Row {
        var id: Int
        var kind: String
        var endpoint: String
        var publicKey: String?
        var authToken: String?
        var contentEncoding: String?
        /// The field the results must name when the row is invalid.
        var invalidField: String?
        var subscriber: Int { 1000 + id / 2 }
    }

    static let hosts = ["updates.push.services.mozilla.com", "web.push.apple.com"]
    static let query = "SELECT id AS device_id, endpoint, public_key, auth_token, content_encoding, subscribable_id "
        + "FROM push_subscriptions ORDER BY id"
    static let created = "2025-06-01 00:00:00"

    var rows: [Row] = []

    /// `count` rows whose endpoints are on `port` of both hosts; the last five are the invalid ones.
    init(count: Int, port: Int) throws {
        for id in 1...count {
            let kind = id % 20 == 1 ? "gone" : id % 20 == 2 ? "nf" : id % 50 == 3 ? "big" : "ok"
            let endpoint = "https://\(Self.hosts[id % 2]):\(port)/\(kind)\(id)/" + String(UInt64(id) &* 0x9E37_79B9_7F4A_7C15, radix: 36)
            let keys = try XCTUnwrap(WebPushDemoSubscriptions.make(endpoint: endpoint))
            rows.append(Row(id: id, kind: kind, endpoint: endpoint, publicKey: keys.p256dh, authToken: keys.auth,
                            contentEncoding: id % 7 == 0 ? nil : "aes128gcm"))
        }
        // Each of these is an `ok` endpoint the mock would answer 201, had it been sent.
        func spoil(_ offset: Int, field: String, _ change: (inout Row) -> Void) {
            var row = rows[count - offset]
            precondition(row.kind == "ok")
            change(&row)
            row.kind = "invalid"
            row.invalidField = field
            rows[count - offset] = row
        }
        spoil(1, field: "p256dh") { $0.publicKey = nil }
        spoil(2, field: "auth") { $0.authToken = "not*base64url" }
        spoil(3, field: "auth") { $0.authToken = "AAAAAAAAAAA" }  // 8 bytes, not 16
        spoil(4, field: "content_encoding") { $0.contentEncoding = "aesgcm" }
        spoil(6, field: "p256dh") { row in
            // 65 bytes starting 0x04, but the last byte changed: no longer a point on the curve.
            var point = Array(row.publicKey!.utf8)
            point[point.count - 2] = point[point.count - 2] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
            row.publicKey = String(decoding: point, as: UTF8.self)
        }
    }

    /// The package's migration (bigIncrements, morphs, string(500)->unique, three nullable
    /// strings, timestamps) as Laravel's schema grammar writes it for each database.
    static func schema(_ kind: String) -> String {
        switch kind {
        case "mysql":
            return """
                CREATE TABLE `push_subscriptions` (`id` bigint unsigned NOT NULL AUTO_INCREMENT PRIMARY KEY,
                  `subscribable_type` varchar(255) NOT NULL, `subscribable_id` bigint unsigned NOT NULL, `endpoint` varchar(500) NOT NULL,
                  `public_key` varchar(255) NULL, `auth_token` varchar(255) NULL, `content_encoding` varchar(255) NULL,
                  `created_at` timestamp NULL, `updated_at` timestamp NULL) DEFAULT CHARACTER SET utf8mb4 COLLATE 'utf8mb4_unicode_ci';
                ALTER TABLE `push_subscriptions` ADD INDEX `push_subscriptions_subscribable_type_subscribable_id_index`(`subscribable_type`, `subscribable_id`);
                ALTER TABLE `push_subscriptions` ADD UNIQUE `push_subscriptions_endpoint_unique`(`endpoint`);
                """
        case "postgres":
            return """
                CREATE TABLE "push_subscriptions" ("id" bigserial NOT NULL PRIMARY KEY, "subscribable_type" varchar(255) NOT NULL,
                  "subscribable_id" bigint NOT NULL, "endpoint" varchar(500) NOT NULL, "public_key" varchar(255) NULL,
                  "auth_token" varchar(255) NULL, "content_encoding" varchar(255) NULL,
                  "created_at" timestamp(0) without time zone NULL, "updated_at" timestamp(0) without time zone NULL);
                CREATE INDEX "push_subscriptions_subscribable_type_subscribable_id_index" ON "push_subscriptions" ("subscribable_type", "subscribable_id");
                ALTER TABLE "push_subscriptions" ADD CONSTRAINT "push_subscriptions_endpoint_unique" UNIQUE ("endpoint");
                """
        default:
            return """
                CREATE TABLE "push_subscriptions" ("id" integer PRIMARY KEY AUTOINCREMENT NOT NULL, "subscribable_type" varchar NOT NULL,
                  "subscribable_id" integer NOT NULL, "endpoint" varchar NOT NULL, "public_key" varchar, "auth_token" varchar,
                  "content_encoding" varchar, "created_at" datetime, "updated_at" datetime);
                CREATE INDEX "push_subscriptions_subscribable_type_subscribable_id_index" ON "push_subscriptions" ("subscribable_type", "subscribable_id");
                CREATE UNIQUE INDEX "push_subscriptions_endpoint_unique" ON "push_subscriptions" ("endpoint");
                """
        }
    }

    /// One INSERT, as `$user->updatePushSubscription(...)` would have left the rows.
    var inserts: String {
        "INSERT INTO push_subscriptions (id, subscribable_type, subscribable_id, endpoint, public_key, auth_token, content_encoding, "
            + "created_at, updated_at) VALUES " + rows.map { r in
                "(\(r.id), 'App\\Models\\User', \(r.subscriber), \(DatabaseFixture.literal(r.endpoint)), \(DatabaseFixture.literal(r.publicKey)), "
                    + "\(DatabaseFixture.literal(r.authToken)), \(DatabaseFixture.literal(r.contentEncoding)), '\(Self.created)', '\(Self.created)')"
            }.joined(separator: ",") + ";"
    }
}

final class WebPushDatabaseTests: XCTestCase {
    static let rowCount = 300
    static let template = #"{"title":"Hello","body":"Subscriber {{subscribable_id}}","row":"{{device_id}}"}"#
    /// What each kind of row must end in, and the status the mock logs for it (nil: never sent).
    static let expected: [String: (outcome: String, status: Int?)] = [
        "ok": ("delivered", 201), "gone": ("pruned", 410), "nf": ("pruned", 404), "big": ("failed", 413), "invalid": ("invalid", nil),
    ]

    var directory = ""

    override func setUpWithError() throws {
        try BinaryTests.requireBinary()
        directory = try DatabaseServers.makeDirectory("webpushdb")
    }

    override func tearDown() { try? FileManager.default.removeItem(atPath: directory) }

    func testLaravelPushSubscriptionsOnMariaDB() throws { try roundTrip(try MariaDBServer(), kind: "mysql") }

    func testLaravelPushSubscriptionsOnPostgreSQL() throws { try roundTrip(try PostgresServer(), kind: "postgres") }

    func testLaravelPushSubscriptionsOnSQLite() throws { try roundTrip(try SQLiteDatabase(), kind: "sqlite") }

    func pushcast(_ arguments: [String], _ database: TestDatabase) throws -> PushcastRun {
        var environment = ProcessInfo.processInfo.environment
        environment[database.passwordVariable] = database.password
        return try runProgram(BinaryTests.binary, arguments, environment: environment, seconds: 300)
    }

    /// Sends the table's rows, checks the results and the mock's log, then deletes the pruned rows;
    /// the database is stopped afterwards, whatever happens.
    func roundTrip(_ database: TestDatabase, kind: String) throws {
        defer { database.stop() }
        let hosts = (LaravelSubscriptions.hosts + ["localhost", "127.0.0.1"]).joined(separator: ",")
        let mock = try MockProcess(directory: directory, arguments: ["--webpush", "--hosts", hosts], waitFor: ["PORT", "WEBPUSH_PORT"])
        defer { _ = mock.stop() }
        let port = try XCTUnwrap(Int(mock.fields["WEBPUSH_PORT"] ?? ""))
        let fixture = try LaravelSubscriptions(count: Self.rowCount, port: port)
        try database.sql(LaravelSubscriptions.schema(kind))
        try database.sql(fixture.inserts)

        let vapid = directory + "/vapid.pem", payload = directory + "/payload.json"
        try DatabaseServers.tool("/usr/bin/openssl", ["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", vapid])
        try Self.template.write(toFile: payload, atomically: true, encoding: .utf8)
        let results = directory + "/results.ndjson", prune = directory + "/prune.csv"
        let started = Date()
        let run = try pushcast(["send", "--from", database.url, "--query", LaravelSubscriptions.query, "--webpush-payload", payload,
                                "--vapid-key", vapid, "--vapid-subject", "mailto:ops@example.com", "--ca-file", mock.caFile]
                               + LaravelSubscriptions.hosts.flatMap { ["--resolve", "\($0):\(port):127.0.0.1"] }
                               + ["--results", results, "--prune", prune, "--quiet"], database)
        XCTAssertEqual(run.status, 1, "the 413 rows fail, so the run ends 1: \(run.stderr.suffix(3000))")
        XCTAssertFalse((run.stdout + run.stderr).contains(database.password), "the password appears in the output")
        _ = mock.stop()
        try checkResults(results, fixture)
        try checkLog(mock.log, fixture)
        let pruned = try prunedEndpoints(prune)
        XCTAssertEqual(pruned, Set(fixture.rows.filter { $0.kind == "gone" || $0.kind == "nf" }.map(\.endpoint)),
                       "the prune file holds exactly the gone and not-found endpoints")
        try checkDelete(database, fixture, prune: prune, since: started)
    }

    /// One results line per row, its outcome that of the row's kind; invalid rows name their field.
    func checkResults(_ path: String, _ fixture: LaravelSubscriptions) throws {
        let byRow = try resultsByRow(path)
        XCTAssertEqual(byRow.count, fixture.rows.count)
        var mismatches: [String] = []
        for row in fixture.rows {
            guard let record = byRow[row.id] else { mismatches.append("row \(row.id): no results line"); continue }
            let (outcome, _) = try XCTUnwrap(Self.expected[row.kind])
            var problems: [String] = []
            if record["outcome"] as? String != outcome { problems.append("outcome \(record["outcome"] ?? "nil"), expected \(outcome)") }
            if record["token"] as? String != row.endpoint { problems.append("token \(record["token"] ?? "nil")") }
            if record["id"] as? String != "\(row.id)" { problems.append("id \(record["id"] ?? "nil")") }
            if record["provider"] as? String != "webpush" { problems.append("provider \(record["provider"] ?? "nil")") }
            if let field = row.invalidField {
                let error = record["error"] as? String ?? ""
                if record["reason"] as? String != "InvalidSubscription" { problems.append("reason \(record["reason"] ?? "nil")") }
                if !error.contains(field) { problems.append("error '\(error)' does not name \(field)") }
            }
            if !problems.isEmpty { mismatches.append("row \(row.id) (\(row.kind)): " + problems.joined(separator: "; ")) }
        }
        XCTAssertEqual(mismatches, [], mismatches.prefix(10).joined(separator: "\n"))
        let invalid = fixture.rows.filter { $0.kind == "invalid" }.count
        XCTAssertEqual(invalid, 5)
        XCTAssertEqual(byRow.values.filter { $0["outcome"] as? String == "invalid" }.count, invalid)
    }

    /// The mock saw each sent row once, decrypted it to the payload rendered for that row, and
    /// never saw an invalid one.
    func checkLog(_ log: [[String: Any]], _ fixture: LaravelSubscriptions) throws {
        var logged: [String: [String: Any]] = [:]
        for entry in log where entry["provider"] as? String == "webpush" {
            let endpoint = try XCTUnwrap(entry["endpoint"] as? String)
            XCTAssertNil(logged.updateValue(entry, forKey: endpoint), "\(endpoint) logged twice")
        }
        var mismatches: [String] = []
        for row in fixture.rows {
            let (_, status) = try XCTUnwrap(Self.expected[row.kind])
            let entry = logged[row.endpoint]
            guard let status else {
                if entry != nil { mismatches.append("row \(row.id): an invalid row was sent") }
                continue
            }
            guard let entry else { mismatches.append("row \(row.id): not in the mock's log"); continue }
            if entry["status"] as? Int != status { mismatches.append("row \(row.id): status \(entry["status"] ?? "nil"), expected \(status)") }
            let rendered = Self.template.replacingOccurrences(of: "{{subscribable_id}}", with: "\(row.subscriber)")
                .replacingOccurrences(of: "{{device_id}}", with: "\(row.id)")
            if entry["payload_sha256"] as? String != WebPushDemoSubscriptions.sha256Hex(Array(rendered.utf8)) {
                mismatches.append("row \(row.id): payload_sha256 \(entry["payload_sha256"] ?? "nil") is not that of \(rendered)")
            }
        }
        XCTAssertEqual(mismatches, [], mismatches.prefix(10).joined(separator: "\n"))
        XCTAssertEqual(logged.count, fixture.rows.filter { $0.kind != "invalid" }.count, "one request per row sent")
    }

    func prunedEndpoints(_ path: String) throws -> Set<String> {
        let lines = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n")
        XCTAssertEqual(lines.first, "token,provider,reason,unregistered_at,id")
        // Endpoints hold no comma or quote.
        return Set(lines.dropFirst().map { String($0.split(separator: ",", omittingEmptySubsequences: false)[0]) })
    }

    /// prune-apply --delete removes the pruned rows but one whose subscription was saved again
    /// after the campaign started; a second run changes nothing.
    func checkDelete(_ database: TestDatabase, _ fixture: LaravelSubscriptions, prune: String, since started: Date) throws {
        let renewed = try XCTUnwrap(fixture.rows.first { $0.kind == "gone" })
        let saved = DatabaseCampaignTests.utc(started.addingTimeInterval(1))
        try database.sql("UPDATE push_subscriptions SET updated_at = '\(saved)' WHERE id = \(renewed.id);")
        let apply = ["prune-apply", prune, "--to", database.url, "--table", "push_subscriptions", "--token-column", "endpoint", "--delete",
                     "--updated-column", "updated_at", "--since", DatabaseCampaignTests.utc(started)]
        let first = try pushcast(apply, database)
        XCTAssertEqual(first.status, 0, first.stdout + first.stderr)
        let deleted = Set(fixture.rows.filter { ($0.kind == "gone" || $0.kind == "nf") && $0.id != renewed.id }.map(\.id))
        let left = Set(try database.sql("SELECT id FROM push_subscriptions;").split(separator: "\n").compactMap { Int($0) })
        XCTAssertEqual(left, Set(fixture.rows.map(\.id)).subtracting(deleted), "exactly the pruned rows deleted, the renewed one kept")
        XCTAssertEqual(DatabaseCampaignTests.count("rows changed:", in: first.stdout), deleted.count, first.stdout)
        XCTAssertEqual(DatabaseCampaignTests.count("skipped, re-registered:", in: first.stdout), 1, first.stdout)
        let second = try pushcast(apply, database)
        XCTAssertEqual(second.status, 0, second.stdout + second.stderr)
        XCTAssertEqual(DatabaseCampaignTests.count("rows changed:", in: second.stdout), 0, second.stdout)
        XCTAssertTrue(second.stdout.contains("nothing to change"), second.stdout)
        XCTAssertFalse((first.stdout + first.stderr + second.stdout + second.stderr).contains(database.password))
    }
}
