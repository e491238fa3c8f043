import Foundation

/// The `push_devices` table of the seed schema (a PHP push server's: user_id, platform, token,
/// app_version, is_active, last_seen_at, created_at, updated_at) and a `users` table for names,
/// filled with the demo's kinds of rows: dead and bad tokens (the mock's prefixes), syntactically
/// invalid ones, repeated tokens, iOS and Android mixed, names in several scripts (with commas,
/// quotes and a newline), and NULLs. The same rows are also written as the CSV a user would
/// export, so a database campaign can be compared with a file campaign row by row.
struct DatabaseFixture {
    struct Row {
        var id: Int
        var userID: Int
        var platform: String
        var token: String
        var appVersion: String?
        var lastSeen: String?
    }

    var rows: [Row] = []
    static let names: [String?] = ["Noor نور", "李小龍", "Сергей", "Zoë", "😀 Emoji", nil, "O'Brien, \"Jr\"", "two\nlines"]
    static let query = "SELECT d.id AS device_id, d.token, d.platform, d.app_version, u.name AS first_name "
        + "FROM push_devices d LEFT JOIN users u ON u.id = d.user_id WHERE d.is_active ORDER BY d.id"
    static let updated = "2026-01-01 00:00:00"

    init(rows count: Int, seed: UInt64 = 14) {
        var state = seed
        func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
        for i in 0..<count {
            let ios = i % 3 == 0
            var token = ios ? String(format: "%02x", next() % 0x40) + (1..<32).map { _ in String(format: "%02x", next() % 256) }.joined()
                : "f" + String((0..<150).map { _ in alphabet[Int(next() % 64)] })
            func prefixed(_ prefix: String) -> String { prefix + token.dropFirst(prefix.count) }
            switch i % 100 {
            case 10, 11: token = prefixed("dead")
            case 12: token = prefixed("bad0")
            case 13: token = ios ? "zz" + token.dropFirst(2) : "has space" + token
            case 14 where i >= 48: token = rows[i - 48].token  // the same platform (48 is a multiple of 3)
            default: break
            }
            rows.append(Row(id: i + 1, userID: i / 2 + 1, platform: ios ? "ios" : "android", token: token,
                            appVersion: i % 7 == 0 ? nil : "1.\(i % 10).0", lastSeen: i % 5 == 0 ? nil : "2025-12-\(10 + i % 18) 08:00:00"))
        }
    }

    static func name(user: Int) -> String? { names[user % names.count] }

    static func literal(_ text: String?) -> String {
        text.map { "'" + $0.replacingOccurrences(of: "'", with: "''") + "'" } ?? "NULL"
    }

    /// The schema, in each dialect. The token column is indexed, as a real table's is.
    static func schema(_ kind: String) -> String {
        switch kind {
        case "mysql":
            return """
                CREATE TABLE users (id BIGINT PRIMARY KEY, name VARCHAR(64));
                CREATE TABLE push_devices (id BIGINT PRIMARY KEY AUTO_INCREMENT, user_id BIGINT NOT NULL, platform VARCHAR(16) NOT NULL,
                  token TEXT NOT NULL, app_version VARCHAR(32), is_active BOOLEAN NOT NULL DEFAULT TRUE, last_seen_at DATETIME NULL,
                  pruned_at DATETIME NULL, created_at DATETIME NOT NULL, updated_at DATETIME NOT NULL, KEY token_index (token(255)));
                """
        case "postgres":
            return """
                CREATE TABLE users (id BIGINT PRIMARY KEY, name VARCHAR(64));
                CREATE TABLE push_devices (id BIGSERIAL PRIMARY KEY, user_id BIGINT NOT NULL, platform VARCHAR(16) NOT NULL,
                  token TEXT NOT NULL, app_version VARCHAR(32), is_active BOOLEAN NOT NULL DEFAULT TRUE, last_seen_at TIMESTAMP NULL,
                  pruned_at TIMESTAMP NULL, created_at TIMESTAMP NOT NULL, updated_at TIMESTAMP NOT NULL);
                CREATE INDEX token_index ON push_devices (token);
                """
        default:
            return """
                CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT);
                CREATE TABLE push_devices (id INTEGER PRIMARY KEY AUTOINCREMENT, user_id INTEGER NOT NULL, platform TEXT NOT NULL,
                  token TEXT NOT NULL, app_version TEXT, is_active BOOLEAN NOT NULL DEFAULT TRUE, last_seen_at TEXT NULL,
                  pruned_at TEXT NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL);
                CREATE INDEX token_index ON push_devices (token);
                """
        }
    }

    /// INSERT statements for both tables, 500 rows each, in one transaction.
    var inserts: String {
        var out = "BEGIN;\n"
        let users = Set(rows.map(\.userID)).sorted()
        for start in stride(from: 0, to: users.count, by: 500) {
            out += "INSERT INTO users (id, name) VALUES "
                + users[start..<min(users.count, start + 500)].map { "(\($0), \(Self.literal(Self.name(user: $0))))" }.joined(separator: ",") + ";\n"
        }
        for start in stride(from: 0, to: rows.count, by: 500) {
            out += "INSERT INTO push_devices (id, user_id, platform, token, app_version, is_active, last_seen_at, created_at, updated_at) VALUES "
                + rows[start..<min(rows.count, start + 500)].map { r in
                    "(\(r.id), \(r.userID), '\(r.platform)', \(Self.literal(r.token)), \(Self.literal(r.appVersion)), TRUE, "
                        + "\(Self.literal(r.lastSeen)), '2025-06-01 00:00:00', '\(Self.updated)')"
                }.joined(separator: ",") + ";\n"
        }
        return out + "COMMIT;\n"
    }

    /// The query's rows as a CSV export (NULL as an empty field).
    var csv: String {
        func field(_ text: String?) -> String {
            guard let text else { return "" }
            return text.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" }) ? "\"" + text.replacingOccurrences(of: "\"", with: "\"\"") + "\"" : text
        }
        var out = "device_id,token,platform,app_version,first_name\n"
        for r in rows {
            out += "\(r.id),\(field(r.token)),\(r.platform),\(field(r.appVersion)),\(field(Self.name(user: r.userID)))\n"
        }
        return out
    }
}
