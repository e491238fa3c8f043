// VAPID (RFC 8292): keys as the web-push tool and PEM files hold them, the Authorization header
// and its per-origin cache on an injected clock, and the verifier's refusals.

import PushcastCore
import PushcastJSON
import Dispatch
import PushcastWire
import Synchronization
import XCTest
@testable import PushcastWebPush

final class VAPIDTests: XCTestCase {
    /// `openssl ecparam -genkey -name prime256v1 -noout`: the SEC1 form py_vapid also writes.
    static let sec1PEM = """
        -----BEGIN EC PRIVATE KEY-----
        MHcCAQEEIDjKRUKlTcfHeNoQSLj+DDSe2KjVrm8JgJAg5o5f7B+moAoGCCqGSM49
        AwEHoUQDQgAE03RBkZ1aG/yJGXLzci+0Mcw62Mb2AK+qW8RbD+iJ5Ik7g85OjU3O
        l4P2O2zvcgVQxJcGLgaWmWFudM0v01AC9g==
        -----END EC PRIVATE KEY-----

        """
    /// Its public key, from `openssl ec -pubout -outform DER | tail -c 65`, base64url.
    static let sec1Public = "BNN0QZGdWhv8iRly83IvtDHMOtjG9gCvqlvEWw_oieSJO4POTo1NzpeD9jts73IFUMSXBi4GlplhbnTNL9NQAvY"
    /// A P-384 key, which VAPID cannot use.
    static let p384PEM = """
        -----BEGIN EC PRIVATE KEY-----
        MIGkAgEBBDDeH4wBDU7qVteqMa1rFwnjWFUFEeofHigp8bopVKm3a8dLM8gA84iF
        yaOifTCquQegBwYFK4EEACKhZANiAATuFqJNvEEbd7n2RCzV8S0l5AU9lXYRcs6b
        muFZ5afuO6rdqdIkm4GFKqactSa3TXcTDEg/t5m3UOpZepslEwOpYNjpcjbEcwgJ
        SY6PKFgm3BAt6OhzqH7b6YGwEtOclTQ=
        -----END EC PRIVATE KEY-----
        """

    private func read(_ text: String) throws -> VAPIDKey {
        try Array(text.utf8).withUnsafeBytes { try VAPIDKey.read($0, source: "'test'") }
    }

    private func refusal(_ text: String) -> String? {
        do {
            _ = try read(text)
            return nil
        } catch { return "\(error)" }
    }

    private func files(_ contents: [String: String]) -> SecretFileReader {
        { path, bytesMax throws(SecretFileError) in
            guard let text = contents[path] else { throw .cannotOpen(reason: "No such file or directory") }
            guard text.utf8.count <= bytesMax else { throw .tooLarge(bytesMax: bytesMax) }
            return Array(text.utf8).withUnsafeBytes { SecretBytes(copying: $0) }
        }
    }

    func testARawWebPushToolKeyDerivesItsPublicKey() throws {
        // The application server key pair of RFC 8291 Appendix A, written as the web-push tool writes keys.
        XCTAssertEqual(try read(RFC8291.asPrivate).publicKeyText, RFC8291.asPublic)
        XCTAssertEqual(try read(RFC8291.asPrivate + "=\n").publicKeyText, RFC8291.asPublic)
        XCTAssertEqual(try read("  " + RFC8291.asPrivate + "\r\n").publicKey, decoded(RFC8291.asPublic))
    }

    func testPEMKeysInSEC1AndPKCS8FormRead() throws {
        XCTAssertEqual(try read(Self.sec1PEM).publicKeyText, Self.sec1Public)
        let generated = try VAPIDKey.generate()
        let pkcs8 = try XCTUnwrap(generated.key.pem(publicOnly: false))
        XCTAssertTrue(pkcs8.hasPrefix("-----BEGIN PRIVATE KEY-----"))
        XCTAssertEqual(try read(pkcs8).publicKey, generated.publicKey)
    }

    func testUnusableKeysAreRefusedWithoutShowingThem() {
        let zero = Base64URL.encode([UInt8](repeating: 0, count: 32))
        let order = Base64URL.encode([UInt8](repeating: 0xFF, count: 32))
        XCTAssertEqual(refusal(""), "the VAPID private key 'test' is empty")
        XCTAssertTrue(refusal(Base64URL.encode([UInt8](repeating: 1, count: 31)))?.contains("decodes to 31 bytes") == true)
        XCTAssertTrue(refusal(zero)?.contains("not a valid P-256 private key") == true)
        XCTAssertTrue(refusal(order)?.contains("not a valid P-256 private key") == true)
        XCTAssertTrue(refusal("not a key at all!")?.contains("is not base64url") == true)
        XCTAssertTrue(refusal(String(repeating: "A", count: 65))?.contains("is not a key") == true)
        XCTAssertTrue(refusal(Self.p384PEM)?.contains("is on curve secp384r1") == true)
        XCTAssertTrue(refusal("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")?.contains("cannot read the VAPID private key 'test'") == true)
        for text in [zero, order, Self.p384PEM] { XCTAssertFalse(refusal(text)?.contains(String(text.prefix(20))) ?? true) }
    }

    func testKeyFilesAreReadThroughTheSecretReaderAndNamedInErrors() throws {
        let reader = files(["vapid.pem": Self.sec1PEM, "raw.txt": RFC8291.asPrivate + "\n", "big.pem": String(repeating: "x", count: 70_000)])
        XCTAssertEqual(try VAPIDKey.load(file: "vapid.pem", files: reader).publicKeyText, Self.sec1Public)
        XCTAssertEqual(try VAPIDKey.load(file: "raw.txt", files: reader).publicKeyText, RFC8291.asPublic)
        XCTAssertThrowsError(try VAPIDKey.load(file: "gone.pem", files: reader)) {
            XCTAssertEqual("\($0)", "cannot open the VAPID private key 'gone.pem': No such file or directory")
        }
        XCTAssertThrowsError(try VAPIDKey.load(file: "big.pem", files: reader)) {
            XCTAssertEqual("\($0)", "the VAPID private key 'big.pem' is larger than 64 KiB; it is not a key file")
        }
    }

    func testTheHeaderCarriesASignedTokenForTheOriginAndTheKey() throws {
        let clock = ManualClock()
        let key = try read(Self.sec1PEM)
        let signer = try VAPIDSigner(key: key, subject: "mailto:push@example.com", clock: clock)
        let header = try XCTUnwrap(signer.authorization(origin: "https://fcm.googleapis.com"))
        XCTAssertTrue(header.hasPrefix("vapid t="))
        XCTAssertTrue(header.hasSuffix(", k=" + Self.sec1Public))
        // Independently of the verifier: the JWT's parts as JSON, and its signature under the PEM's public key.
        let token = String(header.dropFirst("vapid t=".count).prefix(while: { $0 != "," }))
        let parts = token.split(separator: ".").map(String.init)
        XCTAssertEqual(parts.count, 3)
        let jwtHeader = try JSONScanner.parse(decoded(parts[0])).get()
        XCTAssertEqual(jwtHeader["alg"]?.stringValue, "ES256")
        XCTAssertEqual(jwtHeader["typ"]?.stringValue, "JWT")
        let claims = try JSONScanner.parse(decoded(parts[1])).get()
        XCTAssertEqual(claims["aud"]?.stringValue, "https://fcm.googleapis.com")
        XCTAssertEqual(claims["exp"]?.int64Value, clock.secondsSinceEpoch() + 12 * 3600)
        XCTAssertEqual(claims["sub"]?.stringValue, "mailto:push@example.com")
        let publicKey = try XCTUnwrap(decoded(Self.sec1Public).withUnsafeBytes { P256Key.publicKey(point: $0) })
        let signed = Array((parts[0] + "." + parts[1]).utf8)
        XCTAssertTrue(signed.withUnsafeBytes { message in decoded(parts[2]).withUnsafeBytes { publicKey.verify(message, rawSignature: $0) } })
        let verifier = VAPIDVerifier(clock: clock)
        XCTAssertEqual(try verifier.verify(authorization: header, origin: "https://fcm.googleapis.com").get(), decoded(Self.sec1Public))
    }

    /// A push service's cache of checked signatures skips only the ECDSA check: the same header
    /// is still refused for another origin or once it expires, and a header whose signature was
    /// altered is checked (and refused) as new.
    func testACachedSignatureStillHasItsClaimsCheckedEachTime() throws {
        let clock = ManualClock()
        let signer = try VAPIDSigner(key: try read(Self.sec1PEM), subject: "mailto:push@example.com", clock: clock)
        let header = try XCTUnwrap(signer.authorization(origin: "https://fcm.googleapis.com"))
        let cache = VAPIDSignatureCache()
        let verifier = VAPIDVerifier(clock: clock, cache: cache)
        XCTAssertEqual(try verifier.verify(authorization: header, origin: "https://fcm.googleapis.com").get(), decoded(Self.sec1Public))
        XCTAssertTrue(cache.contains(header))
        XCTAssertEqual(try verifier.verify(authorization: header, origin: "https://fcm.googleapis.com").get(), decoded(Self.sec1Public))
        XCTAssertEqual(verifier.verify(authorization: header, origin: "https://web.push.apple.com"), .failure(.wrongAudience))
        let token = header.dropFirst("vapid t=".count).prefix(while: { $0 != "," })
        var signature = Array(token.split(separator: ".")[2].utf8)
        signature[4] = signature[4] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        let forged = header.replacingOccurrences(of: String(token.split(separator: ".")[2]), with: String(decoding: signature, as: UTF8.self))
        XCTAssertEqual(verifier.verify(authorization: forged, origin: "https://fcm.googleapis.com"), .failure(.badSignature))
        XCTAssertFalse(cache.contains(forged))
        clock.advance(milliseconds: 13 * 3600 * 1000)
        XCTAssertEqual(verifier.verify(authorization: header, origin: "https://fcm.googleapis.com"), .failure(.expired))
    }

    func testOneTokenPerOriginIsReusedUntilAnHourBeforeItExpires() throws {
        let clock = ManualClock()
        let signer = try VAPIDSigner(key: VAPIDKey.generate(), subject: "https://example.com/contact", clock: clock)
        let first = signer.authorization(origin: "https://fcm.googleapis.com")
        XCTAssertEqual(signer.authorization(origin: "https://fcm.googleapis.com"), first)
        XCTAssertEqual(signer.signatureCount, 1)
        let other = signer.authorization(origin: "https://updates.push.services.mozilla.com")
        XCTAssertNotEqual(other, first)
        XCTAssertEqual(signer.signatureCount, 2)
        clock.advance(nanoseconds: UInt64(11 * 3600 - 1) * 1_000_000_000)
        XCTAssertEqual(signer.authorization(origin: "https://fcm.googleapis.com"), first)
        XCTAssertEqual(signer.signatureCount, 2)
        clock.advance(nanoseconds: 1_000_000_000)
        let renewed = try XCTUnwrap(signer.authorization(origin: "https://fcm.googleapis.com"))
        XCTAssertNotEqual(renewed, first)
        XCTAssertEqual(signer.signatureCount, 3)
        let verifier = VAPIDVerifier(clock: clock)
        XCTAssertNoThrow(try verifier.verify(authorization: renewed, origin: "https://fcm.googleapis.com").get())
        XCTAssertEqual(signer.authorization(origin: "https://updates.push.services.mozilla.com"), signer.authorization(origin: "https://updates.push.services.mozilla.com"))
        XCTAssertEqual(signer.signatureCount, 4)
    }

    func testTheCacheKeepsAtMostOriginsMaxAndDropsTheFirstToExpire() throws {
        let clock = ManualClock()
        let signer = try VAPIDSigner(key: VAPIDKey.generate(), subject: "mailto:a@b.c", clock: clock)
        let first = signer.authorization(origin: "https://h0.example")
        clock.advance(nanoseconds: 1_000_000_000)
        for index in 1..<VAPIDSigner.originsMax { _ = signer.authorization(origin: "https://h\(index).example") }
        XCTAssertEqual(signer.cachedOrigins, VAPIDSigner.originsMax)
        XCTAssertEqual(signer.authorization(origin: "https://h0.example"), first, "still cached")
        _ = signer.authorization(origin: "https://one-more.example")
        XCTAssertEqual(signer.cachedOrigins, VAPIDSigner.originsMax)
        XCTAssertEqual(signer.signatureCount, VAPIDSigner.originsMax + 1)
        XCTAssertNotEqual(signer.authorization(origin: "https://h0.example"), first, "h0 expired first, so it went")
        XCTAssertEqual(signer.signatureCount, VAPIDSigner.originsMax + 2)
    }

    func testWorkersOnSeveralThreadsShareOneTokenPerOrigin() throws {
        let clock = ManualClock()
        let signer = try VAPIDSigner(key: VAPIDKey.generate(), subject: "mailto:a@b.c", clock: clock)
        let expected = try XCTUnwrap(signer.authorization(origin: "https://push.example.net"))
        let mismatches = Mutex(0)
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            for _ in 0..<200 where signer.authorization(origin: "https://push.example.net") != expected {
                mismatches.withLock { $0 += 1 }
            }
        }
        XCTAssertEqual(mismatches.withLock { $0 }, 0)
        XCTAssertEqual(signer.signatureCount, 1)
    }

    func testSubjectsAndLifetimesAreChecked() throws {
        let key = try VAPIDKey.generate()
        let clock = ManualClock()
        for subject in ["mailto:ops@example.com", "MAILTO:ops@example.com", "https://example.com", "https://example.com/about"] {
            XCTAssertNoThrow(try VAPIDSigner(key: key, subject: subject, clock: clock), subject)
        }
        for subject in ["", "ops@example.com", "mailto:", "mailto:nobody", "http://example.com", "https:///x", "mailto:a b@example.com",
                        "mailto:\"x\"@example.com", "https://" + String(repeating: "a", count: 600)] {
            XCTAssertThrowsError(try VAPIDSigner(key: key, subject: subject, clock: clock), subject)
        }
        XCTAssertThrowsError(try VAPIDSigner(key: key, subject: "mailto:a@b.c", clock: clock, lifetimeSeconds: 24 * 3600 + 1))
        XCTAssertThrowsError(try VAPIDSigner(key: key, subject: "mailto:a@b.c", clock: clock, lifetimeSeconds: 1800, renewBeforeSeconds: 3600))
        XCTAssertNoThrow(try VAPIDSigner(key: key, subject: "mailto:a@b.c", clock: clock, lifetimeSeconds: 24 * 3600))
    }

    func testTheVerifierRefusesWrongAudienceExpiryAndSignature() throws {
        let clock = ManualClock()
        let key = try VAPIDKey.generate()
        let now = clock.secondsSinceEpoch()
        let verifier = VAPIDVerifier(clock: clock)
        func header(expiresAt: Int64, audience: String = "https://push.example.net", subject: String = "mailto:a@b.c") throws -> String {
            let jwt = try XCTUnwrap(VAPIDSigner.token(key: key.key, audience: audience, expiresAt: expiresAt, subject: subject))
            return "vapid t=\(jwt), k=\(key.publicKeyText)"
        }
        func verdict(_ authorization: String, origin: String = "https://push.example.net", expectedKey: [UInt8]? = nil) -> VAPIDRejection? {
            if case .failure(let rejection) = verifier.verify(authorization: authorization, origin: origin, expectedKey: expectedKey) { return rejection }
            return nil
        }
        let good = try header(expiresAt: now + 3600)
        XCTAssertNil(verdict(good))
        XCTAssertNil(verdict(try header(expiresAt: now + 24 * 3600)))
        XCTAssertNil(verdict("VAPID k=\(key.publicKeyText) , t=" + good.dropFirst("vapid t=".count).prefix(while: { $0 != "," })))
        XCTAssertEqual(verdict(good, origin: "https://push.example.net:8443"), .wrongAudience)
        XCTAssertEqual(verdict(try header(expiresAt: now + 3600, audience: "https://other.example")), .wrongAudience)
        XCTAssertEqual(verdict(try header(expiresAt: now + 24 * 3600 + 1)), .expiryTooFar)
        XCTAssertEqual(verdict(try header(expiresAt: now)), .expired)
        XCTAssertEqual(verdict(try header(expiresAt: now + 3600, subject: "ops")), .badSubject)
        clock.advance(nanoseconds: 3600 * 1_000_000_000)
        XCTAssertEqual(verdict(good), .expired)
        clock.nanoseconds = 0
        let other = try VAPIDKey.generate()
        XCTAssertEqual(verdict(good.replacingOccurrences(of: key.publicKeyText, with: other.publicKeyText)), .badSignature)
        var signature = Array(good.utf8)
        let last = try XCTUnwrap(signature.firstIndex(of: UInt8(ascii: ",")))
        signature[last - 2] = signature[last - 2] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        XCTAssertEqual(verdict(String(decoding: signature, as: UTF8.self)), .badSignature)
        XCTAssertEqual(verdict(good, expectedKey: other.publicKey), .wrongKey)
        XCTAssertEqual(verdict(""), .missing)
        XCTAssertEqual(verdict("bearer x"), .malformed)
        XCTAssertEqual(verdict("vapid t=a.b.c"), .malformed)
        XCTAssertEqual(verdict("vapid t=a.b, k=\(key.publicKeyText)"), .malformed)
        XCTAssertEqual(verdict("vapid t=a.b.c, k=AAAA"), .badKey)
    }
}
