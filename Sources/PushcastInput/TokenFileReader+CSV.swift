// CSV framing and field splitting (RFC 4180): quoted fields with "" escapes, embedded commas,
// quotes and newlines (LF or CRLF) inside quotes, CRLF or LF line ends, no final newline needed.
//
// Choices beyond the RFC, each documented for users in the reader's tests:
// - An empty line ("" or a lone CR before the LF) is skipped and not numbered, like a blank NDJSON
//   line. (With a one-column header, an empty value must therefore be written `""`.)
// - A quote inside an unquoted field, anything but a comma or line end after a closing quote, and
//   a quote left open at the end of input make the row malformed. Reading resumes after the next
//   LF, whether or not that LF was inside quotes, which is what a human reading the file sees.
// - A record longer than `lineBytesMax` is malformed; reading resumes at the first LF after the
//   cap. An unterminated quote therefore swallows at most `lineBytesMax` bytes.

private let comma = UInt8(ascii: ",")
private let quote = UInt8(ascii: "\"")
private let lf = UInt8(ascii: "\n")
private let cr = UInt8(ascii: "\r")

/// Where the CSV state machine is inside a record.
enum CSVPhase {
    /// At the first byte of a field.
    case fieldStart
    /// Inside an unquoted field.
    case unquoted
    /// Inside a quoted field.
    case quoted
    /// Just after a quote inside a quoted field: an escaped quote follows, or the field ended.
    case quoteInQuoted
    /// After a closing quote and a CR: only LF may follow.
    case carriageReturnAfterQuote
}

extension TokenFileReader {
    func readCSVHeader() throws {
        fieldsLimit = options.columnsMax
        while true {
            guard let step = try frameCSVRecord() else {
                throw makeProblem(line: lineNumber, "missing header row (the input is empty)")
            }
            let start = recordStart
            let fields = fieldIndex
            let escapes = recordHasEscapes
            let recordProblem = problem
            let line = finishRecord(next: step.next)
            if recordProblem == nil && isBlank(start, step.contentEnd) { continue }
            if let recordProblem {
                throw describe(recordProblem, line: line, header: true)
            }
            guard fields <= options.columnsMax else {
                throw makeProblem(line: line, "header has \(fields) columns, more than \(options.columnsMax)")
            }
            let base = buffer + start
            if escapes { unescapeCSVFields(base, count: fields) }
            var names: [String] = []
            names.reserveCapacity(fields)
            for i in 0..<fields {
                let field = base + fieldStarts[i]
                let count = fieldEnds[i] - fieldStarts[i]
                if let bad = firstInvalidUTF8(field, count: count) {
                    throw makeProblem(line: line, "header column \(i + 1): invalid UTF-8 at byte \(bad + 1)")
                }
                names.append(trimmed(String(decoding: UnsafeBufferPointer(start: field, count: count), as: UTF8.self)))
            }
            columns = names
            fieldsLimit = fields
            return
        }
    }

    func nextCSV() throws -> InputRecord? {
        while true {
            guard let step = try frameCSVRecord() else { return nil }
            let start = recordStart
            let fields = fieldIndex
            let escapes = recordHasEscapes
            let recordProblem = problem
            let line = finishRecord(next: step.next)
            if recordProblem == nil && isBlank(start, step.contentEnd) { continue }
            rowNumber += 1
            if let recordProblem {
                return .malformed(row: rowNumber, problem: describe(recordProblem, line: line, header: false))
            }
            guard fields == fieldsLimit else {
                return .malformed(row: rowNumber,
                                  problem: makeProblem(line: line, "expected \(fieldsLimit) fields, got \(fields)"))
            }
            let base = buffer + start
            if escapes { unescapeCSVFields(base, count: fields) }
            if !isASCII(base, count: step.contentEnd - start) {
                for i in 0..<fields {
                    if let bad = firstInvalidUTF8(base + fieldStarts[i], count: fieldEnds[i] - fieldStarts[i]) {
                        return .malformed(row: rowNumber, problem: makeProblem(
                            line: line, field: columns[i], "invalid UTF-8 at byte \(bad + 1)"))
                    }
                }
            }
            return .row(RowView(row: rowNumber, line: line, fieldCount: fields, base: base,
                                starts: fieldStarts, ends: fieldEnds))
        }
    }

    /// Frames the next record, reading as needed; nil at the end of input. On return the record is
    /// `buffer[recordStart..<contentEnd]`, and `fieldIndex`, the field table, `recordHasEscapes`
    /// and `problem` describe it.
    private func frameCSVRecord() throws -> (contentEnd: Int, next: Int)? {
        csvPhase = .fieldStart
        fieldIndex = 0
        recordHasEscapes = false
        problem = nil
        while true {
            if case .complete(let contentEnd, let next) = skipping ? scanSkipping() : scanCSV() {
                return (contentEnd, next)
            }
            if sourceEnded { return finishCSVAtEnd() }
            try fill()
        }
    }

    /// Runs the state machine from `scanPos` over the buffered bytes.
    private func scanCSV() -> FrameStep {
        let base = buffer
        let capEnd = recordStart + options.lineBytesMax + 1
        let limit = min(dataEnd, capEnd)
        var p = scanPos
        var phase = csvPhase
        var newlines = recordNewlines
        // Every exit stores the state back first (fail() reads and extends it).
        func save(_ position: Int) {
            scanPos = position
            csvPhase = phase
            recordNewlines = newlines
        }
        while p < limit {
            switch phase {
            case .fieldStart:
                if base[p] == quote {
                    fieldStart = p + 1 - recordStart
                    phase = .quoted
                    p += 1
                } else {
                    fieldStart = p - recordStart
                    phase = .unquoted
                }
            case .unquoted:
                p = firstIndex(of: comma, lf, quote, in: base, from: p, to: limit)
                guard p < limit else { break }
                let b = base[p]
                if b == comma {
                    closeField(end: p - recordStart)
                    phase = .fieldStart
                    p += 1
                } else if b == lf {
                    var end = p - recordStart
                    if end > fieldStart && base[p - 1] == cr { end -= 1 }
                    closeField(end: end)
                    newlines += 1
                    save(p + 1)
                    return .complete(contentEnd: p, next: p + 1)
                } else {
                    save(p)
                    return fail(.quoteInUnquotedField(field: fieldIndex))
                }
            case .quoted:
                while true {
                    p = firstIndex(of: quote, lf, quote, in: base, from: p, to: limit)
                    guard p < limit && base[p] == lf else { break }
                    newlines += 1
                    p += 1
                }
                guard p < limit else { break }
                phase = .quoteInQuoted
                p += 1
            case .quoteInQuoted:
                let b = base[p]
                if b == quote {
                    recordHasEscapes = true
                    phase = .quoted
                    p += 1
                } else if b == comma {
                    closeField(end: p - 1 - recordStart)
                    phase = .fieldStart
                    p += 1
                } else if b == lf {
                    closeField(end: p - 1 - recordStart)
                    newlines += 1
                    save(p + 1)
                    return .complete(contentEnd: p, next: p + 1)
                } else if b == cr {
                    quotedFieldEnd = p - 1 - recordStart
                    phase = .carriageReturnAfterQuote
                    p += 1
                } else {
                    save(p)
                    return fail(.dataAfterClosingQuote(field: fieldIndex))
                }
            case .carriageReturnAfterQuote:
                guard base[p] == lf else {
                    save(p)
                    return fail(.dataAfterClosingQuote(field: fieldIndex))
                }
                closeField(end: quotedFieldEnd)
                newlines += 1
                save(p + 1)
                return .complete(contentEnd: p, next: p + 1)
            }
        }
        save(p)
        if p == capEnd {
            return fail(.tooLong)
        }
        return .needMore
    }

    /// Records a problem and discards the rest of the record up to the next LF.
    private func fail(_ found: RecordProblem) -> FrameStep {
        problem = found
        skipping = true
        return scanSkipping()
    }

    /// Ends a record that the end of input cut short; nil when nothing is left.
    private func finishCSVAtEnd() -> (contentEnd: Int, next: Int)? {
        let end = dataEnd
        if skipping { return (end, end) }
        guard end > recordStart else { return nil }
        switch csvPhase {
        case .fieldStart:
            fieldStart = end - recordStart
            closeField(end: end - recordStart)
        case .unquoted:
            var fieldEnd = end - recordStart
            if fieldEnd > fieldStart && buffer[end - 1] == cr { fieldEnd -= 1 }
            closeField(end: fieldEnd)
        case .quoted:
            problem = .unterminatedQuote(field: fieldIndex)
        case .quoteInQuoted:
            closeField(end: end - 1 - recordStart)
        case .carriageReturnAfterQuote:
            closeField(end: quotedFieldEnd)
        }
        return (end, end)
    }

    @inline(__always)
    private func closeField(end: Int) {
        if fieldIndex < fieldsLimit {
            if fieldIndex == fieldTableCapacity { reserveFields(fieldIndex + 1) }
            fieldStarts[fieldIndex] = fieldStart
            fieldEnds[fieldIndex] = end
        }
        fieldIndex += 1
    }

    /// Turns each `""` into `"` in place, in every field of the record.
    private func unescapeCSVFields(_ base: UnsafeMutablePointer<UInt8>, count: Int) {
        for i in 0..<min(count, fieldsLimit) {
            let start = fieldStarts[i]
            let end = fieldEnds[i]
            guard var read = firstIndex(of: quote, in: base, from: start, to: end) else { continue }
            var write = read
            while read < end {
                let b = base[read]
                base[write] = b
                write += 1
                read += b == quote ? 2 : 1
            }
            fieldEnds[i] = write
        }
    }

    /// An empty line: no bytes, or only the CR of a CRLF.
    private func isBlank(_ start: Int, _ contentEnd: Int) -> Bool {
        let count = contentEnd - start
        return count == 0 || (count == 1 && buffer[start] == cr)
    }

    private func describe(_ found: RecordProblem, line: Int, header: Bool) -> InputProblem {
        func name(_ index: Int) -> (field: String?, prefix: String) {
            if !header && index < columns.count { return (columns[index], "") }
            return (nil, header ? "header column \(index + 1): " : "column \(index + 1): ")
        }
        switch found {
        case .tooLong:
            return makeProblem(line: line, "\(header ? "header " : "")line longer than \(options.lineBytesMax) bytes")
        case .quoteInUnquotedField(let index):
            let (field, prefix) = name(index)
            return makeProblem(line: line, field: field, prefix + "unexpected '\"' in an unquoted field")
        case .dataAfterClosingQuote(let index):
            let (field, prefix) = name(index)
            return makeProblem(line: line, field: field, prefix + "unexpected character after a closing quote")
        case .unterminatedQuote(let index):
            let (field, prefix) = name(index)
            return makeProblem(line: line, field: field, prefix + "quoted field not closed before the end of input")
        }
    }
}

/// Drops spaces and tabs at both ends.
private func trimmed(_ name: String) -> String {
    let isBlank: (Character) -> Bool = { $0 == " " || $0 == "\t" }
    guard let first = name.firstIndex(where: { !isBlank($0) }) else { return "" }
    let last = name.lastIndex(where: { !isBlank($0) })!
    return String(name[first...last])
}
