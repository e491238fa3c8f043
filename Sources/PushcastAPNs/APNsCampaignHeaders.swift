// The headers every request of one campaign shares (§1.3), validated and encoded once; per row only
// `apns-id` and `authorization` change. See `headers(authorization:apnsID:)`.

import PushcastWire

/// `apns-expiration`, as the user gives it.
public enum APNsExpiration: Sendable, Equatable {
    /// No header: APNs applies its default storage policy.
    case unspecified
    /// `0`: one delivery attempt; APNs does not store the notification.
    case deliverOnce
    /// Store and retry for this many seconds from the moment the headers are built.
    case secondsFromNow(Int64)
    /// Store and retry until this Unix time (seconds, UTC).
    case absolute(epochSeconds: Int64)

    /// Values at or above this are read as absolute Unix times by `parse`; smaller ones as seconds
    /// from now. 10^9 s is September 2001, and no sensible relative expiration is 31 years long.
    public static let absoluteThreshold: Int64 = 1_000_000_000

    /// Parses the `--expiration` option: `0` delivers once, a value under 10^9 is seconds from
    /// now, anything larger is an absolute epoch.
    public static func parse(_ text: String) throws(APNsHeaderError) -> APNsExpiration {
        guard let value = Int64(text), value >= 0 else {
            throw APNsHeaderError("expiration must be a non-negative integer (seconds from now, or a Unix time), got '\(text)'")
        }
        if value == 0 { return .deliverOnce }
        return value >= absoluteThreshold ? .absolute(epochSeconds: value) : .secondsFromNow(value)
    }
}

/// A campaign header that APNs would reject, named clearly, found before anything is sent.
public struct APNsHeaderError: Error, Sendable, Equatable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// The fixed per-campaign part of every APNs request.
public struct APNsCampaignHeaders: Sendable {
    public static let collapseIDBytesMax = 64

    public let topic: String
    public let pushType: APNsPushType
    public let priority: APNsPriority
    /// The resolved `apns-expiration` value, or nil when the header is omitted.
    public let expirationEpochSeconds: Int64?
    public let collapseID: String?
    /// Adjustments made while building (for example a background push forced to priority 5), for
    /// the CLI to print.
    public let notes: [String]

    /// The headers that never change within the campaign, in send order.
    public let fixedHeaders: [HTTP2Header]

    /// Builds and validates the campaign headers.
    /// - Parameters:
    ///   - topic: the bundle ID (or the full topic); the push type's suffix is added when missing.
    ///     For mdm it is the certificate UID and is used as given.
    ///   - nowEpochSeconds: the wall time that `secondsFromNow` is counted from, read once.
    public init(
        topic: String,
        pushType: APNsPushType = .alert,
        priority: APNsPriority = .immediate,
        expiration: APNsExpiration = .unspecified,
        collapseID: String? = nil,
        nowEpochSeconds: Int64
    ) throws(APNsHeaderError) {
        var notes: [String] = []
        guard !topic.isEmpty else { throw APNsHeaderError("apns-topic is required (the app's bundle ID)") }
        try Self.checkHeaderValue(topic, name: "apns-topic", allowSpaces: false)
        self.topic = pushType.topic(forBundleID: topic)
        if self.topic != topic { notes.append("apns-topic is '\(self.topic)' for push type \(pushType.rawValue)") }
        self.pushType = pushType

        if let required = pushType.requiredPriority, required != priority {
            notes.append("priority \(priority.rawValue) is not allowed for \(pushType.rawValue) pushes; using \(required.rawValue)")
            self.priority = required
        } else {
            self.priority = priority
        }

        switch expiration {
        case .unspecified:
            expirationEpochSeconds = nil
        case .deliverOnce:
            expirationEpochSeconds = 0
        case .secondsFromNow(let seconds):
            guard seconds > 0 else { throw APNsHeaderError("expiration in seconds from now must be positive, got \(seconds)") }
            let (sum, overflow) = nowEpochSeconds.addingReportingOverflow(seconds)
            guard !overflow else { throw APNsHeaderError("expiration \(seconds) s from now is out of range") }
            expirationEpochSeconds = sum
        case .absolute(let epochSeconds):
            guard epochSeconds > nowEpochSeconds else {
                throw APNsHeaderError("expiration \(epochSeconds) is in the past (now is \(nowEpochSeconds)); use 0 to deliver once")
            }
            expirationEpochSeconds = epochSeconds
        }

        if let collapseID {
            guard !collapseID.isEmpty else { throw APNsHeaderError("apns-collapse-id must not be empty") }
            let bytes = collapseID.utf8.count
            guard bytes <= Self.collapseIDBytesMax else {
                throw APNsHeaderError("apns-collapse-id is \(bytes) bytes; APNs allows at most \(Self.collapseIDBytesMax) (BadCollapseId)")
            }
            try Self.checkHeaderValue(collapseID, name: "apns-collapse-id", allowSpaces: true)
        }
        self.collapseID = collapseID
        self.notes = notes

        var fixed = [
            HTTP2Header("apns-push-type", pushType.rawValue),
            HTTP2Header("apns-topic", self.topic),
            HTTP2Header("apns-priority", String(self.priority.rawValue)),
        ]
        if let expirationEpochSeconds { fixed.append(HTTP2Header("apns-expiration", String(expirationEpochSeconds))) }
        if let collapseID { fixed.append(HTTP2Header("apns-collapse-id", collapseID)) }
        fixedHeaders = fixed
    }

    /// The regular headers for one request: the fixed part, then `apns-id`, then `authorization`
    /// (nil with certificate auth). One array allocation; the strings are shared, not copied.
    @inline(__always)
    public func headers(authorization: String?, apnsID: String) -> [HTTP2Header] {
        var headers: [HTTP2Header] = []
        headers.reserveCapacity(fixedHeaders.count + 2)
        headers.append(contentsOf: fixedHeaders)
        headers.append(HTTP2Header("apns-id", apnsID, neverIndexed: true))
        if let authorization { headers.append(HTTP2Header("authorization", authorization)) }
        return headers
    }

    /// Header values must be visible ASCII or UTF-8 with no control characters (RFC 9113 §8.2.1
    /// forbids CR, LF and NUL; the rest would only be rejected later and less clearly).
    private static func checkHeaderValue(_ value: String, name: String, allowSpaces: Bool) throws(APNsHeaderError) {
        for byte in value.utf8 where byte < 0x20 || byte == 0x7F || (!allowSpaces && byte == 0x20) {
            throw APNsHeaderError("\(name) must not contain \(byte == 0x20 ? "spaces" : "control characters")")
        }
    }
}
