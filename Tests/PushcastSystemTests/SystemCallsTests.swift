import Foundation
import Glibc
import PushcastCore
import PushcastSystem
import XCTest

/// The file-system, environment and clock calls the CLI and the engine take from PushcastSystem
/// answer as Foundation's did where they replace it.
final class SystemCallsTests: XCTestCase {
    private func temporaryPath(_ name: String) -> String {
        NSTemporaryDirectory() + "pushcast-system-\(UUID().uuidString)-\(name)"
    }

    func testRenameRemoveAndQueries() throws {
        let from = temporaryPath("from"), to = temporaryPath("to")
        try FileSystem.write("one", to: from)
        XCTAssertTrue(FileSystem.exists(from))
        XCTAssertFalse(FileSystem.isDirectory(from))
        XCTAssertTrue(FileSystem.isDirectory(NSTemporaryDirectory()))
        XCTAssertEqual(FileSystem.isWritable(NSTemporaryDirectory()), FileManager.default.isWritableFile(atPath: NSTemporaryDirectory()))
        let modified = try XCTUnwrap(FileSystem.modificationSeconds(from))
        let expected = try XCTUnwrap(FileManager.default.attributesOfItem(atPath: from)[.modificationDate] as? Date)
        XCTAssertEqual(modified, expected.timeIntervalSince1970, accuracy: 1e-6)
        try FileSystem.rename(from, to: to)
        XCTAssertFalse(FileSystem.exists(from))
        XCTAssertEqual(try readWholeFile(to).map { String(decoding: $0, as: UTF8.self) }, "one")
        XCTAssertThrowsError(try FileSystem.rename(from, to: to)) { error in
            XCTAssertEqual("\(error)", String(cString: strerror(ENOENT)))
        }
        FileSystem.removeFile(to)
        XCTAssertFalse(FileSystem.exists(to))
        XCTAssertEqual(FileSystem.linkTarget("/proc/self/exe"), try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
        XCTAssertNil(FileSystem.linkTarget(NSTemporaryDirectory()))
    }

    func testEnvironmentAsProcessInfoSeesIt() {
        XCTAssertEqual(Environment.all, ProcessInfo.processInfo.environment)
        XCTAssertEqual(Environment.value("PATH"), ProcessInfo.processInfo.environment["PATH"])
        XCTAssertNil(Environment.value("PUSHCAST_SURELY_NOT_SET_\(UUID().uuidString.prefix(8))"))
        XCTAssertEqual(Environment.temporaryDirectory, NSTemporaryDirectory())
    }

    func testSystemFilesStoreAndReadBack() throws {
        let files: any FileStorage = SystemFiles()
        let path = temporaryPath("stored")
        defer { FileSystem.removeFile(path) }
        let out = try files.createForAppending(path)
        try out.append("line 1\n")
        try out.append([UInt8]("line 2\n".utf8))
        try out.flush()
        XCTAssertEqual(files.size(path), 14)
        XCTAssertTrue(files.exists(path))
        var buffer = [UInt8](repeating: 0, count: 64)
        let input = try files.openForReading(path)
        XCTAssertEqual(try input.read(into: &buffer), 14)
        XCTAssertEqual(String(decoding: buffer[0..<14], as: UTF8.self), "line 1\nline 2\n")
        try files.truncate(path, to: 7)
        XCTAssertEqual(try files.readWholeFile(path), Array("line 1\n".utf8))
        XCTAssertNil(try files.readWholeFile(path + ".absent"))
        let scratch = try files.makeScratch(in: NSTemporaryDirectory())
        try [UInt8](1...8).withUnsafeBytes { try scratch.append($0) }
        var back = [UInt8](repeating: 0, count: 4)
        XCTAssertEqual(try back.withUnsafeMutableBytes { try scratch.read(at: 4, into: $0) }, 4)
        XCTAssertEqual(back, [5, 6, 7, 8])
    }

    func testClocksMove() {
        let clock = SystemClock.Monotonic()
        let first = clock.nowNanoseconds()
        SystemClock.sleep(nanoseconds: 1_000_000)
        XCTAssertGreaterThanOrEqual(clock.nowNanoseconds() - first, 1_000_000)
        XCTAssertEqual(Machine.real.wallClockSeconds(), Date().timeIntervalSince1970, accuracy: 5)
    }
}
