import PushcastCommandLine
import PushcastCore
import PushcastProviderKit
import PushcastTransport
import PushcastWire
import XCTest
@testable import PushcastWebPush

/// Web Push's option group, read by its module as `pushcast send` reads it.
final class WebPushCommandLineTests: XCTestCase {
    static let spec = CommandSpec(name: "pushcast send", summary: "test", options: WebPushCommandLine().options)
    let clock = ManualClock(epochSecondsAtZero: 1_800_000_000)

    func configure(_ arguments: [String], environment: [String: String] = [:], files: [String: String] = [:]) throws -> (any ProviderSetup)? {
        guard case .arguments(let parsed) = try Self.spec.parse(arguments) else { throw ProviderSetupError("the test arguments asked for help") }
        let reader: SecretFileReader = { path, bytesMax throws(SecretFileError) in
            guard let text = files[path] else { throw .cannotOpen(reason: "No such file or directory") }
            return Array(text.utf8).withUnsafeBytes { SecretBytes(copying: $0) }
        }
        let context = ProviderContext(files: reader, environment: { environment[$0] }, wallClock: clock, monotonicClock: clock,
                                      threads: SystemThreads(), trust: TLSConfiguration(), notice: { _ in },
                                      sendOne: { _, _, _ in .failure(ProviderSetupError("no network in this test")) })
        return try WebPushCommandLine().configure(parsed, context: context)
    }

    func message(_ arguments: [String], environment: [String: String] = [:], files: [String: String] = [:]) -> String? {
        do {
            _ = try configure(arguments, environment: environment, files: files)
            return nil
        } catch {
            return "\(error)"
        }
    }

    func testNoVAPIDKeyAsksForNoWebPush() throws {
        XCTAssertNil(try configure([]))
        XCTAssertNil(try configure(["--webpush-connections", "3"]))
        XCTAssertEqual(message(["--webpush-payload", "p.json"]).map { $0.contains("--webpush-payload needs a VAPID key") }, true)
    }

    func testOptionErrorsNameTheOption() {
        let key = ["--vapid-key", "k.pem"], files = ["k.pem": VAPIDTests.sec1PEM]
        XCTAssertEqual(message(key, files: files).map { $0.contains("--vapid-key needs --vapid-subject") }, true)
        XCTAssertEqual(message(key + ["--vapid-key-env", "K", "--vapid-subject", "mailto:a@b.c"], files: files)
            .map { $0.contains("--vapid-key and --vapid-key-env: give one") }, true)
        XCTAssertEqual(message(key + ["--vapid-subject", "push@example.com"], files: files).map { $0.contains("--vapid-subject") }, true)
        XCTAssertEqual(message(key + ["--vapid-subject", "mailto:a@b.c", "--webpush-urgency", "urgent"], files: files) != nil, true)
        XCTAssertEqual(message(key + ["--vapid-subject", "mailto:a@b.c", "--webpush-ttl", "-1"], files: files) != nil, true)
        XCTAssertEqual(message(key + ["--vapid-subject", "mailto:a@b.c", "--webpush-topic", "not a topic!"], files: files) != nil, true)
        let missing = message(["--vapid-key", "absent.pem", "--vapid-subject", "mailto:a@b.c"]) ?? ""
        XCTAssertTrue(missing.contains("absent.pem"), missing)
        let unset = message(["--vapid-key-env", "VAPID", "--vapid-subject", "mailto:a@b.c"]) ?? ""
        XCTAssertTrue(unset.contains("$VAPID is not set"), unset)
    }

    func testCheckShowsThePublicKeyAndNeverThePrivateOne() throws {
        let setup = try XCTUnwrap(try configure(["--vapid-key-env", "VAPID", "--vapid-subject", "mailto:push@example.com", "--webpush-ttl", "60",
                                                 "--webpush-urgency", "low"], environment: ["VAPID": VAPIDTests.sec1PEM]))
        let lines = try setup.credentialLines()
        XCTAssertEqual(lines.first, "Web Push VAPID key: k=\(VAPIDTests.sec1Public), subject mailto:push@example.com; a test token signed")
        XCTAssertEqual(lines.last, "Web Push headers: ttl: 60, content-encoding: aes128gcm, content-type: application/octet-stream, urgency: low")
        XCTAssertFalse(lines.joined().contains("PRIVATE"))
        // Each row's key is checked as the worker would make it; the body shows its payload only.
        let (subscription, _, auth) = try freshSubscription()
        let body = subscription.p256dh + auth + Array(#"{"t":1}"#.utf8)
        XCTAssertNil(setup.sendProblem(body: body))
        var offCurve = body
        offCurve[64] ^= 1
        XCTAssertEqual(setup.sendProblem(body: offCurve),
                       RowProblem(reason: "InvalidSubscription", field: "p256dh", message: "not a point on the P-256 curve"))
        XCTAssertEqual(setup.bodyText(body), #"{"t":1} (110 bytes encrypted, aes128gcm)"#)
        XCTAssertEqual(setup.firstRequestLine(sample: (redactedToken: "https://push.example.net/…", messageID: nil)),
                       "first Web Push request: POST https://push.example.net/… (aes128gcm, VAPID)")
    }

    func testEachOriginGetsItsOwnConnectionAndAdapters() throws {
        let setup = try XCTUnwrap(try configure(["--vapid-key", "k.pem", "--vapid-subject", "mailto:a@b.c", "--webpush-connections", "3"],
                                                files: ["k.pem": VAPIDTests.sec1PEM]))
        let connection = try setup.connection(route: "https://push.example.net:8443")
        XCTAssertEqual(connection.endpoint.host, "push.example.net")
        XCTAssertEqual(connection.endpoint.port, 8443)
        XCTAssertEqual(connection.connections, 3)
        XCTAssertTrue(connection.responseHeadersOnSuccess, "the Location of a 201 is the message id")
        XCTAssertEqual(try setup.connection(route: "https://fcm.googleapis.com").endpoint.port, 443)
        let factory = try XCTUnwrap(try setup.adapters(route: "https://push.example.net:8443") as? WebPushAdapterFactory)
        XCTAssertEqual(factory.settings.authority, "push.example.net:8443")
        XCTAssertEqual(factory.makeAdapter().makeRequest().pathSuffixSkip, "https://push.example.net:8443".utf8.count)
        XCTAssertNoThrow(try setup.rendering(template: "{}", path: "p.json", columns: ["endpoint", "p256dh", "auth"]))
    }

    func testNamedKeyColumnsMustExist() throws {
        let setup = try XCTUnwrap(try configure(["--vapid-key", "k.pem", "--vapid-subject", "mailto:a@b.c", "--webpush-p256dh-column", "ua_key",
                                                 "--webpush-auth-column", "ua_auth"], files: ["k.pem": VAPIDTests.sec1PEM]))
        let rendering = try XCTUnwrap(try setup.rendering(template: "{}", path: "p.json", columns: ["endpoint", "UA_Key", "ua_auth"]) as? WebPushRendering)
        XCTAssertEqual(rendering.columns.p256dh, 1)
        XCTAssertEqual(rendering.columns.auth, 2)
        XCTAssertThrowsError(try setup.rendering(template: "{}", path: "p.json", columns: ["endpoint", "p256dh", "ua_auth"])) { error in
            XCTAssertTrue("\(error)".contains("--webpush-p256dh-column ua_key: no such column"), "\(error)")
        }
    }
}
