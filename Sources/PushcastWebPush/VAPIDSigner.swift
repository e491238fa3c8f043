// The application server's identity on each request (RFC 8292): the header
//   Authorization: vapid t=<JWT>, k=<base64url uncompressed public key>
// where the JWT is ES256-signed with claims aud (the push service's origin), exp (no more than
// 24 hours ahead, §2) and sub (a mailto: or https: contact, §2.1). One token per origin is signed
// and reused until `renewBeforeSeconds` before it expires; the cache holds at most `originsMax`
// origins. Time is the caller's WallClock. Thread-safe: every worker shares one signer.

import PushcastCore
import PushcastJSON
import PushcastWire
import Synchronization

public final class VAPIDSigner: Sendable {
    /// How far ahead `exp` is set by default, and the most RFC 8292 §2 allows.
    public static let lifetimeSecondsDefault: Int64 = 12 * 3600
    public static let lifetimeSecondsMax: Int64 = 24 * 3600
    /// A token is replaced this long before its `exp` by default.
    public static let renewBeforeSecondsDefault: Int64 = 3600
    /// The most origins kept; past it the entry that expires first is dropped.
    public static let originsMax = 256
    /// The longest subject accepted.
    public static let subjectBytesMax = 512

    private struct Entry: Sendable {
        let expiresAt: Int64
        let authorization: String
    }

    private struct Cache: Sendable {
        var entries: [String: Entry] = [:]
        var signatures = 0
    }

    public let key: VAPIDKey
    public let subject: String
    public let lifetimeSeconds: Int64
    public let renewBeforeSeconds: Int64
    /// Only read; a test that moves a `ManualClock` does so between calls.
    private nonisolated(unsafe) let clock: any WallClock
    private let cache = Mutex(Cache())

    /// - Parameters:
    ///   - subject: the `sub` claim, a `mailto:` or `https:` URI (checked by `checkSubject`).
    ///   - lifetimeSeconds: `exp` − now, more than `renewBeforeSeconds` and at most 24 hours.
    public init(key: VAPIDKey, subject: String, clock: any WallClock, lifetimeSeconds: Int64 = lifetimeSecondsDefault,
                renewBeforeSeconds: Int64 = renewBeforeSecondsDefault) throws(VAPIDKeyError) {
        try Self.checkSubject(subject)
        guard lifetimeSeconds <= Self.lifetimeSecondsMax, renewBeforeSeconds >= 0, lifetimeSeconds > renewBeforeSeconds else {
            throw VAPIDKeyError("the VAPID token lifetime must be at most 24 hours (86400 s) and longer than its renewal margin "
                                + "(got \(lifetimeSeconds) s and \(renewBeforeSeconds) s)")
        }
        self.key = key
        self.subject = subject
        self.clock = clock
        self.lifetimeSeconds = lifetimeSeconds
        self.renewBeforeSeconds = renewBeforeSeconds
    }

    /// The subject must be `mailto:` followed by an address, or an `https://` URL with a host;
    /// printable ASCII without quotes or backslashes.
    public static func checkSubject(_ subject: String) throws(VAPIDKeyError) {
        let bytes = Array(subject.utf8)
        let printable = bytes.allSatisfy { $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") }
        let lower = subject.lowercased()
        let mailto = lower.hasPrefix("mailto:") && bytes.count > 7 && subject.contains("@")
        let https = lower.hasPrefix("https://") && bytes.count > 8 && bytes[8] != UInt8(ascii: "/")
        guard bytes.count <= subjectBytesMax, printable, mailto || https else {
            throw VAPIDKeyError("the VAPID subject must be a mailto: address or an https:// URL the push service can contact "
                                + "(for example mailto:push@example.com), at most \(subjectBytesMax) characters")
        }
    }

    /// How many tokens have been signed.
    public var signatureCount: Int { cache.withLock { $0.signatures } }

    /// How many origins have a token cached.
    var cachedOrigins: Int { cache.withLock { $0.entries.count } }

    /// The Authorization header value for a request to `origin` ("https://host[:port]", as
    /// `WebPushSubscription.origin` gives it); nil only if OpenSSL cannot sign.
    public func authorization(origin: String) -> String? {
        let now = clock.secondsSinceEpoch()
        if let entry = cache.withLock({ $0.entries[origin] }), now < entry.expiresAt - renewBeforeSeconds { return entry.authorization }
        let expiresAt = now + lifetimeSeconds
        guard let jwt = Self.token(key: key.key, audience: origin, expiresAt: expiresAt, subject: subject) else { return nil }
        let entry = Entry(expiresAt: expiresAt, authorization: "vapid t=\(jwt), k=\(key.publicKeyText)")
        cache.withLock { cache in
            cache.signatures += 1
            if cache.entries[origin] == nil && cache.entries.count >= Self.originsMax,
               let first = cache.entries.min(by: { $0.value.expiresAt < $1.value.expiresAt }) {
                cache.entries[first.key] = nil
            }
            cache.entries[origin] = entry
        }
        return entry.authorization
    }

    /// Forgets `origin`'s token: the next `authorization` signs a new one (after the push
    /// service refused it).
    public func renew(origin: String) {
        _ = cache.withLock { $0.entries.removeValue(forKey: origin) }
    }

    /// `base64url(header).base64url(claims).base64url(R‖S)`.
    static func token(key: P256Key, audience: String, expiresAt: Int64, subject: String) -> String? {
        let header = Base64URL.encode(Array(#"{"typ":"JWT","alg":"ES256"}"#.utf8))
        var claims = Array(#"{"aud":"#.utf8)
        JSONWriter.appendString(audience, to: &claims)
        claims += Array(#","exp":"#.utf8) + Array(String(expiresAt).utf8) + Array(#","sub":"#.utf8)
        JSONWriter.appendString(subject, to: &claims)
        claims.append(UInt8(ascii: "}"))
        let signingInput = header + "." + Base64URL.encode(claims)
        guard let signature = Array(signingInput.utf8).withUnsafeBytes({ key.sign($0) }) else { return nil }
        return signingInput + "." + Base64URL.encode(signature)
    }
}
