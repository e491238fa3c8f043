// pywebpush against `pushcast mock --webpush`: a sender nobody here wrote encrypts (http_ece) and
// signs (py_vapid) a few hundred notifications; the mock verifies and decrypts each, and its log
// agrees with the driver notification by notification: the same endpoints, the outcome of each
// endpoint's kind, and the SHA-256 of the payload it decrypted equal to that of what was sent.

import Foundation
import XCTest

final class WebPushInteropTests: XCTestCase {
    override func setUpWithError() throws { try BinaryTests.requireBinary() }

    func testPywebpushMessagesAreVerifiedAndDecryptedByTheMock() throws {
        let directory = NSTemporaryDirectory() + "pushcast-webpush-interop-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let mock = try MockProcess(directory: directory, arguments: ["--webpush"], waitFor: ["PORT", "WEBPUSH_PORT"])
        defer { _ = mock.stop() }
        let origin = try XCTUnwrap(mock.fields["WEBPUSH_ORIGIN"])
        let count = 300
        let results = directory + "/pywebpush.ndjson"
        let python = try DeployTests.venvPython()
        let environment = InteropClientTests.environment.merging(["SSL_CERT_FILE": mock.caFile]) { $1 }
        let run = try runProgram(python, [InteropClientTests.drivers + "/webpush_pywebpush.py", "--count", "\(count)", "--origin", origin, "--out", results],
                                 environment: environment, seconds: 300)
        XCTAssertEqual(run.status, 0, run.stdout + run.stderr.suffix(3000))
        _ = mock.stop()
        var logged: [String: [String: Any]] = [:]
        for entry in mock.log where entry["provider"] as? String == "webpush" {
            let endpoint = try XCTUnwrap(entry["endpoint"] as? String)
            XCTAssertNil(logged.updateValue(entry, forKey: endpoint), "\(endpoint) logged twice")
        }
        let expected = ["gone": 410, "nf": 404, "slow": 429, "busy": 503, "ok": 201]
        var checked = 0
        for line in try String(contentsOfFile: results, encoding: .utf8).split(separator: "\n") {
            let object = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            let endpoint = try XCTUnwrap(object["token"] as? String)
            let kind = String(endpoint.dropFirst(origin.count + 1).prefix { $0.isLetter })
            let entry = try XCTUnwrap(logged[endpoint], endpoint)
            XCTAssertEqual(object["status"] as? Int, expected[kind], endpoint)
            XCTAssertEqual(entry["status"] as? Int, expected[kind], endpoint)
            XCTAssertEqual(entry["payload_sha256"] as? String, object["sha256"] as? String, endpoint)
            checked += 1
        }
        XCTAssertEqual(checked, count)
        XCTAssertEqual(logged.count, count)
    }
}
