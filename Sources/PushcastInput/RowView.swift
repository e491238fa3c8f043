/// One result of `RowSource.next()`.
public enum InputRecord {
    /// A well-formed row.
    case row(RowView)
    /// A row that could not be read; `row` is the 1-based data-row number it would have had.
    case malformed(row: Int, problem: InputProblem)
}

/// A borrowed view of one row. It points into the reader's buffer and is valid only until the next
/// call to `next()`; copy out (`string(_:)`) what must outlive that. Building one allocates nothing.
public struct RowView {
    /// The 1-based data-row number (the CSV header is not a row). Every data line or record gets
    /// one, malformed ones included; blank lines are skipped and not numbered.
    public let row: Int
    /// The physical line number (1-based) where the row starts in the file.
    public let line: Int
    /// How many columns the row can have: the header's width for CSV, the keys seen so far for
    /// NDJSON.
    public var fieldCount: Int

    let base: UnsafePointer<UInt8>
    /// Start and end offsets from `base`, one per column; a start of -1 means the column is absent.
    let starts: UnsafePointer<Int>
    let ends: UnsafePointer<Int>

    /// A view over a source's own buffer: `fieldCount` columns, column `i` at
    /// `base[starts[i]..<ends[i]]` (unescaped, valid UTF-8), or absent when `starts[i]` is -1.
    public init(row: Int, line: Int, fieldCount: Int, base: UnsafePointer<UInt8>, starts: UnsafePointer<Int>,
                ends: UnsafePointer<Int>) {
        self.row = row
        self.line = line
        self.fieldCount = fieldCount
        self.base = base
        self.starts = starts
        self.ends = ends
    }

    /// The field's unescaped UTF-8 bytes (already validated), or nil when the row lacks that
    /// column (an NDJSON key that is absent or null).
    public func field(_ column: Int) -> UnsafeRawBufferPointer? {
        guard column >= 0 && column < fieldCount else { return nil }
        let start = starts[column]
        guard start >= 0 else { return nil }
        return UnsafeRawBufferPointer(start: base + start, count: ends[column] - start)
    }

    /// The field as a `String`, or nil when the row lacks that column.
    public func string(_ column: Int) -> String? {
        guard column >= 0 && column < fieldCount else { return nil }
        let start = starts[column]
        guard start >= 0 else { return nil }
        return String(decoding: UnsafeBufferPointer(start: base + start, count: ends[column] - start), as: UTF8.self)
    }
}
