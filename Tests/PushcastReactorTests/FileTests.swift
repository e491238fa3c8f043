import Foundation
import PushcastCore
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

    func testSecretFileReadsWholeFilesAndPipesWithinItsBound() throws {
        let path = temporaryPath("key")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let content = (0..<10_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        FileManager.default.createFile(atPath: path, contents: Data(content))
        let secret = try SecretFile.read(path, bytesMax: content.count)
        XCTAssertEqual(secret.withUnsafeBytes { Array($0) }, content)
        XCTAssertThrowsError(try SecretFile.read(path, bytesMax: content.count - 1)) { error in
            XCTAssertEqual(error as? SecretFileError, .tooLarge(bytesMax: content.count - 1))
        }
        XCTAssertThrowsError(try SecretFile.read(path + ".missing", bytesMax: 100)) { error in
            XCTAssertEqual((error as? SecretFileError)?.verb, "open")
            XCTAssertTrue("\((error as? SecretFileError)?.reason ?? "")".contains("No such file"), "\(error)")
        }
        // A pipe has no size up front: the buffer grows, and the bound still holds.
        var fds: [Int32] = [0, 0]
        XCTAssertEqual(pipe(&fds), 0)
        let writer = FileHandle(fileDescriptor: fds[1], closeOnDealloc: true)
        writer.write(Data(content))
        try writer.close()
        let piped = try SecretFile.read("/proc/self/fd/\(fds[0])", bytesMax: 1 << 20)
        close(fds[0])
        XCTAssertEqual(piped.withUnsafeBytes { Array($0) }, content)
    }

    func testSecretBytesWipe() {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64, alignment: 1)
        defer { buffer.deallocate() }
        buffer.initializeMemory(as: UInt8.self, repeating: 0xA5)
        SecretBytes.wipe(buffer)
        XCTAssertTrue(buffer.allSatisfy { $0 == 0 })
        let secret = SecretBytes(capacity: 2)
        for byte in UInt8(1)...UInt8(9) {
            secret.spareCapacity(minimum: 1)[0] = byte
            secret.didAppend(1)
        }
        XCTAssertEqual(secret.withUnsafeBytes { Array($0) }, Array(1...9))
    }
}
