import PushcastCore
import PushcastSchedule
import XCTest

final class ZoneValueTests: XCTestCase {
    private func offset(_ text: String) -> Int32? {
        guard case .success(.fixed(let zone)) = ZoneValue.parse(text) else { return nil }
        return zone.seconds
    }

    private func refusal(_ text: String) -> ZoneRefusal? {
        guard case .failure(let refusal) = ZoneValue.parse(text) else { return nil }
        return refusal
    }

    func testFixedOffsetsInTheirExportForms() {
        XCTAssertEqual(offset("+05:30"), 19_800)
        XCTAssertEqual(offset("+0530"), 19_800)
        XCTAssertEqual(offset("+5:30"), 19_800)
        XCTAssertEqual(offset("-0800"), -28_800)
        XCTAssertEqual(offset("-08"), -28_800)
        XCTAssertEqual(offset("-09:30"), -34_200)
        XCTAssertEqual(offset("UTC+5"), 18_000)
        XCTAssertEqual(offset("utc-3"), -10_800)
        XCTAssertEqual(offset("GMT+05:45"), 20_700)
        XCTAssertEqual(offset("Z"), 0)
        XCTAssertEqual(offset("z"), 0)
        XCTAssertEqual(offset("  +14:00\t"), 50_400)
        XCTAssertEqual(offset("-12:00"), -43_200)
    }

    func testIANANamesAreLeftForTheDirectory() {
        for name in ["Asia/Tokyo", "America/Argentina/Buenos_Aires", "UTC", "Etc/GMT+12", "Etc/GMT-14", "America/Port-au-Prince"] {
            XCTAssertEqual(ZoneValue.parse(name), .success(.named(name)), name)
        }
        XCTAssertEqual(ZoneValue.parse(" Europe/London "), .success(.named("Europe/London")))
        for name in ["GMT", "UCT", "PRC", "NZ", "GB", "Japan", "Etc/UTC", "EST5EDT", "US/Pacific"] {
            XCTAssertEqual(ZoneValue.parse(name), .success(.named(name)), name)
        }
    }

    func testAbbreviationsAreRefusedNotGuessed() {
        for text in ["IST", "BST", "CST", "PST", "EST", "MST", "HST", "CET", "AEST", "NZDT", "JST"] {
            XCTAssertEqual(refusal(text), .abbreviation, text)
        }
        XCTAssertEqual(ZoneRefusal.abbreviation.reason, "zone-abbreviation")
    }

    func testGarbageIsRefusedWithItsReason() {
        XCTAssertEqual(refusal(""), .empty)
        XCTAssertEqual(refusal("   "), .empty)
        XCTAssertEqual(refusal("+"), .malformedOffset)
        XCTAssertEqual(refusal("+530"), .malformedOffset)
        XCTAssertEqual(refusal("+05:3"), .malformedOffset)
        XCTAssertEqual(refusal("+05:60"), .malformedOffset)
        XCTAssertEqual(refusal("+123:00"), .malformedOffset)
        XCTAssertEqual(refusal("+05:30:00"), .malformedOffset)
        XCTAssertEqual(refusal("UTC+"), .malformedOffset)
        XCTAssertEqual(refusal("GMT+five"), .malformedOffset)
        XCTAssertEqual(refusal("+14:01"), .offsetOutOfRange)
        XCTAssertEqual(refusal("-13"), .offsetOutOfRange)
        XCTAssertEqual(refusal("UTC+15"), .offsetOutOfRange)
        XCTAssertEqual(refusal("../etc/passwd"), .malformedName)
        XCTAssertEqual(refusal("/usr/share/zoneinfo/UTC"), .malformedName)
        XCTAssertEqual(refusal("Asia//Tokyo"), .malformedName)
        XCTAssertEqual(refusal("Asia/Tokyo/"), .malformedName)
        XCTAssertEqual(refusal("Asia/Tōkyō"), .malformedName)
        XCTAssertEqual(refusal("New York"), .malformedName)
        XCTAssertEqual(refusal("9am"), .malformedName)
        XCTAssertEqual(refusal("Asia/Tokyo\0"), .malformedName)
        XCTAssertEqual(ZoneRefusal.empty.reason, "zone-empty")
        XCTAssertEqual(ZoneRefusal.tooLong(bytes: 65).reason, "zone-too-long")
        XCTAssertEqual(ZoneRefusal.malformedOffset.reason, "zone-offset-malformed")
        XCTAssertEqual(ZoneRefusal.offsetOutOfRange.reason, "zone-offset-out-of-range")
        XCTAssertEqual(ZoneRefusal.malformedName.reason, "zone-name-malformed")
        XCTAssertEqual(ZoneRefusal.unknownZone.reason, "zone-unknown")
    }

    func testLengthBounds() {
        let longest = "A" + String(repeating: "b", count: ZoneValue.lengthMax - 1)
        XCTAssertEqual(ZoneValue.parse(longest), .success(.named(longest)))
        XCTAssertEqual(refusal(longest + "c"), .tooLong(bytes: ZoneValue.lengthMax + 1))
        XCTAssertEqual(ZoneValue.parse("   " + longest + "   "), .success(.named(longest)))
        let padded = String(repeating: " ", count: ZoneValue.lengthMax * 4) + "UTC"
        XCTAssertEqual(refusal(padded), .tooLong(bytes: ZoneValue.lengthMax * 4 + 3))
        XCTAssertEqual(refusal(String(repeating: "x", count: 1 << 20)), .tooLong(bytes: 1 << 20))
    }

    func testResolveUsesTheDirectoryOnlyForNames() throws {
        let directory = TableDirectory(zones: ["Asia/Tokyo": FixedOffsetZone(seconds: 32_400)])
        XCTAssertEqual(try ZoneValue.resolve("Asia/Tokyo", in: directory).get().offsetSeconds(atEpochSeconds: 0), 32_400)
        XCTAssertEqual(try ZoneValue.resolve("+05:30", in: directory).get().offsetSeconds(atEpochSeconds: 0), 19_800)
        guard case .failure(let refusal) = ZoneValue.resolve("Mars/Olympus_Mons", in: directory) else { return XCTFail("resolved") }
        XCTAssertEqual(refusal, .unknownZone)
        guard case .failure(let malformed) = ZoneValue.resolve("Asia/../Tokyo", in: directory) else { return XCTFail("resolved") }
        XCTAssertEqual(malformed, .malformedName)
    }
}
