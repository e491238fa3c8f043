import PushcastCore
import PushcastSchedule
import XCTest

final class DeliveryPlanTests: XCTestCase {
    private let hour: Int64 = 3600

    private func plan(_ time: LocalTime, window: Int64 = 3600, late: LatePolicy = .nextDay,
                      quiet: (LocalTime, LocalTime)? = nil) throws -> DeliveryPlan {
        try DeliveryPlan(deliverAt: time, windowSeconds: window, late: late, quietHours: quiet.map { (start: $0.0, end: $0.1) })
    }

    func testTheHelperCalendarMatchesKnownInstants() {
        XCTAssertEqual(utc(1970, 1, 1, 0, 0), 0)
        XCTAssertEqual(utc(2026, 3, 8, 7, 0), 1_772_953_200)  // date -u -d 2026-03-08T07:00Z +%s
        XCTAssertEqual(utc(1969, 12, 31, 23, 0), -3600)
    }

    // MARK: Clock changes

    func testNewYorkSpringForwardA0230DeliveryMovesForwardByTheGap() throws {
        let start = utc(2026, 3, 8, 5, 0)  // 00:00 EST, the first local minute of 2026-03-08
        let decision = try plan(local(2, 30)).slot(for: TransitionZone.newYork, campaignStartEpochSeconds: start)
        XCTAssertEqual(decision, .at(epochSeconds: utc(2026, 3, 8, 7, 30), windowEnd: utc(2026, 3, 8, 8, 30)))  // 03:30 EDT
    }

    func testNewYorkFallBackA0130DeliveryUsesTheFirstOccurrence() throws {
        let start = utc(2026, 11, 1, 4, 0)  // 00:00 EDT
        let decision = try plan(local(1, 30)).slot(for: TransitionZone.newYork, campaignStartEpochSeconds: start)
        XCTAssertEqual(decision, .at(epochSeconds: utc(2026, 11, 1, 5, 30), windowEnd: utc(2026, 11, 1, 6, 30)))  // 01:30 EDT, not EST
    }

    func testNextDayAcrossTheSpringForwardDayIsNotTwentyFourHoursLater() throws {
        let start = utc(2026, 3, 7, 15, 0)  // 10:00 EST on 2026-03-07: its 09:00 is past
        let decision = try plan(local(9, 0)).slot(for: TransitionZone.newYork, campaignStartEpochSeconds: start)
        // 09:00 EDT on 2026-03-08 is 13:00 UTC; 24 hours after 09:00 EST would be 14:00 UTC.
        XCTAssertEqual(decision, .at(epochSeconds: utc(2026, 3, 8, 13, 0), windowEnd: utc(2026, 3, 8, 14, 0)))
        let autumn = try plan(local(9, 0)).slot(for: TransitionZone.newYork, campaignStartEpochSeconds: utc(2026, 10, 31, 14, 0))
        XCTAssertEqual(autumn, .at(epochSeconds: utc(2026, 11, 1, 14, 0), windowEnd: utc(2026, 11, 1, 15, 0)))  // 09:00 EST
    }

    func testSydneyAutumnRepeatsTheHourAndSpringSkipsIt() throws {
        // 2026-04-05: 03:00 AEDT becomes 02:00 AEST; 02:30 happens twice, the first at 15:30 UTC.
        let autumn = try plan(local(2, 30)).slot(for: TransitionZone.sydney, campaignStartEpochSeconds: utc(2026, 4, 4, 13, 0))
        XCTAssertEqual(autumn, .at(epochSeconds: utc(2026, 4, 4, 15, 30), windowEnd: utc(2026, 4, 4, 16, 30)))
        // 2026-10-04: 02:00 AEST becomes 03:00 AEDT; 02:30 does not happen and becomes 03:30 AEDT.
        let spring = try plan(local(2, 30)).slot(for: TransitionZone.sydney, campaignStartEpochSeconds: utc(2026, 10, 3, 14, 0))
        XCTAssertEqual(spring, .at(epochSeconds: utc(2026, 10, 3, 16, 30), windowEnd: utc(2026, 10, 3, 17, 30)))
        // 09:00 on those days: AEST after the autumn change, AEDT after the spring one.
        let morning = try plan(local(9, 0)).slot(for: TransitionZone.sydney, campaignStartEpochSeconds: utc(2026, 4, 4, 13, 0))
        XCTAssertEqual(morning, .at(epochSeconds: utc(2026, 4, 4, 23, 0), windowEnd: utc(2026, 4, 5, 0, 0)))
    }

    func testLondonSpringGapAndAutumnRepeat() throws {
        // 2026-03-29: 01:00 GMT becomes 02:00 BST; 01:30 becomes 02:30 BST (01:30 UTC).
        let spring = try plan(local(1, 30)).slot(for: TransitionZone.london, campaignStartEpochSeconds: utc(2026, 3, 29, 0, 0))
        XCTAssertEqual(spring, .at(epochSeconds: utc(2026, 3, 29, 1, 30), windowEnd: utc(2026, 3, 29, 2, 30)))
        // 2026-10-25: 02:00 BST becomes 01:00 GMT; 01:30 BST (00:30 UTC) comes first.
        let autumn = try plan(local(1, 30)).slot(for: TransitionZone.london, campaignStartEpochSeconds: utc(2026, 10, 24, 23, 0))
        XCTAssertEqual(autumn, .at(epochSeconds: utc(2026, 10, 25, 0, 30), windowEnd: utc(2026, 10, 25, 1, 30)))
    }

    func testAStartInsideTheRepeatedHourIsInsideTheFirstOccurrencesWindow() throws {
        // 01:45 EST, the second 01:45 of 2026-11-01: 01:30 EDT's window (1 h) ended at 06:30 UTC.
        let start = utc(2026, 11, 1, 6, 45)
        let decision = try plan(local(1, 30), late: .skip).slot(for: TransitionZone.newYork, campaignStartEpochSeconds: start)
        XCTAssertEqual(decision, .skip(.late))
        let wide = try plan(local(1, 30), window: 2 * hour, late: .skip).slot(for: TransitionZone.newYork, campaignStartEpochSeconds: start)
        XCTAssertEqual(wide, .at(epochSeconds: start, windowEnd: utc(2026, 11, 1, 7, 30)))
    }

    // MARK: The extreme zones

    func testUTCMinus12AndUTCPlus14AreTwoLocalDatesApartForTheSameStart() throws {
        let start = utc(2026, 6, 14, 11, 0)  // 2026-06-13 23:00 at UTC−12, 2026-06-15 01:00 at UTC+14
        let minus12 = FixedOffsetZone(seconds: -12 * 3600), plus14 = FixedOffsetZone(seconds: 14 * 3600)
        XCTAssertEqual(LocalCalendar.day(of: start, in: minus12), utc(2026, 6, 13, 0, 0) / 86_400)
        XCTAssertEqual(LocalCalendar.day(of: start, in: plus14), utc(2026, 6, 15, 0, 0) / 86_400)
        let lateEvening = try plan(local(23, 30))
        XCTAssertEqual(lateEvening.slot(for: minus12, campaignStartEpochSeconds: start),
                       .at(epochSeconds: utc(2026, 6, 14, 11, 30), windowEnd: utc(2026, 6, 14, 12, 30)))
        XCTAssertEqual(lateEvening.slot(for: plus14, campaignStartEpochSeconds: start),
                       .at(epochSeconds: utc(2026, 6, 15, 9, 30), windowEnd: utc(2026, 6, 15, 10, 30)))
        // A 00:30 delivery with a 15-minute window: past at both; the next day's is 2026-06-14 00:30
        // at UTC−12 (12:30 UTC) and 2026-06-16 00:30 at UTC+14 (10:30 UTC on 06-15).
        let night = try plan(local(0, 30), window: 900)
        XCTAssertEqual(night.slot(for: minus12, campaignStartEpochSeconds: start),
                       .at(epochSeconds: utc(2026, 6, 14, 12, 30), windowEnd: utc(2026, 6, 14, 12, 45)))
        XCTAssertEqual(night.slot(for: plus14, campaignStartEpochSeconds: start),
                       .at(epochSeconds: utc(2026, 6, 15, 10, 30), windowEnd: utc(2026, 6, 15, 10, 45)))
    }

    // MARK: Late policies and windows

    func testLatePoliciesWindowsAndTheirEdges() throws {
        let tokyo = FixedOffsetZone(seconds: 9 * 3600)
        let nine = utc(2026, 6, 14, 0, 0)  // 09:00 in Tokyo
        for policy in [LatePolicy.send, .skip, .nextDay] {
            let p = try plan(local(9, 0), late: policy)
            XCTAssertEqual(p.slot(for: tokyo, campaignStartEpochSeconds: nine - 3600), .at(epochSeconds: nine, windowEnd: nine + hour), "\(policy)")
            XCTAssertEqual(p.slot(for: tokyo, campaignStartEpochSeconds: nine), .at(epochSeconds: nine, windowEnd: nine + hour), "\(policy)")
            XCTAssertEqual(p.slot(for: tokyo, campaignStartEpochSeconds: nine + 1800), .at(epochSeconds: nine + 1800, windowEnd: nine + hour), "\(policy)")
        }
        let past = nine + hour  // the window is over (its end is exclusive)
        XCTAssertEqual(try plan(local(9, 0), late: .send).slot(for: tokyo, campaignStartEpochSeconds: past), .at(epochSeconds: past, windowEnd: past + hour))
        XCTAssertEqual(try plan(local(9, 0), late: .skip).slot(for: tokyo, campaignStartEpochSeconds: past), .skip(.late))
        XCTAssertEqual(try plan(local(9, 0), late: .nextDay).slot(for: tokyo, campaignStartEpochSeconds: past),
                       .at(epochSeconds: nine + 86_400, windowEnd: nine + 86_400 + hour))
        XCTAssertEqual(LatePolicy.default, .nextDay)
        XCTAssertEqual(try DeliveryPlan(deliverAt: local(9, 0), windowSeconds: 60).late, .nextDay)
        XCTAssertEqual(SkipReason.late.reason, "delivery-time-passed")
    }

    func testPlanRefusals() {
        XCTAssertThrowsError(try plan(local(9, 0), window: 0)) { XCTAssertEqual($0 as? DeliveryPlanRefusal, .windowOutOfRange) }
        XCTAssertThrowsError(try plan(local(9, 0), window: 86_401)) { XCTAssertEqual($0 as? DeliveryPlanRefusal, .windowOutOfRange) }
        XCTAssertNoThrow(try plan(local(9, 0), window: 86_400))
        XCTAssertThrowsError(try plan(local(9, 0), quiet: (local(22, 0), local(22, 0)))) { XCTAssertEqual($0 as? DeliveryPlanRefusal, .quietHoursEmpty) }
        XCTAssertNil(LocalTime(hour: 24, minute: 0))
        XCTAssertNil(LocalTime(hour: 9, minute: 60))
        XCTAssertNil(LocalTime(hour: -1, minute: 0))
    }

    // MARK: Quiet hours

    func testQuietHoursWrappingMidnightMoveDeliveriesToTheirEnd() throws {
        let tokyo = FixedOffsetZone(seconds: 9 * 3600)
        let quiet = (local(22, 0), local(8, 0))
        let dayStart = utc(2026, 6, 13, 15, 0)  // 00:00 on 2026-06-14 in Tokyo
        let eightNextDay = dayStart + 86_400 + 8 * hour
        XCTAssertEqual(try plan(local(23, 0), quiet: quiet).slot(for: tokyo, campaignStartEpochSeconds: dayStart),
                       .at(epochSeconds: eightNextDay, windowEnd: eightNextDay + hour))
        XCTAssertEqual(try plan(local(22, 0), quiet: quiet).slot(for: tokyo, campaignStartEpochSeconds: dayStart),
                       .at(epochSeconds: eightNextDay, windowEnd: eightNextDay + hour))
        XCTAssertEqual(try plan(local(7, 0), quiet: quiet).slot(for: tokyo, campaignStartEpochSeconds: dayStart),
                       .at(epochSeconds: dayStart + 8 * hour, windowEnd: dayStart + 9 * hour))
        XCTAssertEqual(try plan(local(8, 0), quiet: quiet).slot(for: tokyo, campaignStartEpochSeconds: dayStart),
                       .at(epochSeconds: dayStart + 8 * hour, windowEnd: dayStart + 9 * hour))
        XCTAssertEqual(try plan(local(21, 59), quiet: quiet).slot(for: tokyo, campaignStartEpochSeconds: dayStart),
                       .at(epochSeconds: dayStart + 21 * hour + 59 * 60, windowEnd: dayStart + 22 * hour + 59 * 60))
        // A start inside the window but inside the quiet hours waits for their end, then a full window.
        let start = dayStart + 22 * hour + 1800
        XCTAssertEqual(try plan(local(21, 0), window: 2 * hour, quiet: quiet).slot(for: tokyo, campaignStartEpochSeconds: start),
                       .at(epochSeconds: eightNextDay, windowEnd: eightNextDay + 2 * hour))
        XCTAssertEqual(try plan(local(9, 0), late: .send, quiet: quiet).slot(for: tokyo, campaignStartEpochSeconds: start),
                       .at(epochSeconds: eightNextDay, windowEnd: eightNextDay + hour))
        XCTAssertEqual(try plan(local(9, 0), late: .skip, quiet: quiet).slot(for: tokyo, campaignStartEpochSeconds: start), .skip(.late))
    }

    func testQuietHoursWithinOneDayAndEndingInAClockGap() throws {
        let tokyo = FixedOffsetZone(seconds: 9 * 3600)
        let dayStart = utc(2026, 6, 13, 15, 0)
        let lunch = (local(12, 0), local(14, 0))
        XCTAssertEqual(try plan(local(13, 15), quiet: lunch).slot(for: tokyo, campaignStartEpochSeconds: dayStart),
                       .at(epochSeconds: dayStart + 14 * hour, windowEnd: dayStart + 15 * hour))
        XCTAssertEqual(try plan(local(11, 59), quiet: lunch).slot(for: tokyo, campaignStartEpochSeconds: dayStart),
                       .at(epochSeconds: dayStart + 11 * hour + 59 * 60, windowEnd: dayStart + 12 * hour + 59 * 60))
        // New York, 2026-03-08: quiet hours end at 02:30, which does not happen; they end at 03:30 EDT.
        let decision = try plan(local(1, 0), quiet: (local(0, 0), local(2, 30)))
            .slot(for: TransitionZone.newYork, campaignStartEpochSeconds: utc(2026, 3, 8, 5, 0))
        XCTAssertEqual(decision, .at(epochSeconds: utc(2026, 3, 8, 7, 30), windowEnd: utc(2026, 3, 8, 8, 30)))
    }

    // MARK: Fixed offsets and slots

    func testFixedOffsetsFromTheirText() throws {
        let start = utc(2026, 6, 14, 0, 0)
        let directory = TableDirectory(zones: [:])
        let india = try ZoneValue.resolve("+05:30", in: directory).get()  // 05:30 local: 09:00 is ahead
        let marquesas = try ZoneValue.resolve("-09:30", in: directory).get()  // 14:30 on 06-13: 09:00 is past
        XCTAssertEqual(try plan(local(9, 0)).slot(for: india, campaignStartEpochSeconds: start),
                       .at(epochSeconds: utc(2026, 6, 14, 3, 30), windowEnd: utc(2026, 6, 14, 4, 30)))
        XCTAssertEqual(try plan(local(9, 0)).slot(for: marquesas, campaignStartEpochSeconds: start),
                       .at(epochSeconds: utc(2026, 6, 14, 18, 30), windowEnd: utc(2026, 6, 14, 19, 30)))
    }

    func testSlotKeysAreMinutes() {
        XCTAssertEqual(DeliveryPlan.slotKey(epochSeconds: 0), 0)
        XCTAssertEqual(DeliveryPlan.slotKey(epochSeconds: 59), 0)
        XCTAssertEqual(DeliveryPlan.slotKey(epochSeconds: 60), 1)
        XCTAssertEqual(DeliveryPlan.slotKey(epochSeconds: 119), 1)
        XCTAssertEqual(DeliveryPlan.slotKey(epochSeconds: -1), -1)
        XCTAssertEqual(DeliveryPlan.slotKey(epochSeconds: -60), -1)
        XCTAssertEqual(DeliveryPlan.slotKey(epochSeconds: -61), -2)
        XCTAssertEqual(DeliveryPlan.slotKey(epochSeconds: utc(2026, 3, 8, 7, 30) + 59), utc(2026, 3, 8, 7, 30) / 60)
    }
}
