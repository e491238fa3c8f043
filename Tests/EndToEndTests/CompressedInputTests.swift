import Foundation
import XCTest

/// gzip and zstd exports end to end: the binary reads `tokens.csv.gz` and `tokens.csv.zst` (made
/// by the gzip and zstd tools) as it reads the plain file, row for row; a file cut short stops
/// the run before anything is sent, naming where it ends.
final class CompressedInputTests: XCTestCase {
    private var directory = ""
    static let rows = 100_000

    override func setUpWithError() throws {
        try BinaryTests.requireBinary()
        for tool in ["/usr/bin/gzip", "/usr/bin/zstd"] where !FileManager.default.isExecutableFile(atPath: tool) {
            XCTFail("\(tool) is missing: run scripts/deps.sh")
            throw CocoaError(.fileNoSuchFile)
        }
        directory = NSTemporaryDirectory() + "pushcast-compressed-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try #"{"aps":{"alert":"hi"}}"#.write(toFile: directory + "/payload.json", atomically: true, encoding: .utf8)
    }

    override func tearDown() { try? FileManager.default.removeItem(atPath: directory) }

    /// A demo-like export: distinct APNs tokens, with dead (Unregistered) and bad (BadDeviceToken)
    /// ones for the mock, invalid ones and repeats. Returns the path and the invalid rows' lines.
    private func writeExport() throws -> (path: String, invalidLines: [Int]) {
        var lines = ["device_id,token"]
        var invalid: [Int] = []
        for i in 0..<Self.rows {
            var token = String(format: "%08x", i) + String(repeating: "2", count: 56)
            switch i % 100 {
            case 1, 2: token = "dead" + token.dropFirst(4)
            case 3: token = "bad0" + token.dropFirst(4)
            case 4: token = "zz" + token.dropFirst(2); invalid.append(i + 2)
            case 5 where i > 100: token = String(format: "%08x", i - 5) + String(repeating: "2", count: 56)  // row i - 4's
            default: break
            }
            lines.append("d\(i + 1),\(token)")
        }
        let path = directory + "/tokens.csv"
        try (lines.joined(separator: "\n") + "\n").write(toFile: path, atomically: true, encoding: .utf8)
        return (path, invalid)
    }

    /// Compresses `path` with the gzip or zstd tool into `path.gz` or `path.zst`, keeping it.
    private func compress(_ tool: String, _ path: String) throws -> String {
        let output = path + (tool == "gzip" ? ".gz" : ".zst")
        let arguments = tool == "gzip" ? ["-k", "-f", path] : ["-q", "-f", path, "-o", output]
        let run = try runProgram("/usr/bin/" + tool, arguments, seconds: 120)
        XCTAssertEqual(run.status, 0, run.stderr)
        return output
    }

    private func sendArguments(_ input: String, _ mock: SendTests.Mock, results: String) -> [String] {
        ["send", input, "--payload", directory + "/payload.json", "--apns-topic", "com.example.app",
         "--apns-key", mock.keyPath, "--apns-key-id", mock.keyID, "--apns-team-id", mock.teamID,
         "--apns-endpoint", "https://127.0.0.1:\(mock.port)", "--ca-file", mock.caFile, "--campaign", "compressed",
         "--results", results, "--prune", results + ".prune.csv", "--quiet"]
    }

    /// Runs the binary, under `/usr/bin/time` when it is there so the log shows the peak memory.
    private func runMeasured(_ arguments: [String], label: String) throws -> PushcastRun {
        let time = "/usr/bin/time"
        guard FileManager.default.isExecutableFile(atPath: time) else { return try runPushcast(arguments, seconds: 600) }
        let run = try runProgram(time, ["-f", "peak %M KiB, %e s", BinaryTests.binary] + arguments, seconds: 600)
        print("\(label): \(run.stderr.split(separator: "\n").last ?? "")")
        return run
    }

    func testGzipAndZstdExportsSendExactlyAsThePlainOne() throws {
        let (plain, invalidLines) = try writeExport()
        let gzip = try compress("gzip", plain), zstd = try compress("zstd", plain)
        let mock = try SendTests.Mock(directory: directory, extra: [])
        defer { _ = mock.stop() }

        try checkTruncatedExportsStopBeforeSending(gzip: gzip, zstd: zstd, mock: mock)

        var outcomes: [String: [Int: [String: Any]]] = [:]
        for input in [plain, gzip, zstd] {
            let results = input + ".results.ndjson"
            let run = try runMeasured(sendArguments(input, mock, results: results), label: URL(fileURLWithPath: input).lastPathComponent)
            XCTAssertEqual(run.status, 0, "\(input): \(run.stderr)")
            outcomes[input] = try resultsByRow(results)
            XCTAssertEqual(outcomes[input]?.count, Self.rows, input)
        }
        let keys = ["id", "token", "provider", "outcome", "status", "reason", "apns_id", "duplicate_of"]
        var kinds: [String: Int] = [:]
        for row in 1...Self.rows {
            let expected = try XCTUnwrap(outcomes[plain]?[row])
            kinds[expected["outcome"] as? String ?? "?", default: 0] += 1
            for input in [gzip, zstd] {
                let got = try XCTUnwrap(outcomes[input]?[row], "\(input) row \(row)")
                for key in keys where "\(got[key] ?? "-")" != "\(expected[key] ?? "-")" {
                    XCTFail("\(input) row \(row) \(key): \(got[key] ?? "-") where the plain file gave \(expected[key] ?? "-")")
                }
            }
        }
        XCTAssertEqual(kinds["invalid"], invalidLines.count)
        XCTAssertGreaterThan(kinds["pruned"] ?? 0, 0)
        XCTAssertGreaterThan(kinds["duplicate"] ?? 0, 0)
        XCTAssertGreaterThan(kinds["delivered"] ?? 0, 90_000)

        try checkNamesTheRows(gzip, invalidLines: invalidLines, mock: mock)
        try checkReadsStdin(zstd, mock: mock)
    }

    /// Half a .gz (and half a .zst): exit 2, the message names the compressed offset where the
    /// file ends, nothing is sent.
    private func checkTruncatedExportsStopBeforeSending(gzip: String, zstd: String, mock: SendTests.Mock) throws {
        for (full, name) in [(gzip, "gzip"), (zstd, "zstd")] {
            let bytes = try Data(contentsOf: URL(fileURLWithPath: full))
            let cut = directory + "/cut-" + URL(fileURLWithPath: full).lastPathComponent
            try bytes.prefix(bytes.count / 2).write(to: URL(fileURLWithPath: cut))
            let results = cut + ".results.ndjson"
            let run = try runPushcast(sendArguments(cut, mock, results: results), seconds: 120)
            XCTAssertEqual(run.status, 2, "\(cut): \(run.stderr)")
            XCTAssertTrue(run.stderr.contains("\(name) stream ends early at compressed byte \(bytes.count / 2): the file is truncated"),
                          run.stderr)
        }
        XCTAssertTrue(mock.log.isEmpty, "nothing was sent")
    }

    /// `check` on the .gz names each invalid row by the file's name and line.
    private func checkNamesTheRows(_ gzip: String, invalidLines: [Int], mock: SendTests.Mock) throws {
        var arguments = sendArguments(gzip, mock, results: directory + "/unused.ndjson")
        arguments[0] = "check"
        let run = try runPushcast(arguments, seconds: 300)
        XCTAssertEqual(run.status, 0, run.stderr)
        let output = run.stdout + run.stderr
        for line in invalidLines.prefix(20) {
            XCTAssertTrue(output.contains("tokens.csv.gz:\(line): field 'token'"), "line \(line) not named:\n\(output.prefix(2000))")
        }
        XCTAssertTrue(output.contains("invalid \(invalidLines.count)"), String(output.suffix(2000)))
    }

    /// stdin goes through the same reader: a .zst piped in is read as the plain file.
    private func checkReadsStdin(_ zstd: String, mock: SendTests.Mock) throws {
        var arguments = sendArguments("-", mock, results: directory + "/unused.ndjson")
        arguments[0] = "check"
        let process = Process()
        process.executableURL = URL(fileURLWithPath: BinaryTests.binary)
        process.arguments = arguments + ["--format", "csv"]
        process.standardInput = try FileHandle(forReadingFrom: URL(fileURLWithPath: zstd))
        let out = Pipe()
        process.standardOutput = out
        process.standardError = out
        try process.run()
        let output = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0, output)
        XCTAssertTrue(output.contains("<stdin>:6: field 'token'"), String(output.prefix(2000)))
    }
}
