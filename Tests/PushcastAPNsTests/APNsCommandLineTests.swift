import Foundation
import PushcastAPNs
import PushcastCommandLine
import PushcastCore
import PushcastProviderKit
import PushcastSystem
import PushcastTransport
import PushcastWire
import XCTest

/// APNs's option group, read by its module as `pushcast send` reads it: which options ask for
/// APNs, the errors that stop a run before the input is read, and what the setup makes of them.
final class APNsCommandLineTests: XCTestCase {
    static let spec = CommandSpec(name: "pushcast send", summary: "test", options: APNsCommandLine().options)
    let clock = ManualClock(epochSecondsAtZero: 1_800_000_000)

    func parse(_ arguments: [String]) throws -> ParsedArguments {
        guard case .arguments(let parsed) = try Self.spec.parse(arguments) else { throw ProviderSetupError("the test arguments asked for help") }
        return parsed
    }

    func context(environment: [String: String] = [:], notices: NoticeLog = NoticeLog()) -> ProviderContext {
        ProviderContext(files: SecretFile.read, environment: { environment[$0] }, wallClock: clock, monotonicClock: clock, threads: SystemThreads(),
                        trust: TLSConfiguration(), notice: { notices.add($0) },
                        sendOne: { _, _, _ in .failure(ProviderSetupError("no network in this test")) })
    }

    func configure(_ arguments: [String], environment: [String: String] = [:], notices: NoticeLog = NoticeLog()) throws -> (any ProviderSetup)? {
        try APNsCommandLine().configure(try parse(arguments), context: context(environment: environment, notices: notices))
    }

    func keyFile() throws -> String {
        let path = NSTemporaryDirectory() + "apns-\(UUID().uuidString).p8"
        try APNsKeyPair.generate().privateKeyPEM.write(toFile: path, atomically: true, encoding: .utf8)
        addTeardownBlock { try? FileManager.default.removeItem(atPath: path) }
        return path
    }

    func testNoAPNsOptionsAskForNoAPNs() throws {
        XCTAssertNil(try configure([]))
        XCTAssertNil(try configure(["--apns-topic", "com.example.app", "--connections", "8"]))
    }

    func testTokenAuthNeedsAllThreeAndIsNotCombinedWithACertificate() throws {
        XCTAssertThrowsError(try configure(["--apns-key", "k.p8"])) { error in
            XCTAssertTrue("\(error)".contains("token auth needs --apns-key, --apns-key-id and --apns-team-id together"), "\(error)")
        }
        let key = try keyFile()
        let tokenAuth = ["--apns-key", key, "--apns-key-id", "KEY0000001", "--apns-team-id", "TEAM000001"]
        XCTAssertThrowsError(try configure(tokenAuth + ["--apns-cert", "c.p12"])) { error in
            XCTAssertTrue("\(error)".contains("choose token auth (--apns-key) or certificate auth (--apns-cert), not both"), "\(error)")
        }
        XCTAssertThrowsError(try configure(["--apns-key", "/nonexistent.p8", "--apns-key-id", "KEY0000001", "--apns-team-id", "TEAM000001"])) {
            error in XCTAssertTrue(error is ProviderSetupError && "\(error)".contains("/nonexistent.p8"), "\(error)")
        }
        let setup = try XCTUnwrap(try configure(tokenAuth + ["--payload", "p.json", "--apns-topic", "com.example.app"]))
        _ = try setup.rendering(template: #"{"aps":{"alert":"hi"}}"#, path: "p.json", columns: ["token"])
        XCTAssertNoThrow(try setup.requireSendable())
        XCTAssertEqual(try setup.credentialLines(), ["APNs provider token: signed with key KEY0000001, team TEAM000001"])
    }

    func testAPayloadWithoutCredentialsChecksButDoesNotSend() throws {
        let setup = try XCTUnwrap(try configure(["--payload", "p.json", "--apns-topic", "com.example.app"]))
        XCTAssertEqual(setup.id, .apns)
        XCTAssertEqual(setup.template.option, "payload")
        _ = try setup.rendering(template: #"{"aps":{"alert":"{{name}}"}}"#, path: "p.json", columns: ["token", "name"])
        XCTAssertThrowsError(try setup.requireSendable()) { error in
            XCTAssertTrue("\(error)".contains("APNs credentials are required with --payload"), "\(error)")
        }
        XCTAssertEqual(try setup.credentialLines(), [])
    }

    func testHeadersAndEndpointAreReadWithTheTemplate() throws {
        let notices = NoticeLog()
        let setup = try XCTUnwrap(try configure(["--payload", "p.json", "--apns-topic", "com.example.app", "--push-type", "voip",
                                                 "--apns-environment", "sandbox", "--streams", "77"], notices: notices))
        let rendering = try XCTUnwrap(try setup.rendering(template: #"{"aps":{}}"#, path: "p.json", columns: ["token"]) as? APNsRendering)
        XCTAssertEqual(notices.all, ["pushcast: note: apns-topic is 'com.example.app.voip' for push type voip"],
                       "the headers' notes reach the user through the command's notice")
        XCTAssertEqual(rendering.payloadBytesMax, 5120, "VoIP payloads may be 5 KB")
        let line = try XCTUnwrap(setup.firstRequestLine(sample: ("0123abcd…<64 chars>", "id-1")))
        XCTAssertTrue(line.hasPrefix("first APNs request: POST /3/device/0123abcd…<64 chars> apns-id id-1"), line)
        XCTAssertTrue(line.contains("apns-topic: com.example.app.voip"), line)
        XCTAssertNil(setup.firstRequestLine(sample: nil), "no notification to send: no request to show")
        let connection = try setup.connection()
        XCTAssertEqual(connection.endpoint, Endpoint(host: "api.sandbox.push.apple.com", port: 443))
        XCTAssertEqual(connection.connections, 4)
        XCTAssertEqual(connection.streams, 77)

        let noTopic = try XCTUnwrap(try configure(["--payload", "p.json"]))
        XCTAssertThrowsError(try noTopic.rendering(template: "{}", path: "p.json", columns: ["token"])) { error in
            XCTAssertTrue("\(error)".contains("--apns-topic is required"), "\(error)")
        }
        let badTemplate = try XCTUnwrap(try configure(["--payload", "p.json", "--apns-topic", "t"]))
        XCTAssertThrowsError(try badTemplate.rendering(template: #"{"a":"{{missing}}"}"#, path: "p.json", columns: ["token"])) { error in
            XCTAssertTrue("\(error)".hasPrefix("p.json: "), "\(error)")
        }
    }

    func testACertificatePassphraseVariableThatIsNotSetIsNamedNotGuessed() throws {
        let setup = try XCTUnwrap(try configure(["--apns-cert", "/nonexistent.p12", "--apns-cert-password-env", "APNS_PASS",
                                                 "--payload", "p.json", "--apns-topic", "t"]))
        _ = try setup.rendering(template: "{}", path: "p.json", columns: ["token"])
        XCTAssertThrowsError(try setup.connection()) { error in
            XCTAssertEqual("\(error)", "--apns-cert-password-env: the environment variable APNS_PASS is not set")
        }
    }

    func testTheFingerprintLinesDoNotDependOnWhetherAPNsIsConfigured() throws {
        let lines = APNsCommandLine().fingerprintLines(try parse(["--apns-topic", "com.example.app", "--priority", "5"]))
        XCTAssertEqual(lines, ["apns-topic=com.example.app", "push-type=", "priority=5", "expiration=", "collapse-id="])
        XCTAssertEqual(APNsCommandLine().fingerprintLines(try parse([])).count, 5)
    }
}

/// Notices a setup printed, for the assertions.
final class NoticeLog: @unchecked Sendable {
    private let lock = NSLock()
    private var lines: [String] = []
    func add(_ line: String) { lock.lock(); lines.append(line); lock.unlock() }
    var all: [String] { lock.lock(); defer { lock.unlock() }; return lines }
}
