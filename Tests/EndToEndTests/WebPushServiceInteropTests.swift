import Foundation
import XCTest

/// Web Push against a push service whose crypto nobody here wrote (Tests/Interop/webpush_service.py:
/// http-ece decrypts, py-vapid checks the signature). It serves two origins, one over HTTP/2 and
/// one over HTTP/1.1 only; pushcast sends 5,000 rows to them. Every delivered row must decrypt to
/// the payload rendered for it, with a VAPID token for its own origin, and every row's outcome
/// must follow the service's rule for its endpoint, one by one.
final class WebPushServiceInteropTests: XCTestCase {
    static let count = 5000
    static let script = BinaryTests.root.appendingPathComponent("Tests/Interop/webpush_service.py").path

    override func setUpWithError() throws { try BinaryTests.requireBinary() }

    func testFiveThousandRowsOverHTTP2AndHTTP1DecryptAndFollowTheServicesRules() throws {
        let directory = NSTemporaryDirectory() + "pushcast-webpush-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let python = try DeployTests.venvPython()
        let (h2Port, h1Port) = (try DatabaseServers.freePort(), try DatabaseServers.freePort())
        let h2Origin = "https://push-a.test:\(h2Port)", h1Origin = "https://push-b.test:\(h1Port)"
        let made = try runProgram(python, [Self.script, "make", "--dir", directory, "--count", "\(Self.count)",
                                           "--origin", h2Origin, "--origin", h1Origin], seconds: 300)
        XCTAssertEqual(made.status, 0, made.stderr)
        let log = directory + "/service.ndjson"
        let service = try startService(python, directory, h2: (h2Port, h2Origin), h1: (h1Port, h1Origin), log: log)
        defer { service.terminate(); service.waitUntilExit() }

        let template = #"{"title":"Hello {{name}}","row":"{{name}}"}"#
        try template.write(toFile: directory + "/payload.json", atomically: true, encoding: .utf8)
        let results = directory + "/results.ndjson"
        let run = try runPushcast(["send", directory + "/subscriptions.csv", "--webpush-payload", directory + "/payload.json",
                                   "--vapid-key", directory + "/vapid.txt", "--vapid-subject", "mailto:ops@example.com",
                                   "--ca-file", directory + "/ca.pem",
                                   "--resolve", "push-a.test:\(h2Port):127.0.0.1", "--resolve", "push-b.test:\(h1Port):127.0.0.1",
                                   "--results", results, "--prune", directory + "/prune.csv", "--quiet"], seconds: 300)
        XCTAssertEqual(run.status, 1, "413 rows fail, so the run ends 1: \(run.stderr.suffix(3000))")
        try check(results: results, log: log, template: template, origins: [h2Origin: "h2", h1Origin: "http/1.1"])
    }

    private func startService(_ python: String, _ directory: String, h2: (Int, String), h1: (Int, String), log: String) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [Self.script, "serve", "--dir", directory, "--h2-port", "\(h2.0)", "--h2-origin", h2.1,
                             "--h1-port", "\(h1.0)", "--h1-origin", h1.1, "--log", log]
        process.environment = ["PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.standardError
        try process.run()
        let ready = out.fileHandleForReading.availableData
        guard String(decoding: ready, as: UTF8.self).contains("READY") else {
            process.terminate()
            throw CocoaError(.fileReadUnknown, userInfo: [NSLocalizedDescriptionKey: "the push service did not start"])
        }
        return process
    }

    /// The outcome each kind of endpoint must end in, and the statuses the service logs for it.
    static let expected: [String: (outcome: String, statuses: [Int])] = [
        "ok": ("delivered", [201]), "gone": ("pruned", [410]), "nf": ("pruned", [404]), "big": ("failed", [413]),
        "slow": ("delivered", [429, 201]), "busy": ("delivered", [503, 201]),
    ]

    private func check(results: String, log: String, template: String, origins: [String: String]) throws {
        var byEndpoint: [String: [[String: Any]]] = [:]
        for line in try String(contentsOfFile: log, encoding: .utf8).split(separator: "\n") {
            let entry = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            byEndpoint[try XCTUnwrap(entry["endpoint"] as? String), default: []].append(entry)
        }
        var rows = 0
        var mismatches: [String] = []
        for line in try String(contentsOfFile: results, encoding: .utf8).split(separator: "\n") {
            let record = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            rows += 1
            let endpoint = try XCTUnwrap(record["token"] as? String)
            let path = endpoint.split(separator: "/", maxSplits: 3).dropFirst(2).first ?? ""
            let kind = String(path.prefix { $0.isLetter })
            guard let (outcome, statuses) = Self.expected[kind] else { mismatches.append("\(endpoint): unknown kind"); continue }
            let entries = byEndpoint[endpoint] ?? []
            var problems: [String] = []
            if record["outcome"] as? String != outcome { problems.append("outcome \(record["outcome"] ?? "nil"), expected \(outcome)") }
            if entries.map({ $0["status"] as? Int ?? 0 }) != statuses { problems.append("statuses \(entries.map { $0["status"] ?? "nil" })") }
            let name = "n\(Int(path.drop { $0.isLetter }) ?? -1)"
            let rendered = template.replacingOccurrences(of: "{{name}}", with: name)
            for entry in entries {
                if entry["payload"] as? String != rendered { problems.append("payload \(entry["payload"] ?? "nil")") }
                if let protocolName = origins.first(where: { endpoint.hasPrefix($0.key + "/") })?.value,
                   entry["protocol"] as? String != protocolName { problems.append("protocol \(entry["protocol"] ?? "nil")") }
                if entry["claims"] == nil { problems.append("no VAPID claims: \(entry["error"] ?? "")") }
            }
            if outcome == "delivered", (record["location"] as? String)?.isEmpty ?? true { problems.append("no location") }
            if !problems.isEmpty { mismatches.append("\(endpoint): " + problems.joined(separator: "; ")) }
        }
        XCTAssertEqual(rows, Self.count)
        XCTAssertEqual(byEndpoint.count, Self.count, "the service saw every endpoint")
        XCTAssertEqual(mismatches.count, 0, mismatches.prefix(10).joined(separator: "\n"))
    }
}
