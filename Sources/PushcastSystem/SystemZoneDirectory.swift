// The machine's time zones: Foundation's TimeZone, which reads the zone data installed on the
// system. The only file of PushcastSystem that imports Foundation (scripts/tidy.py, IMPORT_FILES).
import Foundation
import PushcastCore
import Synchronization

/// A `ZoneDirectory` over Foundation's `TimeZone(identifier:)`, with a bounded cache of the
/// names it was asked for, found or not (a campaign asks once per row; an export has few zones).
/// Thread-safe: readers on several threads may share one.
public final class SystemZoneDirectory: ZoneDirectory {
    /// Names remembered at most; past it, lookups still work but are not remembered.
    public let cacheMax: Int
    private let cache = Mutex<[String: SystemZone?]>([:])

    public init(cacheMax: Int = 1024) {
        self.cacheMax = cacheMax
    }

    public func zone(named name: String) -> (any ZoneRules)? {
        if let known = cache.withLock({ $0[name] }) { return known }
        let found = TimeZone(identifier: name).map(SystemZone.init)
        cache.withLock { entries in
            if entries.count < cacheMax { entries[name] = .some(found) }
        }
        return found
    }

    /// How many names are remembered.
    public var cachedCount: Int { cache.withLock { $0.count } }
}

/// One of the system's zones.
public struct SystemZone: ZoneRules {
    public let timeZone: TimeZone

    public var identifier: String { timeZone.identifier }

    public func offsetSeconds(atEpochSeconds: Int64) -> Int32 {
        Int32(timeZone.secondsFromGMT(for: Date(timeIntervalSince1970: TimeInterval(atEpochSeconds))))
    }
}
