import PushcastInput
import XCTest

/// Inputs that never end a line (`/dev/zero`, an endless pipe, a binary file) and headers that
/// name a column twice: each is an error soon, never a read that goes on forever or a column
/// silently ignored.
final class EndlessInputTests: XCTestCase {
    /// Zero bytes forever, counting how many were handed out.
    final class EndlessZeros: ByteSource {
        var prefix: [UInt8]
        var handedOut = 0
        init(prefix: String = "") { self.prefix = Array(prefix.utf8) }
        func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
            if !prefix.isEmpty {
                let n = min(prefix.count, buffer.count)
                for i in 0..<n { buffer[i] = prefix[i] }
                prefix.removeFirst(n)
                handedOut += n
                return n
            }
            for i in 0..<buffer.count { buffer[i] = 0 }
            handedOut += buffer.count
            return buffer.count
        }
    }

    func testAHeaderWithNoLineEndFailsAtTheCap() {
        let source = EndlessZeros()
        XCTAssertThrowsError(try TokenFileReader(source: source, format: .csv, fileName: "/dev/zero")) { error in
            XCTAssertEqual("\(error)", "/dev/zero:1: header line longer than 65536 bytes")
        }
        XCTAssertLessThanOrEqual(source.handedOut, 2 * (256 + 64) * 1024, "read far past the cap")
    }

    func testARowWithNoLineEndFailsAfterTheSkipBound() throws {
        for format in [InputFormat.csv, .ndjson] {
            var options = TokenFileReaderOptions()
            options.skipBytesMax = 1 << 20
            let source = EndlessZeros(prefix: format == .csv ? "token\nabc\n" : "{\"token\":\"abc\"}\n")
            let reader = try TokenFileReader(source: source, format: format, fileName: "pipe", options: options)
            var rows = 0
            XCTAssertThrowsError(try { while try reader.next() != nil { rows += 1 } }(), "\(format)") { error in
                XCTAssertTrue("\(error)".hasPrefix("pipe:\(format == .csv ? 3 : 2): no line end in "), "\(error)")
                XCTAssertTrue("\(error)".hasSuffix("this is not a text export (a device such as /dev/zero, an endless stream, or a binary file)"))
            }
            XCTAssertEqual(rows, 1, "the good row came first (\(format))")
            XCTAssertLessThan(source.handedOut, 3 << 20, "\(format)")
        }
    }

    /// A long line that does end is one malformed row, as before, and reading goes on.
    func testALongLineThatEndsIsOneMalformedRow() throws {
        let input = bytes("token\n" + String(repeating: "x", count: 200_000) + "\nabc\n")
        let (_, records) = try readAll(input, .csv, chunkSize: 4096)
        XCTAssertEqual(records.count, 2)
        if case .malformed = records[0] {} else { XCTFail("\(records[0])") }
        if case .row(_, _, let fields) = records[1] { XCTAssertEqual(fields, ["abc"]) } else { XCTFail("\(records[1])") }
    }

    func testAColumnNamedTwiceIsRefusedNamingIt() {
        XCTAssertThrowsError(try readAll(bytes("token,name,token\nabc,x,def\n"), .csv, chunkSize: 7)) { error in
            XCTAssertEqual("\(error)", "t.csv:1: header: the column 'token' appears twice (columns 1 and 3); "
                + "name each column once, or rename the one not to be used")
        }
        // Empty names (trailing commas) may repeat.
        XCTAssertNoThrow(try readAll(bytes("token,,\nabc,,\n"), .csv, chunkSize: 7))
    }
}
