import PushcastJSON
import PushcastCore
import PushcastProviderKit

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
    public static func read(_ bytes: [UInt8], format: ResultsFormat, path: String, columns: ResultColumns,
                            visit: (OutcomeRecord) -> Void) throws(CampaignError) -> RecoveredResults {
        var reader = LineReader(format: format, path: path, columns: columns)
        let used = try reader.consume(bytes, visit: visit)
        try reader.checkTail(bytes[used...])
        return reader.finish(totalBytes: bytes.count)
    }

    /// Reads the results file at `path` (absent: nothing finished) in chunks of `chunkBytes`, so
    /// memory stays flat however long the file is: a resume of 10,000,000 rows read the whole
    /// 2.8 GB file into memory before.
    public static func read(path: String, format: ResultsFormat, columns: ResultColumns, files: any FileStorage,
                            chunkBytes: Int = 1 << 20, visit: (OutcomeRecord) -> Void) throws(CampaignError) -> RecoveredResults {
        guard files.size(path) != nil else { return RecoveredResults() }
        let file: any ReadableFile
        do { file = try files.openForReading(path) } catch { throw .output(error.description) }
        var reader = LineReader(format: format, path: path, columns: columns)
        var carry: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: max(1, chunkBytes))
        var total = 0
        while true {
            let n: Int
            do { n = try file.read(into: &chunk) } catch { throw .output(error.description) }
            if n == 0 { break }
            total += n
            carry.append(contentsOf: chunk[0..<n])
            let used = try reader.consume(carry, visit: visit)
            carry.removeFirst(used)
            if carry.count > Self.lineBytesMax {
                throw .input("\(path):\(reader.line + 1): damaged results line (longer than \(Self.lineBytesMax) bytes; fix or "
                    + "remove it, or start over with --force)")
            }
        }
        try reader.checkTail(carry[...])
        return reader.finish(totalBytes: total)
    }

    /// The longest results line a resume accepts (a line is one record: a few hundred bytes).
    static let lineBytesMax = 1 << 20

    /// Parses complete lines as they come, in order, remembering where they end.
    struct LineReader {
        let format: ResultsFormat
        let path: String
        let columns: ResultColumns
        var recovered = RecoveredResults()
        /// Physical lines and records read so far (they differ only for CSV fields with line breaks).
        var line = 0
        var records = 0
        /// Bytes of complete records consumed so far.
        var consumed = 0

        init(format: ResultsFormat, path: String, columns: ResultColumns) {
            self.format = format
            self.path = path
            self.columns = columns
        }

        /// Every complete record of `bytes`; returns the bytes those records took (the rest is an
        /// incomplete record that the next call gets again, longer). A CSV record ends at a line
        /// end outside quotes: a field may hold a line break (RFC 4180), and `line` counts
        /// physical lines so that errors name the line an editor shows.
        mutating func consume(_ bytes: [UInt8], visit: (OutcomeRecord) -> Void) throws(CampaignError) -> Int {
            var start = 0
            while start < bytes.count, let end = recordEnd(bytes, from: start) {
                let firstLine = line + 1
                line += format == .csv ? bytes[start...end].reduce(0) { $0 + ($1 == 0x0A ? 1 : 0) } : 1
                records += 1
                let recordStart = start
                start = end + 1
                if format == .csv && records == 1 { continue }  // the header
                guard let record = parse(bytes[recordStart..<end]) else {
                    throw .input("\(path):\(firstLine): damaged results line (fix or remove it, or start over with --force)")
                }
                guard recovered.markFinished(record.row) else { throw .input("\(path):\(firstLine): row \(record.row) is recorded twice") }
                visit(record)
            }
            consumed += start
            return start
        }

        /// Where the record starting at `start` ends (its line end), if it is complete.
        private func recordEnd(_ bytes: [UInt8], from start: Int) -> Int? {
            guard format == .csv else { return bytes[start...].firstIndex(of: 0x0A) }
            var quoted = false
            for i in start..<bytes.count {
                if bytes[i] == 0x22 { quoted.toggle() } else if bytes[i] == 0x0A && !quoted { return i }
            }
            return nil
        }

        /// What follows the last complete record: a crash tears at most the record being written.
        /// A tail spanning lines is refused rather than cut: it may be a damaged quote with whole
        /// records after it.
        func checkTail(_ tail: ArraySlice<UInt8>) throws(CampaignError) {
            guard tail.contains(0x0A) else { return }
            throw .input("\(path):\(line + 1): damaged results line (an unclosed quote; fix or remove it, or start over with --force)")
        }

        /// pushcast's own NDJSON lines by the exact reader, anything else by the general parsers.
        private func parse(_ bytes: ArraySlice<UInt8>) -> OutcomeRecord? {
            if format == .ndjson, let record = bytes.withUnsafeBytes({ ResultsLineParser.parse($0, columns) }) { return record }
            let text = String(decoding: bytes, as: UTF8.self)
            return format == .csv ? parseCSV(text, columns) : parseNDJSON(text, columns)
        }

        /// What was read; bytes after the last line end are a torn line (a crash mid-write).
        func finish(totalBytes: Int) -> RecoveredResults {
            var result = recovered
            result.validLength = consumed
            result.tornBytes = totalBytes - consumed
            return result
        }
    }

    public static func parseNDJSON(_ text: String, _ columns: ResultColumns) -> OutcomeRecord? {
        guard case .success(let object) = JSONScanner.parse(Array(text.utf8)), case .object = object,
              let row = object["row"]?.intValue, row >= 1,
              let outcome = object["outcome"]?.stringValue.flatMap(OutcomeKind.init(rawValue:)) else { return nil }
        let provider = object["provider"]?.stringValue.flatMap { columns.catalog.provider(named: $0) }
        let field = columns.field(of: provider)
        return OutcomeRecord(row: row, id: object["id"]?.stringValue, token: object["token"]?.stringValue ?? "",
                             provider: provider, outcome: outcome,
                             status: object["status"]?.intValue, reason: object["reason"]?.stringValue, error: object["error"]?.stringValue,
                             messageID: field >= 0 ? object[columns.fields[field]]?.stringValue : nil,
                             unregisteredAt: object["unregistered_at"]?.stringValue, duplicateOf: object["duplicate_of"]?.intValue,
                             attempts: object["attempts"]?.intValue ?? 0, latencyMilliseconds: object["latency_ms"]?.doubleValue)
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
