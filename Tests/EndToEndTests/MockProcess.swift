import Foundation
import XCTest

/// A running `pushcast mock` child for end-to-end tests: starts it, reads the `KEY=VALUE` lines it
/// prints on stdout (PORT, APNS_KEY…, FCM_ENDPOINT…), stops it and reads its exit counters and
/// its NDJSON request log.
final class MockProcess {
    let process = Process()
    private(set) var fields: [String: String] = [:]
    let caFile: String
    let logPath: String
    private let out: Pipe

    /// Starts `pushcast mock` with `arguments` (plus --write-ca and, unless `log` is false, --log
    /// into `directory`) and reads stdout until every key in `waitFor` has been printed.
    /// `launcher` runs the binary through another program (its path and arguments, the binary's
    /// path and arguments appended), e.g. into a network namespace of its own (InteropClientTests).
    init(directory: String, arguments: [String], waitFor: [String], log: Bool = true, launcher: [String] = []) throws {
        caFile = directory + "/ca.pem"
        logPath = directory + "/mock.log"
        let command = launcher + [BinaryTests.binary, "mock", "--write-ca", caFile] + (log ? ["--log", logPath] : []) + arguments
        process.executableURL = URL(fileURLWithPath: command[0])
        process.arguments = Array(command.dropFirst())
        out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        var text = ""
        while !waitFor.allSatisfy({ key in text.contains(key + "=") }) || !text.hasSuffix("\n") {
            let chunk = out.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            text += String(decoding: chunk, as: UTF8.self)
        }
        for line in text.split(separator: "\n") {
            for pair in line.split(separator: " ") {
                let kv = pair.split(separator: "=", maxSplits: 1).map(String.init)
                if kv.count == 2 { fields[kv[0]] = kv[1] }
            }
        }
        guard waitFor.allSatisfy({ fields[$0] != nil }) else {
            throw CocoaError(.fileReadCorruptFile, userInfo: [NSLocalizedDescriptionKey: "mock said: \(text)"])
        }
    }

    var port: Int { Int(fields["PORT"] ?? "") ?? 0 }

    /// Stops the mock and returns its final counters (the JSON it prints on exit).
    func stop() -> [String: Any] {
        if process.isRunning { process.interrupt() }
        process.waitUntilExit()
        let rest = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let json = rest.split(separator: "\n").last.map(String.init) ?? "{}"
        return (try? JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any]) ?? [:]
    }

    /// The request log, one object per request.
    var log: [[String: Any]] {
        let text = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }
}

/// A results file (NDJSON) by row; a row with two lines fails the calling test. `tornTail`: the
/// file may end in a line without its newline, which is left out, as a resume drops it (a SIGKILL
/// can cut a write short: the kernel stops copying once a fatal signal is pending).
func resultsByRow(_ path: String, tornTail: Bool = false) throws -> [Int: [String: Any]] {
    var text = try String(contentsOfFile: path, encoding: .utf8)
    if tornTail, !text.isEmpty, !text.hasSuffix("\n") { text = String(text[..<(text.lastIndex(of: "\n").map { text.index(after: $0) } ?? text.startIndex)]) }
    var byRow: [Int: [String: Any]] = [:]
    for line in text.split(separator: "\n") {
        let object = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        let row = try XCTUnwrap(object["row"] as? Int)
        XCTAssertNil(byRow[row], "row \(row) has two lines")
        byRow[row] = object
    }
    return byRow
}
