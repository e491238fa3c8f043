// Google's OAuth2 flow for service accounts (docs/PROTOCOL.md §2.2, RFC 7523): a signed JWT
// assertion is exchanged at the account's `token_uri` for a short-lived access token that FCM
// sends carry as `authorization: Bearer <token>`.
//
// Both sides live here as values with no I/O: the client builds the assertion and the form body
// and reads the answer; the mock's token endpoint parses the body, verifies the assertion and
// writes Google's answers. Whatever a server sends back is untrusted: messages quote only a
// bounded, sanitised part of it, and never the assertion or a token.

import PushcastJSON
import PushcastWire

/// The assertion a service account signs to ask for an access token.
public enum OAuthAssertion {
    /// Google refuses assertions that live longer than an hour.
    public static let lifetimeMaxSeconds: Int64 = 3600

    /// `base64url(header).base64url(claims).base64url(signature)` with header
    /// `{"alg":"RS256","typ":"JWT","kid":private_key_id}` and claims `iss` = client_email,
    /// `scope` = FCMProvider.scope, `aud` = token_uri, `iat` = issuedAt, `exp` = iat + lifetime.
    /// A lifetime outside 1...3600 seconds is a programmer error.
    public static func make(account: FCMServiceAccount, signer: RS256Signer, issuedAt: Int64,
                            lifetimeSeconds: Int64 = 3600) throws(FCMCredentialError) -> String {
        precondition((1...lifetimeMaxSeconds).contains(lifetimeSeconds), "an assertion lives 1 to 3600 seconds")
        var header: [UInt8] = Array(#"{"alg":"RS256","typ":"JWT","kid":"#.utf8)
        JSONWriter.appendString(account.privateKeyID, to: &header)
        header.append(UInt8(ascii: "}"))
        var claims: [UInt8] = Array(#"{"iss":"#.utf8)
        JSONWriter.appendString(account.clientEmail, to: &claims)
        claims += Array(#","scope":"#.utf8)
        JSONWriter.appendString(FCMProvider.scope, to: &claims)
        claims += Array(#","aud":"#.utf8)
        JSONWriter.appendString(account.tokenURI, to: &claims)
        claims += Array(#","iat":\#(issuedAt),"exp":\#(issuedAt + lifetimeSeconds)}"#.utf8)
        let signingInput = Base64URL.encode(header) + "." + Base64URL.encode(claims)
        let signature = try signer.sign(Array(signingInput.utf8))
        return signingInput + "." + Base64URL.encode(signature)
    }
}

/// The claims of an assertion that passed verification.
public struct OAuthClaims: Sendable, Equatable {
    public let keyID: String?
    public let issuer: String
    public let scope: String
    public let audience: String
    public let issuedAtSeconds: Int64
    public let expiresAtSeconds: Int64

    public init(keyID: String?, issuer: String, scope: String, audience: String, issuedAtSeconds: Int64, expiresAtSeconds: Int64) {
        self.keyID = keyID
        self.issuer = issuer
        self.scope = scope
        self.audience = audience
        self.issuedAtSeconds = issuedAtSeconds
        self.expiresAtSeconds = expiresAtSeconds
    }
}

/// Why the token endpoint refuses a request, in the words Google's endpoint uses.
public struct OAuthAssertionError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The OAuth error code: "invalid_grant", "invalid_request" or "invalid_scope".
    public let error: String
    /// The `error_description` text.
    public let description: String

    public init(error: String, description: String) {
        self.error = error
        self.description = description
    }

    static let badSignature = OAuthAssertionError(error: "invalid_grant", description: "Invalid JWT Signature.")
    static let badTime = OAuthAssertionError(
        error: "invalid_grant",
        description: "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check your iat and exp values in the JWT claim.")
    static let unknownAccount = OAuthAssertionError(error: "invalid_grant", description: "Invalid grant: account not found")
    static let badScope = OAuthAssertionError(error: "invalid_scope", description: "Invalid OAuth scope or ID token audience provided.")
    static func malformed(_ what: String) -> OAuthAssertionError {
        OAuthAssertionError(error: "invalid_request", description: "Invalid JWT: \(what)")
    }
}

/// The token endpoint's check of an assertion (for the mock). Stateless and thread-safe.
public struct OAuthAssertionVerifier: Sendable {
    public static let cloudPlatformScope = "https://www.googleapis.com/auth/cloud-platform"
    /// Clock skew allowed on `iat`.
    public static let futureSkewMaxSeconds: Int64 = 60
    /// Longer assertions are refused unread (a real one is under 1 KiB).
    public static let assertionBytesMax = 8 * 1024

    public let publicKey: RS256PublicKey
    public let issuer: String
    public let audience: String
    public let scope: String
    /// When set, the header's `kid` must equal it.
    public let keyID: String?

    public init(publicKey: RS256PublicKey, issuer: String, audience: String, scope: String = FCMProvider.scope, keyID: String? = nil) {
        self.publicKey = publicKey
        self.issuer = issuer
        self.audience = audience
        self.scope = scope
        self.keyID = keyID
    }

    /// Checks, in order: shape, `alg` RS256 (and `kid` if configured), the signature, `iss`,
    /// `aud`, `scope` (a space-separated list holding the scope or cloud-platform), then time:
    /// `iat` at most 60 s in the future, `exp` after now, `exp - iat` at most 3600.
    public func verify(_ assertion: String, nowSeconds: Int64) -> Result<OAuthClaims, OAuthAssertionError> {
        let bytes = Array(assertion.utf8)
        guard bytes.count <= Self.assertionBytesMax else { return .failure(.malformed("the assertion is too long")) }
        let parts = bytes.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 3 else { return .failure(.malformed("the assertion is not header.claims.signature")) }
        guard let headerBytes = Base64URL.decode(parts[0]), let claimBytes = Base64URL.decode(parts[1]),
              let signature = Base64URL.decode(parts[2]) else {
            return .failure(.malformed("a part is not base64url"))
        }
        guard case .success(let header) = JSONScanner.parse(headerBytes), header.members != nil,
              case .success(let claims) = JSONScanner.parse(claimBytes), claims.members != nil else {
            return .failure(.malformed("the header or the claims are not a JSON object"))
        }
        guard header["alg"]?.stringValue == "RS256" else { return .failure(.badSignature) }
        let kid = header["kid"]?.stringValue
        if let keyID, kid != keyID { return .failure(.badSignature) }
        let signingInput = Array(bytes[..<(parts[0].count + 1 + parts[1].count)])
        guard publicKey.verify(signingInput, signature: signature) else { return .failure(.badSignature) }

        guard let iss = claims["iss"]?.stringValue, iss == issuer else { return .failure(.unknownAccount) }
        guard let aud = claims["aud"]?.stringValue, aud == audience else {
            return .failure(OAuthAssertionError(error: "invalid_grant", description: "Invalid JWT: Failed audience check. The right audience is \(audience)"))
        }
        guard let scopes = claims["scope"]?.stringValue, !scopes.isEmpty else {
            return .failure(OAuthAssertionError(error: "invalid_scope", description: "Empty or missing scope not allowed."))
        }
        let granted = scopes.split(separator: " ")
        guard granted.contains(where: { $0 == scope || $0 == Self.cloudPlatformScope }) else { return .failure(.badScope) }
        guard let iat = claims["iat"]?.int64Value, let exp = claims["exp"]?.int64Value else {
            return .failure(.malformed("the iat and exp claims must be integers"))
        }
        guard iat - nowSeconds <= Self.futureSkewMaxSeconds, exp > nowSeconds, exp > iat,
              exp - iat <= OAuthAssertion.lifetimeMaxSeconds else { return .failure(.badTime) }
        return .success(OAuthClaims(keyID: kid, issuer: iss, scope: scopes, audience: aud, issuedAtSeconds: iat, expiresAtSeconds: exp))
    }
}

/// An access token from the token endpoint. Its description never shows the token.
public struct OAuthAccessToken: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public let accessToken: String
    public let expiresInSeconds: Int

    public init(accessToken: String, expiresInSeconds: Int) {
        self.accessToken = accessToken
        self.expiresInSeconds = expiresInSeconds
    }

    /// `Bearer <token>`, ready for the `authorization` header.
    public var authorization: String { "Bearer " + accessToken }

    public var description: String { "OAuthAccessToken(\(accessToken.utf8.count) bytes, redacted; expires in \(expiresInSeconds) s)" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: ["accessToken": "(redacted)", "expiresInSeconds": expiresInSeconds]) }
}

/// A token request that failed.
public struct OAuthTokenError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The HTTP status (0 when there was none).
    public let status: Int
    /// The OAuth `error` code, sanitised; nil when the body was not OAuth JSON.
    public let error: String?
    /// What went wrong, with at most a short sanitised quote from the server.
    public let detail: String

    public init(status: Int, error: String?, detail: String) {
        self.status = status
        self.error = error
        self.detail = detail
    }

    /// OAuth errors that no retry can fix (RFC 6749 §5.2).
    static let credentialErrorCodes: Set<String> = [
        "invalid_grant", "invalid_client", "unauthorized_client", "invalid_scope", "invalid_request", "unsupported_grant_type",
    ]

    /// True when the endpoint refused the credentials or the request itself: 401, 403, or 400 with
    /// an OAuth error code. The run must stop (exit 2). False for 5xx, 429 and answers that are not
    /// OAuth JSON (a proxy's HTML page), which are worth retrying.
    public var isCredentialRejected: Bool {
        switch status {
        case 401, 403: return true
        case 400: return error.map { Self.credentialErrorCodes.contains($0) } ?? false
        default: return false
        }
    }

    public var description: String {
        let code = error.map { " \($0)" } ?? ""
        return "the OAuth token endpoint answered \(status)\(code): \(detail)"
    }
}

/// The form-encoded token request and Google's JSON answers (RFC 6749 §4.1.3, §5; RFC 7523 §2.1).
public enum OAuthTokenExchange {
    public static let grantType = "urn:ietf:params:oauth:grant-type:jwt-bearer"
    /// Longer answers are not read further (a real one is under 2 KiB).
    public static let responseBytesMax = 64 * 1024

    /// `grant_type=...&assertion=...`, application/x-www-form-urlencoded.
    public static func requestBody(assertion: String) -> [UInt8] {
        var body: [UInt8] = Array("grant_type=".utf8)
        FormEncoding.append(grantType, to: &body)
        body += Array("&assertion=".utf8)
        FormEncoding.append(assertion, to: &body)
        return body
    }

    /// The first `grant_type` and `assertion` fields of a form body (nil when absent or not
    /// decodable).
    public static func parseRequestBody(_ body: [UInt8]) -> (grantType: String?, assertion: String?) {
        var grantType: String?
        var assertion: String?
        for pair in body.split(separator: UInt8(ascii: "&")) {
            let halves = pair.split(separator: UInt8(ascii: "="), maxSplits: 1, omittingEmptySubsequences: false)
            guard halves.count == 2, let name = FormEncoding.decode(halves[0]) else { continue }
            if name == "grant_type" && grantType == nil { grantType = FormEncoding.decode(halves[1]) }
            if name == "assertion" && assertion == nil { assertion = FormEncoding.decode(halves[1]) }
        }
        return (grantType, assertion)
    }

    /// Reads the token endpoint's answer. Success needs 200 and a non-empty `access_token`, a
    /// positive integer `expires_in` and, when present, `token_type` Bearer.
    public static func parseResponse(status: Int, body: [UInt8]) -> Result<OAuthAccessToken, OAuthTokenError> {
        let json: JSONValue?
        if body.count <= responseBytesMax, case .success(let value) = JSONScanner.parse(body), value.members != nil {
            json = value
        } else {
            json = nil
        }
        guard let json else {
            let what = body.isEmpty ? "an empty body" : "a \(body.count)-byte body that is not a JSON object"
            return .failure(OAuthTokenError(status: status, error: nil, detail: "\(what) (not an OAuth answer; a proxy or an outage?)"))
        }
        if status == 200 {
            guard let token = json["access_token"]?.stringValue, !token.isEmpty, token.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
                return .failure(OAuthTokenError(status: status, error: nil, detail: "the answer has no usable access_token"))
            }
            guard let expiresIn = json["expires_in"]?.int64Value, expiresIn > 0, expiresIn <= Int64(Int32.max) else {
                return .failure(OAuthTokenError(status: status, error: nil, detail: "the answer has no positive integer expires_in"))
            }
            if let type = json["token_type"]?.stringValue, type.lowercased() != "bearer" {
                return .failure(OAuthTokenError(status: status, error: nil, detail: "the token type is '\(UntrustedText.sanitized(type, limit: 20))', not Bearer"))
            }
            return .success(OAuthAccessToken(accessToken: token, expiresInSeconds: Int(expiresIn)))
        }
        let code = json["error"]?.stringValue.map { UntrustedText.sanitized($0, limit: 40) }
        let description = json["error_description"]?.stringValue.map { UntrustedText.sanitized($0) } ?? "no error_description"
        return .failure(OAuthTokenError(status: status, error: code, detail: description))
    }

    /// `{"access_token":...,"expires_in":...,"token_type":"Bearer"}`.
    public static func successBody(accessToken: String, expiresInSeconds: Int) -> [UInt8] {
        var body: [UInt8] = Array(#"{"access_token":"#.utf8)
        JSONWriter.appendString(accessToken, to: &body)
        body += Array(#","expires_in":\#(expiresInSeconds),"token_type":"Bearer"}"#.utf8)
        return body
    }

    /// `{"error":...,"error_description":...}`.
    public static func errorBody(error: String, description: String) -> [UInt8] {
        var body: [UInt8] = Array(#"{"error":"#.utf8)
        JSONWriter.appendString(error, to: &body)
        body += Array(#","error_description":"#.utf8)
        JSONWriter.appendString(description, to: &body)
        body.append(UInt8(ascii: "}"))
        return body
    }
}

/// application/x-www-form-urlencoded (WHATWG URL §5): unreserved bytes as they are, everything
/// else as %XX; '+' decodes to a space.
enum FormEncoding {
    private static let hexDigits = Array("0123456789ABCDEF".utf8)

    static func append(_ text: String, to out: inout [UInt8]) {
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "*"):
                out.append(byte)
            default:
                out += [UInt8(ascii: "%"), hexDigits[Int(byte >> 4)], hexDigits[Int(byte & 15)]]
            }
        }
    }

    /// nil on a bad %-escape or invalid UTF-8.
    static func decode(_ field: ArraySlice<UInt8>) -> String? {
        var out: [UInt8] = []
        out.reserveCapacity(field.count)
        var index = field.startIndex
        while index < field.endIndex {
            let byte = field[index]
            if byte == UInt8(ascii: "%") {
                guard index + 2 < field.endIndex, let high = hexValue(field[index + 1]), let low = hexValue(field[index + 2]) else { return nil }
                out.append(high << 4 | low)
                index += 3
            } else {
                out.append(byte == UInt8(ascii: "+") ? 0x20 : byte)
                index += 1
            }
        }
        return String(validating: out, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - 0x30
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - 0x41 + 10
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - 0x61 + 10
        default: return nil
        }
    }
}

