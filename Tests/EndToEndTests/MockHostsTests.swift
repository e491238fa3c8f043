import Foundation
import XCTest

/// The names in the mock's generated certificate: the hosts that real APNs and FCM clients verify,
/// so an unmodified client reaches the mock with its CA file and a name-resolution override
/// (curl's --resolve / --connect-to here), and `--hosts` replaces the list.
final class MockHostsTests: XCTestCase {
    static let realHosts = ["api.push.apple.com", "api.sandbox.push.apple.com", "api.development.push.apple.com",
                            "fcm.googleapis.com", "oauth2.googleapis.com", "localhost"]

    override func setUpWithError() throws { try BinaryTests.requireBinary() }

    private func directory() throws -> String {
        let path = NSTemporaryDirectory() + "pushcast-hosts-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    /// The leaf certificate the mock serves, as OpenSSL prints its subjectAltName.
    private func servedAltNames(port: Int, directory: String) throws -> String {
        let hello = try runProgram("/usr/bin/openssl", ["s_client", "-connect", "127.0.0.1:\(port)", "-alpn", "h2",
                                                        "-servername", "api.push.apple.com"], seconds: 30)
        guard let begin = hello.stdout.range(of: "-----BEGIN CERTIFICATE-----"),
              let end = hello.stdout.range(of: "-----END CERTIFICATE-----", range: begin.upperBound..<hello.stdout.endIndex) else {
            XCTFail("openssl s_client printed no certificate: \(hello.stdout) \(hello.stderr)")
            return ""
        }
        let leaf = directory + "/leaf.pem"
        try (String(hello.stdout[begin.lowerBound..<end.upperBound]) + "\n").write(toFile: leaf, atomically: true, encoding: .utf8)
        let text = try runProgram("/usr/bin/openssl", ["x509", "-in", leaf, "-noout", "-ext", "subjectAltName"], seconds: 30)
        XCTAssertEqual(text.status, 0, text.stderr)
        return text.stdout
    }

    /// curl over HTTP/2 to `https://host:port/stats` with the name resolved to loopback and the
    /// mock's CA as the only trust anchor; returns curl's exit status and body.
    private func curlStats(host: String, port: Int, caFile: String) throws -> PushcastRun {
        try runProgram("/usr/bin/curl", ["-sS", "--http2", "--max-time", "20", "--cacert", caFile,
                                         "--resolve", "\(host):\(port):127.0.0.1", "https://\(host):\(port)/stats"], seconds: 30)
    }

    func testDefaultCertificateNamesTheRealAPNsAndFCMHosts() throws {
        let directory = try directory()
        let mock = try MockProcess(directory: directory, arguments: ["--auth", "none"], waitFor: ["PORT"])
        defer { _ = mock.stop() }
        let names = try servedAltNames(port: mock.port, directory: directory)
        for host in Self.realHosts { XCTAssertTrue(names.contains("DNS:\(host)"), names) }
        XCTAssertTrue(names.contains("IP Address:127.0.0.1"), names)
        XCTAssertTrue(names.contains("IP Address:0:0:0:0:0:0:0:1"), names)
        // The TLS handshake verifies each real host name against the mock's CA, and nothing else.
        for host in Self.realHosts {
            let run = try curlStats(host: host, port: mock.port, caFile: mock.caFile)
            XCTAssertEqual(run.status, 0, "\(host): \(run.stderr)")
            XCTAssertTrue(run.stdout.contains("\"requests\""), "\(host): \(run.stdout)")
        }
        let address = try runProgram("/usr/bin/curl", ["-sS", "--http2", "--max-time", "20", "--cacert", mock.caFile,
                                                       "https://127.0.0.1:\(mock.port)/stats"], seconds: 30)
        XCTAssertEqual(address.status, 0, address.stderr)
        // As docs/USAGE.md shows: an unmodified client's own host and port, moved to the mock's.
        let moved = try runProgram("/usr/bin/curl", ["-sS", "--http2", "--max-time", "20", "--cacert", mock.caFile,
                                                     "--connect-to", "api.push.apple.com:443:127.0.0.1:\(mock.port)",
                                                     "https://api.push.apple.com/stats"], seconds: 30)
        XCTAssertEqual(moved.status, 0, moved.stderr)
        let other = try curlStats(host: "api.push.example.com", port: mock.port, caFile: mock.caFile)
        XCTAssertEqual(other.status, 60, "a name the certificate lacks must fail verification: \(other.stderr)")
    }

    func testHostsOptionReplacesTheList() throws {
        let directory = try directory()
        let mock = try MockProcess(directory: directory, arguments: ["--auth", "none", "--hosts", "push.test,10.1.2.3,fe80::1"],
                                   waitFor: ["PORT"])
        defer { _ = mock.stop() }
        let names = try servedAltNames(port: mock.port, directory: directory)
        XCTAssertTrue(names.contains("DNS:push.test"), names)
        XCTAssertTrue(names.contains("IP Address:10.1.2.3"), names)
        XCTAssertTrue(names.contains("IP Address:FE80:0:0:0:0:0:0:1"), names)
        XCTAssertFalse(names.contains("api.push.apple.com"), names)
        XCTAssertFalse(names.contains("localhost"), names)
        XCTAssertEqual(try curlStats(host: "push.test", port: mock.port, caFile: mock.caFile).status, 0)
        XCTAssertEqual(try curlStats(host: "api.push.apple.com", port: mock.port, caFile: mock.caFile).status, 60)
    }

    func testBadHostsListStopsWithExitTwo() throws {
        for list in ["", "a.test,,b.test", "bad name"] {
            let run = try runPushcast(["mock", "--hosts", list, "--duration", "5s"], seconds: 30)
            XCTAssertEqual(run.status, 2, "\(list): \(run.stderr)")
            XCTAssertTrue(run.stderr.contains("--hosts"), run.stderr)
        }
        let withFiles = try runPushcast(["mock", "--hosts", "a.test", "--cert", "/nonexistent.pem", "--key", "/nonexistent.key"], seconds: 30)
        XCTAssertEqual(withFiles.status, 2, withFiles.stderr)
        XCTAssertTrue(withFiles.stderr.contains("--hosts"), withFiles.stderr)
    }
}
