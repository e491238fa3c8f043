import XCTest
@testable import PushcastInput

final class NDJSONReaderTests: XCTestCase {
    func p(_ line: Int, _ message: String) -> InputProblem { problem(line, message, file: "t.ndjson") }
    func p(_ line: Int, _ field: String, _ message: String) -> InputProblem { problem(line, field, message, file: "t.ndjson") }

    func testObjectsAndKeysInOrderOfFirstAppearance() throws {
        let input = """
        {"token":"abc","platform":"ios"}
        {"platform":"android","token":"def","locale":"ru"}
        {"user_id":"9"}
        {}

        """
        try check(bytes(input), .ndjson, columns: ["token", "platform", "locale", "user_id"], expected: [
            .row(1, line: 1, ["abc", "ios", nil, nil]),
            .row(2, line: 2, ["def", "android", "ru", nil]),
            .row(3, line: 3, [nil, nil, nil, "9"]),
            .row(4, line: 4, [nil, nil, nil, nil]),
        ])
    }

    func testInitialColumnsComeFromTheFirstObject() throws {
        let reader = try TokenFileReader(source: MemoryByteSource(bytes("\n  \n{\"token\":\"a\",\"Device_ID\":\"d\"}\n{\"x\":1}\n")),
                                         format: .ndjson, fileName: "t.ndjson")
        XCTAssertEqual(reader.columns, ["token", "Device_ID"])
        XCTAssertEqual(reader.columnIndex("device_id"), 1)
        guard case .row(let first) = try reader.next() else { return XCTFail("expected a row") }
        XCTAssertEqual(first.line, 3)
        XCTAssertEqual(first.fieldCount, 2)
        guard case .row(let second) = try reader.next() else { return XCTFail("expected a row") }
        XCTAssertEqual(reader.columns, ["token", "Device_ID", "x"])
        XCTAssertEqual(second.fieldCount, 3)
        XCTAssertNil(second.field(0))
        XCTAssertEqual(second.string(2), "1")
        XCTAssertNil(try reader.next())
    }

    func testEmptyInputHasNoColumnsAndNoRows() throws {
        for input in ["", "\n", " \r\n\t\n"] {
            try check(bytes(input), .ndjson, columns: [], expected: [])
        }
    }

    func testEscapesUnicodeAndSurrogatePairs() throws {
        let input = #"""
        {"a":"q\"b\\s\/n\nr\rt\tb\bf\f","b":"\u00e9\u4E2D\u0041","c":"\ud83c\udf89!","d":"plain"}
        {"a":"\u0000","b":"","c":"x\u20ACy","d":"\uD834\uDD1E"}
        """#
        try check(bytes(input), .ndjson, columns: ["a", "b", "c", "d"], expected: [
            .row(1, line: 1, ["q\"b\\s/n\nr\rt\tb\u{8}f\u{C}", "éA".replacingOccurrences(of: "A", with: "中A"), "🎉!", "plain"]),
            .row(2, line: 2, ["\u{0}", "", "x€y", "𝄞"]),
        ])
    }

    func testEscapedKeysAreUnescaped() throws {
        try check(bytes(#"{"to\u006ben":"a","first\u005fname":"b"}"#), .ndjson, columns: ["token", "first_name"], expected: [
            .row(1, line: 1, ["a", "b"]),
        ])
    }

    func testNumbersBooleansNullAndNestedValues() throws {
        let input = #"""
        {"n":-12.5e+3,"t":true,"f":false,"z":null,"o":{"k":[1,"x]}",{"y":null}]},"a":[ ],"i":0}
        {"n":7,"z":"here","o":{}}
        """#
        try check(bytes(input), .ndjson, columns: ["n", "t", "f", "z", "o", "a", "i"], expected: [
            .row(1, line: 1, ["-12.5e+3", "true", "false", nil, #"{"k":[1,"x]}",{"y":null}]}"#, "[ ]", "0"]),
            .row(2, line: 2, ["7", nil, nil, "here", "{}", nil, nil]),
        ])
    }

    func testDuplicateKeysLastWins() throws {
        try check(bytes(#"{"token":"first","token":"second"}"# + "\n" + #"{"token":"x","token":null}"#), .ndjson,
                  columns: ["token"], expected: [
                      .row(1, line: 1, ["second"]),
                      .row(2, line: 2, [nil]),
                  ])
    }

    func testBlankLinesAndCRLF() throws {
        let input = "\r\n{\"token\":\"a\"}\r\n   \r\n\t\n{ \"token\" : \"b\" }  \r\n\n{\"token\":\"c\"}"
        try check(bytes(input), .ndjson, columns: ["token"], expected: [
            .row(1, line: 2, ["a"]),
            .row(2, line: 5, ["b"]),
            .row(3, line: 7, ["c"]),
        ])
    }

    func testLinesThatAreNotObjectsAreMalformedWithAPosition() throws {
        let lines: [(String, String)] = [
            (#"[1,2]"#, "invalid JSON: expected '{' (each line must be a JSON object) at byte 1"),
            (#""token""#, "invalid JSON: expected '{' (each line must be a JSON object) at byte 1"),
            (#"  42"#, "invalid JSON: expected '{' (each line must be a JSON object) at byte 3"),
            (#"{"token":"abc}"#, "invalid JSON: unterminated string at byte 10"),
            (#"{"token":"abc"} x"#, "invalid JSON: unexpected data after the object at byte 17"),
            (#"{"token":"abc""#, "invalid JSON: expected ',' or '}' at byte 15"),
            (#"{"token" "abc"}"#, "invalid JSON: expected ':' at byte 10"),
            (#"{token:"abc"}"#, "invalid JSON: expected a string key at byte 2"),
            (#"{"a":1,}"#, "invalid JSON: expected a string key at byte 8"),
            (#"{"a":01}"#, "invalid JSON: expected ',' or '}' at byte 7"),
            (#"{"a":-}"#, "invalid JSON: invalid number at byte 6"),
            (#"{"a":1.}"#, "invalid JSON: invalid number at byte 6"),
            (#"{"a":tru}"#, "invalid JSON: invalid literal at byte 6"),
            (#"{"a":'x'}"#, "invalid JSON: unexpected character at byte 6"),
            (#"{"a":"\x"}"#, "invalid JSON: invalid escape at byte 7"),
            (#"{"a":"\u12G4"}"#, #"invalid JSON: invalid \u escape at byte 7"#),
            (#"{"a":"\ud800"}"#, #"invalid JSON: unpaired UTF-16 surrogate in \u escape at byte 7"#),
            (#"{"a":"\udc00\ud800"}"#, #"invalid JSON: unpaired UTF-16 surrogate in \u escape at byte 7"#),
            (#"{"a":"\ud800\u0041"}"#, #"invalid JSON: unpaired UTF-16 surrogate in \u escape at byte 7"#),
            ("{\"a\":\"tab\there\"}", "invalid JSON: control character in a string at byte 10"),
            (#"{"a":[1,]}"#, "invalid JSON: unexpected character at byte 9"),
            (#"{"a":{"b" 1}}"#, "invalid JSON: expected ':' at byte 11"),
            (#"{"a":[1 2]}"#, "invalid JSON: expected ',' or ']' at byte 9"),
            (#"{"a":"#, "invalid JSON: expected a value at byte 6"),
            (#"{"#, "invalid JSON: expected a string key at byte 2"),
        ]
        var input = ""
        var expected: [Got] = []
        for (index, (line, message)) in lines.enumerated() {
            input += line + "\n{\"token\":\"ok\(index)\"}\n"
            expected.append(.malformed(2 * index + 1, p(2 * index + 1, message)))
            expected.append(.row(2 * index + 2, line: 2 * index + 2, ["ok\(index)", nil]))
        }
        // "a" becomes a column on the lines that name it, even when they are malformed.
        try check(bytes(input), .ndjson, columns: ["token", "a"], expected: expected)
    }

    func testNestingIsBounded() throws {
        let deep = String(repeating: "[", count: 65) + String(repeating: "]", count: 65)
        let fine = String(repeating: "[", count: 64) + String(repeating: "]", count: 64)
        try check(bytes("{\"a\":\(fine)}\n{\"a\":\(deep)}\n"), .ndjson, columns: ["a"], expected: [
            .row(1, line: 1, [fine]),
            .malformed(2, p(2, "invalid JSON: nesting deeper than 64 levels at byte 70")),
        ])
    }

    func testLongLineIsOneMalformedRowAndTheNextIsRead() throws {
        let long = "{\"token\":\"" + String(repeating: "a", count: 1 << 20) + "\"}"
        let input = bytes("{\"token\":\"first\"}\n\(long)\n{\"token\":\"next\"}\n")
        for chunkSize in chunkSizes {
            let result = try readAll(input, .ndjson, chunkSize: chunkSize)
            XCTAssertEqual(result.records, [
                .row(1, line: 1, ["first"]),
                .malformed(2, p(2, "line longer than 65536 bytes")),
                .row(3, line: 3, ["next"]),
            ], "chunk \(chunkSize)")
        }
        try check(bytes("{\"t\":\"0123456789\"}\n{\"t\":\"01234567890\"}\r\n{\"t\":\"0\"}"), .ndjson, columns: ["t"], expected: [
            .row(1, line: 1, ["0123456789"]),
            .malformed(2, p(2, "line longer than 18 bytes")),
            .row(3, line: 3, ["0"]),
        ], options: [smallBufferOptions(lineBytesMax: 18)])
        XCTAssertEqual(try countLines(source: MemoryByteSource(input), format: .ndjson), 3)
    }

    func testInvalidUTF8NamesTheKey() throws {
        let input = bytes("{\"token\":\"a\",\"first_name\":\"B") + [0xE4, 0xB8] + bytes("\"}\n{\"x") + [0xFF] + bytes("\":1}\n")
            + bytes("{\"token\":\"ok\",\"first_name\":\"") + [0xE4, 0xB8, 0xAD] + bytes("\"}\n")
        try check(input, .ndjson, columns: ["token", "first_name"], expected: [
            .malformed(1, p(1, "first_name", "invalid UTF-8 at byte 2")),
            .malformed(2, p(2, "invalid UTF-8 in a key at byte 4")),
            .row(3, line: 3, ["ok", "中"]),
        ])
    }

    func testScriptsAndRightToLeftTextRoundTrip() throws {
        let names = ["مرحبا \u{202B}عالم\u{202C}", "你好，世界", "Привет, мир", "שלום", "👩‍👩‍👧 \\ \"q\""]
        var input = ""
        var expected: [Got] = []
        for (index, name) in names.enumerated() {
            let escaped = name.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
            input += "{\"first_name\":\"\(escaped)\",\"locale\":\"x\(index)\"}\n"
            expected.append(.row(index + 1, line: index + 1, [name, "x\(index)"]))
        }
        try check(bytes(input), .ndjson, columns: ["first_name", "locale"], expected: expected)
    }

    func testTooManyDistinctKeys() throws {
        var options = smallBufferOptions()
        options.columnsMax = 2
        try check(bytes("{\"a\":1,\"b\":2}\n{\"c\":3}\n{\"b\":4}\n"), .ndjson, columns: ["a", "b"], expected: [
            .row(1, line: 1, ["1", "2"]),
            .malformed(2, p(2, "more than 2 distinct keys")),
            .row(3, line: 3, [nil, "4"]),
        ], options: [options])
    }

    func testProblemDescription() {
        XCTAssertEqual(InputProblem(file: "tokens.csv", line: 17, field: "token", message: "missing").description,
                       "tokens.csv:17: field 'token': missing")
        XCTAssertEqual(InputProblem(file: "tokens.ndjson", line: 4, message: "invalid JSON: unterminated string at byte 12").description,
                       "tokens.ndjson:4: invalid JSON: unterminated string at byte 12")
    }

    /// Random bytes never crash the reader, every record is numbered once, and every chunking
    /// gives the same records.
    func testRandomBytesNeverCrash() throws {
        var random = SeededGenerator(state: 11)
        let alphabet: [UInt8] = Array("{}[]\":,\\u0e1tn \n\rab".utf8) + [0xC3, 0xA9, 0xFF]
        for _ in 0..<300 {
            let input = (0..<Int.random(in: 0...200, using: &random)).map { _ in alphabet.randomElement(using: &random)! }
            let options = smallBufferOptions(lineBytesMax: 30)
            let reference = try readAll(input, .ndjson, chunkSize: 65536, options: options).records
            for (index, record) in reference.enumerated() {
                switch record {
                case .row(let row, _, _), .malformed(let row, _): XCTAssertEqual(row, index + 1)
                }
            }
            for chunkSize in [1, 3] {
                XCTAssertEqual(try readAll(input, .ndjson, chunkSize: chunkSize, options: options).records, reference)
            }
            XCTAssertEqual(try countLines(source: MemoryByteSource(input), format: .ndjson), reference.count)
        }
    }
}
