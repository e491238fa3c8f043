import Foundation
import XCTest

/// Runs the built `pushcast` binary the way a user does. `make test` builds it first.
final class BinaryTests: XCTestCase {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static var binary: String {
        if let explicit = ProcessInfo.processInfo.environment["PUSHCAST_BINARY"] { return explicit }
        for configuration in ["debug", "release"] {
            let path = root.appendingPathComponent(".build/\(configuration)/pushcast").path
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        return root.appendingPathComponent(".build/debug/pushcast").path
    }

    /// Fails the calling test at once, with the fix, when the binary under test is not built.
    static func requireBinary() throws {
        guard FileManager.default.isExecutableFile(atPath: binary) else {
            XCTFail("the pushcast binary is not built at \(binary): run `swift build` (make test does)")
            throw CocoaError(.fileNoSuchFile)
        }
    }

    typealias Run = PushcastRun

    @discardableResult
    func run(_ arguments: [String], seconds: Double = 120) throws -> Run {
        try runPushcast(arguments, seconds: seconds)
    }

    override func setUpWithError() throws {
        guard FileManager.default.isExecutableFile(atPath: Self.binary) else {
            XCTFail("the pushcast binary is not built at \(Self.binary): run `swift build` (make test does)")
            throw CocoaError(.fileNoSuchFile)
        }
    }

    func testHelpListsCommandsAndExitsZero() throws {
        let r = try run(["--help"])
        XCTAssertEqual(r.status, 0)
        for command in ["mock", "bench", "demo"] { XCTAssertTrue(r.stdout.contains(command), r.stdout) }
        let bench = try run(["bench", "--help"])
        XCTAssertEqual(bench.status, 0)
        for option in ["--endpoint", "--connections", "--streams", "--ca-file", "--io", "--json"] {
            XCTAssertTrue(bench.stdout.contains(option), "bench --help lacks \(option)")
        }
        let mock = try run(["mock", "--help"])
        XCTAssertEqual(mock.status, 0)
        for option in ["--port", "--workers", "--write-ca", "--cert", "--key", "--max-streams", "--goaway-after"] {
            XCTAssertTrue(mock.stdout.contains(option), "mock --help lacks \(option)")
        }
    }

    func testBadOptionsExitTwoWithUsage() throws {
        let unknown = try run(["bench", "--conections", "4"])
        XCTAssertEqual(unknown.status, 2)
        XCTAssertTrue(unknown.stderr.contains("--connections"), unknown.stderr)
        XCTAssertTrue(unknown.stderr.contains("usage:"), unknown.stderr)
        let badNumber = try run(["bench", "-c", "many"])
        XCTAssertEqual(badNumber.status, 2)
        XCTAssertTrue(badNumber.stderr.contains("many"), badNumber.stderr)
        // No command at all prints the --help overview.
        let noCommand = try run([])
        XCTAssertEqual(noCommand.status, 0)
        XCTAssertEqual(noCommand.stdout, try run(["--help"]).stdout)
        let badEndpoint = try run(["bench", "--endpoint", "http://127.0.0.1:1"])
        XCTAssertEqual(badEndpoint.status, 2)
        XCTAssertTrue(badEndpoint.stderr.contains("https://"), badEndpoint.stderr)
    }

    func testMockAndBenchTalkOverRealTLS() throws {
        let directory = NSTemporaryDirectory() + "pushcast-e2e-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let caFile = directory + "/ca.pem"
        let mock = Process()
        mock.executableURL = URL(fileURLWithPath: Self.binary)
        mock.arguments = ["mock", "--port", "0", "--workers", "1", "--write-ca", caFile, "--duration", "60s", "--auth", "none"]
        let out = Pipe()
        mock.standardOutput = out
        mock.standardError = FileHandle.nullDevice
        try mock.run()
        defer { if mock.isRunning { mock.interrupt() }; mock.waitUntilExit() }
        // The first stdout line is PORT=N.
        var line = Data()
        while !line.contains(UInt8(ascii: "\n")) {
            let chunk = out.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            line.append(chunk)
        }
        let first = String(decoding: line, as: UTF8.self).split(separator: "\n").first.map(String.init) ?? ""
        XCTAssertTrue(first.hasPrefix("PORT="), first)
        let port = try XCTUnwrap(Int(first.dropFirst(5)))

        let bench = try run(["bench", "--endpoint", "https://127.0.0.1:\(port)", "--ca-file", caFile,
                             "-n", "5000", "-c", "2", "-m", "50", "--json"])
        XCTAssertEqual(bench.status, 0, bench.stderr)
        XCTAssertTrue(bench.stdout.contains("\"succeeded\":5000"), bench.stdout)
        XCTAssertTrue(bench.stdout.contains("\"failed\":0"), bench.stdout)

        // Without --ca-file the mock's throw-away CA is not trusted: exit 2 and a clear message.
        let untrusted = try run(["bench", "--endpoint", "https://127.0.0.1:\(port)", "-n", "10"])
        XCTAssertEqual(untrusted.status, 2)
        XCTAssertTrue(untrusted.stderr.contains("verif"), untrusted.stderr)

        mock.interrupt()
        mock.waitUntilExit()
        XCTAssertEqual(mock.terminationStatus, 0)
        let stats = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        XCTAssertTrue(stats.contains("\"requests\":5000"), stats)
    }

    func testBenchWithoutEndpointStartsTheEmbeddedMock() throws {
        let r = try run(["bench", "-n", "3000", "-c", "2", "-m", "20", "--io", "epoll"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.stdout.contains("requests: 3000 total, 3000 succeeded, 0 failed"), r.stdout)
        XCTAssertTrue(r.stdout.contains("io: epoll"), r.stdout)
    }
}

/// What one run of the binary did.
struct PushcastRun {
    var status: Int32
    var stdout: String
    var stderr: String
}

final class DataBox: @unchecked Sendable { var data = Data() }

/// Runs the pushcast binary to completion (killed after `seconds`), reading both pipes while it
/// runs so a full pipe never blocks it.
func runPushcast(_ arguments: [String], seconds: Double = 120) throws -> PushcastRun {
    try runProgram(BinaryTests.binary, arguments, seconds: seconds)
}

/// Runs any program the same way; `environment` replaces the inherited one when given.
func runProgram(_ executable: String, _ arguments: [String], environment: [String: String]? = nil,
                seconds: Double = 120) throws -> PushcastRun {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    if let environment { process.environment = environment }
    let out = Pipe(), err = Pipe()
    process.standardOutput = out
    process.standardError = err
    process.standardInput = FileHandle.nullDevice
    try process.run()
    let outData = DataBox(), errData = DataBox()
    let group = DispatchGroup()
    for (pipe, box) in [(out, outData), (err, errData)] {
        group.enter()
        DispatchQueue.global().async {
            box.data = pipe.fileHandleForReading.readDataToEndOfFile()
            group.leave()
        }
    }
    let deadline = Date().addingTimeInterval(seconds)
    while process.isRunning && Date() < deadline { usleep(20_000) }
    if process.isRunning {
        process.terminate()
        XCTFail("\(URL(fileURLWithPath: executable).lastPathComponent) \(arguments) ran past \(seconds)s")
    }
    process.waitUntilExit()
    group.wait()
    return PushcastRun(status: process.terminationStatus, stdout: String(decoding: outData.data, as: UTF8.self),
                       stderr: String(decoding: errData.data, as: UTF8.self))
}

/// Runs the pushcast binary once per argument list, all at once (shards of one campaign), and
/// returns each run in order.
func runPushcastConcurrently(_ argumentLists: [[String]], seconds: Double = 120) throws -> [PushcastRun] {
    final class Runs: @unchecked Sendable {
        let lock = NSLock()
        var runs: [Int: PushcastRun] = [:]
        var failure: Error?
    }
    let collected = Runs()
    let group = DispatchGroup()
    for (index, arguments) in argumentLists.enumerated() {
        group.enter()
        Thread.detachNewThread {
            defer { group.leave() }
            do {
                let run = try runPushcast(arguments, seconds: seconds)
                collected.lock.withLock { collected.runs[index] = run }
            } catch {
                collected.lock.withLock { collected.failure = error }
            }
        }
    }
    group.wait()
    if let failure = collected.failure { throw failure }
    return argumentLists.indices.map { collected.runs[$0]! }
}
