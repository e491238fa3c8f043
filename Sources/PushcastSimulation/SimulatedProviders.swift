import PushcastCore
import PushcastWire

/// APNs as the simulator's server speaks it: `/3/device/<token>`, an apns-id on success, and
/// the JSON `reason` bodies of docs/PROTOCOL.md §1.
public final class SimulatedAPNs: SimulatedProvider {
    public init() {}
    public var provider: ProviderID { .apns }

    public func token(path: String, body: [UInt8]) -> String { String(path.split(separator: "/").last ?? "") }

    public func accepted(_ random: SplitMix64) -> HTTP2Response {
        HTTP2Response(status: 200, headers: [HTTP2Header("apns-id", Self.uuid(random))])
    }

    public func unregistered() -> HTTP2Response {
        HTTP2Response(status: 410, body: Array(#"{"reason":"Unregistered","timestamp":1767225600000}"#.utf8))
    }

    public func transient(status: Int) -> HTTP2Response {
        let reason = status == 429 ? "TooManyRequests" : status == 503 ? "ServiceUnavailable" : "InternalServerError"
        return HTTP2Response(status: status, body: Array(#"{"reason":"\#(reason)"}"#.utf8))
    }

    static func uuid(_ random: SplitMix64) -> String {
        let a = random.next(), b = random.next()
        func hex(_ value: UInt64, _ digits: Int) -> String {
            let text = String(value, radix: 16, uppercase: true)
            return String(repeating: "0", count: max(0, digits - text.count)) + text.suffix(digits)
        }
        return "\(hex(a >> 32, 8))-\(hex(a >> 16, 4))-\(hex(a, 4))-\(hex(b >> 48, 4))-\(hex(b, 12))"
    }
}

/// FCM HTTP v1 as the simulator's server speaks it: the token inside the message body, a
/// message name on success, and google.rpc error bodies (docs/PROTOCOL.md §2).
public final class SimulatedFCM: SimulatedProvider {
    public init() {}
    public var provider: ProviderID { .fcm }

    /// The body starts `{"message":{"token":"<token>"`; the token is what follows up to its quote.
    public func token(path: String, body: [UInt8]) -> String {
        let key = Array(#""token":""#.utf8)
        guard let start = Self.find(key, in: body) else { return "" }
        let from = start + key.count
        let end = body[from...].firstIndex(of: UInt8(ascii: "\"")) ?? body.count
        return String(decoding: body[from..<end], as: UTF8.self)
    }

    public func accepted(_ random: SplitMix64) -> HTTP2Response {
        HTTP2Response(status: 200, body: Array(#"{"name":"projects/sim/messages/0:\#(random.next() >> 1)"}"#.utf8))
    }

    public func unregistered() -> HTTP2Response {
        HTTP2Response(status: 404, body: Array(Self.error(404, "NOT_FOUND", detail: "UNREGISTERED").utf8))
    }

    public func transient(status: Int) -> HTTP2Response {
        switch status {
        case 429: HTTP2Response(status: 429, headers: [HTTP2Header("retry-after", "1")],
                                body: Array(Self.error(429, "RESOURCE_EXHAUSTED", detail: "QUOTA_EXCEEDED").utf8))
        case 503: HTTP2Response(status: 503, body: Array(Self.error(503, "UNAVAILABLE", detail: "UNAVAILABLE").utf8))
        default: HTTP2Response(status: status, body: Array(Self.error(status, "INTERNAL", detail: "INTERNAL").utf8))
        }
    }

    static func error(_ code: Int, _ status: String, detail: String) -> String {
        #"{"error":{"code":\#(code),"message":"simulated","status":"\#(status)","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"\#(detail)"}]}}"#
    }

    static func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        for start in 0...(haystack.count - needle.count) where haystack[start] == needle[0] {
            if haystack[start..<(start + needle.count)].elementsEqual(needle) { return start }
        }
        return nil
    }
}
