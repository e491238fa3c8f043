// Shared by the Web Push tests: base64url helpers, a key source with fixed values, and the
// vectors of RFC 8291 Appendix A (the Push Message Encryption Example and its intermediate values).

import PushcastCore
import PushcastWire
import XCTest
@testable import PushcastWebPush

enum RFC8291 {
    static let plaintext = Array("When I grow up, I want to be a watermelon".utf8)
    static let asPublic = "BP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A8"
    static let asPrivate = "yfWPiYE-n46HLnH0KqZOF1fJJU3MYrct3AELtAQ-oRw"
    static let uaPublic = "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4"
    static let uaPrivate = "q1dXpw3UpT5VOmu_cf_v6ih07Aems3njxI-JWgLcM94"
    static let salt = "DGv6ra1nlYgDCS1FRnbzlw"
    static let authSecret = "BTBZMqHH6r4Tts7J_aSIgg"
    static let header = "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A8"
    static let body = "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27ml"
        + "mlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A_yl95bQpu6cVPT"
        + "pK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN"
    static let endpoint = "https://push.example.net/push/JzLQ3raZJfFBR0aqvOMsLrt54w4rJUsV"
}

func decoded(_ text: String) -> [UInt8] {
    guard let bytes = Base64URL.decode(ArraySlice(text.utf8)) else { preconditionFailure("not base64url: \(text)") }
    return bytes
}

func privateKey(_ base64url: String) -> P256Key {
    guard let key = decoded(base64url).withUnsafeBytes({ P256Key.privateKey(scalar: $0) }) else { preconditionFailure("not a P-256 scalar") }
    return key
}

/// A key source that hands out one given key and salt.
final class FixedKeys: WebPushKeySource {
    let key: P256Key
    let salt: [UInt8]
    init(key: P256Key, salt: [UInt8]) {
        self.key = key
        self.salt = salt
    }
    func agree(userAgentPublic: UnsafeRawBufferPointer, serverPublic: UnsafeMutableRawBufferPointer,
               secret: UnsafeMutableRawBufferPointer) -> WebPushAgreement {
        agree(ephemeral: key, userAgentPublic: userAgentPublic, serverPublic: serverPublic, secret: secret)
    }
    func fillSalt(_ out: UnsafeMutableRawBufferPointer) -> Bool {
        salt.withUnsafeBytes { out.copyMemory(from: $0) }
        return true
    }
}

/// A fresh subscription: its key pair (the user agent's), a random auth secret, and the parsed
/// subscription the application server holds.
func freshSubscription(endpoint: String = "https://fcm.googleapis.com/fcm/send/abc:def") throws -> (WebPushSubscription, P256Key, [UInt8]) {
    let key = try XCTUnwrap(P256Key.generate())
    let point = try XCTUnwrap(key.publicPoint())
    var auth = [UInt8](repeating: 0, count: 16)
    let generator = SplitMix64(seed: UInt64(point[1]) << 8 | UInt64(point[2]))
    for index in auth.indices { auth[index] = UInt8(truncatingIfNeeded: generator.next()) }
    let subscription = try WebPushSubscription(endpoint: endpoint, p256dh: Base64URL.encode(point), auth: Base64URL.encode(auth))
    return (subscription, key, auth)
}
