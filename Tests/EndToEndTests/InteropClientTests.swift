import Foundation
import XCTest

/// The interop suite: clients nobody here wrote drive `pushcast mock` (Tests/Interop has the
/// drivers), each with a few thousand notifications, one in ten of them to each of the mock's
/// prefix outcomes (dead, bad0, 5030, 4290). What each client reports is checked, notification by
/// notification, against the mock's request log, with the mock's checks on (provider-token JWT,
/// OAuth2 bearer, headers).
///
/// The Python clients are unmodified and cannot be given another host or port: each runs in a
/// network namespace of its own (unshare, nsenter) where the mock listens on 127.0.0.1:443 and a
/// bind-mounted /etc/hosts names 127.0.0.1 for Apple's and Google's hosts; SSL_CERT_FILE is the
/// mock's CA. Nothing outside the namespace changes. curl uses its own --connect-to.
final class InteropClientTests: XCTestCase {
    static let count = 2000
    static let drivers = BinaryTests.root.appendingPathComponent("Tests/Interop").path
    static let hostNames = "localhost api.push.apple.com api.sandbox.push.apple.com api.development.push.apple.com "
        + "fcm.googleapis.com oauth2.googleapis.com"

    /// The drivers' environment: nothing of the caller's but PATH; no bytecode written into Tests/.
    static let environment = ["PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin", "PYTHONPATH": drivers,
                              "PYTHONDONTWRITEBYTECODE": "1", "HOME": NSTemporaryDirectory()]

    override func setUpWithError() throws { try BinaryTests.requireBinary() }

    private func directory() throws -> String {
        let path = NSTemporaryDirectory() + "pushcast-interop-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    /// `pushcast mock` in new network and mount namespaces: loopback up, /etc/hosts replaced.
    private func namespacedMock(_ directory: String, _ arguments: [String], waitFor: [String]) throws -> MockProcess {
        let hosts = directory + "/hosts"
        try "127.0.0.1 \(Self.hostNames)\n::1 ip6-localhost\n".write(toFile: hosts, atomically: true, encoding: .utf8)
        let script = #"ip link set lo up && mount --bind "$0" /etc/hosts && exec "$@""#
        do {
            return try MockProcess(directory: directory, arguments: ["--host", "127.0.0.1"] + arguments, waitFor: waitFor,
                                   launcher: ["/usr/bin/unshare", "--net", "--mount", "--", "/bin/sh", "-c", script, hosts])
        } catch {
            XCTFail("cannot start the mock in a network namespace (needs root or user namespaces, util-linux and iproute2: make deps): \(error)")
            throw error
        }
    }

    /// Runs a driver (Python, from .venv) inside the mock's namespaces.
    private func drive(_ mock: MockProcess, _ script: String, _ arguments: [String]) throws -> PushcastRun {
        let python = try DeployTests.venvPython()
        let environment = Self.environment.merging(["SSL_CERT_FILE": mock.caFile, "REQUESTS_CA_BUNDLE": mock.caFile]) { $1 }
        let run = try runProgram("/usr/bin/nsenter", ["--target", "\(mock.process.processIdentifier)", "--net", "--mount", "--",
                                                      python, Self.drivers + "/" + script] + arguments,
                                 environment: environment, seconds: 300)
        print(run.stdout)
        XCTAssertEqual(run.status, 0, "\(script): \(run.stdout) \(run.stderr.suffix(3000))")
        return run
    }

    /// What the client reported and what the mock logged agree, notification by notification,
    /// and match the prefix outcomes; `expected` gives the statuses the mock logs for a token (in
    /// order: a client that retries a 503 shows two) and the reason the client reports, if any.
    private func compare(results path: String, with mock: MockProcess, provider: String,
                         expected: (String) -> (log: [Int], reason: String?)) throws {
        let text = try String(contentsOfFile: path, encoding: .utf8)
        var client: [String: [String: Any]] = [:]
        for line in text.split(separator: "\n") {
            let object = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            let token = try XCTUnwrap(object["token"] as? String)
            XCTAssertNil(client.updateValue(object, forKey: token), "\(token) reported twice")
        }
        XCTAssertEqual(client.count, Self.count)
        var logged: [String: [[String: Any]]] = [:]
        for entry in mock.log where entry["provider"] as? String == provider {
            guard let token = entry["token"] as? String else { continue }  // the token endpoint
            logged[token, default: []].append(entry)
        }
        XCTAssertEqual(Set(logged.keys), Set(client.keys), "the mock saw exactly the client's notifications")
        var mismatches: [String] = []
        for (token, reported) in client {
            let (statuses, reason) = expected(token)
            let lines = logged[token] ?? []
            let seen = reported["status"] as? Int
            if lines.map({ $0["status"] as? Int ?? 0 }) != statuses || seen != statuses.last {
                mismatches.append("\(token): client \(seen.map(String.init) ?? "-"), mock \(lines.map { $0["status"] ?? "-" }), expected \(statuses)")
            } else if let reason, reported["reason"] as? String != reason {
                mismatches.append("\(token): client reason \(reported["reason"] ?? "-"), expected \(reason)")
            } else if let id = reported["id"] as? String, provider == "apns", lines.last?["apns_id"] as? String != id {
                mismatches.append("\(token): apns-id \(id) reported, \(lines.last?["apns_id"] ?? "-") logged")
            }
        }
        XCTAssertEqual(mismatches.count, 0, mismatches.prefix(10).joined(separator: "\n"))
    }

    /// APNs by prefix: one answer each (these clients do not retry), with APNs's reasons.
    static func apnsOutcome(_ token: String) -> (log: [Int], reason: String?) {
        switch token.prefix(4) {
        case "dead": return ([410], "Unregistered")
        case "bad0": return ([400], "BadDeviceToken")
        case "5030": return ([503], "ServiceUnavailable")
        case "4290": return ([429], "TooManyRequests")
        default: return ([200], nil)
        }
    }

    private func apnsArguments(_ mock: MockProcess, _ directory: String, _ name: String) -> [String] {
        ["--count", "\(Self.count)", "--out", directory + "/\(name).ndjson", "--key", mock.fields["APNS_KEY"] ?? "",
         "--key-id", mock.fields["APNS_KEY_ID"] ?? "", "--team-id", mock.fields["APNS_TEAM_ID"] ?? ""]
    }

    func testAioapnsWithTokenAuthAgainstApiPushAppleCom() throws {
        let directory = try directory()
        let mock = try namespacedMock(directory, ["--port", "443", "--write-apns-key", directory], waitFor: ["PORT", "APNS_KEY"])
        defer { _ = mock.stop() }
        _ = try drive(mock, "apns_aioapns.py", apnsArguments(mock, directory, "aioapns"))
        let statistics = mock.stop()
        try compare(results: directory + "/aioapns.ndjson", with: mock, provider: "apns", expected: Self.apnsOutcome)
        XCTAssertEqual(statistics["requests"] as? Int, Self.count, "\(statistics)")
    }

    func testHttpxWithH2AgainstApiPushAppleCom() throws {
        let directory = try directory()
        let mock = try namespacedMock(directory, ["--port", "443", "--write-apns-key", directory], waitFor: ["PORT", "APNS_KEY"])
        defer { _ = mock.stop() }
        _ = try drive(mock, "apns_httpx.py", apnsArguments(mock, directory, "httpx"))
        _ = mock.stop()
        try compare(results: directory + "/httpx.ndjson", with: mock, provider: "apns", expected: Self.apnsOutcome)
    }

    func testFirebaseAdminThroughTheOAuthTokenEndpoint() throws {
        let directory = try directory()
        let mock = try namespacedMock(directory, ["--port", "0", "--fcm", "--fcm-port", "443", "--write-fcm-credentials", directory],
                                      waitFor: ["PORT", "FCM_CREDENTIALS"])
        defer { _ = mock.stop() }
        _ = try drive(mock, "fcm_firebase_admin.py", ["--count", "\(Self.count)", "--out", directory + "/fcm.ndjson",
                                                      "--credentials", mock.fields["FCM_CREDENTIALS"] ?? ""])
        let statistics = mock.stop()
        // firebase-admin retries a 503 (its default retry policy), so a 5030 token is logged twice
        // and reported delivered; a 429 it reports.
        try compare(results: directory + "/fcm.ndjson", with: mock, provider: "fcm") { token in
            switch token.prefix(4) {
            case "dead": return ([404], "UnregisteredError:NOT_FOUND")
            case "bad0": return ([400], "InvalidArgumentError:INVALID_ARGUMENT")
            case "5030": return ([503, 200], nil)
            case "4290": return ([429], "QuotaExceededError:RESOURCE_EXHAUSTED")
            default: return ([200], nil)
            }
        }
        let fcm = try XCTUnwrap(statistics["fcm"] as? [String: Any], "\(statistics)")
        XCTAssertGreaterThanOrEqual(fcm["tokens_issued"] as? Int ?? 0, 1, "the SDK's token came from the mock: \(fcm)")
        XCTAssertEqual(fcm["delivered"] as? Int, Self.count * 7 / 10, "\(fcm)")
        let messageNames = try String(contentsOfFile: directory + "/fcm.ndjson", encoding: .utf8).components(separatedBy: "\"projects/").count - 1
        XCTAssertEqual(messageNames, Self.count * 7 / 10, "every delivered message reports its name")
    }

    func testCurlOverHTTP2WithItsConnectToOption() throws {
        let directory = try directory()
        let mock = try MockProcess(directory: directory, arguments: ["--write-apns-key", directory], waitFor: ["PORT", "APNS_KEY"])
        defer { _ = mock.stop() }
        let python = try DeployTests.venvPython()
        let run = try runProgram(python, [Self.drivers + "/apns_curl.py", "--connect-to", "api.push.apple.com:443:127.0.0.1:\(mock.port)",
                                          "--cacert", mock.caFile, "--config", directory + "/curl.config"] + apnsArguments(mock, directory, "curl"),
                                 environment: Self.environment, seconds: 300)
        print(run.stdout)
        XCTAssertEqual(run.status, 0, run.stdout + run.stderr)
        _ = mock.stop()
        try compare(results: directory + "/curl.ndjson", with: mock, provider: "apns") { (Self.apnsOutcome($0).log, nil) }
    }
}
