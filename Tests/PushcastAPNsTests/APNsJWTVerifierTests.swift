import COpenSSL
import PushcastAPNs
import PushcastCore
import XCTest

final class APNsJWTVerifierTests: XCTestCase {
    static let keys = try! APNsKeyPair.generate()
    let keyID = "ABC123DEFG"
    let teamID = "TEAM123456"

    func makeVerifier(_ clock: ManualClock, keyID: String? = nil, teamID: String? = nil, publicKeyPEM: String? = nil) throws -> APNsJWTVerifier {
        try APNsJWTVerifier(publicKeyPEM: publicKeyPEM ?? Self.keys.publicKeyPEM, keyID: keyID ?? self.keyID, teamID: teamID ?? self.teamID, clock: clock)
    }

    func testAcceptsTheSourcesTokenAndCachesIt() throws {
        let clock = ManualClock()
        let source = try APNsTokenSource(privateKeyPEM: Self.keys.privateKeyPEM, keyID: keyID, teamID: teamID, clock: clock)
        let verifier = try makeVerifier(clock)
        let token = source.current()
        for _ in 0..<100 { XCTAssertEqual(verifier.verify(authorization: token.authorization), .valid) }
        XCTAssertEqual(verifier.signatureChecks, 1, "the same token string is verified once")
        XCTAssertEqual(verifier.verify(authorization: "Bearer " + token.jwt), .valid, "the scheme is case-insensitive")
    }

    func testAgeAndSkew() throws {
        let clock = ManualClock()
        let source = try APNsTokenSource(privateKeyPEM: Self.keys.privateKeyPEM, keyID: keyID, teamID: teamID, clock: clock)
        let verifier = try makeVerifier(clock)
        let token = source.current()
        clock.advance(milliseconds: 3600 * 1000)
        XCTAssertEqual(verifier.verify(authorization: token.authorization), .valid, "exactly one hour old is still accepted")
        clock.advance(milliseconds: 1000)
        XCTAssertEqual(verifier.verify(authorization: token.authorization), .rejected(.expiredProviderToken))
        XCTAssertEqual(verifier.verify(authorization: token.authorization, nowSeconds: token.issuedAtSeconds - 61), .rejected(.invalidProviderToken))
        XCTAssertEqual(verifier.verify(authorization: token.authorization, nowSeconds: token.issuedAtSeconds - 60), .valid)
    }

    func testRejections() throws {
        let clock = ManualClock()
        let source = try APNsTokenSource(privateKeyPEM: Self.keys.privateKeyPEM, keyID: keyID, teamID: teamID, clock: clock)
        let token = source.current()
        let verifier = try makeVerifier(clock)
        XCTAssertEqual(verifier.verify(authorization: nil), .rejected(.missingProviderToken))
        XCTAssertEqual(verifier.verify(authorization: ""), .rejected(.missingProviderToken))
        XCTAssertEqual(verifier.verify(authorization: "bearer "), .rejected(.missingProviderToken))
        XCTAssertEqual(verifier.verify(authorization: token.jwt), .rejected(.invalidProviderToken), "no scheme")
        XCTAssertEqual(verifier.verify(authorization: "bearer a.b"), .rejected(.invalidProviderToken))
        XCTAssertEqual(verifier.verify(authorization: "bearer a.b.c.d"), .rejected(.invalidProviderToken))
        XCTAssertEqual(verifier.verify(authorization: "bearer !!.??.**"), .rejected(.invalidProviderToken))
        XCTAssertEqual(try makeVerifier(clock, keyID: "OTHERKEY00").verify(authorization: token.authorization), .rejected(.invalidProviderToken))
        XCTAssertEqual(try makeVerifier(clock, teamID: "OTHERTEAM0").verify(authorization: token.authorization), .rejected(.invalidProviderToken))
        let otherKey = try APNsKeyPair.generate()
        XCTAssertEqual(try makeVerifier(clock, publicKeyPEM: otherKey.publicKeyPEM).verify(authorization: token.authorization), .rejected(.invalidProviderToken))

        // Tampered claims keep the old signature, so they must fail.
        let parts = token.jwt.split(separator: ".").map(String.init)
        let forgedClaims = base64URL(#"{"iss":"TEAM123456","iat":\#(token.issuedAtSeconds + 5)}"#)
        XCTAssertEqual(verifier.verify(authorization: "bearer \(parts[0]).\(forgedClaims).\(parts[2])"), .rejected(.invalidProviderToken))
        // A different algorithm in the header is refused before any signature check.
        let noneHeader = base64URL(#"{"alg":"none","kid":"ABC123DEFG"}"#)
        XCTAssertEqual(verifier.verify(authorization: "bearer \(noneHeader).\(parts[1]).\(parts[2])"), .rejected(.invalidProviderToken))
        // Hostile JSON inside a well-formed JWT does not crash.
        let deep = base64URL(String(repeating: "[", count: 10_000))
        XCTAssertEqual(verifier.verify(authorization: "bearer \(deep).\(deep).\(parts[2])"), .rejected(.invalidProviderToken))
    }

    func testBadPublicKeyNamesTheSource() {
        XCTAssertThrowsError(try APNsJWTVerifier(publicKeyPEM: "nonsense", keyID: keyID, teamID: teamID, clock: ManualClock(), source: "'mock.pub'")) { error in
            XCTAssertTrue("\(error)".contains("'mock.pub'"), "\(error)")
        }
    }

    private func base64URL(_ text: String) -> String {
        Data(text.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }
}
