@testable import PushcastMock
import XCTest

/// `mock --fcm-quota`: sends over N in any rolling minute are refused with a Retry-After that
/// says when the oldest counted second leaves the window.
final class MockProjectQuotaTests: XCTestCase {
    func testARollingMinute() {
        let quota = MockProjectQuota(perMinute: 100)
        let start: UInt64 = 1_000 * 1_000_000_000
        for i in 0..<60 { XCTAssertNil(quota.admit(nowNanoseconds: start + UInt64(i) * 1_000_000), "send \(i)") }
        // 40 more, 30 s later: the quota is full.
        for i in 0..<40 { XCTAssertNil(quota.admit(nowNanoseconds: start + 30_000_000_000 + UInt64(i))) }
        XCTAssertEqual(quota.admit(nowNanoseconds: start + 30_500_000_000), 30, "until the first second leaves the window")
        XCTAssertEqual(quota.admit(nowNanoseconds: start + 59_000_000_000), 1)
        // A minute after the first 60: they have left the window, the 40 have not.
        for i in 0..<60 { XCTAssertNil(quota.admit(nowNanoseconds: start + 60_000_000_000 + UInt64(i)), "send \(i) a minute on") }
        XCTAssertNotNil(quota.admit(nowNanoseconds: start + 60_000_000_100))
    }
}
