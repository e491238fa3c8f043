import PushcastCore
import PushcastSchedule
import Dispatch
import PushcastSystem
import XCTest

/// `SystemZoneDirectory` against the machine's own zone data (files Foundation reads; nothing
/// else is started).
final class ZoneDataTests: XCTestCase {
    private let directory = SystemZoneDirectory()
    private let january = utc(2026, 1, 15, 0, 0), june = utc(2026, 6, 15, 0, 0)

    private func offsets(_ name: String) throws -> (january: Int32, june: Int32) {
        let zone = try XCTUnwrap(directory.zone(named: name), name)
        return (zone.offsetSeconds(atEpochSeconds: january), zone.offsetSeconds(atEpochSeconds: june))
    }

    func testOffsetsOfTheSystemsZones() throws {
        XCTAssertTrue(try offsets("Asia/Tokyo") == (32_400, 32_400))
        XCTAssertTrue(try offsets("Asia/Kolkata") == (19_800, 19_800))
        // Lord Howe Island moves its clocks by half an hour: +11:00 in January, +10:30 in June.
        XCTAssertTrue(try offsets("Australia/Lord_Howe") == (39_600, 37_800))
        XCTAssertTrue(try offsets("America/New_York") == (-18_000, -14_400))
        XCTAssertTrue(try offsets("Etc/GMT+12") == (-43_200, -43_200))
        XCTAssertTrue(try offsets("Pacific/Kiritimati") == (50_400, 50_400))
        XCTAssertTrue(try offsets("UTC") == (0, 0))
        XCTAssertNil(directory.zone(named: "Mars/Olympus_Mons"))
        XCTAssertNil(directory.zone(named: "Asia/Tokio"))
        // Abbreviations never reach the directory (Foundation's TimeZone takes BST for Bangladesh).
        guard case .failure(let refusal) = ZoneValue.resolve("BST", in: directory) else { return XCTFail("BST resolved") }
        XCTAssertEqual(refusal, .abbreviation)
    }

    func testTheHandBuiltZonesMatchTheSystemsZoneDataHourByHour() throws {
        let cases: [(String, TransitionZone)] = [("America/New_York", .newYork), ("Australia/Sydney", .sydney), ("Europe/London", .london)]
        for (name, built) in cases {
            let system = try XCTUnwrap(directory.zone(named: name))
            var instant = utc(2026, 1, 1, 0, 0)
            while instant < utc(2027, 1, 1, 0, 0) {
                XCTAssertEqual(system.offsetSeconds(atEpochSeconds: instant), built.offsetSeconds(atEpochSeconds: instant), "\(name) at \(instant)")
                instant += 1800
            }
        }
    }

    func testDeliveriesThroughTheSystemsZones() throws {
        let plan = try DeliveryPlan(deliverAt: local(2, 30), windowSeconds: 3600)
        let newYork = try ZoneValue.resolve("America/New_York", in: directory).get()
        XCTAssertEqual(plan.slot(for: newYork, campaignStartEpochSeconds: utc(2026, 3, 8, 5, 0)),
                       .at(epochSeconds: utc(2026, 3, 8, 7, 30), windowEnd: utc(2026, 3, 8, 8, 30)))
        // Lord Howe, 2026-10-04: 02:00 becomes 02:30 (+10:30 to +11:00); 02:15 becomes 02:45.
        let lordHowe = try XCTUnwrap(directory.zone(named: "Australia/Lord_Howe"))
        let quarter = try DeliveryPlan(deliverAt: local(2, 15), windowSeconds: 3600)
        XCTAssertEqual(quarter.slot(for: lordHowe, campaignStartEpochSeconds: utc(2026, 10, 3, 13, 30)),
                       .at(epochSeconds: utc(2026, 10, 3, 15, 45), windowEnd: utc(2026, 10, 3, 16, 45)))
        let evening = try DeliveryPlan(deliverAt: local(23, 30), windowSeconds: 3600)
        let start = utc(2026, 6, 14, 11, 0)
        XCTAssertEqual(evening.slot(for: try XCTUnwrap(directory.zone(named: "Etc/GMT+12")), campaignStartEpochSeconds: start),
                       .at(epochSeconds: utc(2026, 6, 14, 11, 30), windowEnd: utc(2026, 6, 14, 12, 30)))
        XCTAssertEqual(evening.slot(for: try XCTUnwrap(directory.zone(named: "Pacific/Kiritimati")), campaignStartEpochSeconds: start),
                       .at(epochSeconds: utc(2026, 6, 15, 9, 30), windowEnd: utc(2026, 6, 15, 10, 30)))
    }

    func testTheCacheIsBoundedAndSharedAcrossThreads() {
        let small = SystemZoneDirectory(cacheMax: 2)
        XCTAssertNotNil(small.zone(named: "Asia/Tokyo"))
        XCTAssertNil(small.zone(named: "Nowhere/Atall"))
        XCTAssertNotNil(small.zone(named: "Asia/Kolkata"))
        XCTAssertEqual(small.cachedCount, 2)
        XCTAssertNotNil(small.zone(named: "Asia/Kolkata"), "found though not remembered")
        XCTAssertNil(small.zone(named: "Nowhere/Atall"), "a remembered miss stays a miss")

        let shared = SystemZoneDirectory()
        let names = ["Asia/Tokyo", "Europe/London", "America/New_York", "Australia/Lord_Howe"]
        DispatchQueue.concurrentPerform(iterations: 64) { index in
            let zone = shared.zone(named: names[index % names.count])
            XCTAssertNotNil(zone)
        }
        XCTAssertEqual(shared.cachedCount, names.count)
    }
}
