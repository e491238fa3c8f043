/// The push providers pushcast sends to.
public enum ProviderID: String, Sendable, CaseIterable, Hashable {
    case apns
    case fcm

    /// Parses a `platform`/`provider` column value: ios or apns → APNs; android or fcm → FCM.
    public init?(column value: some StringProtocol) {
        switch value.lowercased() {
        case "ios", "apns", "ipados", "macos", "watchos", "tvos": self = .apns
        case "android", "fcm", "firebase": self = .fcm
        default: return nil
        }
    }
}

/// How one input row ended. Every row ends in exactly one outcome, which is what the results
/// file records (design.md 2.9).
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
