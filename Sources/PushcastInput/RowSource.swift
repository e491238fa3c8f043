/// Where a campaign's rows come from. The engine reads rows only through this: a token file
/// (`TokenFileReader`, CSV or NDJSON, a regular file or stdin) is one source; a database query is
/// another (its rows become `RowView`s over its own buffers). docs/ARCHITECTURE.md, "Seams".
public protocol RowSource: AnyObject {
    /// What the rows are read from, for messages: a file name, or a description of the query.
    var fileName: String { get }
    /// The column names known so far (an NDJSON file learns its keys as it reads).
    var columns: [String] { get }
    /// `columns.count`, asked before every row: a source can answer without handing out (and
    /// retaining) its array.
    var columnCount: Int { get }
    /// The next row, or nil at the end. A row's view stays valid until the next call.
    func next() throws -> InputRecord?
}

extension RowSource {
    public var columnCount: Int { columns.count }
}

extension TokenFileReader: RowSource {
    public var columnCount: Int { columns.count }
}
