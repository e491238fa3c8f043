import Foundation
import PushcastCommandLine
import PushcastCore
import PushcastFCM
import PushcastProviderKit
import PushcastSystem
import PushcastTransport
import PushcastWire
import XCTest

/// FCM's option group, read by its module as `pushcast send` reads it.
final class FCMCommandLineTests: XCTestCase {
    static let spec = CommandSpec(name: "pushcast send", summary: "test", options: FCMCommandLine().options)
    let clock = ManualClock(epochSecondsAtZero: 1_800_000_000)

    func configure(_ arguments: [String], environment: [String: String] = [:]) throws -> (any ProviderSetup)? {
        guard case .arguments(let parsed) = try Self.spec.parse(arguments) else { throw ProviderSetupError("the test arguments asked for help") }
        let context = ProviderContext(files: SecretFile.read, environment: { environment[$0] }, wallClock: clock, monotonicClock: clock, threads: SystemThreads(),
                                      trust: TLSConfiguration(), notice: { _ in },
                                      sendOne: { _, _, _ in .failure(ProviderSetupError("no network in this test")) })
        return try FCMCommandLine().configure(parsed, context: context)
    }

    func serviceAccount() throws -> String {
        let generated = try FCMServiceAccountGenerator.generate(projectID: "demo-project", clientEmail: "sender@demo-project.iam.gserviceaccount.com",
                                                                tokenURI: "https://oauth2.googleapis.com/token")
        let path = NSTemporaryDirectory() + "fcm-\(UUID().uuidString).json"
        try Data(generated.serviceAccountJSON).write(to: URL(fileURLWithPath: path))
        addTeardownBlock { try? FileManager.default.removeItem(atPath: path) }
        return path
    }

    func testNoFCMOptionsAskForNoFCMAndTheEnvironmentAloneDoesNot() throws {
        XCTAssertNil(try configure([]))
        XCTAssertNil(try configure(["--fcm-connections", "2"], environment: ["GOOGLE_APPLICATION_CREDENTIALS": "/x.json"]),
                     "an APNs-only run ignores GOOGLE_APPLICATION_CREDENTIALS")
    }

    func testAMessageTemplateNeedsAServiceAccount() throws {
        XCTAssertThrowsError(try configure(["--fcm-payload", "m.json"])) { error in
            XCTAssertTrue("\(error)".contains("--fcm-payload needs a service account: --fcm-credentials FILE or $GOOGLE_APPLICATION_CREDENTIALS"),
                          "\(error)")
        }
        XCTAssertThrowsError(try configure(["--fcm-payload", "m.json"], environment: ["GOOGLE_APPLICATION_CREDENTIALS": "/nonexistent.json"])) {
            error in XCTAssertTrue(error is ProviderSetupError && "\(error)".contains("/nonexistent.json"), "\(error)")
        }
        let path = try serviceAccount()
        XCTAssertNotNil(try configure(["--fcm-payload", "m.json"], environment: ["GOOGLE_APPLICATION_CREDENTIALS": path]))
    }

    func testTheSetupProvesTheKeyAndNamesTheEndpoints() throws {
        let path = try serviceAccount()
        let setup = try XCTUnwrap(try configure(["--fcm-credentials", path, "--fcm-endpoint", "https://127.0.0.1:9443", "--fcm-streams", "50"]))
        XCTAssertEqual(setup.id, .fcm)
        XCTAssertEqual(setup.template.option, "fcm-payload")
        XCTAssertEqual(try setup.credentialLines(), ["FCM service account: sender@demo-project.iam.gserviceaccount.com, project demo-project, "
                                                     + "token endpoint https://oauth2.googleapis.com/token"])
        XCTAssertEqual(setup.firstRequestLine(sample: nil), "first FCM request: POST https://127.0.0.1:9443/v1/projects/demo-project/messages:send")
        let connection = try setup.connection()
        XCTAssertEqual(connection.endpoint, Endpoint(host: "127.0.0.1", port: 9443))
        XCTAssertEqual(connection.streams, 50)
        XCTAssertEqual(connection.connections, 4)
        XCTAssertThrowsError(try configure(["--fcm-credentials", path, "--fcm-token-uri", "ftp://x"])) { error in
            XCTAssertTrue("\(error)".hasPrefix("--fcm-token-uri: "), "\(error)")
        }
    }

    func testAStartThatCannotGetATokenStopsBeforeAnythingIsSent() throws {
        let path = try serviceAccount()
        let setup = try XCTUnwrap(try configure(["--fcm-credentials", path]))
        XCTAssertThrowsError(try setup.start { _ in }) { error in
            XCTAssertTrue("\(error)".contains("did not answer: no network in this test"), "\(error)")
        }
        XCTAssertNil(setup.finish(), "nothing was started")
    }
}
