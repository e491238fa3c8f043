// Local-time delivery, sans-I/O: when a row whose recipient lives in a given zone should be sent,
// given the campaign's start. Every local date and time is derived from `ZoneRules.offsetSeconds`;
// no day is assumed to be 24 hours long.
import PushcastCore

/// A time of day, local to some zone.
public struct LocalTime: Sendable, Equatable {
    public let hour: Int
    public let minute: Int

    public init?(hour: Int, minute: Int) {
        guard (0...23).contains(hour), (0...59).contains(minute) else { return nil }
        self.hour = hour
        self.minute = minute
    }

    var secondOfDay: Int64 { Int64(hour * 3600 + minute * 60) }
}

/// What to do with a row whose delivery time on the campaign's first day (in its zone) ended,
/// window included, before the campaign started.
public enum LatePolicy: Sendable, Equatable {
    /// Send at the campaign's start (quiet hours still apply).
    case send
    /// Do not send the row: `.skip(.late)`.
    case skip
    /// Send at the delivery time on the next local day.
    case nextDay

    /// `.nextDay`: a message scheduled for 9 am is about the morning; a campaign started in the
    /// evening should not reach the people whose 9 am has passed at 9 pm, nor drop them. It
    /// reaches them at their next 9 am, which is what the sender asked for, a day late.
    public static let `default` = LatePolicy.nextDay
}

/// Where a row's delivery lands.
public enum DeliveryDecision: Sendable, Equatable {
    /// Send at `epochSeconds`, and no later than `windowEnd` (exclusive).
    case at(epochSeconds: Int64, windowEnd: Int64)
    case skip(SkipReason)
}

public enum SkipReason: Sendable, Equatable {
    /// The delivery time had passed, window included, and the late policy is `.skip`.
    case late

    public var reason: String {
        switch self {
        case .late: return "delivery-time-passed"
        }
    }
}

/// Why a plan was refused.
public enum DeliveryPlanRefusal: Error, Sendable, Equatable {
    /// The window is not 1 second to 24 hours.
    case windowOutOfRange
    /// Quiet hours that start when they end (empty, or the whole day).
    case quietHoursEmpty
}

/// The local-time delivery of a campaign: the same local time of day in every recipient's zone.
public struct DeliveryPlan: Sendable, Equatable {
    public let deliverAt: LocalTime
    public let windowSeconds: Int64
    public let late: LatePolicy
    /// No delivery starts from `start` (inclusive) to `end` (exclusive), local; may wrap midnight.
    public let quietHours: (start: LocalTime, end: LocalTime)?

    public static let windowMax: Int64 = 86_400

    public init(deliverAt: LocalTime, windowSeconds: Int64, late: LatePolicy = .default,
                quietHours: (start: LocalTime, end: LocalTime)? = nil) throws(DeliveryPlanRefusal) {
        guard (1...Self.windowMax).contains(windowSeconds) else { throw .windowOutOfRange }
        if let quietHours, quietHours.start == quietHours.end { throw .quietHoursEmpty }
        self.deliverAt = deliverAt
        self.windowSeconds = windowSeconds
        self.late = late
        self.quietHours = quietHours
    }

    public static func == (lhs: DeliveryPlan, rhs: DeliveryPlan) -> Bool {
        lhs.deliverAt == rhs.deliverAt && lhs.windowSeconds == rhs.windowSeconds && lhs.late == rhs.late
            && lhs.quietHours?.start == rhs.quietHours?.start && lhs.quietHours?.end == rhs.quietHours?.end
    }

    /// The delivery of a row in `zone` for a campaign that starts at `campaignStartEpochSeconds`.
    /// The target is `deliverAt` on the local date of the start (moved out of quiet hours); the
    /// row is sent then if that is still ahead, at the start if the start is inside the window,
    /// and otherwise as `late` says.
    public func slot(for zone: any ZoneRules, campaignStartEpochSeconds start: Int64) -> DeliveryDecision {
        let firstDay = LocalCalendar.day(of: start, in: zone)
        let target = leaveQuietHours(LocalCalendar.instant(day: firstDay, secondOfDay: deliverAt.secondOfDay, in: zone), zone)
        let windowEnd = target + windowSeconds
        if start < target { return .at(epochSeconds: target, windowEnd: windowEnd) }
        if start < windowEnd {
            let now = leaveQuietHours(start, zone)
            return .at(epochSeconds: now, windowEnd: now == start ? windowEnd : now + windowSeconds)
        }
        switch late {
        case .send:
            let now = leaveQuietHours(start, zone)
            return .at(epochSeconds: now, windowEnd: now + windowSeconds)
        case .skip:
            return .skip(.late)
        case .nextDay:
            let next = leaveQuietHours(LocalCalendar.instant(day: firstDay + 1, secondOfDay: deliverAt.secondOfDay, in: zone), zone)
            return .at(epochSeconds: next, windowEnd: next + windowSeconds)
        }
    }

    /// `instant`, or the end of the quiet hours it falls in (local).
    func leaveQuietHours(_ instant: Int64, _ zone: any ZoneRules) -> Int64 {
        guard let quietHours else { return instant }
        let local = instant + Int64(zone.offsetSeconds(atEpochSeconds: instant))
        let day = LocalCalendar.floorDivide(local, 86_400)
        let second = local - day * 86_400
        let quietStart = quietHours.start.secondOfDay, quietEnd = quietHours.end.secondOfDay
        let endDay: Int64
        if quietStart < quietEnd {
            guard second >= quietStart && second < quietEnd else { return instant }
            endDay = day
        } else {
            guard second >= quietStart || second < quietEnd else { return instant }
            endDay = second >= quietStart ? day + 1 : day
        }
        return max(instant, LocalCalendar.instant(day: endDay, secondOfDay: quietEnd, in: zone))
    }

    /// The minute a delivery time falls in: rows with the same key are due together.
    public static func slotKey(epochSeconds: Int64) -> Int64 {
        LocalCalendar.floorDivide(epochSeconds, 60)
    }
}

/// Local dates and times from a zone's offsets alone.
public enum LocalCalendar {
    /// The local day number (days since 1970-01-01, local) of `instant` in `zone`.
    public static func day(of instant: Int64, in zone: any ZoneRules) -> Int64 {
        floorDivide(instant + Int64(zone.offsetSeconds(atEpochSeconds: instant)), 86_400)
    }

    /// The instant at which `zone`'s clocks show `secondOfDay` on local day `day`. A local time
    /// that occurs twice (clocks set back) is its first occurrence; one that does not occur
    /// (clocks set forward) moves forward by the gap: 02:30 on a day that skips 02:00-03:00 is 03:30.
    /// Looks at the offsets a day either side, so it assumes at most one change of offset in
    /// that span, which every zone's rules meet.
    public static func instant(day: Int64, secondOfDay: Int64, in zone: any ZoneRules) -> Int64 {
        let local = day * 86_400 + secondOfDay
        let before = zone.offsetSeconds(atEpochSeconds: local - 86_400)
        let after = zone.offsetSeconds(atEpochSeconds: local + 86_400)
        var earliest: Int64?
        for offset in [before, after] {
            let candidate = local - Int64(offset)
            if zone.offsetSeconds(atEpochSeconds: candidate) == offset {
                earliest = min(earliest ?? candidate, candidate)
            }
        }
        // In a gap neither offset reads back: the local time taken with the offset before the
        // change lands as far after the change as the time was after the gap's start.
        return earliest ?? local - Int64(before)
    }

    static func floorDivide(_ value: Int64, _ divisor: Int64) -> Int64 {
        value >= 0 ? value / divisor : -((-value + divisor - 1) / divisor)
    }
}
