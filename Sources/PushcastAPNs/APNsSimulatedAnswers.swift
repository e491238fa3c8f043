import PushcastCore
import PushcastProviderKit
import PushcastWire

/// APNs as the simulator's server speaks it: `/3/device/<token>`, an apns-id on success, and
/// the JSON `reason` bodies of docs/PROTOCOL.md §1.
public final class APNsSimulatedAnswers: SimulatedProvider {
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
