// NDJSON: one JSON object per line, parsed by a small byte-level scanner (no Foundation).
//
// - Blank and whitespace-only lines are skipped and not numbered; a CR before the LF is whitespace.
// - Strings are unescaped in place (\" \\ \/ \b \f \n \r \t \uXXXX, surrogate pairs joined into one
//   scalar); an unpaired surrogate or a raw control character makes the line malformed.
// - Numbers, true and false keep their literal text; null means the column is absent; nested
//   objects and arrays keep their raw JSON text (validated, at most 64 levels deep).
// - A duplicate key: the last value wins.
// - Keys become columns in order of first appearance, up to `columnsMax` over the whole file.
//   A key first seen on a line that turns out malformed still becomes a column (it holds nothing
//   for that line).

private let quote = UInt8(ascii: "\"")
private let backslash = UInt8(ascii: "\\")
private let lf = UInt8(ascii: "\n")

/// Why a line is not a usable JSON object. Positions are 0-based offsets into the line.
enum JSONLineError: Error {
    case syntax(StaticString, at: Int)
    case invalidUTF8InKey(at: Int)
    case invalidUTF8(column: Int, at: Int)
    case tooManyKeys
}

extension TokenFileReader {
    /// NDJSON: makes each name a column now, in order, unless a key of that name is one already.
    /// A row's columns are its own keys: a declared column that a row lacks is absent in that row,
    /// exactly like a key first seen on a later line. Declaring every key a first read of the
    /// file found gives a second reader of it the same columns from row 1; declaring the keys a
    /// template names lets it compile before they appear. CSV: does nothing (the header decides).
    public func declareColumns(_ names: [String]) {
        guard format == .ndjson else { return }
        for name in names where !columns.contains(name) {
            guard keyBytes.count < options.columnsMax else { break }
            let column = keyBytes.count
            reserveFields(column + 1)
            fieldStarts[column] = -1
            keyBytes.append(Array(name.utf8))
            columns.append(name)
        }
        // The first row, read at init, may point at field tables that just moved.
        if case .row(let view)? = pending {
            pending = .row(RowView(row: view.row, line: view.line, fieldCount: columns.count, base: view.base,
                                   starts: fieldStarts, ends: fieldEnds))
        }
    }

    func nextNDJSON() throws -> InputRecord? {
        while true {
            guard let (contentEnd, next) = try frameLine() else { return nil }
            let start = recordStart
            let recordProblem = problem
            let line = finishRecord(next: next)
            let base = buffer + start
            let count = contentEnd - start
            if recordProblem == nil && isWhitespace(base, count: count) { continue }
            rowNumber += 1
            if recordProblem != nil {
                return .malformed(row: rowNumber, problem: makeProblem(
                    line: line, "line longer than \(options.lineBytesMax) bytes"))
            }
            do {
                try parseObject(base, count: count, checkUTF8: !isASCII(base, count: count))
            } catch {
                return .malformed(row: rowNumber, problem: describe(error, line: line))
            }
            return .row(RowView(row: rowNumber, line: line, fieldCount: columns.count, base: base,
                                starts: fieldStarts, ends: fieldEnds))
        }
    }

    /// Frames the next line, reading as needed; nil at the end of input.
    private func frameLine() throws -> (contentEnd: Int, next: Int)? {
        problem = nil
        while true {
            if case .complete(let contentEnd, let next) = skipping ? scanSkipping() : scanLine() {
                return (contentEnd, next)
            }
            if sourceEnded {
                let end = dataEnd
                guard skipping || end > recordStart else { return nil }
                return (end, end)
            }
            try fill()
        }
    }

    private func scanLine() -> FrameStep {
        let capEnd = recordStart + options.lineBytesMax + 1
        let limit = min(dataEnd, capEnd)
        if let end = firstIndex(of: lf, in: buffer, from: scanPos, to: limit) {
            recordNewlines += 1
            scanPos = end + 1
            return .complete(contentEnd: end, next: end + 1)
        }
        scanPos = limit
        guard limit == capEnd else { return .needMore }
        problem = .tooLong
        skipping = true
        return scanSkipping()
    }

    // MARK: Parsing one line

    /// Parses `s[0..<n]` as one JSON object, unescaping strings in place and filling the field
    /// table (offsets from `s`, -1 for absent).
    func parseObject(_ s: UnsafeMutablePointer<UInt8>, count n: Int, checkUTF8: Bool) throws(JSONLineError) {
        for column in 0..<columns.count { fieldStarts[column] = -1 }
        var i = skipWhitespace(s, 0, n)
        guard i < n && s[i] == UInt8(ascii: "{") else { throw .syntax("expected '{' (each line must be a JSON object)", at: i) }
        i = skipWhitespace(s, i + 1, n)
        if i < n && s[i] == UInt8(ascii: "}") {
            i += 1
        } else {
            var guess = 0
            while true {
                guard i < n && s[i] == quote else { throw .syntax("expected a string key", at: i) }
                let key = try unescapeString(s, i, n)
                if checkUTF8, let bad = firstInvalidUTF8(s + key.start, count: key.end - key.start) {
                    throw .invalidUTF8InKey(at: key.start + bad)
                }
                let column = try column(forKey: s + key.start, count: key.end - key.start, guess: guess)
                guess = column + 1
                i = skipWhitespace(s, key.next, n)
                guard i < n && s[i] == UInt8(ascii: ":") else { throw .syntax("expected ':'", at: i) }
                i = skipWhitespace(s, i + 1, n)
                guard i < n else { throw .syntax("expected a value", at: i) }
                var valueStart = i
                var valueEnd: Int
                if s[i] == quote {
                    let value = try unescapeString(s, i, n)
                    (valueStart, valueEnd, i) = (value.start, value.end, value.next)
                } else {
                    valueEnd = try skipValue(s, i, n, depth: 0)
                    i = valueEnd
                    if valueEnd - valueStart == 4 && s[valueStart] == UInt8(ascii: "n") { valueStart = -1 }
                }
                if checkUTF8 && valueStart >= 0,
                   let bad = firstInvalidUTF8(s + valueStart, count: valueEnd - valueStart) {
                    throw .invalidUTF8(column: column, at: bad)
                }
                fieldStarts[column] = valueStart
                fieldEnds[column] = valueEnd
                i = skipWhitespace(s, i, n)
                guard i < n else { throw .syntax("expected ',' or '}'", at: i) }
                if s[i] == UInt8(ascii: ",") {
                    i = skipWhitespace(s, i + 1, n)
                    continue
                }
                guard s[i] == UInt8(ascii: "}") else { throw .syntax("expected ',' or '}'", at: i) }
                i += 1
                break
            }
        }
        i = skipWhitespace(s, i, n)
        guard i == n else { throw .syntax("unexpected data after the object", at: i) }
    }

    /// The column for a key, adding it when new. `guess` (the column after the previous key) is
    /// tried first, since lines usually list keys in the same order.
    private func column(forKey key: UnsafePointer<UInt8>, count: Int, guess: Int) throws(JSONLineError) -> Int {
        func matches(_ column: Int) -> Bool {
            keyBytes[column].withUnsafeBufferPointer { known in
                guard known.count == count else { return false }
                for j in 0..<count where known[j] != key[j] { return false }
                return true
            }
        }
        if guess < keyBytes.count && matches(guess) { return guess }
        for column in 0..<keyBytes.count where column != guess && matches(column) { return column }
        guard keyBytes.count < options.columnsMax else { throw .tooManyKeys }
        let column = keyBytes.count
        reserveFields(column + 1)
        fieldStarts[column] = -1
        let bytes = Array(UnsafeBufferPointer(start: key, count: count))
        keyBytes.append(bytes)
        columns.append(String(decoding: bytes, as: UTF8.self))
        return column
    }

    private func describe(_ error: JSONLineError, line: Int) -> InputProblem {
        switch error {
        case .syntax(let message, let at):
            return makeProblem(line: line, "invalid JSON: \(message) at byte \(at + 1)")
        case .invalidUTF8InKey(let at):
            return makeProblem(line: line, "invalid UTF-8 in a key at byte \(at + 1)")
        case .invalidUTF8(let column, let at):
            return makeProblem(line: line, field: columns[column], "invalid UTF-8 at byte \(at + 1)")
        case .tooManyKeys:
            return makeProblem(line: line, "more than \(options.columnsMax) distinct keys")
        }
    }
}

// MARK: Scanner pieces (free functions over a line's bytes)

@inline(__always)
private func isJSONWhitespace(_ b: UInt8) -> Bool {
    b == 0x20 || b == 0x09 || b == 0x0D || b == 0x0A
}

private func isWhitespace(_ s: UnsafePointer<UInt8>, count: Int) -> Bool {
    for i in 0..<count where !isJSONWhitespace(s[i]) { return false }
    return true
}

@inline(__always)
private func skipWhitespace(_ s: UnsafePointer<UInt8>, _ from: Int, _ n: Int) -> Int {
    var i = from
    while i < n && isJSONWhitespace(s[i]) { i += 1 }
    return i
}

@inline(__always)
private func hexValue(_ b: UInt8) -> UInt32? {
    switch b {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): return UInt32(b - UInt8(ascii: "0"))
    case UInt8(ascii: "a")...UInt8(ascii: "f"): return UInt32(b - UInt8(ascii: "a") + 10)
    case UInt8(ascii: "A")...UInt8(ascii: "F"): return UInt32(b - UInt8(ascii: "A") + 10)
    default: return nil
    }
}

/// The four hex digits at `s[i..<i+4]`, or nil.
private func hex4(_ s: UnsafePointer<UInt8>, _ i: Int, _ n: Int) -> UInt32? {
    guard i + 4 <= n,
          let a = hexValue(s[i]), let b = hexValue(s[i + 1]), let c = hexValue(s[i + 2]), let d = hexValue(s[i + 3])
    else { return nil }
    return a << 12 | b << 8 | c << 4 | d
}

/// Writes `scalar` as UTF-8 at `s[w...]`; returns the index after it.
private func writeUTF8(_ scalar: UInt32, _ s: UnsafeMutablePointer<UInt8>, _ w: Int) -> Int {
    switch scalar {
    case 0..<0x80:
        s[w] = UInt8(scalar)
        return w + 1
    case 0x80..<0x800:
        s[w] = UInt8(0xC0 | scalar >> 6)
        s[w + 1] = UInt8(0x80 | scalar & 0x3F)
        return w + 2
    case 0x800..<0x10000:
        s[w] = UInt8(0xE0 | scalar >> 12)
        s[w + 1] = UInt8(0x80 | scalar >> 6 & 0x3F)
        s[w + 2] = UInt8(0x80 | scalar & 0x3F)
        return w + 3
    default:
        s[w] = UInt8(0xF0 | scalar >> 18)
        s[w + 1] = UInt8(0x80 | scalar >> 12 & 0x3F)
        s[w + 2] = UInt8(0x80 | scalar >> 6 & 0x3F)
        s[w + 3] = UInt8(0x80 | scalar & 0x3F)
        return w + 4
    }
}

/// Unescapes the string whose opening quote is at `s[q]`, in place (the result is never longer
/// than its escaped form). Returns the unescaped bytes' range and the index after the closing quote.
private func unescapeString(_ s: UnsafeMutablePointer<UInt8>, _ q: Int, _ n: Int)
    throws(JSONLineError) -> (start: Int, end: Int, next: Int) {
    var r = firstJSONStringSpecial(in: s, from: q + 1, to: n)
    if r < n {
        let b = s[r]
        if b == quote { return (q + 1, r, r + 1) }
        if b < 0x20 { throw .syntax("control character in a string", at: r) }
    }
    var w = r
    while r < n {
        let b = s[r]
        if b == quote { return (q + 1, w, r + 1) }
        if b < 0x20 { throw .syntax("control character in a string", at: r) }
        if b != backslash {
            s[w] = b
            w += 1
            r += 1
            continue
        }
        guard r + 1 < n else { break }
        let escaped = s[r + 1]
        var replacement: UInt8
        switch escaped {
        case quote, backslash, UInt8(ascii: "/"): replacement = escaped
        case UInt8(ascii: "b"): replacement = 0x08
        case UInt8(ascii: "f"): replacement = 0x0C
        case UInt8(ascii: "n"): replacement = 0x0A
        case UInt8(ascii: "r"): replacement = 0x0D
        case UInt8(ascii: "t"): replacement = 0x09
        case UInt8(ascii: "u"):
            guard let unit = hex4(s, r + 2, n) else { throw .syntax("invalid \\u escape", at: r) }
            var scalar = unit
            if unit >= 0xD800 && unit <= 0xDBFF {
                guard r + 7 < n, s[r + 6] == backslash, s[r + 7] == UInt8(ascii: "u"),
                      let low = hex4(s, r + 8, n), low >= 0xDC00 && low <= 0xDFFF
                else { throw .syntax("unpaired UTF-16 surrogate in \\u escape", at: r) }
                scalar = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)
                w = writeUTF8(scalar, s, w)
                r += 12
            } else if unit >= 0xDC00 && unit <= 0xDFFF {
                throw .syntax("unpaired UTF-16 surrogate in \\u escape", at: r)
            } else {
                w = writeUTF8(scalar, s, w)
                r += 6
            }
            continue
        default:
            throw .syntax("invalid escape", at: r)
        }
        s[w] = replacement
        w += 1
        r += 2
    }
    throw .syntax("unterminated string", at: q)
}

/// Validates the string at `s[q]` without changing it; returns the index after its closing quote.
private func skipString(_ s: UnsafePointer<UInt8>, _ q: Int, _ n: Int) throws(JSONLineError) -> Int {
    var r = q + 1
    while r < n {
        let b = s[r]
        if b == quote { return r + 1 }
        if b < 0x20 { throw .syntax("control character in a string", at: r) }
        if b == backslash {
            guard r + 1 < n else { break }
            switch s[r + 1] {
            case quote, backslash, UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"), UInt8(ascii: "n"),
                 UInt8(ascii: "r"), UInt8(ascii: "t"):
                r += 2
            case UInt8(ascii: "u"):
                guard hex4(s, r + 2, n) != nil else { throw .syntax("invalid \\u escape", at: r) }
                r += 6
            default:
                throw .syntax("invalid escape", at: r)
            }
            continue
        }
        r += 1
    }
    throw .syntax("unterminated string", at: q)
}

private let nestingMax = 64

/// Validates one non-string-at-top value (or any value when nested) starting at `s[i]`; returns
/// the index after it.
private func skipValue(_ s: UnsafePointer<UInt8>, _ i: Int, _ n: Int, depth: Int) throws(JSONLineError) -> Int {
    switch s[i] {
    case quote:
        return try skipString(s, i, n)
    case UInt8(ascii: "{"), UInt8(ascii: "["):
        return try skipContainer(s, i, n, depth: depth + 1)
    case UInt8(ascii: "t"):
        return try skipLiteral("true", s, i, n)
    case UInt8(ascii: "f"):
        return try skipLiteral("false", s, i, n)
    case UInt8(ascii: "n"):
        return try skipLiteral("null", s, i, n)
    case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
        return try skipNumber(s, i, n)
    default:
        throw .syntax("unexpected character", at: i)
    }
}

private func skipLiteral(_ literal: StaticString, _ s: UnsafePointer<UInt8>, _ i: Int, _ n: Int)
    throws(JSONLineError) -> Int {
    let count = literal.utf8CodeUnitCount
    guard i + count <= n else { throw .syntax("invalid literal", at: i) }
    let bytes = literal.utf8Start
    for j in 0..<count where s[i + j] != bytes[j] { throw .syntax("invalid literal", at: i) }
    return i + count
}

/// A JSON number: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
private func skipNumber(_ s: UnsafePointer<UInt8>, _ i: Int, _ n: Int) throws(JSONLineError) -> Int {
    func isDigit(_ j: Int) -> Bool { j < n && s[j] >= UInt8(ascii: "0") && s[j] <= UInt8(ascii: "9") }
    var j = i
    if s[j] == UInt8(ascii: "-") { j += 1 }
    guard isDigit(j) else { throw .syntax("invalid number", at: i) }
    if s[j] == UInt8(ascii: "0") {
        j += 1
    } else {
        while isDigit(j) { j += 1 }
    }
    if j < n && s[j] == UInt8(ascii: ".") {
        j += 1
        guard isDigit(j) else { throw .syntax("invalid number", at: i) }
        while isDigit(j) { j += 1 }
    }
    if j < n && (s[j] == UInt8(ascii: "e") || s[j] == UInt8(ascii: "E")) {
        j += 1
        if j < n && (s[j] == UInt8(ascii: "+") || s[j] == UInt8(ascii: "-")) { j += 1 }
        guard isDigit(j) else { throw .syntax("invalid number", at: i) }
        while isDigit(j) { j += 1 }
    }
    return j
}

/// An object or array starting at `s[i]`, validated; returns the index after its closing bracket.
private func skipContainer(_ s: UnsafePointer<UInt8>, _ i: Int, _ n: Int, depth: Int) throws(JSONLineError) -> Int {
    guard depth <= nestingMax else { throw .syntax("nesting deeper than 64 levels", at: i) }
    let isObject = s[i] == UInt8(ascii: "{")
    let close = isObject ? UInt8(ascii: "}") : UInt8(ascii: "]")
    var j = skipWhitespace(s, i + 1, n)
    if j < n && s[j] == close { return j + 1 }
    while true {
        if isObject {
            guard j < n && s[j] == quote else { throw .syntax("expected a string key", at: j) }
            j = skipWhitespace(s, try skipString(s, j, n), n)
            guard j < n && s[j] == UInt8(ascii: ":") else { throw .syntax("expected ':'", at: j) }
            j = skipWhitespace(s, j + 1, n)
        }
        guard j < n else { throw .syntax("expected a value", at: j) }
        j = skipWhitespace(s, try skipValue(s, j, n, depth: depth), n)
        guard j < n else { throw .syntax(isObject ? "expected ',' or '}'" : "expected ',' or ']'", at: j) }
        if s[j] == close { return j + 1 }
        guard s[j] == UInt8(ascii: ",") else {
            throw .syntax(isObject ? "expected ',' or '}'" : "expected ',' or ']'", at: j)
        }
        j = skipWhitespace(s, j + 1, n)
    }
}
