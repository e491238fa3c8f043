import XCTest
@testable import PushcastInput

final class InputSupportTests: XCTestCase {
    func testFormatGuess() {
        XCTAssertEqual(InputFormat.guess(path: "tokens.csv"), .csv)
        XCTAssertEqual(InputFormat.guess(path: "/data/Tokens.CSV"), .csv)
        XCTAssertEqual(InputFormat.guess(path: "a.b/tokens.ndjson"), .ndjson)
        XCTAssertEqual(InputFormat.guess(path: "tokens.jsonl"), .ndjson)
        XCTAssertEqual(InputFormat.guess(path: "tokens.json"), .ndjson)
        XCTAssertNil(InputFormat.guess(path: "tokens.tsv"))
        XCTAssertNil(InputFormat.guess(path: "-"))
        XCTAssertNil(InputFormat.guess(path: "a.csv/tokens"))
        XCTAssertNil(InputFormat.guess(path: ".csv"))
        XCTAssertNil(InputFormat.guess(path: "tokens"))
    }

    func testMemoryByteSourceHonoursChunkAndBufferSizes() throws {
        let source = MemoryByteSource(Array(0..<10), chunkSize: 4)
        var buffer = [UInt8](repeating: 0, count: 3)
        var read: [UInt8] = []
        while true {
            let count = try buffer.withUnsafeMutableBytes { try source.read(into: $0) }
            XCTAssertLessThanOrEqual(count, 3)
            if count == 0 { break }
            read += buffer[0..<count]
        }
        XCTAssertEqual(read, Array(0..<10))
        XCTAssertEqual(try buffer.withUnsafeMutableBytes { try source.read(into: $0) }, 0)
    }

    func testCountLines() throws {
        let cases: [(String, InputFormat?, Int)] = [
            ("", nil, 0),
            ("a", nil, 1),
            ("a\nb\n", nil, 2),
            ("a\n\n\r\nb", nil, 2),
            (" \n", nil, 1),
            (" \n\t\r\n{}\n", .ndjson, 1),
            ("h\n", .csv, 0),
            ("", .csv, 0),
            ("h\na\nb", .csv, 2),
            ("h\n\"a\nb\",\"c\"\"\n\"\nd\n\n", .csv, 2),
            (String(repeating: "0123456789abcdef,", count: 9) + "\n" + String(repeating: "x", count: 100), nil, 2),
        ]
        for (text, format, expected) in cases {
            for chunkSize in [1, 5, 65536] {
                XCTAssertEqual(try countLines(source: MemoryByteSource(bytes(text), chunkSize: chunkSize), format: format),
                               expected, "\(text.debugDescription) \(String(describing: format)) chunk \(chunkSize)")
            }
        }
        // Beyond one 256 KiB read.
        let many = String(repeating: "{\"token\":\"0123456789abcdef0123456789\"}\n", count: 20_000)
        XCTAssertEqual(try countLines(source: MemoryByteSource(bytes(many)), format: .ndjson), 20_000)
        XCTAssertEqual(try countLines(source: MemoryByteSource(bytes("t\n" + many.replacingOccurrences(of: "\"", with: ""))), format: .csv), 20_000)
    }

    func testUTF8Validator() {
        let valid = ["", "ascii only, longer than eight bytes", "é", "中文字", "𝄞🎉", "\u{7F}\u{80}\u{7FF}\u{800}\u{FFFF}\u{10000}\u{10FFFF}"]
        for text in valid {
            let data = bytes(text)
            XCTAssertNil(data.withUnsafeBufferPointer { firstInvalidUTF8($0.baseAddress!, count: $0.count) }, text)
        }
        let invalid: [([UInt8], Int)] = [
            ([0x41, 0x80], 1), ([0xC1, 0xBF], 0), ([0xE0, 0x9F, 0xBF], 0), ([0xED, 0xBF, 0xBF], 0),
            ([0xF0, 0x8F, 0xBF, 0xBF], 0), ([0xF4, 0x90, 0x80, 0x80], 0), ([0xF5, 0x80, 0x80, 0x80], 0),
            (bytes("12345678") + [0xE4, 0xB8], 8), (bytes("abc") + [0xF0, 0x9F, 0x8E], 3),
        ]
        for (data, at) in invalid {
            XCTAssertEqual(data.withUnsafeBufferPointer { firstInvalidUTF8($0.baseAddress!, count: $0.count) }, at, "\(data)")
        }
    }

    func testByteSearch() {
        let data = bytes("0123456789abcdef\nxyz\n")
        data.withUnsafeBufferPointer { p in
            let base = p.baseAddress!
            XCTAssertEqual(firstIndex(of: 0x0A, in: base, from: 0, to: data.count), 16)
            XCTAssertEqual(firstIndex(of: 0x0A, in: base, from: 17, to: data.count), 20)
            XCTAssertNil(firstIndex(of: 0x0A, in: base, from: 17, to: 20))
            XCTAssertEqual(firstIndex(of: UInt8(ascii: "0"), in: base, from: 0, to: data.count), 0)
            XCTAssertNil(firstIndex(of: UInt8(ascii: "~"), in: base, from: 0, to: data.count))
            for from in 0...data.count {
                let expected = data[from...].firstIndex(of: UInt8(ascii: "z"))
                XCTAssertEqual(firstIndex(of: UInt8(ascii: "z"), in: base, from: from, to: data.count), expected)
            }
        }
        var random = SeededGenerator(state: 3)
        let alphabet: [UInt8] = [0x00, 0x0A, 0x1F, 0x20, 0x22, 0x2C, 0x5C, 0x41, 0x80, 0xFF, 0xE4]
        for _ in 0..<500 {
            let data = (0..<Int.random(in: 0...40, using: &random)).map { _ in alphabet.randomElement(using: &random)! }
            data.withUnsafeBufferPointer { p in
                guard let base = p.baseAddress else { return }
                for from in 0...data.count {
                    let special = data[from...].firstIndex { $0 == 0x22 || $0 == 0x5C || $0 < 0x20 } ?? data.count
                    XCTAssertEqual(firstJSONStringSpecial(in: base, from: from, to: data.count), special)
                    let delimiter = data[from...].firstIndex { $0 == 0x2C || $0 == 0x0A || $0 == 0x22 } ?? data.count
                    XCTAssertEqual(firstIndex(of: 0x2C, 0x0A, 0x22, in: base, from: from, to: data.count), delimiter)
                }
            }
        }
        XCTAssertTrue(bytes("plain ascii text").withUnsafeBufferPointer { isASCII($0.baseAddress!, count: $0.count) })
        XCTAssertFalse(bytes("plain ascii texté").withUnsafeBufferPointer { isASCII($0.baseAddress!, count: $0.count) })
        XCTAssertFalse(bytes("éplain ascii text").withUnsafeBufferPointer { isASCII($0.baseAddress!, count: $0.count) })
    }
}

/// A by-hand throughput measure: prints µs per row; asserts only that every row was read.
final class ReaderThroughputTests: XCTestCase {
    static let rowCount = 200_000

    func generated(_ format: InputFormat) -> [UInt8] {
        var text = format == .csv ? "token,platform,device_id,user_id,locale,first_name\n" : ""
        let names = ["Ann", "Борис", "\"Quoted, Name\"", "محمد", "王芳", "Zoë"]
        for i in 0..<Self.rowCount {
            let token = String(repeating: String(i, radix: 16), count: 64 / max(1, String(i, radix: 16).count) + 1).prefix(64)
            let name = names[i % names.count]
            if format == .csv {
                text += "\(token),\(i % 3 == 0 ? "android" : "ios"),dev-\(i),\(i * 7),en_US,\(name)\n"
            } else {
                let escaped = name.replacingOccurrences(of: "\"", with: "\\\"")
                text += "{\"token\":\"\(token)\",\"platform\":\"\(i % 3 == 0 ? "android" : "ios")\",\"device_id\":\"dev-\(i)\",\"user_id\":\(i * 7),\"locale\":\"en_US\",\"first_name\":\"\(escaped)\"}\n"
            }
        }
        return bytes(text)
    }

    func measure(_ format: InputFormat) throws {
        let input = generated(format)
        let start = ContinuousClock.now
        let reader = try TokenFileReader(source: MemoryByteSource(input, chunkSize: 1 << 20), format: format, fileName: "bench")
        var rows = 0
        var bytesSeen = 0
        while let record = try reader.next() {
            guard case .row(let view) = record else { return XCTFail("unexpected \(record)") }
            rows += 1
            bytesSeen &+= view.field(0)!.count &+ (view.field(5)?.count ?? 0)
        }
        let elapsed = ContinuousClock.now - start
        let countStart = ContinuousClock.now
        let counted = try countLines(source: MemoryByteSource(input, chunkSize: 1 << 20), format: format)
        let countElapsed = ContinuousClock.now - countStart
        XCTAssertEqual(rows, Self.rowCount)
        XCTAssertEqual(counted, Self.rowCount)
        XCTAssertGreaterThan(bytesSeen, 0)
        let microseconds = Double(elapsed.components.attoseconds) / 1e12 + Double(elapsed.components.seconds) * 1e6
        let countMicroseconds = Double(countElapsed.components.attoseconds) / 1e12 + Double(countElapsed.components.seconds) * 1e6
        print(String(format: "%@: %.3f µs/row over %d rows (%.1f MB/s); countLines %.3f µs/row",
                     format.rawValue, microseconds / Double(rows), rows,
                     Double(input.count) / microseconds, countMicroseconds / Double(rows)))
    }

    func testCSVThroughput() throws { try measure(.csv) }
    func testNDJSONThroughput() throws { try measure(.ndjson) }
}
