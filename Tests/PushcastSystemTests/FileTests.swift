import Foundation
import Glibc
import PushcastCore
@testable import PushcastSystem
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

    /// Pages of `path` in the page cache now (mincore over a read-only mapping).
    private func residentPages(_ path: String) throws -> Int {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { throw CocoaError(.fileNoSuchFile) }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, st.st_size > 0 else { return 0 }
        let size = Int(st.st_size)
        guard let map = mmap(nil, size, PROT_READ, MAP_SHARED, fd, 0), map != MAP_FAILED else { throw CocoaError(.fileReadUnknown) }
        defer { munmap(map, size) }
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        var vector = [UInt8](repeating: 0, count: (size + page - 1) / page)
        guard mincore(map, size, &vector) == 0 else { throw CocoaError(.fileReadUnknown) }
        return vector.reduce(0) { $0 + Int($1 & 1) }
    }

    /// The type of the file system `path` is on: the mount point in /proc/mounts that is the
    /// longest prefix of the path.
    private func fileSystemType(of path: String) throws -> String {
        var best = (point: "", type: "")
        for line in try String(contentsOfFile: "/proc/mounts", encoding: .utf8).split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard fields.count >= 3 else { continue }
            let point = String(fields[1])
            let prefix = point.hasSuffix("/") ? point : point + "/"
            if (path.hasPrefix(prefix) || path == point) && point.count > best.point.count { best = (point, String(fields[2])) }
        }
        return best.type
    }

    func testResultsStyleOutputFileGivesSyncedPagesBackAndKeepsEveryByte() throws {
        // A file system with a page cache: the temporary directory, or else the working directory
        // (tmpfs pages are the files themselves and are never dropped).
        var directory = NSTemporaryDirectory()
        if try fileSystemType(of: directory) == "tmpfs" { directory = FileManager.default.currentDirectoryPath + "/" }
        if try fileSystemType(of: directory) == "tmpfs" {
            throw XCTSkip("both the temporary and the working directory are tmpfs: no page cache to give back")
        }
        let dropped = directory + "pushcast-file-\(UUID().uuidString)-dropped"
        let kept = directory + "pushcast-file-\(UUID().uuidString)-kept"
        let chunk = (0..<65_536).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) }
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        var expected = [UInt8]()
        do {
            let droppingFile = try OutputFile(path: dropped, bufferBytes: 256 * 1024, dropsSyncedPages: true)
            let keepingFile = try OutputFile(path: kept, bufferBytes: 256 * 1024)
            for round in 0..<3 {
                // 2 MiB and a ragged tail a round: the drop must also cover the page the
                // previous round's range ended in.
                for _ in 0..<32 {
                    try droppingFile.append(chunk)
                    try keepingFile.append(chunk)
                    expected += chunk
                }
                let tail = [UInt8](repeating: UInt8(0x41 + round), count: 1000 + round)
                try droppingFile.append(tail)
                try keepingFile.append(tail)
                expected += tail
                try droppingFile.flush()
                try keepingFile.flush()
                try droppingFile.sync()
                try keepingFile.sync()
                // The control: without the flag, the written pages stay cached.
                XCTAssertGreaterThan(try residentPages(kept), expected.count / page - 16, "round \(round)")
                // With it, at most the last, partial page is left.
                XCTAssertLessThanOrEqual(try residentPages(dropped), 1, "round \(round)")
            }
        }
        XCTAssertEqual(Array(try Data(contentsOf: URL(fileURLWithPath: dropped))), expected)
        XCTAssertEqual(Array(try Data(contentsOf: URL(fileURLWithPath: kept))), expected)
        try? FileManager.default.removeItem(atPath: dropped)
        try? FileManager.default.removeItem(atPath: kept)
    }

    /// A sync with nothing handed to the kernel since the last one is skipped; the first sync,
    /// new bytes (buffered ones once flushed) and a truncation each make the next one real.
    func testSyncReachesTheDiskOnlyForWhatIsNew() throws {
        let path = NSTemporaryDirectory() + "pushcast-sync-\(UUID().uuidString).csv"
        defer { try? FileManager.default.removeItem(atPath: path) }
        let file = try OutputFile(path: path, bufferBytes: 4096)
        try file.sync()
        XCTAssertEqual(file.syncCount, 1, "the first sync makes the new file durable")
        try file.sync()
        XCTAssertEqual(file.syncCount, 1)
        try file.append("token,reason\n")
        try file.sync()
        XCTAssertEqual(file.syncCount, 1, "buffered bytes are not in the file yet")
        try file.flush()
        try file.sync()
        try file.sync()
        XCTAssertEqual(file.syncCount, 2)
        XCTAssertTrue(file.reserve(headroom: 1 << 16, step: 1 << 16))
        file.releaseReservation()
        try file.sync()
        XCTAssertEqual(file.syncCount, 3, "a truncation changes the file")
        XCTAssertEqual(try String(contentsOfFile: path, encoding: .utf8), "token,reason\n")
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
