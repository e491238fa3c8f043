// The APNs provider token (§1.8): one ES256 JWT per key, shared by every connection and worker
// (docs/PROTOCOL.md §1.8: per-connection or per-process tokens cause TooManyProviderTokenUpdates).
//
// Schedule, on the injected wall clock:
// - a token is re-signed when it is 50 minutes old or older, checked whenever it is read;
// - it is never re-signed less than 20 minutes after the previous one (Apple: "no more than once
//   per 20 minutes"), including after 403 ExpiredProviderToken, see `refreshAfterExpired`.
//
// Reading is cheap: workers keep their own copy of `APNsBearerToken` and call
// `refreshIfNeeded(_:)`, which costs two atomic loads and a clock read until the generation
// changes or the refresh time passes; only then does it take the lock.

import PushcastCore
import PushcastWire
import Synchronization

/// One signed provider token and the `authorization` value that carries it.
public struct APNsBearerToken: Sendable, Equatable {
    /// Increases by one each time the source signs a new token (the first is 1).
    public let generation: UInt64
    /// The token's `iat`, in seconds since the Unix epoch.
    public let issuedAtSeconds: Int64
    /// The compact JWT (`header.claims.signature`).
    public let jwt: String
    /// `bearer <jwt>`, ready for the `authorization` header.
    public let authorization: String

    init(generation: UInt64, issuedAtSeconds: Int64, jwt: String) {
        self.generation = generation
        self.issuedAtSeconds = issuedAtSeconds
        self.jwt = jwt
        self.authorization = "bearer " + jwt
    }
}

/// What to do after APNs answered 403 ExpiredProviderToken.
public enum APNsTokenRefreshResult: Sendable, Equatable {
    /// There is a newer token than the rejected one (signed now, or earlier by another worker):
    /// retry with it.
    case refreshed(APNsBearerToken)
    /// The rejected token is the current one and younger than 20 minutes, so signing again would
    /// break Apple's spacing rule (429 TooManyProviderTokenUpdates). Keep it, and retry no sooner
    /// than `retryAfterSeconds` from now, when a refresh becomes allowed. A young token rejected
    /// as expired usually means this host's clock is wrong; the caller should say so.
    case tooSoon(current: APNsBearerToken, retryAfterSeconds: Int64)
}

/// The shared ES256 provider-token source. Thread-safe; create one per key at start-up.
public final class APNsTokenSource: Sendable {
    /// Re-sign when the token is this old (50 minutes; APNs rejects tokens older than 60).
    public static let refreshAgeSeconds: Int64 = 50 * 60
    /// Never re-sign sooner than this after the previous token (20 minutes).
    public static let refreshSpacingSeconds: Int64 = 20 * 60

    public let keyID: String
    public let teamID: String
    private let key: ES256Key
    /// The clock is only read, and tests that move a `ManualClock` do so between calls.
    private nonisolated(unsafe) let clock: any WallClock
    private let state: Mutex<APNsBearerToken>
    private let currentGeneration: Atomic<UInt64>
    /// The wall time at which the current token is due for a refresh.
    private let refreshDueSeconds: Atomic<Int64>
    private let signatures: Atomic<Int>

    /// - Parameters:
    ///   - privateKeyPEM: the `.p8` file's text (PKCS#8 PEM, EC P-256).
    ///   - keyID: the 10-character Key ID (`kid`).
    ///   - teamID: the 10-character Team ID (`iss`).
    ///   - source: how error messages name the key, typically its file name.
    public convenience init(privateKeyPEM: String, keyID: String, teamID: String, clock: any WallClock, source: String = "(given in memory)") throws(APNsCredentialError) {
        try Self.checkIdentifier(keyID, name: "key ID")
        try Self.checkIdentifier(teamID, name: "team ID")
        let key = try ES256Key.load(pem: Array(privateKeyPEM.utf8), source: source, publicOnly: false)
        try self.init(key: key, keyID: keyID, teamID: teamID, clock: clock, source: source)
    }

    /// The identifiers are checked by the caller.
    private init(key: ES256Key, keyID: String, teamID: String, clock: any WallClock, source: String) throws(APNsCredentialError) {
        self.key = key
        self.keyID = keyID
        self.teamID = teamID
        self.clock = clock
        let now = clock.secondsSinceEpoch()
        guard let jwt = Self.sign(key: key, keyID: keyID, teamID: teamID, issuedAt: now) else {
            throw APNsCredentialError("cannot sign a provider token with the APNs key \(source)\(lastOpenSSLReason().map { ": \($0)" } ?? "")")
        }
        state = Mutex(APNsBearerToken(generation: 1, issuedAtSeconds: now, jwt: jwt))
        currentGeneration = Atomic(1)
        refreshDueSeconds = Atomic(now + Self.refreshAgeSeconds)
        signatures = Atomic(1)
    }

    /// Reads the `.p8` file at `path` through `files` (start-up only: `SecretFile.read` of
    /// PushcastReactor, whose buffer is wiped) and names it in every error.
    public convenience init(keyFile path: String, keyID: String, teamID: String, clock: any WallClock, files: SecretFileReader) throws(APNsCredentialError) {
        let key = try ES256Key.load(file: path, what: "key file", publicOnly: false, files: files)
        try Self.checkIdentifier(keyID, name: "key ID")
        try Self.checkIdentifier(teamID, name: "team ID")
        try self.init(key: key, keyID: keyID, teamID: teamID, clock: clock, source: "'\(path)'")
    }

    /// The generation of the current token; changes only when a new token is signed.
    public var generation: UInt64 { currentGeneration.load(ordering: .acquiring) }

    /// Whether a token of this generation is still the one to send (lock-free): no newer token
    /// was signed and the current one is not due for renewal.
    @inline(__always)
    public func isCurrent(generation: UInt64) -> Bool {
        generation == currentGeneration.load(ordering: .acquiring) && clock.secondsSinceEpoch() < refreshDueSeconds.load(ordering: .relaxed)
    }

    /// How many tokens this source has signed (for tests and the run summary).
    public var signatureCount: Int { signatures.load(ordering: .relaxed) }

    /// The current token, re-signed first if it is due (50 minutes old).
    public func current() -> APNsBearerToken {
        let now = clock.secondsSinceEpoch()
        return state.withLock { token in
            if now - token.issuedAtSeconds >= Self.refreshAgeSeconds { resign(&token, now: now) }
            return token
        }
    }

    /// Brings a worker's cached token up to date. Lock-free while the cache is current; returns
    /// whether `cached` changed.
    @inline(__always)
    public func refreshIfNeeded(_ cached: inout APNsBearerToken) -> Bool {
        if isCurrent(generation: cached.generation) { return false }
        let fresh = current()
        defer { cached = fresh }
        return fresh.generation != cached.generation
    }

    /// Handles 403 ExpiredProviderToken for a request that carried `seenToken`. Signs at most
    /// once however many workers report the same rejection, and never within 20 minutes of the
    /// previous signature.
    public func refreshAfterExpired(seenToken: APNsBearerToken) -> APNsTokenRefreshResult {
        let now = clock.secondsSinceEpoch()
        return state.withLock { token in
            if token.generation != seenToken.generation { return .refreshed(token) }
            let age = now - token.issuedAtSeconds
            if age >= Self.refreshSpacingSeconds {
                resign(&token, now: now)
                return token.generation != seenToken.generation ? .refreshed(token) : .tooSoon(current: token, retryAfterSeconds: 1)
            }
            return .tooSoon(current: token, retryAfterSeconds: Self.refreshSpacingSeconds - max(age, 0))
        }
    }

    /// Signs a new token into `token` (called with the lock held). If OpenSSL fails, the old
    /// token stays and the next read tries again.
    private func resign(_ token: inout APNsBearerToken, now: Int64) {
        guard let jwt = Self.sign(key: key, keyID: keyID, teamID: teamID, issuedAt: now) else { return }
        token = APNsBearerToken(generation: token.generation + 1, issuedAtSeconds: now, jwt: jwt)
        signatures.add(1, ordering: .relaxed)
        refreshDueSeconds.store(now + Self.refreshAgeSeconds, ordering: .relaxed)
        currentGeneration.store(token.generation, ordering: .releasing)
    }

    /// `base64url(header).base64url(claims).base64url(R‖S)`.
    static func sign(key: ES256Key, keyID: String, teamID: String, issuedAt: Int64) -> String? {
        let header = Base64URL.encode(Array(#"{"alg":"ES256","kid":""#.utf8) + Array(keyID.utf8) + Array(#""}"#.utf8))
        let claims = Base64URL.encode(Array(#"{"iss":""#.utf8) + Array(teamID.utf8) + Array(#"","iat":"#.utf8) + Array(String(issuedAt).utf8) + [UInt8(ascii: "}")])
        let signingInput = header + "." + claims
        let signature = Array(signingInput.utf8).withUnsafeBytes { key.sign($0) }
        guard let signature else { return nil }
        return signingInput + "." + Base64URL.encode(signature)
    }

    /// Key and team IDs are 10 characters from Apple's developer account, letters and digits.
    static func checkIdentifier(_ value: String, name: String) throws(APNsCredentialError) {
        let bytes = Array(value.utf8)
        guard bytes.count == 10, bytes.allSatisfy({ (0x30...0x39).contains($0) || (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0) }) else {
            throw APNsCredentialError("the APNs \(name) must be 10 letters or digits, as shown in the Apple developer account (got '\(value)')")
        }
    }
}
