import COpenSSL
import PushcastAPNs
import PushcastCore
import PushcastSystem
import XCTest

/// Checks a JWT with OpenSSL directly, sharing no code with PushcastAPNs: base64url via
/// Foundation, DER rebuilt from R‖S by hand with ECDSA_SIG, EVP_DigestVerify against the PEM key.
enum IndependentJWT {
    static func base64URLDecode(_ text: Substring) -> Data? {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        return Data(base64Encoded: base64)
    }

    static func verify(jwt: String, publicKeyPEM: String) -> Bool {
        let parts = jwt.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let raw = base64URLDecode(parts[2]), raw.count == 64 else { return false }
        let signingInput = Array((parts[0] + "." + parts[1]).utf8)
        guard let signature = ECDSA_SIG_new() else { return false }
        defer { ECDSA_SIG_free(signature) }
        let bytes = [UInt8](raw)
        let r = BN_bin2bn(bytes, 32, nil)
        let s = BN_bin2bn(Array(bytes[32...]), 32, nil)
        guard ECDSA_SIG_set0(signature, r, s) == 1 else { return false }
        let length = Int(i2d_ECDSA_SIG(signature, nil))
        var der = [UInt8](repeating: 0, count: length)
        der.withUnsafeMutableBufferPointer { buffer in
            var cursor: UnsafeMutablePointer<UInt8>? = buffer.baseAddress
            _ = i2d_ECDSA_SIG(signature, &cursor)
        }
        let pem = Array(publicKeyPEM.utf8)
        guard let bio = BIO_new_mem_buf(pem, Int32(pem.count)) else { return false }
        defer { BIO_free(bio) }
        guard let key = PEM_read_bio_PUBKEY(bio, nil, nil, nil) else { return false }
        defer { EVP_PKEY_free(key) }
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestVerifyInit(context, nil, EVP_sha256(), nil, key) == 1 else { return false }
        return EVP_DigestVerify(context, der, der.count, signingInput, signingInput.count) == 1
    }

    static func json(_ part: Substring) throws -> [String: Any] {
        let data = try XCTUnwrap(base64URLDecode(part))
        return try XCTUnwrap(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }
}

final class APNsTokenSourceTests: XCTestCase {
    static let keys = try! APNsKeyPair.generate()
    let keyID = "ABC123DEFG"
    let teamID = "TEAM123456"

    func makeSource(_ clock: ManualClock) throws -> APNsTokenSource {
        try APNsTokenSource(privateKeyPEM: Self.keys.privateKeyPEM, keyID: keyID, teamID: teamID, clock: clock, source: "'AuthKey_ABC123DEFG.p8'")
    }

    func testKeyPairFormats() {
        XCTAssertTrue(Self.keys.privateKeyPEM.hasPrefix("-----BEGIN PRIVATE KEY-----"))
        XCTAssertTrue(Self.keys.publicKeyPEM.hasPrefix("-----BEGIN PUBLIC KEY-----"))
    }

    func testJWTVerifiesIndependentlyWithOpenSSL() throws {
        let clock = ManualClock()
        let token = try makeSource(clock).current()
        XCTAssertEqual(token.authorization, "bearer " + token.jwt)
        XCTAssertTrue(IndependentJWT.verify(jwt: token.jwt, publicKeyPEM: Self.keys.publicKeyPEM))
        let other = try APNsKeyPair.generate()
        XCTAssertFalse(IndependentJWT.verify(jwt: token.jwt, publicKeyPEM: other.publicKeyPEM))
        // A flipped signature bit must fail, so the check above is not vacuous.
        var parts = token.jwt.split(separator: ".").map(String.init)
        var signature = [UInt8](try XCTUnwrap(IndependentJWT.base64URLDecode(Substring(parts[2]))))
        signature[40] ^= 1
        parts[2] = Data(signature).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        XCTAssertFalse(IndependentJWT.verify(jwt: parts.joined(separator: "."), publicKeyPEM: Self.keys.publicKeyPEM))
    }

    func testHeaderAndClaims() throws {
        let clock = ManualClock(epochSecondsAtZero: 1_800_000_123)
        let token = try makeSource(clock).current()
        let parts = token.jwt.split(separator: ".")
        XCTAssertEqual(parts.count, 3)
        XCTAssertFalse(token.jwt.contains("="))
        let header = try IndependentJWT.json(parts[0])
        XCTAssertEqual(header.count, 2)
        XCTAssertEqual(header["alg"] as? String, "ES256")
        XCTAssertEqual(header["kid"] as? String, keyID)
        let claims = try IndependentJWT.json(parts[1])
        XCTAssertEqual(claims.count, 2)
        XCTAssertEqual(claims["iss"] as? String, teamID)
        XCTAssertEqual((claims["iat"] as? NSNumber)?.int64Value, 1_800_000_123)
        XCTAssertEqual(token.issuedAtSeconds, 1_800_000_123)
        XCTAssertEqual(String(decoding: try XCTUnwrap(IndependentJWT.base64URLDecode(parts[0])), as: UTF8.self),
                       #"{"alg":"ES256","kid":"ABC123DEFG"}"#)
    }

    func testRefreshSchedule() throws {
        let clock = ManualClock()
        let source = try makeSource(clock)
        let first = source.current()
        XCTAssertEqual(first.generation, 1)
        clock.advance(milliseconds: 49 * 60_000)
        XCTAssertEqual(source.current(), first, "no refresh at 49 minutes")
        clock.advance(milliseconds: 59_999)
        XCTAssertEqual(source.current(), first, "no refresh just before 50 minutes")
        clock.advance(milliseconds: 1)
        let second = source.current()
        XCTAssertEqual(second.generation, 2, "refresh at 50 minutes")
        XCTAssertEqual(second.issuedAtSeconds, first.issuedAtSeconds + 3000)
        XCTAssertNotEqual(second.jwt, first.jwt)
        XCTAssertEqual(source.generation, 2)
        XCTAssertEqual(source.signatureCount, 2)
        XCTAssertTrue(IndependentJWT.verify(jwt: second.jwt, publicKeyPEM: Self.keys.publicKeyPEM))
    }

    func testWorkerCacheOnlyChangesWithGeneration() throws {
        let clock = ManualClock()
        let source = try makeSource(clock)
        var cached = source.current()
        XCTAssertFalse(source.refreshIfNeeded(&cached))
        clock.advance(milliseconds: 30 * 60_000)
        XCTAssertFalse(source.refreshIfNeeded(&cached))
        XCTAssertEqual(cached.generation, 1)
        clock.advance(milliseconds: 20 * 60_000)
        XCTAssertTrue(source.refreshIfNeeded(&cached), "a worker's read past 50 minutes triggers the refresh")
        XCTAssertEqual(cached.generation, 2)
        var otherWorker = APNsBearerToken?.none ?? cached
        XCTAssertFalse(source.refreshIfNeeded(&otherWorker))
        XCTAssertEqual(source.signatureCount, 2)
    }

    func testExpiredProviderTokenRespectsTwentyMinutes() throws {
        let clock = ManualClock()
        let source = try makeSource(clock)
        let first = source.current()
        clock.advance(milliseconds: 5 * 60_000)
        XCTAssertEqual(source.refreshAfterExpired(seenToken: first), .tooSoon(current: first, retryAfterSeconds: 15 * 60))
        XCTAssertEqual(source.signatureCount, 1)
        clock.advance(milliseconds: 15 * 60_000)
        guard case .refreshed(let second) = source.refreshAfterExpired(seenToken: first) else { return XCTFail("expected a refresh at 20 minutes") }
        XCTAssertEqual(second.generation, 2)
        // Every other worker that saw the same rejection gets the new token without a new signature.
        XCTAssertEqual(source.refreshAfterExpired(seenToken: first), .refreshed(second))
        XCTAssertEqual(source.signatureCount, 2)
        // The new token is now the one that is too young to replace.
        XCTAssertEqual(source.refreshAfterExpired(seenToken: second), .tooSoon(current: second, retryAfterSeconds: 20 * 60))
        // The 50-minute schedule restarts from the last signature.
        clock.advance(milliseconds: 49 * 60_000)
        XCTAssertEqual(source.current(), second)
        clock.advance(milliseconds: 60_000)
        XCTAssertEqual(source.current().generation, 3)
    }

    func testConcurrentReadersSeeOneToken() async throws {
        let clock = ManualClock()
        let source = try makeSource(clock)
        let jwts = await withTaskGroup(of: String.self) { group in
            for _ in 0..<8 { group.addTask { source.current().jwt } }
            return await group.reduce(into: Set<String>()) { $0.insert($1) }
        }
        XCTAssertEqual(jwts.count, 1)
    }

    func testBadKeysGiveClearErrorsWithoutKeyBytes() throws {
        let clock = ManualClock()
        func message(_ pem: String, keyID: String = "ABC123DEFG", teamID: String = "TEAM123456") -> String {
            do {
                _ = try APNsTokenSource(privateKeyPEM: pem, keyID: keyID, teamID: teamID, clock: clock, source: "'AuthKey.p8'")
                return "no error"
            } catch {
                return error.description
            }
        }
        let garbage = "-----BEGIN PRIVATE KEY-----\nTUlJQ0FTRUNSRVRTRUNSRVQ=\n-----END PRIVATE KEY-----\n"
        let garbageMessage = message(garbage)
        XCTAssertTrue(garbageMessage.contains("'AuthKey.p8'"), garbageMessage)
        XCTAssertFalse(garbageMessage.contains("TUlJQ0FTRUNSRVRTRUNSRVQ"), garbageMessage)
        XCTAssertTrue(message("").contains("empty"))
        XCTAssertTrue(message(Self.keys.publicKeyPEM).contains("BEGIN PRIVATE KEY"))
        XCTAssertTrue(message(Self.keys.privateKeyPEM, keyID: "short").contains("key ID must be 10"))
        XCTAssertTrue(message(Self.keys.privateKeyPEM, teamID: "TEAM12345!").contains("team ID must be 10"))
        XCTAssertTrue(message(try rsaKeyPEM()).contains("not an elliptic-curve key"))
        XCTAssertTrue(message(try ecKeyPEM(curve: "P-384")).contains("P-256"))
    }

    func testKeyFileErrorsNameTheFile() throws {
        let clock = ManualClock()
        let missing = "/nonexistent/AuthKey_X.p8"
        XCTAssertThrowsError(try APNsTokenSource(keyFile: missing, keyID: keyID, teamID: teamID, clock: clock, files: SecretFile.read)) { error in
            XCTAssertTrue("\(error)".contains(missing), "\(error)")
        }
        let path = NSTemporaryDirectory() + "pushcast-apns-\(UUID().uuidString).p8"
        try Self.keys.privateKeyPEM.write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let source = try APNsTokenSource(keyFile: path, keyID: keyID, teamID: teamID, clock: clock, files: SecretFile.read)
        XCTAssertTrue(IndependentJWT.verify(jwt: source.current().jwt, publicKeyPEM: Self.keys.publicKeyPEM))
    }

    private func rsaKeyPEM() throws -> String {
        let context = try XCTUnwrap(EVP_PKEY_CTX_new_from_name(nil, "RSA", nil))
        defer { EVP_PKEY_CTX_free(context) }
        var key: OpaquePointer?
        XCTAssertEqual(EVP_PKEY_keygen_init(context), 1)
        XCTAssertEqual(EVP_PKEY_CTX_set_rsa_keygen_bits(context, 1024), 1)
        XCTAssertEqual(EVP_PKEY_generate(context, &key), 1)
        return try pem(XCTUnwrap(key))
    }

    private func ecKeyPEM(curve: String) throws -> String {
        let context = try XCTUnwrap(EVP_PKEY_CTX_new_from_name(nil, "EC", nil))
        defer { EVP_PKEY_CTX_free(context) }
        var key: OpaquePointer?
        XCTAssertEqual(EVP_PKEY_keygen_init(context), 1)
        XCTAssertEqual(EVP_PKEY_CTX_set_group_name(context, curve), 1)
        XCTAssertEqual(EVP_PKEY_generate(context, &key), 1)
        return try pem(XCTUnwrap(key))
    }

    private func pem(_ key: OpaquePointer) -> String {
        defer { EVP_PKEY_free(key) }
        let bio = BIO_new(BIO_s_mem())!
        defer { BIO_free(bio) }
        _ = PEM_write_bio_PrivateKey(bio, key, nil, nil, 0, nil, nil)
        var data: UnsafeMutablePointer<CChar>?
        let length = pushcast_BIO_get_mem_data(bio, &data)
        return String(decoding: UnsafeRawBufferPointer(start: data, count: length), as: UTF8.self)
    }
}
