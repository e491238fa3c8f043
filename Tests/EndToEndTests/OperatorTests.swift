import Foundation
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What the people around a campaign see: stderr that suits a log file (whole lines,
/// or one JSON object per line, never a token or a secret), and the Prometheus metrics file,
/// checked by promtool at every sample and served by a real node_exporter.
final class OperatorTests: XCTestCase {
    /// A mixed iOS/Android token file, some dead tokens among them, and both templates.
    struct Campaign {
        let directory: String
        var tokens: String { directory + "/tokens.csv" }
        var payload: String { directory + "/payload.json" }
        var message: String { directory + "/message.json" }
        var results: String { directory + "/results.ndjson" }
        var tokenList: [String] = []
    }

    override func setUpWithError() throws {
        try BinaryTests.requireBinary()
    }

    static func makeCampaign(rows: Int) throws -> Campaign {
        let directory = NSTemporaryDirectory() + "pushcast-ops-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        var campaign = Campaign(directory: directory)
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
        var lines = ["device_id,token,platform"]
        for i in 0..<rows {
            let ios = i % 2 == 0
            var token = ios
                ? (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...0x3f, using: &generator)) }.joined()
                : "f" + String((0..<150).map { _ in alphabet.randomElement(using: &generator)! })
            if i % 50 == 7 { token = "dead" + token.dropFirst(4) }
            campaign.tokenList.append(token)
            lines.append("d\(i),\(token),\(ios ? "ios" : "android")")
        }
        try (lines.joined(separator: "\n") + "\n").write(toFile: campaign.tokens, atomically: true, encoding: .utf8)
        try #"{"aps":{"alert":{"title":"Hello","body":"x"}}}"#.write(toFile: campaign.payload, atomically: true, encoding: .utf8)
        try #"{"notification":{"title":"Hello"}}"#.write(toFile: campaign.message, atomically: true, encoding: .utf8)
        return campaign
    }

    /// `send` arguments for this campaign against the mock: 2 APNs connections x 100 streams, one
    /// FCM connection x 100 streams, so that the mock's latency stretches the run over seconds.
    static func sendArguments(_ campaign: Campaign, _ mock: FCMSendTests.Mock, _ extra: [String]) -> [String] {
        ["send", campaign.tokens, "--payload", campaign.payload, "--fcm-payload", campaign.message] + mock.sendFlags
            + ["--results", campaign.results, "--prune", campaign.directory + "/prune.csv", "--connections", "2", "--streams", "100",
               "--fcm-connections", "1", "--fcm-streams", "100", "--workers", "1"] + extra
    }

    /// Fails when any line of `text` holds a device token of the campaign, or a secret: the APNs
    /// key's body, the service account's private key, a JWT or an OAuth2 bearer.
    func assertNoTokenOrSecret(_ text: String, _ campaign: Campaign, _ mock: FCMSendTests.Mock, file: StaticString = #filePath, line: UInt = #line) throws {
        for token in campaign.tokenList where text.contains(token) {
            return XCTFail("stderr holds the device token \(token.prefix(8))…", file: file, line: line)
        }
        let key = try String(contentsOfFile: mock.fields["APNS_KEY"]!, encoding: .utf8)
        let account = try String(contentsOfFile: mock.fields["FCM_CREDENTIALS"]!, encoding: .utf8)
        let keyLines = key.split(separator: "\n").filter { !$0.hasPrefix("-----") && $0.count > 16 }
        XCTAssertFalse(keyLines.isEmpty)
        for secretLine in keyLines where text.contains(secretLine) { XCTFail("stderr holds the APNs key", file: file, line: line) }
        let accountKey = try XCTUnwrap((try JSONSerialization.jsonObject(with: Data(account.utf8)) as? [String: Any])?["private_key"] as? String)
        for secretLine in accountKey.split(separator: "\n") where secretLine.count > 16 && !secretLine.hasPrefix("-----") && text.contains(secretLine) {
            XCTFail("stderr holds the service account's key", file: file, line: line)
        }
        // JWTs (the APNs provider token, the OAuth2 assertion) start with a base64url JSON header.
        XCTAssertFalse(text.contains("eyJ"), "stderr holds a JWT", file: file, line: line)
        XCTAssertFalse(text.lowercased().contains("bearer "), "stderr holds a bearer token", file: file, line: line)
    }

    func testProgressOffATerminalIsWholeLinesEveryInterval() throws {
        let campaign = try Self.makeCampaign(rows: 4000)
        let mock = try FCMSendTests.Mock(directory: campaign.directory, extra: ["--latency-ms", "100"])
        defer { _ = mock.stop() }
        let run = try runPushcast(Self.sendArguments(campaign, mock, ["--progress", "--progress-interval", "300ms"]))
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertFalse(run.stderr.contains("\r"), "a carriage return in a log: \(run.stderr.debugDescription.prefix(300))")
        XCTAssertTrue(run.stderr.hasSuffix("\n"), "the last line is not whole")
        let lines = run.stderr.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
        XCTAssertFalse(lines.contains { $0.isEmpty }, "an empty line")
        let progress = lines.filter { $0.contains(" rows (") }
        // About 2 s at 2,000 rows/s with a line every 0.3 s, and one at the end.
        XCTAssertGreaterThanOrEqual(progress.count, 3, run.stderr)
        XCTAssertTrue(progress.last?.hasPrefix("4000/4000 rows (100%)") == true, String(progress.last ?? ""))
        XCTAssertTrue(run.stderr.contains("rows: 4000  delivered"), run.stderr)
        try assertNoTokenOrSecret(run.stderr, campaign, mock)
    }

    func testJSONLogsAreOneObjectPerLineWithTheSummary() throws {
        let campaign = try Self.makeCampaign(rows: 4000)
        let mock = try FCMSendTests.Mock(directory: campaign.directory, extra: ["--latency-ms", "100"])
        defer { _ = mock.stop() }
        let run = try runPushcast(Self.sendArguments(campaign, mock, ["--progress", "--progress-interval", "300ms", "--log-format", "json"]))
        XCTAssertEqual(run.status, 0, run.stderr)
        let objects = try Self.jsonLines(run.stderr)
        let progress = objects.filter { $0["event"] as? String == "progress" }
        XCTAssertGreaterThanOrEqual(progress.count, 3, run.stderr)
        XCTAssertEqual(progress.last?["rows"] as? Int, 4000)
        XCTAssertEqual(progress.last?["final"] as? Bool, true)
        let providers = try XCTUnwrap(progress.first?["providers"] as? [String: Any])
        XCTAssertEqual(Set(providers.keys), ["apns", "fcm"])
        let summaries = objects.filter { $0["event"] as? String == "summary" }
        XCTAssertEqual(summaries.count, 1)
        let summary = try XCTUnwrap(summaries.first?["summary"] as? [String: Any])
        XCTAssertEqual(summary["rows"] as? Int, 4000)
        XCTAssertEqual((summary["outcomes"] as? [String: Int])?["pruned"], 80)
        XCTAssertTrue(objects.contains { ($0["msg"] as? String)?.hasPrefix("results: ") == true })
        try assertNoTokenOrSecret(run.stderr, campaign, mock)
        // An error before anything starts is a JSON object too, at level error.
        let bad = try runPushcast(["send", campaign.tokens, "--log-format", "json", "--rate", "apns=fast"])
        XCTAssertEqual(bad.status, 2)
        let errors = try Self.jsonLines(bad.stderr)
        XCTAssertFalse(errors.isEmpty)
        XCTAssertTrue(errors.allSatisfy { $0["level"] as? String == "error" }, bad.stderr)
    }

    /// Every line of `text` parses as one JSON object with a time and a level.
    static func jsonLines(_ text: String, file: StaticString = #filePath, line: UInt = #line) throws -> [[String: Any]] {
        XCTAssertTrue(text.hasSuffix("\n"), "the last line is not whole", file: file, line: line)
        return try text.split(separator: "\n", omittingEmptySubsequences: false).dropLast().map { entry in
            let object = try XCTUnwrap(try? JSONSerialization.jsonObject(with: Data(entry.utf8)) as? [String: Any],
                                       "not a JSON object: \(entry)", file: file, line: line)
            XCTAssertNotNil(object["ts"] as? String, file: file, line: line)
            XCTAssertNotNil(object["level"] as? String, file: file, line: line)
            return object
        }
    }
}
