// Subscriptions whose private keys a push service can recover from the endpoint alone, for the
// mock and the demo data: both derive them the same way, so the mock needs no subscription file.
//   scalar = HMAC-SHA-256(key: seed, message: "pushcast webpush key" ‖ 0 ‖ path ‖ 0 ‖ attempt)
//            for attempt = 0, 1, … until it is a valid P-256 scalar (1 ≤ s < n; a retry is
//            vanishingly rare)
//   auth   = the first 16 bytes of HMAC-SHA-256(key: seed, message: "pushcast webpush auth" ‖ 0 ‖ path)
// `path` is the endpoint's path (from the first "/" after the authority), so the same path on
// another host or port has the same keys. Python reproduces it with `hmac` and `cryptography`.

import COpenSSL
import PushcastCore
import PushcastWire

/// A demo subscription's keys: what the user agent keeps (the private key, the auth secret) and
/// what it hands the application server (p256dh and auth, base64url).
public struct WebPushDemoKeys: Sendable {
    public let privateKey: P256Key
    public let publicPoint: [UInt8]
    public let authSecret: [UInt8]
    public var p256dh: String { Base64URL.encode(publicPoint) }
    public var auth: String { Base64URL.encode(authSecret) }
}

public enum WebPushDemoSubscriptions {
    /// The seed the demo data and `pushcast mock --webpush` use unless told another.
    public static let defaultSeed = "pushcast-demo-webpush"
    /// Attempts at a valid scalar before giving up (each fails with probability about 2^-32).
    static let attemptsMax = 16

    /// The keys of the subscription at `endpoint` (its path, see above); nil only when OpenSSL fails.
    public static func make(endpoint: String, seed: String = defaultSeed) -> WebPushDemoKeys? {
        let (scalar, auth) = secrets(endpoint: endpoint, seed: seed)
        guard let scalar, let auth, let privateKey = scalar.withUnsafeBytes({ P256Key.privateKey(scalar: $0) }),
              let point = privateKey.publicPoint() else { return nil }
        return WebPushDemoKeys(privateKey: privateKey, publicPoint: point, authSecret: auth)
    }

    /// The private scalar and auth secret of the subscription at `endpoint`, without making an
    /// OpenSSL key (the mock, per message); nil only when OpenSSL fails.
    public static func secrets(endpoint: String, seed: String = defaultSeed) -> (scalar: [UInt8]?, auth: [UInt8]?) {
        let path = Array(Self.path(of: endpoint).utf8)
        let key = Array(seed.utf8)
        var found: [UInt8]?
        for attempt in 0..<attemptsMax {
            guard let scalar = hmac(key: key, message: Array("pushcast webpush key".utf8) + [0] + path + [0, UInt8(attempt)]) else { return (nil, nil) }
            if isPrivateScalar(scalar) {
                found = scalar
                break
            }
        }
        let auth = hmac(key: key, message: Array("pushcast webpush auth".utf8) + [0] + path).map { Array($0.prefix(WebPushSubscription.authSecretBytes)) }
        return (found, auth)
    }

    /// P-256's group order n, big-endian.
    static let order: [UInt8] = [0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
                                 0xBC, 0xE6, 0xFA, 0xAD, 0xA7, 0x17, 0x9E, 0x84, 0xF3, 0xB9, 0xCA, 0xC2, 0xFC, 0x63, 0x25, 0x51]

    /// Whether 32 big-endian bytes are a P-256 private key: 1 ≤ s < n.
    public static func isPrivateScalar(_ scalar: [UInt8]) -> Bool {
        scalar.count == 32 && scalar.contains { $0 != 0 } && scalar.lexicographicallyPrecedes(order)
    }

    /// The endpoint's path: from the first "/" after "scheme://authority" ("/" when none).
    public static func path(of endpoint: String) -> Substring {
        var rest = Substring(endpoint)
        if let colon = rest.firstIndex(of: ":"), rest[colon...].hasPrefix("://") { rest = rest[rest.index(colon, offsetBy: 3)...] }
        guard let slash = rest.firstIndex(of: "/") else { return "/" }
        return rest[slash...]
    }

    static func hmac(key: [UInt8], message: [UInt8]) -> [UInt8]? {
        var out = [UInt8](repeating: 0, count: 32)
        var written = 0
        let ok = out.withUnsafeMutableBytes { output in
            key.withUnsafeBytes { secret in
                message.withUnsafeBytes { data in
                    EVP_Q_mac(nil, "HMAC", nil, "SHA256", nil, secret.baseAddress, secret.count, data.baseAddress, data.count,
                              output.baseAddress?.assumingMemoryBound(to: UInt8.self), 32, &written)
                }
            }
        }
        return ok != nil && written == 32 ? out : nil
    }

    /// SHA-256 of `bytes`, lowercase hex (the mock logs payloads by it).
    public static func sha256Hex(_ bytes: [UInt8]) -> String {
        var digest = [UInt8](repeating: 0, count: 32)
        var size: UInt32 = 0
        _ = bytes.withUnsafeBytes { input in
            EVP_Digest(input.baseAddress, input.count, &digest, &size, EVP_sha256(), nil)
        }
        let digits = Array("0123456789abcdef".utf8)
        var text = [UInt8]()
        text.reserveCapacity(64)
        for byte in digest { text.append(digits[Int(byte >> 4)]); text.append(digits[Int(byte & 15)]) }
        return String(decoding: text, as: UTF8.self)
    }
}

/// Demo rows of Web Push subscriptions the mock can decrypt for, for the demo data generator.
public enum WebPushDemoRows {
    /// The CSV header the rows follow.
    public static let header = "device_id,endpoint,platform,user_id,locale,p256dh,auth"

    /// The endpoint kinds, per mille of the rows (the rest are `ok`): the mock answers `gone` 410,
    /// `nf` 404, `big` 413, `slow` 429 once, `busy` 503 once.
    public static let kinds: [(prefix: String, perMille: UInt64)] = [("gone", 30), ("nf", 10), ("big", 5), ("slow", 10), ("busy", 10)]

    /// The kinds without `big`: subscriptions that all end delivered or pruned (`pushcast demo`).
    public static let kindsThatNeverFail = kinds.filter { $0.prefix != "big" }

    /// `count` rows spread over `origins` (`https://host:port`), deterministic for a seed:
    /// endpoint `<origin>/<kind><n>/<id>`, keys from `WebPushDemoSubscriptions`, platform `web`.
    /// Row ids start at `firstID`; nil when a key cannot be derived (OpenSSL failed).
    public static func generate(origins: [String], count: Int, seed: UInt64, firstID: Int = 1, kinds: [(prefix: String, perMille: UInt64)] = kinds,
                                keySeed: String = WebPushDemoSubscriptions.defaultSeed) -> [String]? {
        guard !origins.isEmpty else { return [] }
        let random = SplitMix64(seed: seed)
        let locales = ["en", "fr", "de", "ja", "ar"]
        var lines: [String] = []
        lines.reserveCapacity(count)
        for index in 0..<count {
            guard let (endpoint, keys) = subscription(origins: origins, number: index + firstID, random: random, kinds: kinds,
                                                      keySeed: keySeed) else { return nil }
            let locale = locales[Int(random.next(below: UInt64(locales.count)))]
            lines.append("web-\(index + firstID),\(endpoint),web,w\(100_000 + index + firstID),\(locale),\(keys.p256dh),\(keys.auth)")
        }
        return lines
    }

    /// One subscription: a kind drawn from `kinds` (per mille; the rest `ok`), an origin from
    /// `origins`, endpoint `<origin>/<kind><number>/<id>`, and the keys the mock derives from its
    /// path. Nil when a key cannot be derived (OpenSSL failed).
    public static func subscription(origins: [String], number: Int, random: SplitMix64, kinds: [(prefix: String, perMille: UInt64)] = kinds,
                                    keySeed: String = WebPushDemoSubscriptions.defaultSeed) -> (endpoint: String, keys: WebPushDemoKeys)? {
        var draw = random.next(below: 1000)
        var kind = "ok"
        for candidate in kinds {
            if draw < candidate.perMille { kind = candidate.prefix; break }
            draw -= candidate.perMille
        }
        let origin = origins[Int(random.next(below: UInt64(origins.count)))]
        let endpoint = origin + "/\(kind)\(number)/" + String(random.next(), radix: 36)
        guard let keys = WebPushDemoSubscriptions.make(endpoint: endpoint, seed: keySeed) else { return nil }
        return (endpoint, keys)
    }
}
