/// One connection to a database: what the snapshot and `prune-apply` need of it. Each backend
/// (SQLite, PostgreSQL, MySQL/MariaDB) implements it over its C client library.
public protocol DatabaseSession: AnyObject {
    var dialect: SQLDialect { get }
    /// Streams `query`'s rows into `spool` (its header is the query's column names), row by row
    /// with memory that does not grow with the result; `shouldStop` is asked every few thousand
    /// rows (a stop signal). Returns the rows written.
    func export(query: String, into spool: CSVSpoolWriter, shouldStop: () -> Bool) throws(DatabaseError) -> Int
    /// Runs a statement without parameters; returns the rows it changed.
    @discardableResult
    func execute(_ sql: String) throws(DatabaseError) -> Int
    /// A query's first row of integers (counts).
    func integers(_ sql: String) throws(DatabaseError) -> [Int]
    /// A query's rows, each row's fields joined by " | " (EXPLAIN output).
    func lines(_ sql: String) throws(DatabaseError) -> [String]
    /// Loads (token, at) pairs into the prune table `dialect.pruneTable`, as data: a prepared
    /// statement's parameters, or COPY; never SQL text built from a token.
    func load(_ entries: ArraySlice<PruneEntry>) throws(DatabaseError)
    /// Runs a user's statement with one `?` once per token, as a prepared statement; returns the
    /// rows changed in all.
    func executeForEach(_ sql: String, tokens: ArraySlice<PruneEntry>) throws(DatabaseError) -> Int
    func close()
}

/// One token to prune, and the time it stands for: the prune line's `unregistered_at`, or when
/// the campaign started; `YYYY-MM-DD HH:MM:SS` UTC, which every database compares with its own
/// date-time types.
public struct PruneEntry: Sendable, Equatable {
    public var token: String
    public var at: String
    public init(token: String, at: String) {
        self.token = token
        self.at = at
    }
}

/// Writes a query result as RFC 4180 CSV: a header of the column names, then one line per row;
/// a field is quoted when it holds a comma, a quote, CR or LF (quotes doubled); NULL is an empty
/// field. Buffers in 256 KiB chunks through `sink`.
public final class CSVSpoolWriter {
    private var buffer: [UInt8] = []
    private let sink: (UnsafeRawBufferPointer) throws -> Void
    private var fieldInRow = 0
    public private(set) var rows = 0
    static let flushBytes = 256 * 1024

    public init(sink: @escaping (UnsafeRawBufferPointer) throws -> Void) {
        self.sink = sink
        buffer.reserveCapacity(Self.flushBytes + 64 * 1024)
    }

    public func header(_ names: [String]) throws(DatabaseError) {
        for name in names {
            var copy = name
            copy.withUTF8 { field(UnsafeRawBufferPointer($0)) }
        }
        try endRow(counted: false)
    }

    /// One field of the current row; nil is SQL NULL.
    @inline(__always)
    public func field(_ bytes: UnsafeRawBufferPointer?) {
        if fieldInRow > 0 { buffer.append(0x2C) }
        fieldInRow += 1
        guard let bytes, !bytes.isEmpty else { return }
        guard bytes.contains(where: { $0 == 0x2C || $0 == 0x22 || $0 == 0x0A || $0 == 0x0D }) else {
            buffer.append(contentsOf: bytes)
            return
        }
        // Quoted: the runs between quotes copied whole, each quote doubled.
        buffer.append(0x22)
        var start = 0
        while let quote = bytes[start...].firstIndex(of: 0x22) {
            buffer.append(contentsOf: bytes[start...quote])
            buffer.append(0x22)
            start = quote + 1
        }
        buffer.append(contentsOf: bytes[start...])
        buffer.append(0x22)
    }

    /// Bytes that are already CSV lines (PostgreSQL's COPY … CSV output), passed through.
    public func raw(_ bytes: UnsafeRawBufferPointer) throws(DatabaseError) {
        buffer.append(contentsOf: bytes)
        if buffer.count >= Self.flushBytes { try flush() }
    }

    public func endRow(counted: Bool = true) throws(DatabaseError) {
        buffer.append(0x0A)
        fieldInRow = 0
        if counted { rows += 1 }
        if buffer.count >= Self.flushBytes { try flush() }
    }

    public func addRows(_ count: Int) { rows += count }

    public func flush() throws(DatabaseError) {
        guard !buffer.isEmpty else { return }
        do { try buffer.withUnsafeBytes { try sink($0) } } catch { throw DatabaseError("cannot write the snapshot: \(error)") }
        buffer.removeAll(keepingCapacity: true)
    }
}
