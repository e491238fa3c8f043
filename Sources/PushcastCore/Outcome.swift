/// The push providers pushcast sends to.
public enum ProviderID: String, Sendable, CaseIterable, Hashable {
    case apns
    case fcm

    /// The provider's index in `allCases`: tables by provider are arrays indexed by it, so every
    /// provider has its own slot (no `== .apns ? 0 : 1` that a third provider would fall into).
    @inline(__always)
    public var position: Int {
        switch self {
        case .apns: return 0
        case .fcm: return 1
        }
    }

    /// Parses a `platform`/`provider` column value: ios or apns → APNs; android or fcm → FCM.
    /// The same, from the column's bytes: surrounding spaces ignored, ASCII case-insensitive, no
    /// String made (this runs once per row).
    public init?(columnBytes value: UnsafeRawBufferPointer) {
        var start = 0, end = value.count
        while start < end && (value[start] == 0x20 || value[start] == 0x09) { start += 1 }
        while end > start && (value[end - 1] == 0x20 || value[end - 1] == 0x09 || value[end - 1] == 0x0D) { end -= 1 }
        func matches(_ word: StaticString) -> Bool {
            guard end - start == word.utf8CodeUnitCount else { return false }
            let expected = word.utf8Start
            for i in 0..<(end - start) where value[start + i] | 0x20 != expected[i] { return false }
            return true
        }
        if matches("ios") || matches("apns") || matches("ipados") || matches("macos") || matches("watchos") || matches("tvos") {
            self = .apns
        } else if matches("android") || matches("fcm") || matches("firebase") {
            self = .fcm
        } else {
            return nil
        }
    }

    public init?(column value: some StringProtocol) {
        switch value.lowercased() {
        case "ios", "apns", "ipados", "macos", "watchos", "tvos": self = .apns
        case "android", "fcm", "firebase": self = .fcm
        default: return nil
        }
    }
}

/// How one input row ended. Every row ends in exactly one outcome, which is what the results
/// file records (docs/DESIGN.md §2.9).
public enum OutcomeKind: String, Sendable, CaseIterable, Hashable {
    /// The provider accepted the notification.
    case delivered
    /// The provider says the token is dead (410 Unregistered, BadDeviceToken, ...): remove it.
    case pruned
    /// The provider refused it for another reason, or retries ran out.
    case failed
    /// The row itself is unusable (bad token, malformed line, payload too large); never sent.
    case invalid
    /// The token already appeared earlier in this run; sent once only.
    case duplicate
    /// The request may or may not have been delivered (connection died after writing it, or it
    /// timed out).
    case unknown

    /// Whether this outcome leaves the run's exit status at 0.
    public var isExpected: Bool {
        switch self {
        case .delivered, .pruned, .invalid, .duplicate: return true
        case .failed, .unknown: return false
        }
    }
}
