/// Reads a token export (CSV or NDJSON) one row at a time, in constant memory.
///
/// The reader owns one buffer of `bufferBytes + lineBytesMax` bytes, allocated at start and never
/// grown. Bytes are read into it from the source; each record is framed in place, its fields are
/// unescaped in place (unescaping never lengthens a field) and validated as UTF-8, and the row is
/// handed out as a `RowView` that borrows the buffer. The partial record at the end of the buffer
/// is moved to the front only when the buffer is full, so each byte is moved at most once per
/// record and a record can always grow to `lineBytesMax` bytes.
///
/// Framing is resumable: the CSV state machine keeps its state between reads, so a source that
/// returns one byte at a time costs no rescanning.
///
/// Malformed rows do not throw: they come back as `.malformed` and reading goes on at the next
/// line. Only source errors throw from `next()`.
public final class TokenFileReader {
    public let format: InputFormat
    public let fileName: String
    public let options: TokenFileReaderOptions

    /// CSV: the header's names (UTF-8 BOM stripped, surrounding spaces and tabs trimmed). NDJSON:
    /// keys in order of first appearance; keys new on later lines are appended.
    public internal(set) var columns: [String] = []

    let source: ByteSource
    let buffer: UnsafeMutablePointer<UInt8>
    /// Fixed at `bufferBytes + lineBytesMax`; the reader's only input memory.
    let bufferCapacity: Int
    /// Valid bytes are `buffer[0..<dataEnd]`.
    var dataEnd = 0
    var sourceEnded = false

    // The record being framed.
    /// Where the record being framed starts; everything before it is consumed.
    var recordStart = 0
    /// How far framing has looked.
    var scanPos = 0
    /// Line ends inside the record so far (quoted LFs and the terminator).
    var recordNewlines = 0
    /// True after a problem: the rest of the record is discarded up to the next line end.
    var skipping = false
    var problem: RecordProblem?
    /// Where (in bytes from the input's start) the record being skipped began, once a skip has
    /// needed more input; nil otherwise. Bounds a skip: see `checkSkip`.
    var skipOrigin: Int?
    /// Bytes read from the source so far; `buffer[0]` is byte `bytesRead - dataEnd` of the input.
    var bytesRead = 0
    /// True while the CSV header is framed: a header past the cap is an error at once.
    var readingHeader = false

    // Numbering.
    /// The physical line the record being framed starts on.
    var lineNumber = 1
    /// The last data-row number handed out.
    var rowNumber = 0
    /// The last data row handed out (or passed over): rows after it are not read yet.
    public var lastRow: Int { rowNumber }

    // Per-record field table: offsets from the record's start, -1 for absent.
    var fieldStarts: UnsafeMutablePointer<Int>
    var fieldEnds: UnsafeMutablePointer<Int>
    var fieldTableCapacity: Int
    /// Fields stored per record (CSV: the header's width once it is read).
    var fieldsLimit: Int
    /// Fields seen in the current record (may exceed `fieldsLimit`).
    var fieldIndex = 0

    // CSV framing state.
    var csvPhase: CSVPhase = .fieldStart
    var fieldStart = 0
    var recordHasEscapes = false

    /// Records that spanned more than one line (a quoted line end) or ran past `lineBytesMax`:
    /// while there are none, a line is a row, and `rowSkipping` may pass over whole lines.
    public private(set) var irregularRecords = 0
    /// CSV: rows this reader passes over without framing their fields (another shard's rows, as
    /// the first read found them). Set it only when that first read saw no irregular record.
    public var rowSkipping: (any RowSkipping)?

    // NDJSON keys, as bytes, parallel to `columns`.
    var keyBytes: [[UInt8]] = []
    /// NDJSON reads its first record at init to learn the columns; `next()` returns it first.
    var pending: InputRecord?

    /// CSV: reads and parses the header row now (an empty input or a bad header throws an
    /// `InputProblem`). NDJSON: reads the first object to learn its keys as the initial columns.
    /// Source errors throw.
    public init(source: ByteSource, format: InputFormat, fileName: String,
                options: TokenFileReaderOptions = .init()) throws {
        precondition(options.lineBytesMax >= 1, "lineBytesMax must be positive")
        precondition(options.bufferBytes >= 64, "bufferBytes must be at least 64")
        precondition(options.columnsMax >= 1, "columnsMax must be positive")
        self.source = source
        self.format = format
        self.fileName = fileName
        self.options = options
        bufferCapacity = options.bufferBytes + options.lineBytesMax
        buffer = .allocate(capacity: bufferCapacity)
        fieldTableCapacity = 16
        fieldStarts = .allocate(capacity: fieldTableCapacity)
        fieldEnds = .allocate(capacity: fieldTableCapacity)
        fieldsLimit = options.columnsMax

        try skipByteOrderMark()
        switch format {
        case .csv:
            try readCSVHeader()
        case .ndjson:
            pending = try nextNDJSON()
        }
    }

    deinit {
        buffer.deallocate()
        fieldStarts.deallocate()
        fieldEnds.deallocate()
    }

    /// The index of the column named `name`: an exact match first, then a case-insensitive one.
    public func columnIndex(_ name: String) -> Int? {
        if let index = columns.firstIndex(of: name) { return index }
        let lowered = name.lowercased()
        return columns.firstIndex { $0.lowercased() == lowered }
    }

    /// The next row, or nil at the end of input. Source errors throw; a malformed row does not
    /// throw: it comes back as `.malformed` and reading goes on.
    public func next() throws -> InputRecord? {
        if let record = pending {
            pending = nil
            return record
        }
        switch format {
        case .csv: return try nextCSV()
        case .ndjson: return try nextNDJSON()
        }
    }

    // MARK: Buffer

    /// Reads more bytes after `dataEnd`. When the buffer is full, first moves the unconsumed part
    /// (the partial record, or nothing while skipping) to the front. Sets `sourceEnded` at the end
    /// of input.
    func fill() throws {
        if skipping { try checkSkip() }
        let keep = skipping ? scanPos : recordStart
        if keep == dataEnd || dataEnd == bufferCapacity {
            let kept = dataEnd - keep
            // Framing caps a record at lineBytesMax + 1 bytes, so the buffer always has room left.
            assert(kept <= options.lineBytesMax + 2, "partial record exceeds the cap")
            if kept > 0 && keep > 0 {
                UnsafeMutableRawPointer(buffer).copyMemory(from: buffer + keep, byteCount: kept)
            }
            scanPos -= keep
            recordStart = skipping ? scanPos : recordStart - keep
            dataEnd = kept
        }
        let room = bufferCapacity - dataEnd
        let count = try source.read(into: UnsafeMutableRawBufferPointer(start: buffer + dataEnd, count: room))
        precondition(count >= 0 && count <= room, "ByteSource.read returned \(count) for \(room) bytes of room")
        if count == 0 {
            sourceEnded = true
        } else {
            dataEnd += count
            bytesRead += count
        }
    }

    /// A record being skipped (over the cap, or another shard's line) that finds no line end:
    /// a header fails at once; a row fails once `skipBytesMax` bytes went by without a line end
    /// (`/dev/zero`, an endless pipe, a binary file), so that no read goes on forever.
    private func checkSkip() throws {
        let start = bytesRead - dataEnd
        if skipOrigin == nil { skipOrigin = start + recordStart }
        if readingHeader, case .tooLong? = problem {
            throw makeProblem(line: lineNumber, "header line longer than \(options.lineBytesMax) bytes")
        }
        let skipped = start + dataEnd - skipOrigin!
        if skipped > options.skipBytesMax {
            throw makeProblem(line: lineNumber, "no line end in \(skipped) bytes: this is not a text export "
                + "(a device such as /dev/zero, an endless stream, or a binary file)")
        }
    }

    /// Strips a UTF-8 byte order mark at the very start of the input.
    private func skipByteOrderMark() throws {
        while dataEnd < 3 && !sourceEnded {
            try fill()
        }
        if dataEnd >= 3 && buffer[0] == 0xEF && buffer[1] == 0xBB && buffer[2] == 0xBF {
            recordStart = 3
            scanPos = 3
        }
    }

    /// Makes room in the field table for `count` fields, up to `columnsMax`.
    func reserveFields(_ count: Int) {
        guard count > fieldTableCapacity else { return }
        let capacity = min(max(count, fieldTableCapacity * 2), max(options.columnsMax, count))
        let starts = UnsafeMutablePointer<Int>.allocate(capacity: capacity)
        let ends = UnsafeMutablePointer<Int>.allocate(capacity: capacity)
        starts.update(from: fieldStarts, count: fieldTableCapacity)
        ends.update(from: fieldEnds, count: fieldTableCapacity)
        fieldStarts.deallocate()
        fieldEnds.deallocate()
        fieldStarts = starts
        fieldEnds = ends
        fieldTableCapacity = capacity
    }

    /// Ends the framed record at `next` (the byte after its terminator) and returns its start line;
    /// resets the framing state for the following record.
    func finishRecord(next: Int) -> Int {
        let line = lineNumber
        if recordNewlines > 1 {
            irregularRecords += 1
        } else if case .tooLong? = problem {
            irregularRecords += 1
        }
        lineNumber += recordNewlines
        recordNewlines = 0
        recordStart = next
        scanPos = next
        skipping = false
        skipOrigin = nil
        return line
    }

    /// The rest of a record after a problem: up to and including the next LF or, when
    /// `lineEndsAtCR` (CSV), the next LF, CRLF or lone CR, whether or not it is inside quotes.
    func scanSkipping(lineEndsAtCR: Bool = false) -> FrameStep {
        let lf = UInt8(ascii: "\n")
        let cr = UInt8(ascii: "\r")
        let end = lineEndsAtCR
            ? firstIndex(of: lf, cr, lf, in: buffer, from: scanPos, to: dataEnd)
            : firstIndex(of: lf, in: buffer, from: scanPos, to: dataEnd) ?? dataEnd
        guard end < dataEnd else {
            scanPos = dataEnd
            return .needMore
        }
        var next = end + 1
        if buffer[end] == cr {
            // Whether an LF follows is known only once the next byte is in: keep the CR till then.
            // At the end of input the CR stays unread, which ends the skipped record all the same.
            guard next < dataEnd else {
                scanPos = end
                return .needMore
            }
            if buffer[next] == lf { next += 1 }
        }
        recordNewlines += 1
        return .complete(contentEnd: end, next: next)
    }

    func makeProblem(line: Int, field: String? = nil, _ message: String) -> InputProblem {
        InputProblem(file: fileName, line: line, field: field, message: message)
    }
}

/// Which rows a reader may pass over unread.
public protocol RowSkipping: AnyObject {
    /// False: row `row` (1-based) is not wanted. Nil or true: it is read as usual.
    func owns(row: Int) -> Bool?
}

/// What framing one record found.
enum FrameStep {
    /// The record's content ends at `contentEnd` (its LF, or the end of input); the next record
    /// starts at `next`.
    case complete(contentEnd: Int, next: Int)
    /// The buffer ran out before the record ended.
    case needMore
}

/// A problem found while framing, turned into text only when the row is reported.
enum RecordProblem {
    case tooLong
    case quoteInUnquotedField(field: Int)
    case dataAfterClosingQuote(field: Int)
    case unterminatedQuote(field: Int)
}
