import Foundation
import XCTest
@testable import PushcastDatabase

final class DatabaseURLTests: XCTestCase {
    func testParsesEachScheme() throws {
        let pg = try DatabaseURL(parsing: "postgres://app@127.0.0.1:5433/push?sslmode=verify-full")
        XCTAssertEqual(pg.kind, .postgres)
        XCTAssertEqual(pg.user, "app")
        XCTAssertEqual(pg.host, "127.0.0.1")
        XCTAssertEqual(pg.port, 5433)
        XCTAssertEqual(pg.database, "push")
        XCTAssertEqual(pg.parameters["sslmode"], "verify-full")
        XCTAssertTrue(pg.isLoopback)
        let my = try DatabaseURL(parsing: "mysql://root@db.example.com/app%20db")
        XCTAssertEqual(my.kind, .mysql)
        XCTAssertEqual(my.database, "app db")
        XCTAssertFalse(my.isLoopback)
        XCTAssertEqual(try DatabaseURL(parsing: "sqlite:/tmp/x.db").path, "/tmp/x.db")
        XCTAssertEqual(try DatabaseURL(parsing: "sqlite:///tmp/x.db").path, "/tmp/x.db")
        XCTAssertTrue(try DatabaseURL(parsing: "postgres://u@[::1]:5432/d").isLoopback)
    }

    func testTLSIsRequiredOffLoopback() throws {
        XCTAssertEqual(try DatabaseURL(parsing: "postgres://u@db.example.com/d").postgresSSLMode(), "require")
        XCTAssertEqual(try DatabaseURL(parsing: "postgres://u@10.0.0.5/d?sslmode=verify-full").postgresSSLMode(), "verify-full")
        XCTAssertThrowsError(try DatabaseURL(parsing: "postgres://u@10.0.0.5/d?sslmode=prefer").postgresSSLMode())
        XCTAssertNil(try DatabaseURL(parsing: "postgres://u@127.0.0.1/d").postgresSSLMode())
        XCTAssertEqual(try DatabaseURL(parsing: "postgres://u@localhost/d?sslmode=disable").postgresSSLMode(), "disable")
        XCTAssertTrue(try DatabaseURL(parsing: "mysql://u@db.example.com/d").mysqlRequiresTLS())
        XCTAssertFalse(try DatabaseURL(parsing: "mysql://u@127.0.0.1:3306/d").mysqlRequiresTLS())
        XCTAssertTrue(try DatabaseURL(parsing: "mysql://u@127.0.0.1:3306/d?sslmode=require").mysqlRequiresTLS())
        XCTAssertThrowsError(try DatabaseURL(parsing: "mysql://u@db.example.com/d?sslmode=disable").mysqlRequiresTLS())
        XCTAssertFalse(try DatabaseURL(parsing: "mysql://u@h/d?socket=/run/mysqld/mysqld.sock").mysqlRequiresTLS())
    }

    func testRefusesAPasswordWithoutEchoingIt() {
        XCTAssertThrowsError(try DatabaseURL(parsing: "postgres://app:s3cret-pw@host/db")) { error in
            let text = "\(error)"
            XCTAssertFalse(text.contains("s3cret-pw"), text)
            XCTAssertTrue(text.contains("PGPASSWORD"), text)
        }
        XCTAssertThrowsError(try DatabaseURL(parsing: "mysql://host/db?password=x"))
        XCTAssertThrowsError(try DatabaseURL(parsing: "oracle://host/db"))
        XCTAssertThrowsError(try DatabaseURL(parsing: "mysql://host:99999/db"))
        XCTAssertThrowsError(try DatabaseURL(parsing: "mysql://host/"))
    }
}

final class PruneStatementTests: XCTestCase {
    func testIdentifiersAreCheckedAndQuoted() throws {
        XCTAssertEqual(SQLDialect(kind: .mysql).quote(try SQLIdentifier("app.push_devices", dotted: true, what: "--table")), "`app`.`push_devices`")
        XCTAssertEqual(SQLDialect(kind: .postgres).quote(try SQLIdentifier("token", what: "c")), "\"token\"")
        for bad in ["to ken", "x;drop", "\"q\"", "1abc", "", String(repeating: "a", count: 65), "a.b"] {
            XCTAssertThrowsError(try SQLIdentifier(bad, what: "--token-column"), bad)
        }
    }

    func testSetClausesTakeOnlyKeywordsNumbersAndTheTime() throws {
        XCTAssertEqual(try SetClause(parsing: "is_active = false").value, "false")
        XCTAssertEqual(try SetClause(parsing: " pruned_at={unregistered_at} ").value, "{unregistered_at}")
        XCTAssertEqual(try SetClause(parsing: "state = 3").value, "3")
        XCTAssertThrowsError(try SetClause(parsing: "is_active = 'no'"))
        XCTAssertThrowsError(try SetClause(parsing: "is_active = false; DROP TABLE x"))
        XCTAssertThrowsError(try SetClause(parsing: "is_active false"))
    }

    func testStatementsPerDialect() throws {
        let set = PruneAction.set([try SetClause(parsing: "is_active = false"), try SetClause(parsing: "pruned_at = {unregistered_at}")])
        let table = try SQLIdentifier("push_devices", what: "t"), token = try SQLIdentifier("token", what: "c")
        let updated = try SQLIdentifier("updated_at", what: "u")
        let pg = try PruneApplyPlan(table: table, tokenColumn: token, updatedColumn: updated, action: set, dialect: SQLDialect(kind: .postgres))
        XCTAssertEqual(pg.applyStatement, "UPDATE \"push_devices\" SET \"is_active\" = false, \"pruned_at\" = pushcast_prune.at FROM pushcast_prune "
            + "WHERE \"push_devices\".\"token\" = pushcast_prune.token AND (\"push_devices\".\"updated_at\" IS NULL OR "
            + "\"push_devices\".\"updated_at\" <= pushcast_prune.at) AND NOT (\"push_devices\".\"is_active\" IS NOT DISTINCT FROM false AND "
            + "\"push_devices\".\"pruned_at\" IS NOT DISTINCT FROM pushcast_prune.at)")
        let my = try PruneApplyPlan(table: table, tokenColumn: token, updatedColumn: nil, action: set, dialect: SQLDialect(kind: .mysql))
        XCTAssertTrue(my.applyStatement!.hasPrefix("UPDATE `push_devices` JOIN pushcast_prune ON `push_devices`.`token` = pushcast_prune.token SET "))
        XCTAssertTrue(my.applyStatement!.contains("`push_devices`.`is_active` <=> false"))
        XCTAssertThrowsError(try PruneApplyPlan(table: nil, tokenColumn: nil, updatedColumn: nil, action: .delete, dialect: SQLDialect(kind: .sqlite)))
        XCTAssertThrowsError(try PruneApplyPlan(table: nil, tokenColumn: nil, updatedColumn: nil, action: .sql("UPDATE x SET a = 1"),
                                                dialect: SQLDialect(kind: .sqlite)))
    }

    func testTimesNormalise() {
        XCTAssertEqual(PruneTime.normalize("2026-01-02T03:04:05.678Z"), "2026-01-02 03:04:05")
        XCTAssertEqual(PruneTime.normalize("2026-01-02 03:04:05"), "2026-01-02 03:04:05")
        XCTAssertEqual(PruneTime.normalize("0"), "1970-01-01 00:00:00")
        XCTAssertEqual(PruneTime.normalize("1767225600"), "2026-01-01 00:00:00")
        XCTAssertEqual(PruneTime.format(epochSeconds: 951_782_400), "2000-02-29 00:00:00")
        XCTAssertNil(PruneTime.normalize("yesterday"))
        XCTAssertNil(PruneTime.normalize("2026-01-02T03:04:05+02:00"))
    }
}

final class CSVSpoolWriterTests: XCTestCase {
    func testQuotingAndNulls() throws {
        var out: [UInt8] = []
        let spool = CSVSpoolWriter { out.append(contentsOf: $0) }
        try spool.header(["id", "name"])
        for (a, b) in [("1", "plain"), ("2", "a,b"), ("3", "say \"hi\"\nbye"), ("4", "")] {
            var x = a, y = b
            x.withUTF8 { spool.field(UnsafeRawBufferPointer($0)) }
            y.withUTF8 { spool.field(UnsafeRawBufferPointer($0)) }
            try spool.endRow()
        }
        spool.field(nil)
        spool.field(nil)
        try spool.endRow()
        try spool.flush()
        XCTAssertEqual(String(decoding: out, as: UTF8.self), "id,name\n1,plain\n2,\"a,b\"\n3,\"say \"\"hi\"\"\nbye\"\n4,\n,\n")
        XCTAssertEqual(spool.rows, 5)
    }
}

/// The set-based prune against a real SQLite file: counts, idempotence, re-registered rows.
final class SQLitePruneTests: XCTestCase {
    func testApplyTwiceAndSkipReregistered() throws {
        let path = NSTemporaryDirectory() + "pushcast-prune-\(UUID().uuidString).db"
        defer { try? FileManager.default.removeItem(atPath: path) }
        FileManager.default.createFile(atPath: path, contents: nil)
        let session = try Database.connect(try DatabaseURL(parsing: "sqlite:" + path), password: nil)
        try session.execute("CREATE TABLE d (id INTEGER PRIMARY KEY, token TEXT NOT NULL, is_active BOOLEAN NOT NULL DEFAULT 1, "
            + "pruned_at TEXT, updated_at TEXT NOT NULL)")
        for i in 0..<100 {
            try session.execute("INSERT INTO d (token, updated_at) VALUES ('t\(i)', '\(i == 7 ? "2026-05-01 00:00:00" : "2026-01-01 00:00:00")')")
        }
        let entries = (0..<10).map { PruneEntry(token: "t\($0)", at: "2026-03-01 00:00:00") } + [PruneEntry(token: "nope", at: "2026-03-01 00:00:00")]
        let plan = try PruneApplyPlan(table: try SQLIdentifier("d", what: "t"), tokenColumn: try SQLIdentifier("token", what: "c"),
                                      updatedColumn: try SQLIdentifier("updated_at", what: "u"),
                                      action: .set([try SetClause(parsing: "is_active = false"), try SetClause(parsing: "pruned_at = {unregistered_at}")]),
                                      dialect: session.dialect)
        let dry = try PruneApplier.run(plan, session: session, entries: entries, lines: 11, dryRun: true, batchSize: 4) { false }
        XCTAssertEqual([dry.matched, dry.changed, dry.reregistered, dry.notFound, dry.batches], [10, 9, 1, 1, 3])
        XCTAssertEqual(try session.integers("SELECT COUNT(*) FROM d WHERE is_active = 0"), [0], "a dry run changes nothing")
        let first = try PruneApplier.run(plan, session: session, entries: entries, lines: 11, dryRun: false, batchSize: 4) { false }
        XCTAssertEqual([first.matched, first.changed, first.reregistered, first.notFound], [10, 9, 1, 1])
        XCTAssertEqual(try session.integers("SELECT COUNT(*) FROM d WHERE is_active = 0 AND pruned_at = '2026-03-01 00:00:00'"), [9])
        XCTAssertEqual(try session.integers("SELECT is_active FROM d WHERE token = 't7'"), [1])
        let second = try PruneApplier.run(plan, session: session, entries: entries, lines: 11, dryRun: false, batchSize: 4) { false }
        XCTAssertEqual([second.matched, second.changed, second.alreadyApplied], [10, 0, 9])
        XCTAssertTrue(second.text(dryRun: false).contains("nothing to change"))
    }

    func testDeleteAndPerTokenSQL() throws {
        let path = NSTemporaryDirectory() + "pushcast-prune-\(UUID().uuidString).db"
        defer { try? FileManager.default.removeItem(atPath: path) }
        FileManager.default.createFile(atPath: path, contents: nil)
        let session = try Database.connect(try DatabaseURL(parsing: "sqlite:" + path), password: nil)
        try session.execute("CREATE TABLE d (id INTEGER PRIMARY KEY, token TEXT NOT NULL, note TEXT)")
        for i in 0..<20 { try session.execute("INSERT INTO d (token) VALUES ('t\(i)')") }
        // A token that looks like SQL is only ever data.
        try session.execute("INSERT INTO d (token) VALUES ('x''); DROP TABLE d; --')")
        let at = "2026-03-01 00:00:00"
        let entries = [PruneEntry(token: "t1", at: at), PruneEntry(token: "t2", at: at), PruneEntry(token: "x'); DROP TABLE d; --", at: at)]
        let table = try SQLIdentifier("d", what: "t"), token = try SQLIdentifier("token", what: "c")
        let custom = try PruneApplyPlan(table: nil, tokenColumn: nil, updatedColumn: nil, action: .sql("UPDATE d SET note = 'gone' WHERE token = ?"),
                                        dialect: session.dialect)
        let noted = try PruneApplier.run(custom, session: session, entries: entries, lines: 3, dryRun: false) { false }
        XCTAssertEqual(noted.changed, 3)
        XCTAssertFalse(noted.counted)
        let delete = try PruneApplyPlan(table: table, tokenColumn: token, updatedColumn: nil, action: .delete, dialect: session.dialect)
        let first = try PruneApplier.run(delete, session: session, entries: entries, lines: 3, dryRun: false) { false }
        XCTAssertEqual([first.matched, first.changed, first.notFound], [3, 3, 0])
        let again = try PruneApplier.run(delete, session: session, entries: entries, lines: 3, dryRun: false) { false }
        XCTAssertEqual([again.matched, again.changed, again.notFound], [0, 0, 3])
        XCTAssertEqual(try session.integers("SELECT COUNT(*) FROM d"), [18])
    }
}
