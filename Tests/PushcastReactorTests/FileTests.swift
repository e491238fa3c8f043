import Foundation
@testable import PushcastReactor
import XCTest

final class FileTests: XCTestCase {
    private func temporaryPath(_ name: String) -> String {
        NSTemporaryDirectory() + "pushcast-file-\(UUID().uuidString)-\(name)"
    }

    func testOutputFileIsPrivateAndKeepsEveryByteAcrossBufferBoundaries() throws {
        let path = temporaryPath("out")
        // A pre-existing, world-readable file must come out 0600 and truncated.
        FileManager.default.createFile(atPath: path, contents: Data("old contents".utf8), attributes: [.posixPermissions: 0o644])
        var expected = [UInt8]()
        do {
            let file = try OutputFile(path: path, bufferBytes: 4096)
            for i in 0..<2000 {
                let line = "line \(i) " + String(repeating: "x", count: i % 50) + "\n"
                try file.append(line)
                expected += Array(line.utf8)
            }
            let big = [UInt8](repeating: 0x41, count: 10_000)  // larger than the buffer
            try file.append(big)
            expected += big
            try file.flush()
        }
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        XCTAssertEqual((attributes[.posixPermissions] as? NSNumber)?.intValue, 0o600)
        XCTAssertEqual(Array(try Data(contentsOf: URL(fileURLWithPath: path))), expected)
    }

    func testOutputFileInAMissingDirectoryNamesThePath() {
        let path = "/nonexistent-dir-\(UUID().uuidString)/results.ndjson"
        XCTAssertThrowsError(try OutputFile(path: path)) { error in
            XCTAssertTrue("\(error)".contains(path), "\(error)")
        }
    }

    func testInputFileReadsToEndInChunks() throws {
        let path = temporaryPath("in")
        let content = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        FileManager.default.createFile(atPath: path, contents: Data(content))
        let file = try InputFile(path: path)
        XCTAssertTrue(file.isRegularFile)
        var read = [UInt8]()
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 4096, alignment: 1)
        defer { buffer.deallocate() }
        while true {
            let n = try file.read(into: buffer)
            if n == 0 { break }
            read += buffer[0..<n]
        }
        XCTAssertEqual(read, content)
        XCTAssertThrowsError(try InputFile(path: path + ".missing")) { error in
            XCTAssertTrue("\(error)".contains("No such file"), "\(error)")
        }
    }
}
