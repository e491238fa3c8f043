// The mock's Web Push listener over real TLS and HTTP/2 (our client against our server): VAPID
// verified against the origin the request arrived on, every message decrypted with the demo
// subscription's keys, the outcomes by endpoint kind, the counters and the request log.

import Foundation
import PushcastCore
import PushcastMock
import PushcastSystem
import PushcastWebPush
import PushcastWire
import XCTest

final class MockWebPushTests: XCTestCase {
    func testWebPushListenerVerifiesDecryptsAndLogsPayloadHashes() throws {
        let directory = try TestPKI().directory
        let logPath = directory + "/webpush-log.ndjson"
        let harness = try FCMMockHarness { configuration in
            configuration.webpush = MockWebPushConfiguration()
            configuration.logPath = logPath
        }
        defer { harness.stop() }
        let webpush = try XCTUnwrap(harness.server.webpush)
        XCTAssertEqual(webpush.announcement, "WEBPUSH_PORT=\(webpush.port) WEBPUSH_ORIGIN=https://127.0.0.1:\(webpush.port)")
        let authority = "127.0.0.1:\(webpush.port)"
        let origin = "https://" + authority
        let signer = try VAPIDSigner(key: VAPIDKey.generate(), subject: "mailto:ops@example.com", clock: SystemWallClock())
        let good = try XCTUnwrap(signer.authorization(origin: origin))
        let elsewhere = try XCTUnwrap(signer.authorization(origin: "https://127.0.0.1"))
        let encryptor = try WebPushEncryptor()
        func request(_ path: String, _ payload: String, authorization: String, tamper: Bool = false) throws -> HTTP2Request {
            let keys = try XCTUnwrap(WebPushDemoSubscriptions.make(endpoint: origin + path))
            let subscription = try WebPushSubscription(endpoint: origin + path, p256dh: keys.p256dh, auth: keys.auth)
            var body = [UInt8]()
            try Array(payload.utf8).withUnsafeBytes { try encryptor.encrypt($0, for: subscription, into: &body) }
            if tamper { body[body.count - 1] ^= 0x80 }
            let headers = [HTTP2Header("authorization", authorization), HTTP2Header("ttl", "60"), HTTP2Header("content-encoding", "aes128gcm")]
            return HTTP2Request(authority: authority, path: path, headers: headers, body: body)
        }
        let requests = [try request("/ok1/a", "first", authorization: good), try request("/gone1/a", "second", authorization: good),
                        try request("/slow1/a", "third", authorization: good), try request("/slow1/a", "fourth", authorization: good),
                        try request("/ok2/a", "fifth", authorization: elsewhere), try request("/ok3/a", "sixth", authorization: good, tamper: true)]
        let responses = try harness.exchange(requests, port: webpush.port)
        XCTAssertEqual(responses.map(\.status), [201, 410, 429, 201, 403, 400])
        XCTAssertEqual(responses[2].headers.first { $0.name == "retry-after" }?.value, "1")
        let statistics = harness.stop()
        XCTAssertEqual(statistics.webpush.requests, 6)
        XCTAssertEqual(statistics.webpush.delivered, 2)
        XCTAssertEqual(statistics.requests, 0)
        let log = try String(contentsOfFile: logPath, encoding: .utf8)
        for payload in ["first", "second", "third", "fourth"] {
            XCTAssertTrue(log.contains(WebPushDemoSubscriptions.sha256Hex(Array(payload.utf8))), payload)
            XCTAssertFalse(log.contains(payload))
        }
        XCTAssertFalse(log.contains(WebPushDemoSubscriptions.sha256Hex(Array("sixth".utf8))))
        XCTAssertTrue(log.contains("\"vapid\":\"wrongAudience\""), log)
    }
}
