// The server side of the provider token, for the mock (`pushcast mock`): checks
// `authorization: bearer <jwt>` the way APNs does (§1.6, §1.8) and answers with APNs's reasons.
// Verified tokens are cached, so the per-request cost for the one shared token is a string
// comparison plus an age check; the signature is verified once per distinct token.

import PushcastCore
import PushcastJSON
import PushcastWire
import Synchronization

/// Why APNs would refuse a request's provider token (all 403).
public enum APNsProviderTokenFailure: String, Sendable, Equatable, CaseIterable {
    /// No `authorization` header, or an empty one.
    case missingProviderToken = "MissingProviderToken"
    /// Malformed, wrong algorithm, unknown key ID or team, bad signature, or `iat` in the future.
    case invalidProviderToken = "InvalidProviderToken"
    /// `iat` is more than an hour old.
    case expiredProviderToken = "ExpiredProviderToken"
}

/// The verifier's answer for one request.
public enum APNsJWTVerification: Sendable, Equatable {
    case valid
    case rejected(APNsProviderTokenFailure)
}

/// Verifies provider tokens against one public key. Thread-safe: one instance serves every mock
/// worker. The cache of recent tokens sits behind a lock held only for string comparisons; a
/// signature is verified outside it.
public final class APNsJWTVerifier: Sendable {
    public static let cacheEntriesMax = 8

    private struct Entry: Sendable {
        let authorization: String
        /// The token's `iat`, when its structure and signature are good.
        let issuedAtSeconds: Int64
        /// A failure that does not depend on time, or nil.
        let failure: APNsProviderTokenFailure?
    }

    private struct Cache: Sendable {
        var entries: [Entry] = []
        var next = 0
        var signatureChecks = 0
    }

    public let keyID: String
    public let teamID: String
    public let ageMaxSeconds: Int64
    public let futureSkewMaxSeconds: Int64
    private let key: ES256Key
    /// Only read; a test that moves a `ManualClock` does so between calls.
    private nonisolated(unsafe) let clock: any WallClock
    private let cache = Mutex(Cache())

    /// - Parameters:
    ///   - publicKeyPEM: the SubjectPublicKeyInfo PEM of the key whose `.p8` signs the tokens.
    ///   - clock: the wall clock `verify(authorization:)` reads.
    ///   - ageMaxSeconds: tokens whose `iat` is older are ExpiredProviderToken (APNs: one hour).
    ///   - futureSkewMaxSeconds: tokens whose `iat` is further in the future are invalid.
    ///   - source: how error messages name the key, typically its file name.
    public convenience init(publicKeyPEM: String, keyID: String, teamID: String, clock: any WallClock, ageMaxSeconds: Int64 = 3600,
                            futureSkewMaxSeconds: Int64 = 60, source: String = "(given in memory)") throws(APNsCredentialError) {
        let key = try ES256Key.load(pem: Array(publicKeyPEM.utf8), source: source, publicOnly: true)
        self.init(key: key, keyID: keyID, teamID: teamID, clock: clock, ageMaxSeconds: ageMaxSeconds, futureSkewMaxSeconds: futureSkewMaxSeconds)
    }

    /// Reads the public key PEM file at `path` through `files` (start-up only: `SecretFile.read`
    /// of PushcastReactor) and names it in every error.
    public convenience init(publicKeyFile path: String, keyID: String, teamID: String, clock: any WallClock,
                            ageMaxSeconds: Int64 = 3600, futureSkewMaxSeconds: Int64 = 60, files: SecretFileReader) throws(APNsCredentialError) {
        let key = try ES256Key.load(file: path, what: "public key file", publicOnly: true, files: files)
        self.init(key: key, keyID: keyID, teamID: teamID, clock: clock, ageMaxSeconds: ageMaxSeconds, futureSkewMaxSeconds: futureSkewMaxSeconds)
    }

    private init(key: ES256Key, keyID: String, teamID: String, clock: any WallClock, ageMaxSeconds: Int64, futureSkewMaxSeconds: Int64) {
        self.key = key
        self.keyID = keyID
        self.teamID = teamID
        self.clock = clock
        self.ageMaxSeconds = ageMaxSeconds
        self.futureSkewMaxSeconds = futureSkewMaxSeconds
    }

    /// How many signature checks ran (every other call was answered from the cache).
    public var signatureChecks: Int { cache.withLock { $0.signatureChecks } }

    /// Checks an `authorization` header value now, by the injected clock.
    public func verify(authorization: String?) -> APNsJWTVerification {
        verify(authorization: authorization, nowSeconds: clock.secondsSinceEpoch())
    }

    /// Checks an `authorization` header value at `nowSeconds`.
    public func verify(authorization: String?, nowSeconds: Int64) -> APNsJWTVerification {
        guard let authorization, !authorization.isEmpty else { return .rejected(.missingProviderToken) }
        let cached = cache.withLock { cache in cache.entries.first(where: { $0.authorization == authorization }) }
        let entry: Entry
        if let cached {
            entry = cached
        } else {
            let (failure, issuedAt, checkedSignature) = check(authorization)
            entry = Entry(authorization: authorization, issuedAtSeconds: issuedAt, failure: failure)
            cache.withLock { cache in
                if checkedSignature { cache.signatureChecks += 1 }
                if cache.entries.count < Self.cacheEntriesMax {
                    cache.entries.append(entry)
                } else {
                    cache.entries[cache.next] = entry
                    cache.next = (cache.next + 1) % Self.cacheEntriesMax
                }
            }
        }
        if let failure = entry.failure { return .rejected(failure) }
        if entry.issuedAtSeconds - nowSeconds > futureSkewMaxSeconds { return .rejected(.invalidProviderToken) }
        if nowSeconds - entry.issuedAtSeconds > ageMaxSeconds { return .rejected(.expiredProviderToken) }
        return .valid
    }

    /// The time-independent checks: shape, header, claims, signature.
    private func check(_ authorization: String) -> (APNsProviderTokenFailure?, Int64, Bool) {
        var text = authorization
        return text.withUTF8 { bytes -> (APNsProviderTokenFailure?, Int64, Bool) in
            // "bearer" (any case), spaces, then the JWT.
            let scheme = Array("bearer".utf8)
            guard bytes.count > scheme.count,
                  zip(bytes.prefix(scheme.count), scheme).allSatisfy({ $0 | 0x20 == $1 }),
                  bytes[scheme.count] == 0x20 else { return (.invalidProviderToken, 0, false) }
            var start = scheme.count
            while start < bytes.count && bytes[start] == 0x20 { start += 1 }
            if start == bytes.count { return (.missingProviderToken, 0, false) }
            let jwt = UnsafeBufferPointer(rebasing: bytes[start...])
            guard let firstDot = jwt.firstIndex(of: UInt8(ascii: ".")),
                  let secondDot = jwt[(firstDot + 1)...].firstIndex(of: UInt8(ascii: ".")),
                  !jwt[(secondDot + 1)...].contains(UInt8(ascii: ".")) else { return (.invalidProviderToken, 0, false) }
            guard let header = Base64URL.decode(UnsafeBufferPointer(rebasing: jwt[..<firstDot])),
                  let claims = Base64URL.decode(UnsafeBufferPointer(rebasing: jwt[(firstDot + 1)..<secondDot])),
                  let signature = Base64URL.decode(UnsafeBufferPointer(rebasing: jwt[(secondDot + 1)...])) else {
                return (.invalidProviderToken, 0, false)
            }
            let headerMembers = header.withUnsafeBufferPointer { FlatObjectReader.read($0) }
            guard headerMembers.error == nil,
                  FlatObjectReader.string(headerMembers.members, "alg") == "ES256",
                  FlatObjectReader.string(headerMembers.members, "kid") == keyID else { return (.invalidProviderToken, 0, false) }
            let claimMembers = claims.withUnsafeBufferPointer { FlatObjectReader.read($0) }
            guard claimMembers.error == nil,
                  FlatObjectReader.string(claimMembers.members, "iss") == teamID,
                  let issuedAt = FlatObjectReader.integer(claimMembers.members, "iat") else { return (.invalidProviderToken, 0, false) }
            let signed = UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(jwt)[..<secondDot])
            let good = signature.withUnsafeBytes { key.verify(signed, rawSignature: $0) }
            return good ? (nil, issuedAt, true) : (.invalidProviderToken, 0, true)
        }
    }
}
