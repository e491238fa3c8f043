// The mock push service's rules, in memory: a sender signs with VAPIDSigner and encrypts with
// WebPushEncryptor to a demo subscription; WebPushResponder verifies, decrypts and answers.

import PushcastCore
import PushcastProviderKit
import PushcastWire
import XCTest
@testable import PushcastWebPush

final class WebPushResponderTests: XCTestCase {
    static let authority = "push.example.net:8443"
    static let origin = "https://push.example.net:8443"
    let clock = ManualClock()

    func context(once: FirstTimeSet = FirstTimeSet()) -> ProviderRequestContext {
        let clock = self.clock
        return ProviderRequestContext(wallMilliseconds: { clock.secondsSinceEpoch() * 1000 }, random: SplitMix64(seed: 7), once: once)
    }

    func signer(clock: ManualClock? = nil) throws -> VAPIDSigner {
        try VAPIDSigner(key: VAPIDKey.generate(), subject: "mailto:ops@example.com", clock: clock ?? self.clock)
    }

    /// A request as a sender makes it: encrypted to the demo subscription at `path`.
    func request(path: String, payload: [UInt8] = Array("{\"title\":\"hi\"}".utf8), authorization: String?,
                 headers: [HTTP2Header] = [HTTP2Header("ttl", "60"), HTTP2Header("content-encoding", "aes128gcm")],
                 authority: String = authority, tamper: Bool = false) throws -> HTTP2ServerRequest {
        let keys = try XCTUnwrap(WebPushDemoSubscriptions.make(endpoint: "https://" + authority + path))
        let subscription = try WebPushSubscription(endpoint: "https://" + authority + path, p256dh: keys.p256dh, auth: keys.auth)
        var body = [UInt8]()
        try payload.withUnsafeBytes { try WebPushEncryptor().encrypt($0, for: subscription, into: &body) }
        if tamper { body[body.count - 5] ^= 1 }
        var all = headers
        if let authorization { all.append(HTTP2Header("authorization", authorization)) }
        return HTTP2ServerRequest(streamID: 1, method: "POST", path: path, authority: authority, headers: all, body: body)
    }

    func reason(_ answer: ProviderServerAnswer) -> String { String(decoding: answer.body, as: UTF8.self) }

    func testAcceptedMessageIsDecryptedLoggedByHashAndGetsALocation() throws {
        let responder = WebPushResponder()
        let payload = Array("{\"title\":\"hello\"}".utf8)
        let request = try request(path: "/ok1/abc", payload: payload, authorization: try signer().authorization(origin: Self.origin))
        let answer = responder.respond(to: request, context: context())
        XCTAssertEqual(answer.status, 201)
        XCTAssertEqual(answer.kind, .accepted)
        let location = try XCTUnwrap(answer.headers.first { $0.name == "location" }?.value)
        XCTAssertTrue(location.hasPrefix(Self.origin + "/m/"), location)
        let log = responder.logMembers(request, answer)
        XCTAssertTrue(log.contains("\"payload_sha256\":\"" + WebPushDemoSubscriptions.sha256Hex(payload) + "\""), log)
        XCTAssertTrue(log.contains("\"endpoint\":\"https://push.example.net:8443/ok1/abc\""), log)
        XCTAssertFalse(log.contains("hello"))
        XCTAssertEqual(WebPushDemoSubscriptions.sha256Hex(Array("abc".utf8)), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    }

    func testKindsByPathPrefix() throws {
        let responder = WebPushResponder()
        let once = FirstTimeSet()
        let authorization = try signer().authorization(origin: Self.origin)
        func status(_ path: String) throws -> ProviderServerAnswer {
            responder.respond(to: try request(path: path, authorization: authorization), context: context(once: once))
        }
        XCTAssertEqual(try status("/gone3/x").status, 410)
        XCTAssertEqual(try status("/gone3/x").kind, .deviceGone)
        XCTAssertEqual(try status("/nf1/x").status, 404)
        XCTAssertEqual(try status("/4042").status, 404)
        XCTAssertEqual(try status("/big9/x").status, 413)
        let slow = try status("/slow1/x")
        XCTAssertEqual(slow.status, 429)
        XCTAssertEqual(slow.headers.first { $0.name == "retry-after" }?.value, "1")
        XCTAssertEqual(try status("/slow1/x").status, 201)
        XCTAssertEqual(try status("/busy1/x").status, 503)
        XCTAssertEqual(try status("/busy1/x").status, 201)
        XCTAssertEqual(try status("/x/gone").status, 201)
    }

    func testVAPIDRefusalsAre403() throws {
        let responder = WebPushResponder()
        let good = try XCTUnwrap(try signer().authorization(origin: Self.origin))
        func answer(_ authorization: String?, authority: String = WebPushResponderTests.authority) throws -> ProviderServerAnswer {
            responder.respond(to: try request(path: "/ok/1", authorization: authorization, authority: authority), context: context())
        }
        XCTAssertEqual(try answer(nil).status, 403)
        XCTAssertEqual(reason(try answer(nil)), "{\"reason\":\"BadJwtToken\"}")
        XCTAssertEqual(try answer(nil).kind, .credentialsRefused)
        // aud names another origin: the port differs.
        XCTAssertEqual(try answer(try signer().authorization(origin: "https://push.example.net")).status, 403)
        XCTAssertEqual(try answer(good, authority: "push.example.net:9443").status, 403)
        // Expired: signed a day and a half ago.
        let old = ManualClock(epochSecondsAtZero: clock.secondsSinceEpoch() - 36 * 3600)
        let expired = responder.respond(to: try request(path: "/ok/1", authorization: try signer(clock: old).authorization(origin: Self.origin)), context: context())
        XCTAssertEqual(expired.status, 403)
        XCTAssertTrue(responder.logMembers(try request(path: "/ok/1", authorization: nil), expired).contains("\"vapid\":\"expired\""))
        // A signature byte changed.
        var bad = Array(good.utf8)
        let comma = try XCTUnwrap(bad.firstIndex(of: UInt8(ascii: ",")))
        bad[comma - 3] = bad[comma - 3] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        XCTAssertEqual(try answer(String(decoding: bad, as: UTF8.self)).status, 403)
        // Default port: the origin has none.
        let plain = try signer().authorization(origin: "https://push.example.net")
        XCTAssertEqual(try answer(plain, authority: "push.example.net:443").status, 201)
        XCTAssertEqual(try answer(good).status, 201)
    }

    func testHeaderBodyAndDecryptionRules() throws {
        let responder = WebPushResponder()
        let good = try signer().authorization(origin: Self.origin)
        func answer(_ headers: [HTTP2Header], tamper: Bool = false, payload: [UInt8] = [1, 2, 3]) throws -> ProviderServerAnswer {
            responder.respond(to: try request(path: "/ok/2", payload: payload, authorization: good, headers: headers, tamper: tamper), context: context())
        }
        let encoding = HTTP2Header("content-encoding", "aes128gcm")
        XCTAssertEqual(try answer([encoding]).status, 400)
        XCTAssertEqual(try answer([HTTP2Header("ttl", "x"), encoding]).status, 400)
        XCTAssertEqual(try answer([HTTP2Header("ttl", "0")]).status, 400)
        XCTAssertEqual(try answer([HTTP2Header("ttl", "0"), HTTP2Header("content-encoding", "aesgcm")]).status, 400)
        let tampered = try answer([HTTP2Header("ttl", "0"), encoding], tamper: true)
        XCTAssertEqual(tampered.status, 400)
        XCTAssertEqual(reason(tampered), "{\"reason\":\"DecryptionFailed\"}")
        XCTAssertEqual(try answer([HTTP2Header("ttl", "0"), encoding]).status, 201)
        var large = try request(path: "/ok/2", authorization: good)
        large.body += [UInt8](repeating: 0, count: WebPushResponder.bodyBytesMax)
        XCTAssertEqual(responder.respond(to: large, context: context()).status, 413)
        // Another seed's push service cannot read the demo subscription's messages.
        let other = WebPushResponder(seed: "another")
        XCTAssertEqual(other.respond(to: try request(path: "/ok/2", authorization: good), context: context()).status, 400)
    }

    func testDemoKeysAreDeterministicAndByPath() throws {
        let one = try XCTUnwrap(WebPushDemoSubscriptions.make(endpoint: "https://a.example:8443/ok1/x"))
        let again = try XCTUnwrap(WebPushDemoSubscriptions.make(endpoint: "https://b.example/ok1/x"))
        let other = try XCTUnwrap(WebPushDemoSubscriptions.make(endpoint: "https://a.example:8443/ok2/x"))
        let seeded = try XCTUnwrap(WebPushDemoSubscriptions.make(endpoint: "https://a.example:8443/ok1/x", seed: "s"))
        XCTAssertEqual(one.p256dh, again.p256dh)
        XCTAssertEqual(one.auth, again.auth)
        XCTAssertNotEqual(one.p256dh, other.p256dh)
        XCTAssertNotEqual(one.auth, other.auth)
        XCTAssertNotEqual(one.p256dh, seeded.p256dh)
        XCTAssertEqual(one.publicPoint.count, 65)
        XCTAssertEqual(one.authSecret.count, 16)
        XCTAssertEqual(WebPushDemoSubscriptions.path(of: "https://a.example:8443/ok1/x?y"), "/ok1/x?y")
        XCTAssertEqual(WebPushDemoSubscriptions.path(of: "https://a.example"), "/")
        // HMAC-SHA-256 (RFC 4231 test case 2), the derivation's primitive.
        let mac = try XCTUnwrap(WebPushDemoSubscriptions.hmac(key: Array("Jefe".utf8), message: Array("what do ya want for nothing?".utf8)))
        XCTAssertEqual(Base64URL.encode(mac), Base64URL.encode(decodedHex("5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")))
    }

    func testSubscriptionFileKeysDecrypt() throws {
        let random = SplitMix64(seed: 42)
        let scalar = (0..<32).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        let key = try XCTUnwrap(scalar.withUnsafeBytes { P256Key.privateKey(scalar: $0) })
        let point = try XCTUnwrap(key.publicPoint())
        let auth = [UInt8](repeating: 9, count: 16)
        let endpoint = "https://" + Self.authority + "/given/1"
        let line = "{\"endpoint\":\"\(endpoint)\",\"private_key\":\"\(Base64URL.encode(scalar))\",\"auth\":\"\(Base64URL.encode(auth))\"}\n"
        let responder = WebPushResponder(subscriptions: try WebPushSubscriptionFile.read(Array(line.utf8)))
        let subscription = try WebPushSubscription(endpoint: endpoint, p256dh: Base64URL.encode(point), auth: Base64URL.encode(auth))
        var body = [UInt8]()
        try Array("x".utf8).withUnsafeBytes { try WebPushEncryptor().encrypt($0, for: subscription, into: &body) }
        let headers = [HTTP2Header("ttl", "5"), HTTP2Header("content-encoding", "aes128gcm"),
                       HTTP2Header("authorization", try XCTUnwrap(try signer().authorization(origin: Self.origin)))]
        let request = HTTP2ServerRequest(streamID: 1, method: "POST", path: "/given/1", authority: Self.authority, headers: headers, body: body)
        XCTAssertEqual(responder.respond(to: request, context: context()).status, 201)
        XCTAssertEqual(WebPushResponder().respond(to: request, context: context()).status, 400)
        XCTAssertThrowsError(try WebPushSubscriptionFile.read(Array("{\"endpoint\":\"x\"}".utf8)))
    }
}

func decodedHex(_ text: String) -> [UInt8] {
    var bytes = [UInt8]()
    var index = text.startIndex
    while index < text.endIndex {
        let next = text.index(index, offsetBy: 2)
        bytes.append(UInt8(text[index..<next], radix: 16)!)
        index = next
    }
    return bytes
}

final class WebPushDemoRowsTests: XCTestCase {
    func testRowsAreDeterministicMixedAndDecryptableByTheMock() throws {
        let origins = ["https://127.0.0.1:8443", "https://push.example.net:9443"]
        let rows = try XCTUnwrap(WebPushDemoRows.generate(origins: origins, count: 2000, seed: 5))
        XCTAssertEqual(rows, WebPushDemoRows.generate(origins: origins, count: 2000, seed: 5))
        XCTAssertNotEqual(rows, WebPushDemoRows.generate(origins: origins, count: 2000, seed: 6))
        XCTAssertEqual(rows.count, 2000)
        var kinds: [String: Int] = [:]
        for row in rows {
            let fields = row.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
            XCTAssertEqual(fields.count, WebPushDemoRows.header.split(separator: ",").count)
            XCTAssertEqual(fields[2], "web")
            let subscription = try WebPushSubscription(endpoint: fields[1], p256dh: fields[5], auth: fields[6])
            XCTAssertTrue(origins.contains(subscription.origin), subscription.origin)
            let segment = WebPushDemoSubscriptions.path(of: fields[1]).split(separator: "/").first ?? ""
            kinds[String(segment.prefix { $0.isLetter }), default: 0] += 1
        }
        XCTAssertEqual(Set(kinds.keys), ["ok", "gone", "nf", "big", "slow", "busy"])
        XCTAssertGreaterThan(kinds["ok"] ?? 0, 1800)
        // The mock decrypts what a sender encrypts to a demo row's keys.
        let fields = rows[0].split(separator: ",").map(String.init)
        let subscription = try WebPushSubscription(endpoint: fields[1], p256dh: fields[5], auth: fields[6])
        var body = [UInt8]()
        try Array("hello".utf8).withUnsafeBytes { try WebPushEncryptor().encrypt($0, for: subscription, into: &body) }
        let keys = try XCTUnwrap(WebPushResponder().privateSubscription(path: String(WebPushDemoSubscriptions.path(of: fields[1]))))
        XCTAssertEqual(try WebPushDecryptor(scalar: keys.scalar, authSecret: keys.authSecret).decrypt(body), Array("hello".utf8))
        // The scalar path and the OpenSSL-key path agree, and both refuse another subscription's body.
        let demo = try XCTUnwrap(WebPushDemoSubscriptions.make(endpoint: fields[1]))
        XCTAssertEqual(demo.p256dh, fields[5])
        XCTAssertEqual(try WebPushDecryptor(privateKey: demo.privateKey, authSecret: demo.authSecret).decrypt(body), Array("hello".utf8))
        let other = try XCTUnwrap(WebPushResponder().privateSubscription(path: String(WebPushDemoSubscriptions.path(of: String(rows[1].split(separator: ",")[1])))))
        XCTAssertThrowsError(try WebPushDecryptor(scalar: other.scalar, authSecret: other.authSecret).decrypt(body))
        var offCurve = body
        offCurve[21 + 64] ^= 1
        XCTAssertThrowsError(try WebPushDecryptor(scalar: keys.scalar, authSecret: keys.authSecret).decrypt(offCurve)) { error in
            XCTAssertEqual(error as? WebPushDecryptionError, .keyNotOnCurve)
        }
    }

    func testPrivateScalarsAreOneUpToTheGroupOrder() {
        XCTAssertFalse(WebPushDemoSubscriptions.isPrivateScalar([UInt8](repeating: 0, count: 32)))
        XCTAssertTrue(WebPushDemoSubscriptions.isPrivateScalar([UInt8](repeating: 0, count: 31) + [1]))
        XCTAssertFalse(WebPushDemoSubscriptions.isPrivateScalar(WebPushDemoSubscriptions.order), "n itself")
        XCTAssertTrue(WebPushDemoSubscriptions.isPrivateScalar(Array(WebPushDemoSubscriptions.order.dropLast()) + [0x50]), "n - 1")
        XCTAssertFalse(WebPushDemoSubscriptions.isPrivateScalar([UInt8](repeating: 0xFF, count: 32)))
        XCTAssertFalse(WebPushDemoSubscriptions.isPrivateScalar([1]))
    }
}
