import Foundation
import PushcastCore

/// What a resume finds in an earlier run's results file: which rows are finished, their records
/// (handed to `visit` one at a time, for the summary and the prune file), and where the file's
/// complete lines end (a torn last line, cut by a crash mid-write, is dropped).
public struct RecoveredResults {
    /// Finished rows, as bits by row number.
    public private(set) var finished: [UInt64] = []
    public private(set) var count = 0
    /// The length of the file's complete lines: a resume truncates to it before appending.
    public var validLength = 0
    public var tornBytes = 0

    public func isFinished(_ row: Int) -> Bool {
        let word = row >> 6
        return word < finished.count && finished[word] & (1 << UInt64(row & 63)) != 0
    }

    mutating func markFinished(_ row: Int) -> Bool {
        let word = row >> 6
        if word >= finished.count { finished.append(contentsOf: repeatElement(0, count: word + 1 - finished.count)) }
        let bit: UInt64 = 1 << UInt64(row & 63)
        guard finished[word] & bit == 0 else { return false }
        finished[word] |= bit
        count += 1
        return true
    }

    /// Reads a results file's bytes. Damage anywhere but the last line throws, naming the line;
    /// so does a row recorded twice.
    public static func read(_ bytes: [UInt8], format: ResultsFormat, path: String, columns: ResultColumns = .standard,
                            visit: (OutcomeRecord) -> Void) throws(CampaignError) -> RecoveredResults {
        var recovered = RecoveredResults()
        recovered.validLength = (bytes.lastIndex(of: UInt8(ascii: "\n")).map { $0 + 1 }) ?? 0
        recovered.tornBytes = bytes.count - recovered.validLength
        var start = 0
        var line = 0
        while start < recovered.validLength {
            let end = bytes[start...].firstIndex(of: UInt8(ascii: "\n"))!
            line += 1
            defer { start = end + 1 }
            let text = String(decoding: bytes[start..<end], as: UTF8.self)
            if format == .csv && line == 1 { continue }  // the header
            guard let record = format == .csv ? parseCSV(text, columns) : parseNDJSON(text, columns) else {
                throw .input("\(path):\(line): damaged results line (fix or remove it, or start over with --force)")
            }
            guard recovered.markFinished(record.row) else { throw .input("\(path):\(line): row \(record.row) is recorded twice") }
            visit(record)
        }
        return recovered
    }

    public static func parseNDJSON(_ text: String, _ columns: ResultColumns) -> OutcomeRecord? {
        guard let object = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any],
              let row = object["row"] as? Int, row >= 1,
              let outcome = (object["outcome"] as? String).flatMap(OutcomeKind.init(rawValue:)) else { return nil }
        let provider = (object["provider"] as? String).flatMap { columns.catalog.provider(named: $0) }
        let field = columns.field(of: provider)
        return OutcomeRecord(row: row, id: object["id"] as? String, token: object["token"] as? String ?? "",
                             provider: provider, outcome: outcome,
                             status: object["status"] as? Int, reason: object["reason"] as? String, error: object["error"] as? String,
                             messageID: field >= 0 ? object[columns.fields[field]] as? String : nil,
                             unregisteredAt: object["unregistered_at"] as? String, duplicateOf: object["duplicate_of"] as? Int,
                             attempts: object["attempts"] as? Int ?? 0, latencyMilliseconds: object["latency_ms"] as? Double)
    }

    /// `row,id,token,provider,outcome,status,reason,` the message-id columns,
    /// `unregistered_at,attempts,latency_ms,duplicate_of,error` (`ResultColumns`).
    public static func parseCSV(_ text: String, _ columns: ResultColumns) -> OutcomeRecord? {
        let k = columns.fields.count
        guard let f = splitCSV(text), f.count == 12 + k, let row = Int(f[0]), row >= 1,
              let outcome = OutcomeKind(rawValue: f[4]) else { return nil }
        func optional(_ i: Int) -> String? { f[i].isEmpty ? nil : f[i] }
        let provider = columns.catalog.provider(named: f[3])
        let field = columns.field(of: provider)
        return OutcomeRecord(row: row, id: optional(1), token: f[2], provider: provider, outcome: outcome,
                             status: Int(f[5]), reason: optional(6), error: optional(11 + k), messageID: field >= 0 ? optional(7 + field) : nil,
                             unregisteredAt: optional(7 + k), duplicateOf: Int(f[10 + k]), attempts: Int(f[8 + k]) ?? 0,
                             latencyMilliseconds: Double(f[9 + k]))
    }

    /// RFC 4180 fields of one line (the results file never breaks a field across lines).
    static func splitCSV(_ text: String) -> [String]? {
        var fields: [String] = []
        var field = ""
        var quoted = false
        var chars = Array(text)
        if chars.last == "\r" { chars.removeLast() }
        var i = 0
        while i < chars.count {
            let c = chars[i]
            if quoted {
                if c == "\"" {
                    if i + 1 < chars.count && chars[i + 1] == "\"" { field.append("\""); i += 1 } else { quoted = false }
                } else {
                    field.append(c)
                }
            } else if c == "\"" && field.isEmpty {
                quoted = true
            } else if c == "," {
                fields.append(field)
                field = ""
            } else {
                field.append(c)
            }
            i += 1
        }
        guard !quoted else { return nil }
        fields.append(field)
        return fields
    }
}
