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
            try Self.request(origin: origin, path: path, payload: payload, authorization: authorization, encryptor: encryptor, tamper: tamper)
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

    /// A message for the demo subscription at `origin` + `path`, encrypted to its keys.
    private static func request(origin: String, path: String, payload: String, authorization: String,
                                encryptor: WebPushEncryptor, tamper: Bool = false) throws -> HTTP2Request {
        let keys = try XCTUnwrap(WebPushDemoSubscriptions.make(endpoint: origin + path))
        let subscription = try WebPushSubscription(endpoint: origin + path, p256dh: keys.p256dh, auth: keys.auth)
        var body = [UInt8]()
        try Array(payload.utf8).withUnsafeBytes { try encryptor.encrypt($0, for: subscription, into: &body) }
        if tamper { body[body.count - 1] ^= 0x80 }
        let headers = [HTTP2Header("authorization", authorization), HTTP2Header("ttl", "60"), HTTP2Header("content-encoding", "aes128gcm")]
        return HTTP2Request(authority: String(origin.dropFirst("https://".count)), path: path, headers: headers, body: body)
    }

    /// `http1Port`: a second origin on its own port that speaks HTTP/1.1 only, while the main port
    /// stays HTTP/2, to the same client offering both; each origin checks VAPID against itself, and
    /// both count in the Web Push statistics and log the protocol the request came over.
    func testHTTP1OnlyPortIsAnOriginOfItsOwnOverHTTP1WhileTheMainPortSpeaksH2() throws {
        let logPath = try TestPKI().directory + "/webpush-log.ndjson"
        let harness = try FCMMockHarness { configuration in
            var webpush = MockWebPushConfiguration()
            webpush.http1Port = 0
            configuration.webpush = webpush
            configuration.logPath = logPath
        }
        defer { harness.stop() }
        let webpush = try XCTUnwrap(harness.server.webpush)
        let http1Port = try XCTUnwrap(webpush.http1Port)
        XCTAssertNotEqual(http1Port, webpush.port)
        XCTAssertEqual(webpush.http1Origin, "https://127.0.0.1:\(http1Port)")
        XCTAssertEqual(webpush.announcement, "WEBPUSH_PORT=\(webpush.port) WEBPUSH_ORIGIN=https://127.0.0.1:\(webpush.port) "
                       + "WEBPUSH_HTTP1_PORT=\(http1Port) WEBPUSH_HTTP1_ORIGIN=https://127.0.0.1:\(http1Port)")
        let signer = try VAPIDSigner(key: VAPIDKey.generate(), subject: "mailto:ops@example.com", clock: SystemWallClock())
        let encryptor = try WebPushEncryptor()
        let (h2Origin, h1Origin) = (webpush.origin, try XCTUnwrap(webpush.http1Origin))
        func messages(_ origin: String, _ tag: String) throws -> [HTTP2Request] {
            let good = try XCTUnwrap(signer.authorization(origin: origin))
            let other = try XCTUnwrap(signer.authorization(origin: origin == h2Origin ? h1Origin : h2Origin))
            return [try Self.request(origin: origin, path: "/ok\(tag)/a", payload: "ok " + tag, authorization: good, encryptor: encryptor),
                    try Self.request(origin: origin, path: "/gone\(tag)/a", payload: "gone " + tag, authorization: good, encryptor: encryptor),
                    try Self.request(origin: origin, path: "/ok\(tag)/b", payload: "other " + tag, authorization: other, encryptor: encryptor)]
        }
        let both = ["h2", "http/1.1"]
        let h2Answers = try harness.exchange(try messages(h2Origin, "1"), port: webpush.port, alpn: both)
        let h1Answers = try harness.exchange(try messages(h1Origin, "2"), port: http1Port, alpn: both)
        // A token signed for the other origin is refused on each: they are two origins.
        XCTAssertEqual(h2Answers.map(\.status), [201, 410, 403])
        XCTAssertEqual(h1Answers.map(\.status), [201, 410, 403])
        let statistics = harness.stop()
        XCTAssertEqual(statistics.webpush.requests, 6)
        XCTAssertEqual(statistics.webpush.delivered, 2)
        XCTAssertEqual(statistics.webpush.statusCounts, [201: 2, 410: 2, 403: 2])
        XCTAssertEqual(statistics.webpush.connectionsAccepted, 2)
        XCTAssertEqual(statistics.requests, 0)
        var protocols: [String: Set<String>] = [:]
        for line in try String(contentsOfFile: logPath, encoding: .utf8).split(separator: "\n") {
            let entry = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            let endpoint = try XCTUnwrap(entry["endpoint"] as? String)
            let origin = endpoint.hasPrefix(h1Origin + "/") ? h1Origin : endpoint.hasPrefix(h2Origin + "/") ? h2Origin : endpoint
            protocols[origin, default: []].insert(try XCTUnwrap(entry["http"] as? String))
        }
        XCTAssertEqual(protocols, [h2Origin: ["2"], h1Origin: ["1.1"]])
    }
}
