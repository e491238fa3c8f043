@testable import PushcastInput

/// Counts the data rows in an input, fast: the reference the reader tests check row counts
/// against (test support; it was in PushcastInput, where nothing but the tests used it). It reads
/// `source` to its end (open a second source for the reader) and keeps only a 256 KiB buffer.
///
/// - `format: nil` counts non-empty physical lines (a lone CR before the LF is empty).
/// - `.ndjson` counts lines that hold anything but spaces, tabs and CRs: exactly the lines the
///   reader numbers.
/// - `.csv` counts records: an LF inside double quotes (by quote parity, which `""` escapes do not
///   disturb) does not end one, empty lines are skipped, and the header is not counted. This is
///   exact for well-formed files; with broken quoting the reader resynchronises at the next LF and
///   the count drifts, so treat it as an estimate.
///
/// Words without an LF or a quote are skipped 8 bytes at a time.
func countLines(source: ByteSource, format: InputFormat? = nil) throws -> Int {
    let capacity = 256 * 1024
    let buffer = UnsafeMutablePointer<UInt8>.allocate(capacity: capacity)
    defer { buffer.deallocate() }
    let csv = format == .csv
    let whitespaceIsEmpty = format == .ndjson
    var records = 0
    var hasContent = false
    var inQuotes = false
    while true {
        let count = try source.read(into: UnsafeMutableRawBufferPointer(start: buffer, count: capacity))
        precondition(count >= 0 && count <= capacity, "ByteSource.read returned \(count) for \(capacity) bytes of room")
        if count == 0 { break }
        var i = 0
        while i < count {
            if hasContent && i + 8 <= count {
                let word = loadWord(buffer + i)
                let specials = matchBits(word, UInt8(ascii: "\n")) | (csv ? matchBits(word, UInt8(ascii: "\"")) : 0)
                if specials == 0 {
                    i += 8
                    continue
                }
            }
            let b = buffer[i]
            if b == UInt8(ascii: "\n") {
                if !inQuotes {
                    if hasContent { records += 1 }
                    hasContent = false
                }
            } else if csv && b == UInt8(ascii: "\"") {
                inQuotes.toggle()
                hasContent = true
            } else if !hasContent {
                hasContent = b != 0x0D && !(whitespaceIsEmpty && (b == 0x20 || b == 0x09))
            }
            i += 1
        }
    }
    if hasContent { records += 1 }
    return csv ? max(records - 1, 0) : records
}
