/// A push provider, as a value: its name (`apns`, `fcm`, the word in `--rate`, the results'
/// `provider` column and the journal) and its slot in tables by provider. What a provider does,
/// its aliases, tokens, bodies, verdicts and result field, lives in the engine's `PushProvider`
/// that carries this id; the engine only ever iterates over the configured ones. A provider
/// added to pushcast declares its id next to its code, with a position of its own.
public struct ProviderID: Hashable, Sendable, CustomStringConvertible {
    /// The provider's name, lower case: `apns`, `fcm`.
    public let rawValue: String
    /// The provider's slot in tables by provider (arrays of `positionsMax` entries, no hashing
    /// per row): distinct for every provider of a catalog, below `positionsMax`.
    public let position: Int

    /// Tables by provider have this many slots; a catalog refuses a position beyond it.
    public static let positionsMax = 8

    public init(_ name: String, position: Int) {
        precondition((0..<Self.positionsMax).contains(position), "a provider's position is below \(Self.positionsMax)")
        rawValue = name
        self.position = position
    }

    public static let apns = ProviderID("apns", position: 0)
    public static let fcm = ProviderID("fcm", position: 1)

    public var description: String { rawValue }

    /// Whether `value` (the bytes of a `platform` column) is one of `aliases` (lower-case words):
    /// surrounding spaces ignored, ASCII case-insensitive, no String made (this runs once per row).
    public static func matches(_ value: UnsafeRawBufferPointer, anyOf aliases: [[UInt8]]) -> Bool {
        var start = 0, end = value.count
        while start < end && (value[start] == 0x20 || value[start] == 0x09) { start += 1 }
        while end > start && (value[end - 1] == 0x20 || value[end - 1] == 0x09 || value[end - 1] == 0x0D) { end -= 1 }
        next: for word in aliases where word.count == end - start {
            for i in 0..<word.count where value[start + i] | 0x20 != word[i] { continue next }
            return true
        }
        return false
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
