import Foundation
import PushcastFCM
import XCTest

final class OAuthAssertionTests: XCTestCase {
    let now: Int64 = 1_800_000_000

    func makeVerifier(publicKey: RS256PublicKey = Fixture.publicKey, issuer: String = Fixture.clientEmail,
                      audience: String = Fixture.tokenURI) -> OAuthAssertionVerifier {
        OAuthAssertionVerifier(publicKey: publicKey, issuer: issuer, audience: audience)
    }

    /// An assertion with any header and claims, signed by the fixture's key (for the shapes
    /// `OAuthAssertion.make` never produces).
    func forge(header: String = #"{"alg":"RS256","typ":"JWT"}"#, claims: [String: Any]) throws -> String {
        let claimsJSON = try JSONSerialization.data(withJSONObject: claims, options: .sortedKeys)
        let input = Independent.base64URL(Array(header.utf8)) + "." + Independent.base64URL([UInt8](claimsJSON))
        return input + "." + Independent.base64URL(try Fixture.signer.sign(Array(input.utf8)))
    }

    func goodClaims(iat: Int64? = nil) -> [String: Any] {
        let issuedAt = iat ?? now
        return ["iss": Fixture.clientEmail, "scope": "https://www.googleapis.com/auth/firebase.messaging", "aud": Fixture.tokenURI,
                "iat": issuedAt, "exp": issuedAt + 3600]
    }

    func testAssertionVerifiesWithTheOpenSSLCommandLineAndCarriesTheClaims() throws {
        let assertion = try OAuthAssertion.make(account: Fixture.account, signer: Fixture.signer, issuedAt: now)
        XCTAssertFalse(assertion.contains("="))
        let parts = assertion.split(separator: ".", omittingEmptySubsequences: false)
        XCTAssertEqual(parts.count, 3)
        let signature = [UInt8](try XCTUnwrap(Independent.base64URLDecode(parts[2])))
        let input = Array((parts[0] + "." + parts[1]).utf8)
        XCTAssertTrue(try Independent.opensslVerifies(publicKeyPEM: Fixture.generated.publicKeyPEM, signature: signature, input: input))
        XCTAssertFalse(try Independent.opensslVerifies(publicKeyPEM: Fixture.other.publicKeyPEM, signature: signature, input: input))

        let header = try Independent.json(parts[0])
        XCTAssertEqual(header.count, 3)
        XCTAssertEqual(header["alg"] as? String, "RS256")
        XCTAssertEqual(header["typ"] as? String, "JWT")
        XCTAssertEqual(header["kid"] as? String, Fixture.account.privateKeyID)
        let claims = try Independent.json(parts[1])
        XCTAssertEqual(claims.count, 5)
        XCTAssertEqual(claims["iss"] as? String, Fixture.clientEmail)
        XCTAssertEqual(claims["scope"] as? String, "https://www.googleapis.com/auth/firebase.messaging")
        XCTAssertEqual(claims["aud"] as? String, Fixture.tokenURI)
        XCTAssertEqual((claims["iat"] as? NSNumber)?.int64Value, now)
        XCTAssertEqual((claims["exp"] as? NSNumber)?.int64Value, now + 3600)

        let short = try OAuthAssertion.make(account: Fixture.account, signer: Fixture.signer, issuedAt: now, lifetimeSeconds: 600)
        XCTAssertEqual((try Independent.json(short.split(separator: ".")[1])["exp"] as? NSNumber)?.int64Value, now + 600)
    }

    func testVerifierAcceptsAGoodAssertion() throws {
        let assertion = try OAuthAssertion.make(account: Fixture.account, signer: Fixture.signer, issuedAt: now)
        let claims = try makeVerifier().verify(assertion, nowSeconds: now + 10).get()
        XCTAssertEqual(claims, OAuthClaims(keyID: Fixture.account.privateKeyID, issuer: Fixture.clientEmail, scope: FCMProvider.scope,
                                           audience: Fixture.tokenURI, issuedAtSeconds: now, expiresAtSeconds: now + 3600))
        let withKeyID = OAuthAssertionVerifier(publicKey: Fixture.publicKey, issuer: Fixture.clientEmail, audience: Fixture.tokenURI,
                                               keyID: Fixture.account.privateKeyID)
        XCTAssertNoThrow(try withKeyID.verify(assertion, nowSeconds: now).get())
        let otherKeyID = OAuthAssertionVerifier(publicKey: Fixture.publicKey, issuer: Fixture.clientEmail, audience: Fixture.tokenURI, keyID: "0123")
        XCTAssertEqual(otherKeyID.verify(assertion, nowSeconds: now).failure?.description, "Invalid JWT Signature.")
    }

    func testScopeListMayHoldCloudPlatform() throws {
        var claims = goodClaims()
        claims["scope"] = "openid https://www.googleapis.com/auth/cloud-platform"
        XCTAssertNoThrow(try makeVerifier().verify(try forge(claims: claims), nowSeconds: now).get())
        claims["scope"] = "openid https://www.googleapis.com/auth/firebase.messaging email"
        XCTAssertNoThrow(try makeVerifier().verify(try forge(claims: claims), nowSeconds: now).get())
    }

    func testRejections() throws {
        let assertion = try OAuthAssertion.make(account: Fixture.account, signer: Fixture.signer, issuedAt: now)
        func rejected(_ result: Result<OAuthClaims, OAuthAssertionError>, _ error: String, _ words: String,
                      file: StaticString = #filePath, line: UInt = #line) {
            guard case .failure(let failure) = result else { return XCTFail("accepted", file: file, line: line) }
            XCTAssertEqual(failure.error, error, file: file, line: line)
            XCTAssertTrue(failure.description.contains(words), failure.description, file: file, line: line)
        }
        rejected(makeVerifier(publicKey: Fixture.otherPublicKey).verify(assertion, nowSeconds: now), "invalid_grant", "Invalid JWT Signature.")
        rejected(makeVerifier(issuer: "someone@else.iam.gserviceaccount.com").verify(assertion, nowSeconds: now), "invalid_grant", "account not found")
        rejected(makeVerifier(audience: "https://oauth2.googleapis.com/token").verify(assertion, nowSeconds: now),
                 "invalid_grant", "Failed audience check. The right audience is https://oauth2.googleapis.com/token")
        rejected(makeVerifier().verify(assertion, nowSeconds: now + 3600), "invalid_grant", "short-lived token")
        rejected(makeVerifier().verify(assertion, nowSeconds: now - 61), "invalid_grant", "Check your iat and exp")
        XCTAssertNoThrow(try makeVerifier().verify(assertion, nowSeconds: now - 60).get(), "60 s of clock skew is allowed")
        XCTAssertNoThrow(try makeVerifier().verify(assertion, nowSeconds: now + 3599).get())

        var claims = goodClaims()
        claims["exp"] = now + 3601
        rejected(makeVerifier().verify(try forge(claims: claims), nowSeconds: now), "invalid_grant", "short-lived token")
        claims = goodClaims()
        claims["scope"] = "https://www.googleapis.com/auth/userinfo.email"
        rejected(makeVerifier().verify(try forge(claims: claims), nowSeconds: now), "invalid_scope", "Invalid OAuth scope")
        claims.removeValue(forKey: "scope")
        rejected(makeVerifier().verify(try forge(claims: claims), nowSeconds: now), "invalid_scope", "missing scope")
        claims = goodClaims()
        claims["iat"] = "\(now)"
        rejected(makeVerifier().verify(try forge(claims: claims), nowSeconds: now), "invalid_request", "iat and exp")
        rejected(makeVerifier().verify(try forge(header: #"{"alg":"none"}"#, claims: goodClaims()), nowSeconds: now),
                 "invalid_grant", "Invalid JWT Signature.")
        rejected(makeVerifier().verify(try forge(header: #"{"alg":"HS256"}"#, claims: goodClaims()), nowSeconds: now),
                 "invalid_grant", "Invalid JWT Signature.")

        // Claims changed after signing: a later exp, another issuer.
        let parts = assertion.split(separator: ".").map(String.init)
        var tampered = try Independent.json(Substring(parts[1]))
        tampered["exp"] = now + 7200
        let forgedClaims = Independent.base64URL([UInt8](try JSONSerialization.data(withJSONObject: tampered)))
        rejected(makeVerifier().verify("\(parts[0]).\(forgedClaims).\(parts[2])", nowSeconds: now), "invalid_grant", "Invalid JWT Signature.")
        // A changed last character that only flips the unused low bits must not verify either.
        var lastChanged = assertion
        let last = lastChanged.removeLast()
        lastChanged.append(last == "A" ? "B" : "A")
        XCTAssertNotEqual(lastChanged, assertion)
        XCTAssertThrowsError(try makeVerifier().verify(lastChanged, nowSeconds: now).get())

        for malformed in ["", "a.b", "a.b.c.d", "!!.??.**", "W10.W10.AAAA", String(repeating: "A", count: 9000)] {
            rejected(makeVerifier().verify(malformed, nowSeconds: now), "invalid_request", "Invalid JWT")
        }
        for unsigned in ["\(parts[0]).\(parts[1]).", "e30.e30.AAAA"] {
            rejected(makeVerifier().verify(unsigned, nowSeconds: now), "invalid_grant", "Invalid JWT Signature.")
        }
    }
}

final class OAuthTokenExchangeTests: XCTestCase {
    func testRequestBodyIsFormEncodedAndRoundTrips() throws {
        let assertion = try OAuthAssertion.make(account: Fixture.account, signer: Fixture.signer, issuedAt: 1_800_000_000)
        let body = OAuthTokenExchange.requestBody(assertion: assertion)
        XCTAssertEqual(String(decoding: body, as: UTF8.self),
                       "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=" + assertion)
        let parsed = OAuthTokenExchange.parseRequestBody(body)
        XCTAssertEqual(parsed.grantType, OAuthTokenExchange.grantType)
        XCTAssertEqual(parsed.assertion, assertion)

        // Every byte that is not unreserved is escaped, and comes back; Foundation agrees.
        let odd = "a b+c&d=e%f/é😀~"
        let oddBody = OAuthTokenExchange.requestBody(assertion: odd)
        XCTAssertEqual(OAuthTokenExchange.parseRequestBody(oddBody).assertion, odd)
        var components = URLComponents()
        components.percentEncodedQuery = String(decoding: oddBody, as: UTF8.self)
        XCTAssertEqual(components.queryItems?.first(where: { $0.name == "assertion" })?.value, odd)
    }

    func testParseRequestBodyIsDefensive() {
        XCTAssertEqual(OAuthTokenExchange.parseRequestBody(Array("assertion=x+y&grant_type=g&assertion=z".utf8)).assertion, "x y",
                       "the first field of a name counts")
        let missing = OAuthTokenExchange.parseRequestBody(Array("grant_type=g".utf8))
        XCTAssertEqual(missing.grantType, "g")
        XCTAssertNil(missing.assertion)
        XCTAssertNil(OAuthTokenExchange.parseRequestBody(Array("assertion=%zz".utf8)).assertion)
        XCTAssertNil(OAuthTokenExchange.parseRequestBody(Array("assertion=%C3".utf8)).assertion, "invalid UTF-8")
        XCTAssertNil(OAuthTokenExchange.parseRequestBody(Array("assertion=%4".utf8)).assertion)
        XCTAssertNil(OAuthTokenExchange.parseRequestBody([]).grantType)
        XCTAssertNil(OAuthTokenExchange.parseRequestBody([0xFF, 0x00, 0x3D]).assertion)
    }

    func testSuccess() throws {
        let body = OAuthTokenExchange.successBody(accessToken: "ya29.c.secret-token", expiresInSeconds: 3599)
        let fields = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(body)) as? [String: Any])
        XCTAssertEqual(fields["access_token"] as? String, "ya29.c.secret-token")
        XCTAssertEqual(fields["expires_in"] as? Int, 3599)
        XCTAssertEqual(fields["token_type"] as? String, "Bearer")
        let token = try OAuthTokenExchange.parseResponse(status: 200, body: body).get()
        XCTAssertEqual(token.accessToken, "ya29.c.secret-token")
        XCTAssertEqual(token.expiresInSeconds, 3599)
        XCTAssertEqual(token.authorization, "Bearer ya29.c.secret-token")
        var dumped = ""
        dump(token, to: &dumped)
        for text in ["\(token)", String(reflecting: token), dumped] {
            XCTAssertFalse(text.contains("secret"), text)
        }
        // Google's own shape, with extra members and whitespace.
        let google = #"{ "access_token": "ya29.abc", "expires_in": 3599, "token_type": "Bearer", "id_token": null }"#
        XCTAssertEqual(try OAuthTokenExchange.parseResponse(status: 200, body: Array(google.utf8)).get().expiresInSeconds, 3599)
    }

    func testBadSuccessAnswersAreRetryableErrors() {
        for body in [#"{"expires_in":3600}"#, #"{"access_token":"","expires_in":3600}"#, #"{"access_token":"a b","expires_in":3600}"#,
                     #"{"access_token":"t","expires_in":"3600"}"#, #"{"access_token":"t","expires_in":0}"#,
                     #"{"access_token":"t","expires_in":3600,"token_type":"mac"}"#, "", "[1]"] {
            guard case .failure(let error) = OAuthTokenExchange.parseResponse(status: 200, body: Array(body.utf8)) else {
                XCTFail("accepted \(body)"); continue
            }
            XCTAssertFalse(error.isCredentialRejected, body)
            XCTAssertEqual(error.status, 200)
        }
    }

    func testInvalidGrantStopsTheRun() throws {
        let body = OAuthTokenExchange.errorBody(error: "invalid_grant", description: "Invalid JWT Signature.")
        XCTAssertEqual(String(decoding: body, as: UTF8.self), #"{"error":"invalid_grant","error_description":"Invalid JWT Signature."}"#)
        guard case .failure(let error) = OAuthTokenExchange.parseResponse(status: 400, body: body) else { return XCTFail("accepted") }
        XCTAssertTrue(error.isCredentialRejected)
        XCTAssertEqual(error.error, "invalid_grant")
        XCTAssertEqual(error.detail, "Invalid JWT Signature.")
        XCTAssertEqual(error.description, "the OAuth token endpoint answered 400 invalid_grant: Invalid JWT Signature.")
        for code in ["invalid_client", "unauthorized_client", "invalid_scope"] {
            let failure = OAuthTokenExchange.parseResponse(status: 400, body: OAuthTokenExchange.errorBody(error: code, description: "x")).failure
            XCTAssertEqual(failure?.isCredentialRejected, true, code)
        }
        for status in [401, 403] {
            XCTAssertEqual(OAuthTokenExchange.parseResponse(status: status, body: Array("<html>denied</html>".utf8)).failure?.isCredentialRejected, true)
        }
    }

    func testServerTroubleIsRetryable() {
        let unavailable = OAuthTokenExchange.parseResponse(status: 503, body: OAuthTokenExchange.errorBody(error: "internal_failure", description: "Backend Error"))
        XCTAssertEqual(unavailable.failure?.isCredentialRejected, false)
        XCTAssertEqual(unavailable.failure?.status, 503)
        XCTAssertEqual(OAuthTokenExchange.parseResponse(status: 429, body: Array(#"{"error":"rate_limit_exceeded"}"#.utf8)).failure?.isCredentialRejected, false)
        let html = "<!DOCTYPE html><html><head><title>502 Bad Gateway</title></head><body>\u{0}\u{FF}</body></html>"
        for status in [200, 400, 500, 502] {
            guard case .failure(let error) = OAuthTokenExchange.parseResponse(status: status, body: Array(html.utf8) + [0xFF, 0xFE]) else {
                XCTFail("accepted HTML"); continue
            }
            XCTAssertFalse(error.isCredentialRejected, "\(status)")
            XCTAssertNil(error.error)
            XCTAssertFalse(error.description.contains("<html>"), error.description)
            XCTAssertTrue(error.description.contains("not a JSON object"), error.description)
        }
        XCTAssertEqual(OAuthTokenExchange.parseResponse(status: 502, body: Array(repeating: 0x7B, count: 200_000)).failure?.isCredentialRejected, false)
    }

    func testHostileErrorTextIsSanitisedAndBounded() throws {
        let assertion = try OAuthAssertion.make(account: Fixture.account, signer: Fixture.signer, issuedAt: 1_800_000_000)
        let hostile = OAuthTokenExchange.errorBody(error: "invalid_grant\n\u{1B}[2J", description: "echo: \(assertion) " + String(repeating: "x ", count: 500))
        guard case .failure(let error) = OAuthTokenExchange.parseResponse(status: 400, body: hostile) else { return XCTFail("accepted") }
        XCTAssertFalse(error.description.contains(assertion.prefix(30)), error.description)
        XCTAssertFalse(error.description.contains(String(assertion.split(separator: ".")[2].prefix(20))), error.description)
        XCTAssertTrue(error.description.contains("[redacted]"), error.description)
        XCTAssertFalse(error.description.contains("\u{1B}"), error.description)
        XCTAssertFalse(error.description.contains("\n"), error.description)
        XCTAssertLessThan(error.description.count, 320)
        XCTAssertFalse(error.isCredentialRejected, "an error code that is not OAuth's is not trusted to stop the run")
    }
}

extension Result {
    var failure: Failure? {
        if case .failure(let failure) = self { return failure }
        return nil
    }
}
