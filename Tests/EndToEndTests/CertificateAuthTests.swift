import Foundation
import PushcastWire
import XCTest

/// APNs certificate auth end to end: `pushcast send --apns-cert` against `pushcast mock
/// --client-ca`, as separate processes over real TLS. The certificates are made here, like
/// Apple's push certificates (subject UID = bundle ID, CN "Apple Push Services: <bundle>"), by a
/// throw-away CA that the mock trusts for clients; the mock's own server CA is another one.
final class CertificateAuthTests: XCTestCase {
    private static let topic = "com.example.pushcast"
    /// The environment variable the sends read their passphrase from (set in this process, which
    /// the pushcast children inherit).
    private static let passphraseVariable = "PUSHCAST_TEST_APNS_CERT_PASSPHRASE"
    private static let passphrase = "Keychain export 7!"

    private var directory = ""
    private var pushCA: SigningAuthority!
    private var pushCAFile = ""
    /// Every mock this test started, stopped in tearDown if a failure skipped its stop.
    private var mocks: [MockProcess] = []

    override func setUpWithError() throws {
        try BinaryTests.requireBinary()
        directory = NSTemporaryDirectory() + "pushcast-cert-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        pushCA = try CertificateFactory.makeSigningAuthority(commonName: "Test Apple Worldwide Developer Relations CA")
        pushCAFile = directory + "/push-ca.pem"
        try pushCA.certificatePEM.write(toFile: pushCAFile, atomically: true, encoding: .utf8)
        setenv(Self.passphraseVariable, Self.passphrase, 1)
    }

    override func tearDown() {
        for mock in mocks where mock.process.isRunning { _ = mock.stop() }
        unsetenv(Self.passphraseVariable)
        try? FileManager.default.removeItem(atPath: directory)
    }

    // MARK: Material

    /// A push certificate for `uid`, with Apple's CN for the kind of certificate.
    private func issue(uid: String = topic, commonNamePrefix: String = "Apple Push Services", notBefore: Int = -3600,
                       notAfter: Int = 365 * 86_400) throws -> IssuedCertificate {
        try pushCA.issueClientCertificate(
            subject: [("UID", uid), ("CN", "\(commonNamePrefix): \(uid)"), ("OU", "TEAM123456"), ("O", "Example Inc."), ("C", "US")],
            notBefore: notBefore, notAfter: notAfter)
    }

    /// A passphrase-protected .p12 of the key and certificate, in OpenSSL 3's default encryption
    /// (AES-256-CBC, PBKDF2).
    private func p12(_ issued: IssuedCertificate, name: String = "cert") throws -> String {
        let path = directory + "/\(name).p12"
        try Data(issued.pkcs12(passphrase: Self.passphrase, caCertificatePEM: nil)).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// The certificate and its key as a .p12 in the legacy encryption Keychain Access has long
    /// exported and OpenSSL 1.x used (RC2-40 for the certificate, 3DES for the key), made with the
    /// openssl CLI;
    /// nil when it cannot make one (no CLI, or no legacy provider for it).
    private func legacyP12(_ issued: IssuedCertificate) throws -> String? {
        guard let openssl = ["/usr/bin/openssl", "/usr/local/bin/openssl"].first(where: FileManager.default.isExecutableFile) else { return nil }
        let certificate = directory + "/legacy-cert.pem", key = directory + "/legacy-key.pem", path = directory + "/keychain.p12"
        try issued.certificatePEM.write(toFile: certificate, atomically: true, encoding: .utf8)
        try issued.privateKeyPEM.write(toFile: key, atomically: true, encoding: .utf8)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: openssl)
        process.arguments = ["pkcs12", "-export", "-legacy", "-in", certificate, "-inkey", key, "-out", path,
                             "-passout", "env:\(Self.passphraseVariable)"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        try? FileManager.default.removeItem(atPath: key)
        return process.terminationStatus == 0 ? path : nil
    }

    /// `ck.pem` as the legacy PHP senders' instructions make it, `openssl pkcs12 -in cert.p12 -out
    /// ck.pem`: "Bag Attributes" text, the certificate, and the key encrypted with the same
    /// passphrase. Made in memory the same shape when the openssl CLI is missing.
    private func legacyPEM(_ issued: IssuedCertificate) throws -> String {
        let path = directory + "/ck.pem"
        if let openssl = ["/usr/bin/openssl", "/usr/local/bin/openssl"].first(where: FileManager.default.isExecutableFile) {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: openssl)
            process.arguments = ["pkcs12", "-in", try p12(issued, name: "for-ck"), "-out", path,
                                 "-passin", "env:\(Self.passphraseVariable)", "-passout", "env:\(Self.passphraseVariable)"]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            process.waitUntilExit()
            XCTAssertEqual(process.terminationStatus, 0, "openssl pkcs12 failed")
        } else {
            let text = "Bag Attributes\n    localKeyID: 01\n" + issued.certificatePEM + "Bag Attributes\n    localKeyID: 01\n"
                + (try issued.encryptedPrivateKeyPEM(passphrase: Self.passphrase))
            try text.write(toFile: path, atomically: true, encoding: .utf8)
        }
        let text = try String(contentsOfFile: path, encoding: .utf8)
        XCTAssertTrue(text.contains("-----BEGIN CERTIFICATE-----"), text)
        XCTAssertTrue(text.contains("-----BEGIN ENCRYPTED PRIVATE KEY-----"), "the key must be encrypted")
        return path
    }

    /// A token file of `rows` distinct ordinary tokens (none with a mock outcome prefix), and a payload.
    private func campaign(rows: Int) throws -> (tokens: String, payload: String, tokenList: [String]) {
        var generator = SystemRandomNumberGenerator()
        func hex(_ value: UInt64, digits: Int) -> String {
            let text = String(value, radix: 16)
            return String(repeating: "0", count: digits - text.count) + text
        }
        // 64 hex digits: a first byte below 0x40 keeps clear of the mock's outcome prefixes
        // (dead, bad0, 5030, 4290), the row number keeps the tokens distinct.
        let tokens = (0..<rows).map { row in
            hex(UInt64(row % 64), digits: 2) + hex(UInt64(row), digits: 14)
                + (0..<3).map { _ in hex(generator.next(), digits: 16) }.joined()
        }
        let path = directory + "/tokens.csv", payload = directory + "/payload.json"
        try (["token"] + tokens).joined(separator: "\n").appending("\n").write(toFile: path, atomically: true, encoding: .utf8)
        try #"{"aps":{"alert":"certificate auth"}}"#.write(toFile: payload, atomically: true, encoding: .utf8)
        return (path, payload, tokens)
    }

    // MARK: Running

    private func startMock(_ extra: [String] = [], waitFor: [String] = ["PORT"]) throws -> MockProcess {
        let mockDirectory = directory + "/mock-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: mockDirectory, withIntermediateDirectories: true)
        let mock = try MockProcess(directory: mockDirectory, arguments: ["--port", "0", "--workers", "2", "--client-ca", pushCAFile,
                                                                         "--duration", "120s"] + extra, waitFor: waitFor)
        mocks.append(mock)
        return mock
    }

    /// The results file of the latest `send`.
    private var resultsPath = ""

    private func send(_ mock: MockProcess, certificate: String, tokens: String, payload: String, topic: String = topic,
                      seconds: Double = 30, command: String = "send") throws -> PushcastRun {
        let run = UUID().uuidString.prefix(8)
        resultsPath = directory + "/results-\(run).ndjson"
        return try runPushcast([command, tokens, "--payload", payload, "--apns-topic", topic,
                                "--apns-cert", certificate, "--apns-cert-password-env", Self.passphraseVariable,
                                "--apns-endpoint", "https://127.0.0.1:\(mock.port)", "--ca-file", mock.caFile,
                                "--results", resultsPath, "--prune", directory + "/prune-\(run).csv", "--quiet"], seconds: seconds)
    }

    /// Every row delivered, each token exactly once at the mock, no secret in the output.
    private func assertEveryRowDeliveredOnce(_ run: PushcastRun, _ mock: MockProcess, tokens: [String],
                                             file: StaticString = #filePath, line: UInt = #line) throws {
        XCTAssertEqual(run.status, 0, run.stderr, file: file, line: line)
        assertNoSecret(run, file: file, line: line)
        let results = try String(contentsOfFile: resultsPath, encoding: .utf8).split(separator: "\n")
        XCTAssertEqual(results.count, tokens.count, file: file, line: line)
        XCTAssertEqual(results.filter { $0.contains(#""outcome":"delivered""#) }.count, tokens.count, file: file, line: line)
        var delivered: [String: Int] = [:]
        for entry in mock.log where entry["status"] as? Int == 200 {
            delivered[entry["token"] as? String ?? "", default: 0] += 1
        }
        // Counts, not sets, in the messages: a 50,000-token set would drown the log.
        XCTAssertEqual(Set(tokens).subtracting(delivered.keys).count, 0, "tokens never delivered", file: file, line: line)
        XCTAssertEqual(Set(delivered.keys).subtracting(tokens).count, 0, "tokens delivered that were not sent", file: file, line: line)
        XCTAssertEqual(delivered.values.filter { $0 > 1 }.count, 0, "tokens delivered twice", file: file, line: line)
    }

    private func assertNoSecret(_ run: PushcastRun, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertFalse(run.stderr.contains(Self.passphrase) || run.stdout.contains(Self.passphrase), "the passphrase leaked",
                       file: file, line: line)
        XCTAssertFalse(run.stderr.contains("PRIVATE KEY"), "key material leaked", file: file, line: line)
    }

    /// Exit status 2 with every fragment in stderr.
    private func assertStopped(_ run: PushcastRun, naming fragments: [String], file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(run.status, 2, run.stderr, file: file, line: line)
        for fragment in fragments {
            XCTAssertTrue(run.stderr.contains(fragment), "stderr lacks '\(fragment)': \(run.stderr)", file: file, line: line)
        }
        assertNoSecret(run, file: file, line: line)
    }

    // MARK: Delivered

    func testP12WithPassphraseDeliversEveryRow() throws {
        let mock = try startMock()
        let (tokens, payload, list) = try campaign(rows: 300)
        let run = try send(mock, certificate: try p12(try issue()), tokens: tokens, payload: payload)
        let statistics = mock.stop()
        try assertEveryRowDeliveredOnce(run, mock, tokens: list)
        XCTAssertEqual(statistics["delivered"] as? Int, 300, "\(statistics)")
        XCTAssertFalse(run.stderr.contains("warning"), run.stderr)
    }

    func testKeychainStyleLegacyP12DeliversEveryRow() throws {
        guard let bundle = try legacyP12(try issue()) else { throw XCTSkip("the openssl CLI cannot make a legacy .p12 here") }
        let mock = try startMock()
        let (tokens, payload, list) = try campaign(rows: 100)
        let run = try send(mock, certificate: bundle, tokens: tokens, payload: payload)
        _ = mock.stop()
        try assertEveryRowDeliveredOnce(run, mock, tokens: list)
    }

    func testPEMWithCertificateAndEncryptedKeyDeliversEveryRow() throws {
        let mock = try startMock()
        let (tokens, payload, list) = try campaign(rows: 300)
        let run = try send(mock, certificate: try legacyPEM(try issue()), tokens: tokens, payload: payload)
        _ = mock.stop()
        try assertEveryRowDeliveredOnce(run, mock, tokens: list)
    }

    func testFiftyThousandRowsWithGoAwayEveryThousandAreEachDeliveredOnce() throws {
        let mock = try startMock(["--goaway-after", "1000"])
        let (tokens, payload, list) = try campaign(rows: 50_000)
        let run = try send(mock, certificate: try p12(try issue()), tokens: tokens, payload: payload, seconds: 45)
        let statistics = mock.stop()
        try assertEveryRowDeliveredOnce(run, mock, tokens: list)
        // A fresh handshake, with the certificate, for each connection the GOAWAYs ended.
        XCTAssertGreaterThanOrEqual(statistics["goaways_sent"] as? Int ?? 0, 40, "\(statistics)")
        XCTAssertGreaterThan(statistics["connections_accepted"] as? Int ?? 0, 40, "\(statistics)")
    }

    // MARK: Refused

    func testWrongPassphraseStopsBeforeConnectingAndSaysSo() throws {
        let mock = try startMock()
        let (tokens, payload, _) = try campaign(rows: 10)
        let issued = try issue()
        let bundle = try p12(issued), pem = try legacyPEM(issued)
        setenv(Self.passphraseVariable, "not the passphrase", 1)
        let wrongP12 = try send(mock, certificate: bundle, tokens: tokens, payload: payload)
        let wrongPEM = try send(mock, certificate: pem, tokens: tokens, payload: payload)
        // `check` loads the certificate too, and says the same.
        let checkWrong = try send(mock, certificate: bundle, tokens: tokens, payload: payload, command: "check")
        setenv(Self.passphraseVariable, Self.passphrase, 1)
        let checkRight = try send(mock, certificate: pem, tokens: tokens, payload: payload, command: "check")
        unsetenv(Self.passphraseVariable)
        let unset = try send(mock, certificate: pem, tokens: tokens, payload: payload)
        let statistics = mock.stop()
        assertStopped(wrongP12, naming: [bundle, "passphrase is wrong", Self.passphraseVariable])
        assertStopped(wrongPEM, naming: [pem, "passphrase is wrong", Self.passphraseVariable])
        assertStopped(unset, naming: [Self.passphraseVariable, "not set"])
        assertStopped(checkWrong, naming: [bundle, "passphrase is wrong"])
        XCTAssertEqual(checkRight.status, 0, checkRight.stderr)
        XCTAssertTrue(checkRight.stdout.contains("APNs client certificate: \(pem)"), checkRight.stdout)
        assertNoSecret(checkRight)
        for run in [wrongP12, wrongPEM] { XCTAssertFalse(run.stderr.contains("not the passphrase"), run.stderr) }
        XCTAssertEqual(statistics["connections_accepted"] as? Int, 0, "nothing may connect: \(statistics)")
    }

    func testExpiredCertificateFailsTheHandshakeOrIsAnsweredBadCertificate() throws {
        let (tokens, payload, _) = try campaign(rows: 20)
        let expired = try p12(try issue(notBefore: -30 * 86_400, notAfter: -86_400))
        let strict = try startMock()
        // Eight connections in a row die in the handshake (with backoff) before the run stops.
        let handshake = try send(strict, certificate: expired, tokens: tokens, payload: payload, seconds: 45)
        let strictStatistics = strict.stop()
        // Said before connecting, then the server's alert in the handshake's diagnosis.
        assertStopped(handshake, naming: ["warning: --apns-cert: certificate has expired", "TLS handshake", "alert certificate expired"])
        XCTAssertEqual(strictStatistics["requests"] as? Int, 0, "\(strictStatistics)")

        let lenient = try startMock(["--client-cert-403"])
        let answered = try send(lenient, certificate: expired, tokens: tokens, payload: payload)
        _ = lenient.stop()
        assertStopped(answered, naming: ["BadCertificate"])
    }

    func testCertificateForAnotherTopicStopsWithBadTopic() throws {
        let mock = try startMock()
        let (tokens, payload, _) = try campaign(rows: 20)
        let run = try send(mock, certificate: try p12(try issue(uid: "com.example.other")), tokens: tokens, payload: payload)
        _ = mock.stop()
        assertStopped(run, naming: ["--apns-topic \(Self.topic) is not the certificate's topic (subject UID com.example.other)", "BadTopic"])
        XCTAssertFalse(mock.log.isEmpty)
        XCTAssertTrue(mock.log.allSatisfy { $0["reason"] as? String == "BadTopic" }, "\(mock.log.prefix(3))")
    }

    func testFCMPortNeedsNoClientCertificate() throws {
        let mock = try startMock(["--fcm"], waitFor: ["PORT", "FCM_ENDPOINT", "FCM_CREDENTIALS"])
        let (tokens, _, list) = try campaign(rows: 50)
        let message = directory + "/message.json"
        try #"{"notification":{"title":"certificate auth elsewhere"}}"#.write(toFile: message, atomically: true, encoding: .utf8)
        resultsPath = directory + "/results-fcm.ndjson"
        let run = try runPushcast(["send", tokens, "--provider", "fcm", "--fcm-payload", message,
                                   "--fcm-credentials", mock.fields["FCM_CREDENTIALS"] ?? "", "--fcm-endpoint", mock.fields["FCM_ENDPOINT"] ?? "",
                                   "--ca-file", mock.caFile, "--results", resultsPath, "--prune", directory + "/prune-fcm.csv", "--quiet"],
                                  seconds: 30)
        _ = mock.stop()
        XCTAssertEqual(run.status, 0, run.stderr)
        let results = try String(contentsOfFile: resultsPath, encoding: .utf8).split(separator: "\n")
        XCTAssertEqual(results.filter { $0.contains(#""outcome":"delivered""#) }.count, list.count)
    }

    func testMockCertificateOptionsAreChecked() throws {
        let missing = try runPushcast(["mock", "--port", "0", "--client-ca", directory + "/missing.pem", "--duration", "5s"], seconds: 10)
        XCTAssertNotEqual(missing.status, 0)
        XCTAssertTrue(missing.stderr.contains("client CA file") && missing.stderr.contains("missing.pem"), missing.stderr)
        for (arguments, fragment) in [(["--apns-environment", "sandbox"], "--client-ca"), (["--client-cert-403"], "--client-ca"),
                                      (["--client-ca", pushCAFile, "--auth", "none"], "--auth none"),
                                      (["--client-ca", pushCAFile, "--apns-key-id", "K"], "provider tokens")] {
            let run = try runPushcast(["mock", "--port", "0", "--duration", "5s"] + arguments, seconds: 10)
            XCTAssertEqual(run.status, 2, "\(arguments): \(run.stderr)")
            XCTAssertTrue(run.stderr.contains(fragment), "\(arguments): \(run.stderr)")
        }
    }

    func testDevelopmentCertificateIsForTheSandboxOnly() throws {
        let (tokens, payload, list) = try campaign(rows: 20)
        let development = try p12(try issue(commonNamePrefix: "Apple Development IOS Push Services"))
        let production = try startMock()
        let refused = try send(production, certificate: development, tokens: tokens, payload: payload)
        _ = production.stop()
        assertStopped(refused, naming: ["BadCertificateEnvironment"])

        let sandbox = try startMock(["--apns-environment", "sandbox"])
        let accepted = try send(sandbox, certificate: development, tokens: tokens, payload: payload)
        _ = sandbox.stop()
        try assertEveryRowDeliveredOnce(accepted, sandbox, tokens: list)
    }
}
