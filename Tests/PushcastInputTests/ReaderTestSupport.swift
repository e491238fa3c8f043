import XCTest
@testable import PushcastInput

/// One record as the tests compare it: a row's values (padded with nil to the final column count)
/// or a malformed row's problem.
enum Got: Equatable, CustomStringConvertible {
    case row(Int, line: Int, [String?])
    case malformed(Int, InputProblem)

    var description: String {
        switch self {
        case .row(let row, let line, let values): return "row \(row) line \(line) \(values)"
        case .malformed(let row, let problem): return "malformed \(row): \(problem)"
        }
    }
}

/// The chunk sizes every case runs with: each splits the input at different boundaries.
let chunkSizes = [1, 2, 3, 7, 64, 65536]

func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

func smallBufferOptions(lineBytesMax: Int = 256) -> TokenFileReaderOptions {
    var options = TokenFileReaderOptions()
    options.bufferBytes = 64
    options.lineBytesMax = lineBytesMax
    return options
}

/// Reads everything with one chunk size and one set of options.
func readAll(_ input: [UInt8], _ format: InputFormat, chunkSize: Int, options: TokenFileReaderOptions = .init(),
             fileName: String? = nil) throws -> (columns: [String], records: [Got]) {
    let name = fileName ?? (format == .csv ? "t.csv" : "t.ndjson")
    let reader = try TokenFileReader(source: MemoryByteSource(input, chunkSize: chunkSize), format: format,
                                     fileName: name, options: options)
    var records: [Got] = []
    while let record = try reader.next() {
        switch record {
        case .row(let view):
            XCTAssertLessThanOrEqual(view.fieldCount, reader.columns.count)
            records.append(.row(view.row, line: view.line, (0..<view.fieldCount).map { view.string($0) }))
        case .malformed(let row, let problem):
            records.append(.malformed(row, problem))
        }
        XCTAssertEqual(reader.bufferCapacity, options.bufferBytes + options.lineBytesMax)
    }
    XCTAssertNil(try reader.next(), "next() after the end keeps returning nil")
    let width = reader.columns.count
    let padded = records.map { got -> Got in
        guard case .row(let row, let line, let values) = got else { return got }
        return .row(row, line: line, values + Array(repeating: nil, count: width - values.count))
    }
    return (reader.columns, padded)
}

/// Runs a case with every chunk size, with the default options and with a tiny buffer (64 bytes
/// plus the line cap, so the partial-record move runs constantly), and checks each run gives
/// `columns` and `expected`. Unless `countExact` is false, `countLines` must equal the number of
/// records.
func check(_ input: [UInt8], _ format: InputFormat, columns: [String], expected: [Got],
           options: [TokenFileReaderOptions] = [.init(), smallBufferOptions()], countExact: Bool = true,
           file: StaticString = #filePath, line: UInt = #line) throws {
    for option in options {
        for chunkSize in chunkSizes {
            let result = try readAll(input, format, chunkSize: chunkSize, options: option)
            XCTAssertEqual(result.columns, columns, "chunk \(chunkSize) buffer \(option.bufferBytes)", file: file, line: line)
            XCTAssertEqual(result.records, expected, "chunk \(chunkSize) buffer \(option.bufferBytes)", file: file, line: line)
            if result.records != expected {
                for (a, b) in zip(result.records, expected) where a != b {
                    print("got      \(a)\nexpected \(b)")
                }
                return
            }
        }
    }
    if countExact {
        for chunkSize in [1, 7, 65536] {
            let counted = try countLines(source: MemoryByteSource(input, chunkSize: chunkSize), format: format)
            XCTAssertEqual(counted, expected.count, "countLines chunk \(chunkSize)", file: file, line: line)
        }
    }
}

func problem(_ line: Int, _ message: String, file: String = "t.csv") -> InputProblem {
    InputProblem(file: file, line: line, field: nil, message: message)
}

func problem(_ line: Int, _ field: String, _ message: String, file: String = "t.csv") -> InputProblem {
    InputProblem(file: file, line: line, field: field, message: message)
}

/// A deterministic generator (SplitMix64) for generated inputs.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// A source that fails after a number of bytes.
final class FailingByteSource: ByteSource {
    struct Failure: Error, Equatable {}
    var remaining: [UInt8]
    init(_ bytes: [UInt8]) { remaining = bytes }
    func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        guard !remaining.isEmpty else { throw Failure() }
        buffer[0] = remaining.removeFirst()
        return 1
    }
}
