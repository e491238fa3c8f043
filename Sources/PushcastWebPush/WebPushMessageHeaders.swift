// The header fields of a push message request (RFC 8030 §5, RFC 8291 §4), checked once per
// campaign: TTL (§5.2, required: how many seconds the push service keeps an undelivered message),
// Urgency (§5.3: very-low, low, normal or high), Topic (§5.4: replaces a pending message with the
// same topic; at most 32 characters of the base64url alphabet), and the one content coding,
// aes128gcm.

/// Why a message option cannot be sent.
public struct WebPushHeaderError: Error, Sendable, Equatable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

public enum WebPushUrgency: String, Sendable, CaseIterable {
    case veryLow = "very-low"
    case low
    case normal
    case high
}

/// The request headers every message of a campaign carries, besides Authorization.
public struct WebPushMessageHeaders: Sendable, Equatable {
    /// pushcast's limit, four weeks (FCM's longest time to live). A push service may keep a
    /// message for less than asked and says so in the TTL header of its answer (RFC 8030 §5.2).
    public static let ttlSecondsMax = 28 * 24 * 3600
    public static let topicBytesMax = 32

    public let ttlSeconds: Int
    public let urgency: WebPushUrgency?
    public let topic: String?

    public init(ttlSeconds: Int, urgency: WebPushUrgency? = nil, topic: String? = nil) throws(WebPushHeaderError) {
        guard (0...Self.ttlSecondsMax).contains(ttlSeconds) else {
            throw WebPushHeaderError("the Web Push TTL must be 0 to \(Self.ttlSecondsMax) seconds (four weeks), got \(ttlSeconds)")
        }
        if let topic {
            let bytes = Array(topic.utf8)
            let alphabet = bytes.allSatisfy { (0x30...0x39).contains($0) || (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0)
                || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") }
            guard !bytes.isEmpty, bytes.count <= Self.topicBytesMax, alphabet else {
                throw WebPushHeaderError("the Web Push topic must be 1 to 32 letters, digits, '-' or '_' (RFC 8030 §5.4)")
            }
        }
        self.ttlSeconds = ttlSeconds
        self.urgency = urgency
        self.topic = topic
    }

    /// Reads an urgency as written on the command line ("very-low", "low", "normal", "high").
    public static func urgency(_ text: String) throws(WebPushHeaderError) -> WebPushUrgency {
        guard let urgency = WebPushUrgency(rawValue: text.lowercased()) else {
            throw WebPushHeaderError("the Web Push urgency must be very-low, low, normal or high, got '\(text)'")
        }
        return urgency
    }

    /// The header fields in order, names lower case (HTTP/2).
    public var fields: [(name: String, value: String)] {
        var fields: [(name: String, value: String)] = [("ttl", String(ttlSeconds)), ("content-encoding", "aes128gcm"),
                                                       ("content-type", "application/octet-stream")]
        if let urgency { fields.append(("urgency", urgency.rawValue)) }
        if let topic { fields.append(("topic", topic)) }
        return fields
    }
}
