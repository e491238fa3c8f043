// RFC 8291 message encryption: the Appendix A known answer, encryption then decryption over
// sizes from 0 to the 3,993-byte limit, and the receiver's checks on damaged bodies.

import PushcastCore
import PushcastWire
import XCTest
@testable import PushcastWebPush

final class WebPushEncryptionTests: XCTestCase {
    private func rfcSubscription() throws -> WebPushSubscription {
        try WebPushSubscription(endpoint: RFC8291.endpoint, p256dh: RFC8291.uaPublic, auth: RFC8291.authSecret)
    }

    func testTheApplicationServerKeyOfAppendixADerivesItsPublicKey() throws {
        XCTAssertEqual(privateKey(RFC8291.asPrivate).publicPoint(), decoded(RFC8291.asPublic))
        XCTAssertEqual(privateKey(RFC8291.uaPrivate).publicPoint(), decoded(RFC8291.uaPublic))
    }

    func testAppendixAKnownAnswerGivesTheRFCsBodyByteForByte() throws {
        let keys = FixedKeys(key: privateKey(RFC8291.asPrivate), salt: decoded(RFC8291.salt))
        let encryptor = try WebPushEncryptor(keys: keys)
        var body: [UInt8] = []
        try RFC8291.plaintext.withUnsafeBytes { try encryptor.encrypt($0, for: rfcSubscription(), into: &body) }
        XCTAssertEqual(Base64URL.encode(body), RFC8291.body)
        XCTAssertEqual(Array(body.prefix(86)), decoded(RFC8291.header))
        XCTAssertEqual(body.count, 86 + RFC8291.plaintext.count + 1 + 16)
    }

    func testAppendixABodyDecryptsWithTheUserAgentKey() throws {
        let decryptor = try WebPushDecryptor(privateKey: privateKey(RFC8291.uaPrivate), authSecret: decoded(RFC8291.authSecret))
        XCTAssertEqual(try decryptor.decrypt(decoded(RFC8291.body)), RFC8291.plaintext)
    }

    func testEncryptedBodiesDecryptAtSizesFromEmptyToTheLimit() throws {
        let (subscription, key, auth) = try freshSubscription()
        let encryptor = try WebPushEncryptor()
        let decryptor = try WebPushDecryptor(privateKey: key, authSecret: auth)
        let random = SplitMix64(seed: 8291)
        var sizes = [0, 1, 15, 16, 17, 255, 1024, 3992, WebPushContentCoding.plaintextBytesMax]
        for _ in 0..<24 { sizes.append(Int(random.next() % UInt64(WebPushContentCoding.plaintextBytesMax + 1))) }
        var body: [UInt8] = []
        for size in sizes {
            let plaintext = (0..<size).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            try plaintext.withUnsafeBytes { try encryptor.encrypt($0, for: subscription, into: &body) }
            XCTAssertEqual(body.count, 86 + size + 1 + 16, "size \(size)")
            XCTAssertEqual(body[16..<21], [0, 0, 0x10, 0, 65], "rs 4096 and idlen 65")
            XCTAssertEqual(try decryptor.decrypt(body), plaintext, "size \(size)")
        }
        XCTAssertEqual(WebPushContentCoding.bodyBytes(plaintextBytes: WebPushContentCoding.plaintextBytesMax), 4096)
    }

    func testEachMessageHasAFreshKeyAndSalt() throws {
        let (subscription, _, _) = try freshSubscription()
        let encryptor = try WebPushEncryptor()
        var first: [UInt8] = []
        var second: [UInt8] = []
        try RFC8291.plaintext.withUnsafeBytes { try encryptor.encrypt($0, for: subscription, into: &first) }
        try RFC8291.plaintext.withUnsafeBytes { try encryptor.encrypt($0, for: subscription, into: &second) }
        XCTAssertNotEqual(first[0..<16], second[0..<16], "salt")
        XCTAssertNotEqual(first[21..<86], second[21..<86], "ephemeral key")
        XCTAssertNotEqual(first[86...], second[86...])
    }

    func testMoreThan3993BytesIsRejected() throws {
        let (subscription, _, _) = try freshSubscription()
        let encryptor = try WebPushEncryptor()
        var body: [UInt8] = []
        let plaintext = [UInt8](repeating: 0x61, count: 3994)
        XCTAssertThrowsError(try plaintext.withUnsafeBytes { try encryptor.encrypt($0, for: subscription, into: &body) }) { error in
            XCTAssertEqual(error as? WebPushEncryptionError, .plaintextTooLarge(bytes: 3994, bytesMax: 3993))
            XCTAssertTrue("\(error)".contains("3993"))
        }
    }

    func testACallerBufferTooSmallIsRejectedAndAnExactOneIsFilled() throws {
        let (subscription, key, auth) = try freshSubscription()
        let encryptor = try WebPushEncryptor()
        var buffer = [UInt8](repeating: 0xEE, count: 86 + 41 + 17 + 10)
        let short = UnsafeMutableRawBufferPointer.allocate(byteCount: 86 + 41 + 16, alignment: 1)
        defer { short.deallocate() }
        XCTAssertThrowsError(try RFC8291.plaintext.withUnsafeBytes { try encryptor.encrypt($0, for: subscription, into: short) }) { error in
            XCTAssertEqual(error as? WebPushEncryptionError, .bufferTooSmall(bytesNeeded: 144))
        }
        let written = try buffer.withUnsafeMutableBytes { out in try RFC8291.plaintext.withUnsafeBytes { try encryptor.encrypt($0, for: subscription, into: out) } }
        XCTAssertEqual(written, 144)
        XCTAssertEqual(buffer[144...], [UInt8](repeating: 0xEE, count: 10)[...], "nothing past the body is written")
        let decryptor = try WebPushDecryptor(privateKey: key, authSecret: auth)
        XCTAssertEqual(try decryptor.decrypt(Array(buffer.prefix(written))), RFC8291.plaintext)
    }

    func testTheDecryptorRefusesDamagedBodies() throws {
        let decryptor = try WebPushDecryptor(privateKey: privateKey(RFC8291.uaPrivate), authSecret: decoded(RFC8291.authSecret))
        let body = decoded(RFC8291.body)
        func refusal(_ edit: (inout [UInt8]) -> Void) -> WebPushDecryptionError? {
            var damaged = body
            edit(&damaged)
            do {
                _ = try decryptor.decrypt(damaged)
                return nil
            } catch { return error }
        }
        XCTAssertEqual(refusal { $0[100] ^= 1 }, .authenticationFailed, "ciphertext")
        XCTAssertEqual(refusal { $0[$0.count - 1] ^= 1 }, .authenticationFailed, "tag")
        XCTAssertEqual(refusal { $0[3] ^= 1 }, .authenticationFailed, "salt")
        XCTAssertEqual(refusal { $0.removeLast(50) }, .truncated(bytes: 94))
        XCTAssertEqual(refusal { $0[20] = 64 }, .keyIDLength(64))
        XCTAssertEqual(refusal { $0[19] = 17; $0[18] = 0 }, .recordSizeTooSmall(17))
        XCTAssertEqual(refusal { $0[18] = 0; $0[19] = 40 }, .recordLargerThanRecordSize(record: 58, recordSize: 40))
        XCTAssertEqual(refusal { $0[85] ^= 1 }, .keyNotOnCurve)
        let other = try WebPushDecryptor(privateKey: privateKey(RFC8291.uaPrivate), authSecret: [UInt8](repeating: 7, count: 16))
        XCTAssertThrowsError(try other.decrypt(body)) { XCTAssertEqual($0 as? WebPushDecryptionError, .authenticationFailed) }
    }

    func testARecordWithoutThePaddingDelimiterIsDiscarded() throws {
        // A record sealed with the right keys but ending in 0x01: only the delimiter check catches it.
        let uaKey = privateKey(RFC8291.uaPrivate)
        let asKey = privateKey(RFC8291.asPrivate)
        let schedule = try XCTUnwrap(WebPushKeySchedule())
        var body = decoded(RFC8291.header) + RFC8291.plaintext + [0x01, 0, 0] + [UInt8](repeating: 0, count: 16)
        XCTAssertTrue(asKey.sharedSecret(with: uaKey, into: schedule.secret))
        let derived = decoded(RFC8291.authSecret).withUnsafeBytes { auth in
            decoded(RFC8291.uaPublic).withUnsafeBytes { ua in
                decoded(RFC8291.asPublic).withUnsafeBytes { server in
                    decoded(RFC8291.salt).withUnsafeBytes { schedule.derive(authSecret: auth, userAgentPublic: ua, serverPublic: server, salt: $0) }
                }
            }
        }
        XCTAssertTrue(derived)
        let sealed = body.withUnsafeMutableBytes { schedule.seal(UnsafeMutableRawBufferPointer(rebasing: $0[86...]), count: RFC8291.plaintext.count + 3) }
        XCTAssertTrue(sealed)
        let decryptor = try WebPushDecryptor(privateKey: uaKey, authSecret: decoded(RFC8291.authSecret))
        XCTAssertThrowsError(try decryptor.decrypt(body)) { XCTAssertEqual($0 as? WebPushDecryptionError, .badPadding) }
        body[86 + RFC8291.plaintext.count] = 0
        XCTAssertThrowsError(try decryptor.decrypt(body)) { XCTAssertEqual($0 as? WebPushDecryptionError, .authenticationFailed) }
    }

    /// The production agreement (one reused OpenSSL context): a fresh ephemeral key each time, and
    /// the secret the user agent computes from its own private key and that ephemeral point; a
    /// p256dh off the curve is refused, and the context still works afterwards.
    func testTheReusedAgreementMatchesTheUserAgentsECDHAndRefusesPointsOffTheCurve() throws {
        let keys = OpenSSLWebPushKeys()
        let (subscription, userAgent, _) = try freshSubscription()
        var seen = Set<[UInt8]>()
        for _ in 0..<3 {
            var ours = [UInt8](repeating: 0, count: 65), secret = [UInt8](repeating: 0, count: 32)
            let result = subscription.p256dh.withUnsafeBytes { theirs in
                ours.withUnsafeMutableBytes { o in secret.withUnsafeMutableBytes { keys.agree(userAgentPublic: theirs, serverPublic: o, secret: $0) } }
            }
            XCTAssertEqual(result, .agreed)
            let ephemeral = try XCTUnwrap(ours.withUnsafeBytes { P256Key.publicKey(point: $0) }, "the ephemeral point is on the curve")
            var expected = [UInt8](repeating: 0, count: 32)
            XCTAssertTrue(expected.withUnsafeMutableBytes { userAgent.sharedSecret(with: ephemeral, into: $0) })
            XCTAssertEqual(secret, expected)
            seen.insert(ours)
        }
        XCTAssertEqual(seen.count, 3, "an ephemeral key was used twice")
        var offCurve = subscription.p256dh
        offCurve[64] ^= 1
        var ours = [UInt8](repeating: 0, count: 65), secret = [UInt8](repeating: 0, count: 32)
        let refused = offCurve.withUnsafeBytes { theirs in
            ours.withUnsafeMutableBytes { o in secret.withUnsafeMutableBytes { keys.agree(userAgentPublic: theirs, serverPublic: o, secret: $0) } }
        }
        XCTAssertEqual(refused, .notOnCurve)
        let again = subscription.p256dh.withUnsafeBytes { theirs in
            ours.withUnsafeMutableBytes { o in secret.withUnsafeMutableBytes { keys.agree(userAgentPublic: theirs, serverPublic: o, secret: $0) } }
        }
        XCTAssertEqual(again, .agreed)
    }
}
