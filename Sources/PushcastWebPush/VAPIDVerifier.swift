// The push service's side of VAPID (RFC 8292), for the mock: parses `vapid t=…, k=…`, checks the
// ES256 signature with the key in `k`, that `aud` is the origin the request was sent to, that
// `exp` is in the future and no more than 24 hours ahead (§2), and that `sub` is a mailto: or
// https: contact. A push service may also hold the subscription to the key it was created with
// (§4): pass `expectedKey`.

import PushcastCore
import PushcastJSON
import PushcastWire
import Synchronization

/// Why a push service would refuse a request's VAPID header (RFC 8292 §4.1 answers 401 or 403).
public enum VAPIDRejection: String, Error, Sendable, Equatable, CaseIterable {
    case missing
    case malformed
    case badKey
    case badSignature
    case wrongAudience
    case expired
    case expiryTooFar
    case badSubject
    /// `k` is not the key the subscription was created with.
    case wrongKey
}

/// Authorization headers whose signature has been checked (a push service sees the same token on
/// every message of a campaign until it expires): a header seen again skips the key import and the
/// ECDSA verification; its claims (audience, expiry, subject) are still checked each time. Bounded:
/// when full it starts again empty. Safe from any thread.
public final class VAPIDSignatureCache: Sendable {
    public static let entriesMax = 1024
    private let verified = Mutex<Set<String>>([])

    public init() {}

    func contains(_ authorization: String) -> Bool { verified.withLock { $0.contains(authorization) } }

    func insert(_ authorization: String) {
        verified.withLock {
            if $0.count >= Self.entriesMax { $0.removeAll() }
            $0.insert(authorization)
        }
    }
}

public struct VAPIDVerifier {
    public let expiryAheadMaxSeconds: Int64
    private let clock: any WallClock

    private let cache: VAPIDSignatureCache?

    public init(clock: any WallClock, expiryAheadMaxSeconds: Int64 = VAPIDSigner.lifetimeSecondsMax, cache: VAPIDSignatureCache? = nil) {
        self.clock = clock
        self.expiryAheadMaxSeconds = expiryAheadMaxSeconds
        self.cache = cache
    }

    /// The public key (65 bytes) that signed a valid header, or why the header is refused.
    public func verify(authorization: String, origin: String, expectedKey: [UInt8]? = nil) -> Result<[UInt8], VAPIDRejection> {
        guard let (token, keyText) = Self.parameters(authorization) else {
            return .failure(authorization.isEmpty ? .missing : .malformed)
        }
        var point = [UInt8](repeating: 0, count: P256Key.pointBytes + 1)
        let written = Array(keyText.utf8).withUnsafeBytes { text in point.withUnsafeMutableBytes { WebPushBase64.decode(text, into: $0) } }
        guard written == P256Key.pointBytes else { return .failure(.badKey) }
        point.removeLast()
        // A header whose signature was checked before needs neither its key nor the ECDSA check.
        var key: P256Key?
        if !(cache?.contains(authorization) ?? false) {
            key = point.withUnsafeBytes { P256Key.publicKey(point: $0) }
            guard key != nil else { return .failure(.badKey) }
        }
        if let expectedKey, expectedKey != point { return .failure(.wrongKey) }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let header = Base64URL.decode(ArraySlice(parts[0].utf8)), let claims = Base64URL.decode(ArraySlice(parts[1].utf8)),
              let signature = Base64URL.decode(ArraySlice(parts[2].utf8)) else { return .failure(.malformed) }
        let headerMembers = header.withUnsafeBufferPointer { FlatObjectReader.read($0) }
        guard headerMembers.error == nil, FlatObjectReader.string(headerMembers.members, "alg") == "ES256" else { return .failure(.malformed) }
        if let key {
            let signed = Array(token.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count))
            let good = signed.withUnsafeBytes { message in signature.withUnsafeBytes { key.verify(message, rawSignature: $0) } }
            guard good else { return .failure(.badSignature) }
            cache?.insert(authorization)
        }
        let claimMembers = claims.withUnsafeBufferPointer { FlatObjectReader.read($0) }
        guard claimMembers.error == nil, let expiresAt = FlatObjectReader.integer(claimMembers.members, "exp") else { return .failure(.malformed) }
        guard FlatObjectReader.string(claimMembers.members, "aud") == origin else { return .failure(.wrongAudience) }
        let now = clock.secondsSinceEpoch()
        guard expiresAt > now else { return .failure(.expired) }
        guard expiresAt - now <= expiryAheadMaxSeconds else { return .failure(.expiryTooFar) }
        guard let subject = FlatObjectReader.string(claimMembers.members, "sub"), (try? VAPIDSigner.checkSubject(subject)) != nil else {
            return .failure(.badSubject)
        }
        return .success(point)
    }

    /// `vapid` (any case), then `t=` and `k=` separated by a comma and optional spaces, in
    /// either order.
    static func parameters(_ authorization: String) -> (token: Substring, key: Substring)? {
        let scheme = "vapid "
        guard authorization.count > scheme.count, authorization.prefix(scheme.count).lowercased() == scheme else { return nil }
        var token: Substring?
        var key: Substring?
        for parameter in authorization.dropFirst(scheme.count).split(separator: ",") {
            var trimmed = parameter.drop(while: { $0 == " " })
            while trimmed.last == " " { trimmed = trimmed.dropLast() }
            let value = trimmed.dropFirst(2)
            guard !value.contains(" ") else { return nil }
            if trimmed.hasPrefix("t=") && token == nil {
                token = value
            } else if trimmed.hasPrefix("k=") && key == nil {
                key = value
            } else {
                return nil
            }
        }
        guard let token, let key, !token.isEmpty, !key.isEmpty else { return nil }
        return (token, key)
    }
}
