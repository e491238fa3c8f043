import PushcastCore
import PushcastSchedule

/// A zone from a list of offset changes: `initial` before the first, each change's offset from
/// its instant on. The 2026 rules below are the ones tzdata gives (`ZoneDataTests` compares them
/// hour by hour with the system's).
struct TransitionZone: ZoneRules {
    let initial: Int32
    let changes: [(at: Int64, offset: Int32)]

    func offsetSeconds(atEpochSeconds instant: Int64) -> Int32 {
        changes.last(where: { $0.at <= instant })?.offset ?? initial
    }

    /// America/New_York in 2026: EDT from 2026-03-08 07:00 UTC, EST from 2026-11-01 06:00 UTC.
    static let newYork = TransitionZone(initial: -5 * 3600, changes: [(utc(2026, 3, 8, 7, 0), -4 * 3600), (utc(2026, 11, 1, 6, 0), -5 * 3600)])
    /// Australia/Sydney in 2026: AEST from 2026-04-04 16:00 UTC, AEDT from 2026-10-03 16:00 UTC.
    static let sydney = TransitionZone(initial: 11 * 3600, changes: [(utc(2026, 4, 4, 16, 0), 10 * 3600), (utc(2026, 10, 3, 16, 0), 11 * 3600)])
    /// Europe/London in 2026: BST from 2026-03-29 01:00 UTC, GMT from 2026-10-25 01:00 UTC.
    static let london = TransitionZone(initial: 0, changes: [(utc(2026, 3, 29, 1, 0), 3600), (utc(2026, 10, 25, 1, 0), 0)])
}

/// A directory over a dictionary.
struct TableDirectory: ZoneDirectory {
    let zones: [String: FixedOffsetZone]
    func zone(named name: String) -> (any ZoneRules)? { zones[name] }
}

/// Epoch seconds of a UTC date and time (Howard Hinnant's days-from-civil).
func utc(_ year: Int64, _ month: Int64, _ day: Int64, _ hour: Int64, _ minute: Int64) -> Int64 {
    let y = month <= 2 ? year - 1 : year
    let era = (y >= 0 ? y : y - 399) / 400
    let yearOfEra = y - era * 400
    let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
    let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
    return (era * 146_097 + dayOfEra - 719_468) * 86_400 + hour * 3600 + minute * 60
}

/// A local time the test knows is valid.
func local(_ hour: Int, _ minute: Int) -> LocalTime { LocalTime(hour: hour, minute: minute)! }
