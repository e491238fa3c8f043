// CSV framing and field splitting (RFC 4180): quoted fields with "" escapes, embedded commas,
// quotes and line ends inside quotes, no final newline needed.
//
// Line ends: outside quotes a record ends at an LF, a CRLF or a lone CR (old Mac exports). Inside
// quotes all three are data. Either way each counts as one line in "file:line", as an editor shows
// the file. Whether a CR outside quotes is lone is known only from the byte after it, so a record
// ending in a CR is complete once that byte is read or the input ends.
//
// Choices beyond the RFC, each documented for users in the reader's tests:
// - An empty line (nothing before its LF, CRLF or lone CR) is skipped and not numbered, like a
//   blank NDJSON line. (With a one-column header, an empty value must therefore be written `""`.)
// - A quote inside an unquoted field, anything but a comma or line end after a closing quote, and
//   a quote left open at the end of input make the row malformed. Reading resumes after the next
//   LF, CRLF or lone CR, whether or not it was inside quotes, which is what a human reading the
//   file sees.
// - A record longer than `lineBytesMax` is malformed; its line end does not count, except the CR
//   of a CRLF (as in NDJSON). Reading resumes at the first line end after the cap. An unterminated
//   quote therefore swallows at most `lineBytesMax` bytes.

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
    /// After a CR that ended the record's last field: an LF here is part of the same line end.
    case carriageReturn
}

extension TokenFileReader {
    func readCSVHeader() throws {
        fieldsLimit = options.columnsMax
        readingHeader = true
        defer { readingHeader = false }
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
            try refuseRepeatedNames(names, line: line)
            columns = names
            fieldsLimit = fields
            return
        }
    }

    /// Two header columns with one name: a row's value would be read from the first alone, and
    /// the second silently ignored. Empty names (trailing commas) may repeat.
    private func refuseRepeatedNames(_ names: [String], line: Int) throws {
        var seen: [String: Int] = [:]
        for (index, name) in names.enumerated() where !name.isEmpty {
            if let first = seen[name] {
                throw makeProblem(line: line, "header: the column '\(name)' appears twice (columns \(first + 1) and \(index + 1)); "
                    + "name each column once, or rename the one not to be used")
            }
            seen[name] = index
        }
    }

    func nextCSV() throws -> InputRecord? {
        while true {
            if let rowSkipping, rowSkipping.owns(row: rowNumber + 1) == false {
                guard try skipLine() else { return nil }
                continue
            }
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

    /// Passes over one line without framing its fields: an unwanted row, or a blank line (no
    /// row, as in `nextCSV`). Only for inputs in which every record is one line (no
    /// `irregularRecords`), where it numbers rows and lines exactly as framing would. False at
    /// the end of input.
    private func skipLine() throws -> Bool {
        skipping = true
        problem = nil
        var content = false
        while true {
            let from = scanPos
            if case .complete(let contentEnd, let next) = scanSkipping(lineEndsAtCR: true) {
                if contentEnd > from { content = true }
                _ = finishRecord(next: next)
                if content { rowNumber += 1 }
                return true
            }
            if scanPos > from { content = true }
            if sourceEnded {
                // The last line has no line end (or only a lone CR, which `scanPos` stops before).
                recordNewlines = 0
                _ = finishRecord(next: dataEnd)
                if content { rowNumber += 1 }
                return content
            }
            try fill()
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
            if case .complete(let contentEnd, let next) = skipping ? scanSkipping(lineEndsAtCR: true) : scanCSV() {
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
                p = firstIndex(of: comma, lf, cr, quote, in: base, from: p, to: limit)
                guard p < limit else { break }
                guard base[p] != quote else {
                    save(p)
                    return fail(.quoteInUnquotedField(field: fieldIndex))
                }
                if let step = endField(p - recordStart, at: &p, &phase, newlines) { return step }
            case .quoted:
                while true {
                    p = firstIndex(of: quote, lf, cr, in: base, from: p, to: limit)
                    guard p < limit && base[p] != quote else { break }
                    // A line end inside quotes: a CR counts, an LF unless it ends a CRLF.
                    if base[p] == cr || base[p - 1] != cr { newlines += 1 }
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
                } else if b == comma || b == lf || b == cr {
                    if let step = endField(p - 1 - recordStart, at: &p, &phase, newlines) { return step }
                } else {
                    save(p)
                    return fail(.dataAfterClosingQuote(field: fieldIndex))
                }
            case .carriageReturn:
                save(p)
                return endAfterCarriageReturn(at: p)
            }
        }
        save(p)
        return p == capEnd ? reachedCap() : .needMore
    }

    /// At the comma, LF or CR at `p` that ends a field (`end` is from the record's start): moves
    /// past it and returns nil to go on, or stores the state and returns the record's end.
    @inline(__always)
    private func endField(_ end: Int, at p: inout Int, _ phase: inout CSVPhase, _ newlines: Int) -> FrameStep? {
        closeField(end: end)
        let b = buffer[p]
        p += 1
        if b == comma {
            phase = .fieldStart
            return nil
        }
        if b == cr {
            phase = .carriageReturn
            return nil
        }
        scanPos = p
        recordNewlines = newlines + 1
        return .complete(contentEnd: p - 1, next: p)
    }

    /// Ends the record at the CR before `p`, and at the LF at `p` too if there is one.
    private func endAfterCarriageReturn(at p: Int) -> FrameStep {
        let next = buffer[p] == lf ? p + 1 : p
        recordNewlines += 1
        scanPos = next
        return .complete(contentEnd: p - 1, next: next)
    }

    /// The record has reached the cap (the state is stored): it is too long, unless a lone CR
    /// ends it right there.
    private func reachedCap() -> FrameStep {
        let p = scanPos
        if csvPhase == .carriageReturn {
            // A CR is the last byte the cap allows: as a lone CR it ends the record in time, as the
            // CR of a CRLF it counts toward the cap.
            guard p < dataEnd else { return .needMore }
            if buffer[p] != lf { return endAfterCarriageReturn(at: p) }
        } else if csvPhase == .quoted && buffer[p - 1] == cr {
            // A quoted CR, counted already, is the last byte: the skip reads it again as the line
            // end, with an LF after it, so that a CRLF across the cap counts once.
            recordNewlines -= 1
            scanPos = p - 1
        }
        return fail(.tooLong)
    }

    /// Records a problem and discards the rest of the record up to the next LF, CRLF or lone CR.
    private func fail(_ found: RecordProblem) -> FrameStep {
        problem = found
        skipping = true
        return scanSkipping(lineEndsAtCR: true)
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
            closeField(end: end - recordStart)
        case .quoted:
            problem = .unterminatedQuote(field: fieldIndex)
        case .quoteInQuoted:
            closeField(end: end - 1 - recordStart)
        case .carriageReturn:
            // A lone CR as the last byte: the field is closed already.
            return (end - 1, end)
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

    /// An empty line: no bytes before its LF, CRLF or lone CR (the content never holds the CR).
    private func isBlank(_ start: Int, _ contentEnd: Int) -> Bool {
        contentEnd == start
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
