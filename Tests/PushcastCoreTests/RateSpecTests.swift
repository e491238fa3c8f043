import PushcastCore
import XCTest

final class RateSpecTests: XCTestCase {
    private let known: [ProviderID] = [.apns, .fcm]

    private func assertRateError(_ text: String, _ expected: RateSpecError, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertThrowsError(try RateSpec.parse(text, providers: known), text, file: file, line: line) {
            XCTAssertEqual($0 as? RateSpecError, expected, text, file: file, line: line)
        }
    }

    func testProvidersAndUnits() throws {
        XCTAssertEqual(try RateSpec.parse("apns=500/s,fcm=2000/s", providers: known), [.apns: 500, .fcm: 2000])
        XCTAssertEqual(try RateSpec.parse("fcm=600000/min", providers: known), [.fcm: 10_000])
        XCTAssertEqual(try RateSpec.parse("fcm=600000/m", providers: known), [.fcm: 10_000])
        XCTAssertEqual(try RateSpec.parse("apns=36000/h", providers: known), [.apns: 10])
        XCTAssertEqual(try RateSpec.parse("fcm=250", providers: known), [.fcm: 250])
        XCTAssertEqual(try RateSpec.parse("fcm=2.5/s", providers: known), [.fcm: 2.5])
        XCTAssertEqual(try RateSpec.parse("fcm=.5", providers: known), [.fcm: 0.5])
        XCTAssertEqual(try RateSpec.parse("fcm=30/m", providers: known), [.fcm: 0.5])
    }

    func testSpacesCaseAndStrayCommasAreTolerated() throws {
        XCTAssertEqual(try RateSpec.parse(" apns = 500 / s , FCM=1.5/s ,", providers: known), [.apns: 500, .fcm: 1.5])
        XCTAssertEqual(try RateSpec.parse(",,fcm=1,", providers: known), [.fcm: 1])
    }

    func testErrorsQuoteTheBadPart() {
        assertRateError("", .empty)
        assertRateError(" , ", .empty)
        assertRateError("500/s", .missingProvider(part: "500/s"))
        assertRateError("apns=1,gcm=5/s", .unknownProvider(name: "gcm", part: "gcm=5/s", known: ["apns", "fcm"]))
        assertRateError("=5", .unknownProvider(name: "", part: "=5", known: ["apns", "fcm"]))
        assertRateError("fcm=1,fcm=2", .duplicateProvider(name: "fcm"))
        assertRateError("fcm=0", .zero(part: "fcm=0"))
        assertRateError("fcm=0.0/s", .zero(part: "fcm=0.0/s"))
        assertRateError("fcm=-5/s", .negative(part: "fcm=-5/s"))
        for bad in ["fcm=abc", "fcm=", "fcm=1e3", "fcm=inf", "fcm=nan", "fcm=1.2.3", "fcm=.", "fcm=+5", "fcm=5 0"] {
            assertRateError(bad, .invalidNumber(part: bad))
        }
        assertRateError("fcm=5/d", .unknownUnit(unit: "d", part: "fcm=5/d"))
        assertRateError("fcm=5/", .unknownUnit(unit: "", part: "fcm=5/"))
        assertRateError("fcm=5/s/s", .unknownUnit(unit: "s/s", part: "fcm=5/s/s"))
    }

    func testErrorDescriptionsAreClear() {
        XCTAssertEqual(RateSpecError.unknownProvider(name: "gcm", part: "gcm=5", known: ["apns", "fcm"]).description, "'gcm=5': unknown provider 'gcm' (known: apns, fcm)")
        XCTAssertTrue(RateSpecError.invalidNumber(part: "fcm=x").description.hasPrefix("'fcm=x' is not a rate"))
        XCTAssertTrue(RateSpecError.unknownUnit(unit: "d", part: "fcm=5/d").description.contains("unknown unit 'd'"))
        XCTAssertTrue(RateSpecError.zero(part: "fcm=0").description.contains("'fcm=0'"))
        XCTAssertTrue(RateSpecError.negative(part: "fcm=-1").description.contains("negative"))
        XCTAssertTrue(RateSpecError.missingProvider(part: "500/s").description.contains("fcm=500/s"))
    }
}
