import XCTest
@testable import PushcastInput

final class CSVReaderTests: XCTestCase {
    let header = ["token", "platform", "name"]

    func testPlainRows() throws {
        try check(bytes("token,platform,name\nabc,ios,Ann\ndef,android,Bob\n"), .csv, columns: header, expected: [
            .row(1, line: 2, ["abc", "ios", "Ann"]),
            .row(2, line: 3, ["def", "android", "Bob"]),
        ])
    }

    func testQuotedFieldsWithCommasQuotesAndNewlines() throws {
        let input = "token,platform,name\n"
            + "\"a,b\",ios,\"say \"\"hi\"\"\"\n"
            + "c,\"\",\"two\nlines\"\n"
            + "d,ios,\"crlf\r\ninside\"\n"
            + "\"\"\"\",\"x\"\"\",\"\"\"y\"\n"
            + "e,ios,last\n"
        try check(bytes(input), .csv, columns: header, expected: [
            .row(1, line: 2, ["a,b", "ios", "say \"hi\""]),
            .row(2, line: 3, ["c", "", "two\nlines"]),
            .row(3, line: 5, ["d", "ios", "crlf\r\ninside"]),
            .row(4, line: 7, ["\"", "x\"", "\"y"]),
            .row(5, line: 8, ["e", "ios", "last"]),
        ])
    }

    func testCRLFAndByteOrderMarkAndTrimmedHeader() throws {
        let input = "\u{FEFF} token ,\tplatform,name \r\nabc,ios,Ann\r\n\"q\",\"w\"\r\n"
        try check(bytes(input), .csv, columns: header, expected: [
            .row(1, line: 2, ["abc", "ios", "Ann"]),
            .malformed(2, problem(3, "expected 3 fields, got 2")),
        ])
        let quotedEnd = "token,platform,name\r\nabc,ios,\"Ann\"\r\ndef,\"ios\",Bob\r\n"
        try check(bytes(quotedEnd), .csv, columns: header, expected: [
            .row(1, line: 2, ["abc", "ios", "Ann"]),
            .row(2, line: 3, ["def", "ios", "Bob"]),
        ])
    }

    // countLines knows LF line ends only, so the cases with lone CRs below pass countExact: false.

    func testLoneCREndsARowLikeLF() throws {
        let input = "token,platform,name\rabc,ios,Ann\r\rdef,android,Bob\rx,y\r\"q\",\"w\",\"e\"\r"
        try check(bytes(input), .csv, columns: header, expected: [
            .row(1, line: 2, ["abc", "ios", "Ann"]),
            .row(2, line: 4, ["def", "android", "Bob"]),
            .malformed(3, problem(5, "expected 3 fields, got 2")),
            .row(4, line: 6, ["q", "w", "e"]),
        ], countExact: false)
    }

    func testMixedLFCRLFAndLoneCRLineEnds() throws {
        let input = "token,platform,name\r\n"
            + "a,ios,A\r"
            + "b,ios,B\n"
            + "c,ios,C\r\n"
            + "\r\n\n\r"              // three empty lines: CRLF, LF, lone CR
            + "d,ios,\"D\"\r"
            + "e,ios,\"E\"\r\n"
            + "g,h\r"
            + "f,,F"
        try check(bytes(input), .csv, columns: header, expected: [
            .row(1, line: 2, ["a", "ios", "A"]),
            .row(2, line: 3, ["b", "ios", "B"]),
            .row(3, line: 4, ["c", "ios", "C"]),
            .row(4, line: 8, ["d", "ios", "D"]),
            .row(5, line: 9, ["e", "ios", "E"]),
            .malformed(6, problem(10, "expected 3 fields, got 2")),
            .row(7, line: 11, ["f", "", "F"]),
        ], countExact: false)
    }

    /// A CR inside quotes is data; like a quoted LF it still counts as a line (a CRLF once).
    func testCRInsideQuotesIsData() throws {
        let input = "token,platform,name\r"
            + "\"a\rb\",ios,\"x\r\"\r"
            + "\"c\r\nd\",\"\r\",\"\"\"\r\"\r\n"
            + "bad,\"i\ros\"x,N\r"
            + "next,ios,N\r"
        try check(bytes(input), .csv, columns: header, expected: [
            .row(1, line: 2, ["a\rb", "ios", "x\r"]),
            .row(2, line: 5, ["c\r\nd", "\r", "\"\r"]),
            .malformed(3, problem(9, "platform", "unexpected character after a closing quote")),
            .row(4, line: 11, ["next", "ios", "N"]),
        ], countExact: false)
    }

    /// Reads that end between a CR and what follows it: an LF there still makes one CRLF, in a row,
    /// inside quotes and in a malformed row being skipped.
    func testCRLFSplitAcrossReads() throws {
        let chunks = ["token,platform,name\r", "\na,ios,A\r", "\r", "\nb,ios,\"B\"\r", "\nc,ios,C\r",
                      "d,ios,\"D\"\r", "e,\"i\r", "\nos\",E\r", "\nbad\"1,ios,B\r", "\nbad\"2,ios,B\r",
                      "f,ios,F\r", "\n"]
        let quoteInToken = "unexpected '\"' in an unquoted field"
        let expected: [Got] = [
            .row(1, line: 2, ["a", "ios", "A"]),
            .row(2, line: 4, ["b", "ios", "B"]),
            .row(3, line: 5, ["c", "ios", "C"]),
            .row(4, line: 6, ["d", "ios", "D"]),
            .row(5, line: 7, ["e", "i\r\nos", "E"]),
            .malformed(6, problem(9, "token", quoteInToken)),
            .malformed(7, problem(10, "token", quoteInToken)),
            .row(8, line: 11, ["f", "ios", "F"]),
        ]
        for options in [TokenFileReaderOptions(), smallBufferOptions()] {
            let source = ChunkedByteSource(chunks.map(bytes))
            XCTAssertEqual(try readRecords(source, options: options), expected)
        }
        try check(bytes(chunks.joined()), .csv, columns: header, expected: expected, countExact: false)
    }

    func testLoneCRAtTheEndOfInput() throws {
        let a: [Got] = [.row(1, line: 2, ["a", "ios", "A"])]
        let cases: [(String, [Got])] = [
            ("a,ios,A\r", a),
            ("a,ios,\"A\"\r", a),
            ("a,ios,A\r\r", a),
            ("a,ios,\r", [.row(1, line: 2, ["a", "ios", ""])]),
            ("a,ios,A\rb,ios,\"B\r\"\r", a + [.row(2, line: 3, ["b", "ios", "B\r"])]),
            ("a\"b,ios,A\r", [.malformed(1, problem(2, "token", "unexpected '\"' in an unquoted field"))]),
            ("\r", []),
        ]
        for (body, expected) in cases {
            try check(bytes("token,platform,name\r" + body), .csv, columns: header, expected: expected,
                      countExact: false)
        }
    }

    func testHeaderEndingInALoneCR() throws {
        try check(bytes("token,platform,name\rabc,ios,Ann\n"), .csv, columns: header, expected: [
            .row(1, line: 2, ["abc", "ios", "Ann"]),
        ], countExact: false)
        // Empty lines before the header: a lone CR, a CRLF and an LF.
        try check(bytes("\r\r\n\n token ,\"platform\",\"name\"\rabc,ios,Ann\r"), .csv, columns: header, expected: [
            .row(1, line: 5, ["abc", "ios", "Ann"]),
        ], countExact: false)
        try check(bytes("token\rabc\r"), .csv, columns: ["token"], expected: [
            .row(1, line: 2, ["abc"]),
        ], countExact: false)
        try check(bytes("\u{FEFF}token,platform,name\r"), .csv, columns: header, expected: [])
        let broken = bytes("\r\rtok\"en,platform\rx\r")
        for chunkSize in chunkSizes {
            XCTAssertThrowsError(try readAll(broken, .csv, chunkSize: chunkSize)) { error in
                XCTAssertEqual("\(error)", "t.csv:3: header column 1: unexpected '\"' in an unquoted field")
            }
        }
    }

    /// A too-long record is skipped up to the next LF, CRLF or lone CR. At the cap a lone CR ends
    /// the record in time, while the CR of a CRLF counts toward the cap.
    func testTooLongRecordsResynchroniseAtALoneCR() throws {
        let options = smallBufferOptions(lineBytesMax: 12)
        let input = "t,p,n\rabcd,ios,Ann\rabcd,ios,Ann\r\nabcde,ios,Ann,more\rab,io,A\r"
        try check(bytes(input), .csv, columns: ["t", "p", "n"], expected: [
            .row(1, line: 2, ["abcd", "ios", "Ann"]),
            .malformed(2, problem(3, "line longer than 12 bytes")),
            .malformed(3, problem(4, "line longer than 12 bytes")),
            .row(4, line: 5, ["ab", "io", "A"]),
        ], options: [options], countExact: false)
        try check(bytes("t,p,n\rabcd,ios,Ann\r"), .csv, columns: ["t", "p", "n"], expected: [
            .row(1, line: 2, ["abcd", "ios", "Ann"]),
        ], options: [options], countExact: false)
    }

    func testUnterminatedQuoteWithLoneCRsResynchronisesAfterTheCap() throws {
        let options = smallBufferOptions(lineBytesMax: 40)
        // As in the LF case: CRs at record offsets 11, 22, 33, 44; the cap ends at offset 41.
        let body = String(repeating: "0123456789\r", count: 5)
        try check(bytes("token,platform,name\r\"\(body)a,b,c\r"), .csv, columns: header, expected: [
            .malformed(1, problem(2, "line longer than 40 bytes")),
            .malformed(2, problem(6, "expected 3 fields, got 1")),
            .row(3, line: 7, ["a", "b", "c"]),
        ], options: [options], countExact: false)
        // A quoted CR as the last byte the cap allows, alone or the start of a CRLF: one line end,
        // and reading resumes right after it.
        let full = "\"" + String(repeating: "x", count: 39)
        for lineEnd in ["\r", "\r\n"] {
            try check(bytes("token,platform,name\r\(full)\(lineEnd)tail\ra,b,c\r"), .csv, columns: header, expected: [
                .malformed(1, problem(2, "line longer than 40 bytes")),
                .malformed(2, problem(3, "expected 3 fields, got 1")),
                .row(3, line: 4, ["a", "b", "c"]),
            ], options: [options], countExact: false)
        }
    }

    func testBlankLinesAreSkippedAndNotNumbered() throws {
        let input = "\n\r\ntoken,platform,name\n\nabc,ios,Ann\r\n\r\n\n\"\",,\ndef,ios,Bob\n\n"
        try check(bytes(input), .csv, columns: header, expected: [
            .row(1, line: 5, ["abc", "ios", "Ann"]),
            .row(2, line: 8, ["", "", ""]),
            .row(3, line: 9, ["def", "ios", "Bob"]),
        ])
    }

    func testNoFinalNewline() throws {
        let cases: [(String, [String?])] = [
            ("abc,ios,Ann", ["abc", "ios", "Ann"]),
            ("abc,ios,\"Ann\"", ["abc", "ios", "Ann"]),
            ("abc,ios,", ["abc", "ios", ""]),
            ("abc,ios,Ann\r", ["abc", "ios", "Ann"]),
            ("abc,ios,\"Ann\"\r", ["abc", "ios", "Ann"]),
            ("abc,ios,\"A\"\"\"", ["abc", "ios", "A\""]),
        ]
        for (last, values) in cases {
            try check(bytes("token,platform,name\n" + last), .csv, columns: header, expected: [
                .row(1, line: 2, values),
            ])
        }
    }

    func testHeaderOnlyAndHeaderWithoutNewline() throws {
        try check(bytes("token,platform,name\n"), .csv, columns: header, expected: [])
        try check(bytes("token,platform,name"), .csv, columns: header, expected: [])
        try check(bytes("\"to,ken\",\"a\"\"b\""), .csv, columns: ["to,ken", "a\"b"], expected: [])
    }

    func testMissingHeaderThrows() {
        for input in ["", "\n\n", "\r\n", "\u{FEFF}"] {
            for chunkSize in chunkSizes {
                XCTAssertThrowsError(try readAll(bytes(input), .csv, chunkSize: chunkSize)) { error in
                    XCTAssertEqual((error as? InputProblem)?.message, "missing header row (the input is empty)")
                }
            }
        }
    }

    func testBrokenHeaderThrows() {
        let cases: [(String, String)] = [
            ("token,\"platform\n", "t.csv:1: header column 2: quoted field not closed before the end of input"),
            ("tok\"en,platform\n", "t.csv:1: header column 1: unexpected '\"' in an unquoted field"),
            ("\n\"token\"x,platform\n", "t.csv:2: header column 1: unexpected character after a closing quote"),
            ("tok\u{FF}en\n", "t.csv:1: header column 1: invalid UTF-8 at byte 4"),
        ]
        for (text, message) in cases {
            var input = bytes(text)
            if let i = input.firstIndex(of: 0xC3) { input.replaceSubrange(i...i + 1, with: [0xFF]) }
            XCTAssertThrowsError(try readAll(input, .csv, chunkSize: 3)) { error in
                XCTAssertEqual("\(error)", message)
            }
        }
    }

    func testWrongFieldCounts() throws {
        let input = "token,platform,name\na,b,c,d\na,b\n\na\nx,y,z\n"
        try check(bytes(input), .csv, columns: header, expected: [
            .malformed(1, problem(2, "expected 3 fields, got 4")),
            .malformed(2, problem(3, "expected 3 fields, got 2")),
            .malformed(3, problem(5, "expected 3 fields, got 1")),
            .row(4, line: 6, ["x", "y", "z"]),
        ])
    }

    func testBrokenQuotingIsMalformedAndReadingResumesAtTheNextLine() throws {
        let input = "token,platform,name\n"
            + "ab\"c,ios,Ann\n"            // quote inside an unquoted field
            + "good1,ios,Ann\n"
            + "\"ab\"c,ios,Ann\n"          // data after the closing quote
            + "good2,ios,Ann\n"
            + "x,\"ios\" ,Ann\n"          // a space after a closing quote
            + "a,b,c,\"d\"e\n"             // beyond the header's width
            + "good3,ios,\"multi\nline\"\n"
            + "\"open,ios,Ann\nstill open\n" // unterminated to the end of input
        try check(bytes(input), .csv, columns: header, expected: [
            .malformed(1, problem(2, "token", "unexpected '\"' in an unquoted field")),
            .row(2, line: 3, ["good1", "ios", "Ann"]),
            .malformed(3, problem(4, "token", "unexpected character after a closing quote")),
            .row(4, line: 5, ["good2", "ios", "Ann"]),
            .malformed(5, problem(6, "platform", "unexpected character after a closing quote")),
            .malformed(6, problem(7, "column 4: unexpected character after a closing quote")),
            .row(7, line: 8, ["good3", "ios", "multi\nline"]),
            .malformed(8, problem(10, "token", "quoted field not closed before the end of input")),
        ], countExact: false)
        let description = try readAll(bytes(input), .csv, chunkSize: 65536).records[0]
        guard case .malformed(_, let found) = description else { return XCTFail("expected a malformed row") }
        XCTAssertEqual(found.description, "t.csv:2: field 'token': unexpected '\"' in an unquoted field")
    }

    func testRowAndLineNumbersAfterMultiLineQuotedFields() throws {
        let input = "token,platform,name\n\"a\n\n\",ios,\"b\r\nc\nd\"\ne,f,g\n\nh,i,\"\n\"\n"
        try check(bytes(input), .csv, columns: header, expected: [
            .row(1, line: 2, ["a\n\n", "ios", "b\r\nc\nd"]),
            .row(2, line: 7, ["e", "f", "g"]),
            .row(3, line: 9, ["h", "i", "\n"]),
        ])
    }

    func testMegabyteLineIsOneMalformedRowInBoundedMemory() throws {
        let long = String(repeating: "x", count: 1 << 20)
        let input = bytes("token,platform,name\nfirst,ios,A\n\(long),ios,B\nnext,ios,C\n")
        let expected: [Got] = [
            .row(1, line: 2, ["first", "ios", "A"]),
            .malformed(2, problem(3, "line longer than 65536 bytes")),
            .row(3, line: 4, ["next", "ios", "C"]),
        ]
        for chunkSize in chunkSizes {
            let result = try readAll(input, .csv, chunkSize: chunkSize)
            XCTAssertEqual(result.records, expected, "chunk \(chunkSize)")
        }
        var small = TokenFileReaderOptions()
        small.bufferBytes = 4096
        small.lineBytesMax = 1000
        let reader = try TokenFileReader(source: MemoryByteSource(input, chunkSize: 3000), format: .csv,
                                         fileName: "t.csv", options: small)
        var count = 0
        while let record = try reader.next() {
            count += 1
            XCTAssertEqual(reader.bufferCapacity, 5096, "the buffer never grows")
            if count == 2, case .malformed(_, let found) = record {
                XCTAssertEqual(found.message, "line longer than 1000 bytes")
            }
        }
        XCTAssertEqual(count, 3)
        XCTAssertEqual(try countLines(source: MemoryByteSource(input), format: .csv), 3)
    }

    func testRecordAtExactlyTheCap() throws {
        var options = smallBufferOptions(lineBytesMax: 12)
        // "abcd,ios,Ann" is 12 bytes: allowed; with a CR it is 13: too long.
        let input = bytes("t,p,n\nabcd,ios,Ann\nabcd,ios,Ann\r\nabcde,ios,An\nab,io,A\r\n")
        try check(input, .csv, columns: ["t", "p", "n"], expected: [
            .row(1, line: 2, ["abcd", "ios", "Ann"]),
            .malformed(2, problem(3, "line longer than 12 bytes")),
            .row(3, line: 4, ["abcde", "ios", "An"]),
            .row(4, line: 5, ["ab", "io", "A"]),
        ], options: [options])
        options.lineBytesMax = 4
        XCTAssertThrowsError(try readAll(input, .csv, chunkSize: 5, options: options)) { error in
            XCTAssertEqual("\(error)", "t.csv:1: header line longer than 4 bytes")
        }
    }

    func testUnterminatedQuoteLongerThanTheCapResynchronisesAfterTheCap() throws {
        let options = smallBufferOptions(lineBytesMax: 40)
        // The open quote swallows lines until the cap; reading resumes at the first LF after it.
        let body = String(repeating: "0123456789\n", count: 5)   // 55 bytes, LFs at 10, 21, 32, 43, 54
        let input = bytes("token,platform,name\n\"\(body)a,b,c\n")
        // Record starts at line 2; the cap is 40 bytes, the first LF at or after it is body's 4th.
        try check(input, .csv, columns: header, expected: [
            .malformed(1, problem(2, "line longer than 40 bytes")),
            .malformed(2, problem(6, "expected 3 fields, got 1")),
            .row(3, line: 7, ["a", "b", "c"]),
        ], options: [options], countExact: false)
    }

    func testInvalidUTF8IsMalformedNamingTheField() throws {
        let invalid: [[UInt8]] = [
            [0xFF], [0xC3], [0xC0, 0x80], [0xE0, 0x80, 0x80], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80],
            [0xF0, 0x9F, 0x98], [0x80], [0xE2, 0x82, 0x41],
        ]
        for sequence in invalid {
            let input = bytes("token,platform,name\nabc,ios,Ann\nabc,ios,\"N") + sequence + bytes("é\"\nlast,ios,\"Zoë\"\n")
            try check(input, .csv, columns: header, expected: [
                .row(1, line: 2, ["abc", "ios", "Ann"]),
                .malformed(2, problem(3, "name", "invalid UTF-8 at byte 2")),
                .row(3, line: 4, ["last", "ios", "Zoë"]),
            ])
        }
        let inToken = bytes("token,platform,name\nab") + [0xFE] + bytes(",ios,Ann\n")
        let result = try readAll(inToken, .csv, chunkSize: 1)
        XCTAssertEqual(result.records.first?.description, "malformed 1: t.csv:2: field 'token': invalid UTF-8 at byte 3")
    }

    func testScriptsRoundTrip() throws {
        let names = ["مرحبا بالعالم", "你好，世界", "Привет, мир", "שלום \u{200F}עולם", "emoji 🎉👩‍👩‍👧", "Ünïcödé"]
        var input = "token,platform,name\n"
        var expected: [Got] = []
        for (index, name) in names.enumerated() {
            input += "t\(index),ios,\"\(name)\"\n"
            expected.append(.row(index + 1, line: index + 2, ["t\(index)", "ios", name]))
        }
        try check(bytes(input), .csv, columns: header, expected: expected)
        let result = try readAll(bytes(input), .csv, chunkSize: 1)
        if case .row(_, _, let values) = result.records[0] {
            XCTAssertEqual(values[2]?.utf8.count, "مرحبا بالعالم".utf8.count)
        }
    }

    func testFieldBytesAndColumnIndex() throws {
        let reader = try TokenFileReader(source: MemoryByteSource(bytes("Token,device_id,LOCALE\n\"a\"\"b\",7,ar\n")),
                                         format: .csv, fileName: "t.csv")
        XCTAssertEqual(reader.columnIndex("Token"), 0)
        XCTAssertEqual(reader.columnIndex("token"), 0)
        XCTAssertEqual(reader.columnIndex("locale"), 2)
        XCTAssertNil(reader.columnIndex("platform"))
        guard case .row(let view) = try reader.next() else { return XCTFail("expected a row") }
        XCTAssertEqual(view.fieldCount, 3)
        XCTAssertEqual(view.field(0).map { Array($0) }, bytes("a\"b"))
        XCTAssertEqual(view.field(1).map { Array($0) }, bytes("7"))
        XCTAssertNil(view.field(3))
        XCTAssertNil(view.field(-1))
        XCTAssertNil(view.string(3))
        XCTAssertNil(try reader.next())
    }

    func testExactColumnMatchWinsOverCaseInsensitive() throws {
        let reader = try TokenFileReader(source: MemoryByteSource(bytes("TOKEN,token\n")), format: .csv, fileName: "t.csv")
        XCTAssertEqual(reader.columnIndex("token"), 1)
        XCTAssertEqual(reader.columnIndex("Token"), 0)
    }

    func testSourceErrorsThrow() throws {
        let reader = try TokenFileReader(source: FailingByteSource(bytes("token\nabc\nd")), format: .csv, fileName: "t.csv")
        guard case .row(let view) = try reader.next() else { return XCTFail("expected a row") }
        XCTAssertEqual(view.string(0), "abc")
        XCTAssertThrowsError(try reader.next()) { XCTAssertTrue($0 is FailingByteSource.Failure) }
        XCTAssertThrowsError(try TokenFileReader(source: FailingByteSource([]), format: .csv, fileName: "t.csv"))
    }

    /// Random tables written with RFC 4180 quoting read back exactly, and countLines agrees.
    func testGeneratedTablesRoundTrip() throws {
        var random = SeededGenerator(state: 42)
        let pieces = ["a", "b", ",", "\"", "\n", "\r\n", " ", "é", "ш", "中", "🎉", "x", "", "\r"]
        for round in 0..<40 {
            let width = Int.random(in: 1...4, using: &random)
            let columns = (0..<width).map { "c\($0)" }
            let lineEnds = ["\n", "\r\n", "\r"]
            var input = columns.joined(separator: ",") + lineEnds[round % 3]
            var loneCR = round % 3 == 2
            var expected: [Got] = []
            var line = 2
            for row in (0..<Int.random(in: 0...12, using: &random)).map({ $0 + 1 }) {
                var values: [String] = []
                for _ in 0..<width {
                    values.append((0..<Int.random(in: 0...5, using: &random)).map { _ in pieces.randomElement(using: &random)! }.joined())
                }
                if width == 1 && values[0].isEmpty { values[0] = "v" }   // an empty line would be skipped
                let fields = values.map { value -> String in
                    let needsQuotes = value.contains { ",\"\r\n".contains($0) } || value.unicodeScalars.contains { $0 == "\r" || $0 == "\n" }
                    return needsQuotes || Bool.random(using: &random)
                        ? "\"" + value.replacingOccurrences(of: "\"", with: "\"\"") + "\"" : value
                }
                let text = fields.joined(separator: ",")
                let lineEnd = lineEnds.randomElement(using: &random)!
                loneCR = loneCR || lineEnd == "\r"
                input += text + lineEnd
                expected.append(.row(row, line: line, values))
                line += lineEndCount(text) + 1
            }
            if Bool.random(using: &random), !expected.isEmpty {
                input.removeLast()   // drops the whole "\r\n" grapheme, the "\n" or the "\r"
            }
            // countLines knows LF line ends only.
            try check(bytes(input), .csv, columns: columns, expected: expected,
                      options: [.init(), smallBufferOptions(lineBytesMax: 400)], countExact: !loneCR)
        }
    }

    /// Random bytes never crash the reader, every record is numbered once, and the buffer stays
    /// at its fixed size.
    func testRandomBytesNeverCrash() throws {
        var random = SeededGenerator(state: 7)
        let alphabet: [UInt8] = Array(",\"\n\r ab".utf8) + [0xC3, 0xA9, 0xFF, 0xE4]
        for _ in 0..<200 {
            let input = [UInt8](bytes("a,b\n")) + (0..<Int.random(in: 0...300, using: &random)).map { _ in alphabet.randomElement(using: &random)! }
            var options = smallBufferOptions(lineBytesMax: 24)
            options.bufferBytes = 64
            let reference = try readAll(input, .csv, chunkSize: 65536, options: options).records
            for (index, record) in reference.enumerated() {
                switch record {
                case .row(let row, _, _), .malformed(let row, _): XCTAssertEqual(row, index + 1)
                }
            }
            for chunkSize in [1, 3] {
                XCTAssertEqual(try readAll(input, .csv, chunkSize: chunkSize, options: options).records, reference)
            }
        }
    }
}

/// Line ends in `text` as the reader counts them: LFs, CRLFs and lone CRs, one line each.
private func lineEndCount(_ text: String) -> Int {
    let utf8 = Array(text.utf8)
    return utf8.indices.filter { utf8[$0] == 0x0D || (utf8[$0] == 0x0A && ($0 == 0 || utf8[$0 - 1] != 0x0D)) }.count
}

/// A source that returns the given chunks, one per read.
private final class ChunkedByteSource: ByteSource {
    var chunks: [[UInt8]]
    init(_ chunks: [[UInt8]]) { self.chunks = chunks }
    func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        guard !chunks.isEmpty else { return 0 }
        let chunk = chunks.removeFirst()
        precondition(chunk.count <= buffer.count, "chunk larger than the room left")
        buffer.copyBytes(from: chunk)
        return chunk.count
    }
}

/// Every record of a CSV source with the test header, as the tests compare them.
private func readRecords(_ source: ByteSource, options: TokenFileReaderOptions) throws -> [Got] {
    let reader = try TokenFileReader(source: source, format: .csv, fileName: "t.csv", options: options)
    XCTAssertEqual(reader.columns, ["token", "platform", "name"])
    var records: [Got] = []
    while let record = try reader.next() {
        switch record {
        case .row(let view):
            records.append(.row(view.row, line: view.line, (0..<view.fieldCount).map { view.string($0) }))
        case .malformed(let row, let problem):
            records.append(.malformed(row, problem))
        }
    }
    return records
}
