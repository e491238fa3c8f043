import PushcastCore
import PushcastProviderKit
import PushcastWire

/// FCM HTTP v1 as the simulator's server speaks it: the token inside the message body, a
/// message name on success, and google.rpc error bodies (docs/PROTOCOL.md §2).
public final class FCMSimulatedAnswers: SimulatedProvider {
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
