import XCTest
@testable import PushcastInput

/// `rowSkipping`: a reader passes over unwanted lines without framing them, and numbers the rows
/// and lines it does return exactly as a reader that framed everything.
final class RowSkippingTests: XCTestCase {
    /// Skips the rows a predicate names; counts how often it was asked.
    final class Skipper: RowSkipping {
        let skips: (Int) -> Bool
        var asked = 0
        init(_ skips: @escaping (Int) -> Bool) { self.skips = skips }
        func owns(row: Int) -> Bool? {
            asked += 1
            return !skips(row)
        }
    }

    private func records(_ input: [UInt8], chunkSize: Int, options: TokenFileReaderOptions,
                         skipper: Skipper?) throws -> (got: [Got], irregular: Int) {
        let reader = try TokenFileReader(source: MemoryByteSource(input, chunkSize: chunkSize), format: .csv,
                                         fileName: "t.csv", options: options)
        reader.rowSkipping = skipper
        var got: [Got] = []
        while let record = try reader.next() {
            switch record {
            case .row(let view): got.append(.row(view.row, line: view.line, (0..<view.fieldCount).map { view.string($0) }))
            case .malformed(let row, let problem): got.append(.malformed(row, problem))
            }
        }
        XCTAssertNil(try reader.next())
        return (got, reader.irregularRecords)
    }

    private func rowNumber(_ got: Got) -> Int {
        switch got {
        case .row(let row, _, _), .malformed(let row, _): return row
        }
    }

    /// Every chunk size and both buffer sizes: the kept rows equal the full read's, filtered.
    private func checkSkipping(_ text: String, skips: @escaping (Int) -> Bool, file: StaticString = #filePath, line: UInt = #line) throws {
        let input = bytes(text)
        for options in [TokenFileReaderOptions(), smallBufferOptions()] {
            for chunkSize in chunkSizes {
                let full = try records(input, chunkSize: chunkSize, options: options, skipper: nil)
                XCTAssertEqual(full.irregular, 0, "a line is a row here", file: file, line: line)
                let skipped = try records(input, chunkSize: chunkSize, options: options, skipper: Skipper(skips))
                XCTAssertEqual(skipped.got, full.got.filter { !skips(rowNumber($0)) }, "chunk size \(chunkSize)", file: file, line: line)
            }
        }
    }

    func testSkippedLinesKeepRowAndLineNumbers() throws {
        let body = "token,platform\na,ios\n\nb,android\r\nc,ios\r\r\nd,\"ios\"\n\"e\",ios\n\n\nf,ios"
        try checkSkipping(body, skips: { $0 % 2 == 0 })
        try checkSkipping(body, skips: { $0 % 2 == 1 })
        try checkSkipping(body, skips: { $0 != 6 })
        try checkSkipping(body, skips: { _ in true })
        try checkSkipping(body + "\n", skips: { $0 == 6 })
        try checkSkipping(body + "\r", skips: { $0 == 6 })
        try checkSkipping(body + "\r", skips: { $0 == 5 })
    }

    /// Malformed rows on one line (a stray quote, too few fields) are rows like any other.
    func testMalformedOneLineRowsAreSkippedAsRows() throws {
        try checkSkipping("token,platform\na\"b,ios\nc,ios\nd\ne,ios,x\nf,ios\n", skips: { $0 == 1 || $0 == 4 })
        try checkSkipping("token,platform\na\"b,ios\nc,ios\nd\ne,ios,x\nf,ios\n", skips: { $0 == 2 || $0 == 3 })
    }

    /// Random one-line files, random choices: the same rows and lines as the full read.
    func testRandomFiles() throws {
        var generator = SeededGenerator(state: 0x5EED)
        let pieces = ["a", "bb", "\"q\"", "\"x,y\"", "", "ios", "\u{e9}t\u{e9}"]
        let ends = ["\n", "\r\n", "\r", "\n\n"]
        for _ in 0..<60 {
            var text = "token,platform"
            for _ in 0..<(1 + generator.next() % 40) {
                text += ends[Int(generator.next() % 4)]
                text += pieces[Int(generator.next() % 7)] + "," + pieces[Int(generator.next() % 7)]
            }
            let mask = generator.next()
            try checkSkipping(text, skips: { mask >> UInt64($0 % 64) & 1 == 1 })
        }
    }

    /// The first read counts what breaks "a line is a row": a quoted line end, a record past the cap.
    func testIrregularRecordsAreCounted() throws {
        let quotedNewline = try records(bytes("token,platform\n\"a\nb\",ios\nc,ios\n"), chunkSize: 7, options: .init(), skipper: nil)
        XCTAssertEqual(quotedNewline.irregular, 1)
        let long = "token,platform\n" + String(repeating: "x", count: 300) + ",ios\nc,ios\n"
        let tooLong = try records(bytes(long), chunkSize: 7, options: smallBufferOptions(), skipper: nil)
        XCTAssertEqual(tooLong.irregular, 1)
        let plain = try records(bytes("token,platform\na,ios\r\n\r\nb,ios"), chunkSize: 2, options: .init(), skipper: nil)
        XCTAssertEqual(plain.irregular, 0)
    }
}
