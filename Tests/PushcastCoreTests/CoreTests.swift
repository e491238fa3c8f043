import XCTest
@testable import PushcastCore

final class CoreTests: XCTestCase {
    func testSplitMixIsDeterministic() {
        let a = SplitMix64(seed: 42), b = SplitMix64(seed: 42), c = SplitMix64(seed: 43)
        let xs = (0..<5).map { _ in a.next() }
        XCTAssertEqual(xs, (0..<5).map { _ in b.next() })
        XCTAssertNotEqual(xs, (0..<5).map { _ in c.next() })
    }

    func testManualClockAdvancesBothClocks() {
        let clock = ManualClock(nanoseconds: 0, epochSecondsAtZero: 1000)
        clock.advance(milliseconds: 2500)
        XCTAssertEqual(clock.nowNanoseconds(), 2_500_000_000)
        XCTAssertEqual(clock.secondsSinceEpoch(), 1002)
    }

    func testDefaultLimitsValidateAndBadOnesDoNot() throws {
        try Limits().validate()
        var bad = Limits()
        bad.receiveBufferCount = 100
        XCTAssertThrowsError(try bad.validate())
        bad = Limits()
        bad.connectionsMax = 0
        XCTAssertThrowsError(try bad.validate())
        XCTAssertEqual(Limits().streamsInFlightMax, 4000)
    }
}
