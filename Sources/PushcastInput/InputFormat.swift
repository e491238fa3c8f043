/// The two token-file formats pushcast reads.
public enum InputFormat: String, Sendable, CaseIterable {
    /// RFC 4180 CSV with a required header row.
    case csv
    /// One JSON object per line.
    case ndjson

    /// The format a file name implies: `.csv` is CSV; `.ndjson`, `.jsonl` and `.json` are NDJSON.
    /// One trailing compression suffix (`.gz`, `.gzip`, `.zst`, `.zstd`) is looked through, so
    /// `tokens.csv.gz` is CSV and `tokens.jsonl.zst` NDJSON: the file is decompressed on the way
    /// in (`DecompressingByteSource`, which goes by the magic bytes, not the name).
    /// Case-insensitive. Nil for anything else (including `-`, stdin, and a bare `tokens.gz`): the
    /// caller then needs `--format`.
    public static func guess(path: String) -> InputFormat? {
        var name = path.split(separator: "/", omittingEmptySubsequences: false).last ?? ""
        if let dot = name.lastIndex(of: "."), compressionSuffixes.contains(name[name.index(after: dot)...].lowercased()) {
            name = name[..<dot]
        }
        guard let dot = name.lastIndex(of: "."), dot != name.startIndex else { return nil }
        switch name[name.index(after: dot)...].lowercased() {
        case "csv": return .csv
        case "ndjson", "jsonl", "json": return .ndjson
        default: return nil
        }
    }

    /// The compression suffixes `guess(path:)` looks through.
    static let compressionSuffixes: Set<String> = ["gz", "gzip", "zst", "zstd"]
}

/// What is wrong with one input row (or with the header). A malformed row becomes an `invalid`
/// outcome carrying this text; a bad header stops the run.
public struct InputProblem: Error, Sendable, Equatable, CustomStringConvertible {
    /// The input's name as the user gave it (`tokens.csv`, `-`).
    public var file: String
    /// The physical line (1-based) where the row starts.
    public var line: Int
    /// The column the problem is in, when it is in one.
    public var field: String?
    public var message: String

    public init(file: String, line: Int, field: String? = nil, message: String) {
        self.file = file
        self.line = line
        self.field = field
        self.message = message
    }

    /// `tokens.csv:17: field 'token': missing`, or `tokens.ndjson:4: invalid JSON: unterminated
    /// string at byte 12`.
    public var description: String {
        if let field {
            return "\(file):\(line): field '\(field)': \(message)"
        }
        return "\(file):\(line): \(message)"
    }
}

/// Sizes fixed when a reader starts (docs/DESIGN.md §2.4).
public struct TokenFileReaderOptions: Sendable {
    /// The longest record, in bytes, excluding its final LF (a CR before it counts). A longer one is
    /// one malformed row, and reading resumes at the next newline after the cap.
    public var lineBytesMax = 64 * 1024
    /// How much is read from the source at a time. The reader's buffer is
    /// `bufferBytes + lineBytesMax` bytes and never grows.
    public var bufferBytes = 256 * 1024
    /// The most bytes a record may run on past the cap, skipped, before the input is judged not
    /// to be text at all and reading stops with an error (no export has a 16 MiB line).
    public var skipBytesMax = 16 << 20
    /// The most columns: CSV header fields, or distinct NDJSON keys over the whole file. An NDJSON
    /// line that would add one more is malformed. Bounds the per-row field tables.
    public var columnsMax = 1024

    public init() {}
}
