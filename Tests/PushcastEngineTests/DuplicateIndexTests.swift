@testable import PushcastEngine
import XCTest

final class DuplicateIndexTests: XCTestCase {
    private func insert(_ index: DuplicateIndex, _ token: String, row: Int) -> Int? {
        var copy = token
        return copy.withUTF8 { index.insert(UnsafeRawBufferPointer($0), row: row) }
    }

    func testFirstSightingThenTheFirstRowForEveryRepeat() {
        let index = DuplicateIndex(expected: 10)
        XCTAssertNil(insert(index, "aa", row: 1))
        XCTAssertNil(insert(index, "bb", row: 2))
        XCTAssertEqual(insert(index, "aa", row: 3), 1)
        XCTAssertEqual(insert(index, "aa", row: 9), 1)
        XCTAssertEqual(insert(index, "bb", row: 4), 2)
        XCTAssertEqual(index.count, 2)
    }

    func testGrowsPastItsPlanWithoutLosingAnything() {
        let index = DuplicateIndex(expected: 1)
        let start = index.capacity
        for i in 0..<50_000 { XCTAssertNil(insert(index, "token-\(i)", row: i + 1)) }
        XCTAssertGreaterThan(index.capacity, start)
        for i in stride(from: 0, to: 50_000, by: 97) { XCTAssertEqual(insert(index, "token-\(i)", row: 999_999), i + 1) }
        XCTAssertEqual(index.count, 50_000)
    }

    func testSizedFromTheLineCountItDoesNotRehash() {
        let index = DuplicateIndex(expected: 1_000_000)
        XCTAssertGreaterThanOrEqual(index.capacity * 3, 1_000_000 * 4)
        XCTAssertLessThanOrEqual(index.capacity, 4 * 1_048_576)
    }
}

final class SyntheticTokenSourceTests: XCTestCase {
    func testProducesDistinctValidTokensInAnyChunking() throws {
        var all: [UInt8] = []
        let source = SyntheticTokenSource(count: 5000)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1000, alignment: 1)
        defer { buffer.deallocate() }
        while true {
            let n = try source.read(into: buffer)
            if n == 0 { break }
            all += buffer[0..<n]
        }
        let lines = String(decoding: all, as: UTF8.self).split(separator: "\n")
        XCTAssertEqual(lines.first, "token")
        let tokens = lines.dropFirst()
        XCTAssertEqual(tokens.count, 5000)
        XCTAssertEqual(Set(tokens).count, 5000)
        for token in tokens.prefix(100) {
            XCTAssertEqual(token.count, 64)
            XCTAssertTrue("0123".contains(token.first!))
        }
    }
}
