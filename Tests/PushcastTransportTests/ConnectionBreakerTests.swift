import PushcastCore
@testable import PushcastTransport
import PushcastWire
import XCTest

/// The breaker trips on what a broken server does forever, and never on what a busy one does.
final class ConnectionBreakerTests: XCTestCase {
    private func breaker(dead: Int = 8, streams: Int = 64, stall: UInt64 = 60_000_000_000) -> ConnectionBreaker {
        ConnectionBreaker(deadConnectionsMax: dead, failedStreamsMax: streams, stallNanoseconds: stall,
                          reconnectBaseNanoseconds: 100_000_000, endpoint: "https://example:443", nowNanoseconds: 0)
    }

    func testConnectionsClosedRightAfterTheHandshakeTripWithTheirDiagnosis() {
        var b = breaker(dead: 5)
        for _ in 1...4 { XCTAssertNil(b.connectionDied(.closedAfterHandshake)) }
        let trip = b.connectionDied(.closedAfterHandshake)
        XCTAssertEqual(trip, "https://example:443: every connection closed right after the TLS handshake (5 in a row)")
    }

    func testGoAwayZeroAndProtocolErrorsAreNamed() {
        var b = breaker(dead: 1)
        XCTAssertTrue(b.connectionDied(.goAwayZero)?.contains("GOAWAY with last-stream-id 0 on every connection") ?? false)
        var c = breaker(dead: 1)
        let trip = c.connectionDied(.failedAfterHandshake("HTTP/2 error: protocol error")) ?? ""
        XCTAssertTrue(trip.contains("protocol error from the server: HTTP/2 error: protocol error"), trip)
    }

    func testAnAnswerResetsTheCount() {
        var b = breaker(dead: 3)
        XCTAssertNil(b.connectionDied(.goAwayZero))
        XCTAssertNil(b.connectionDied(.goAwayZero))
        b.answered()
        XCTAssertNil(b.connectionDied(.goAwayZero))
        XCTAssertNil(b.connectionDied(.goAwayZero))
        XCTAssertNotNil(b.connectionDied(.goAwayZero))
    }

    func testReconnectDelayGrowsWithJitterAndACeiling() {
        var b = breaker(dead: 100)
        var ceilings: [UInt64] = []
        for _ in 1...12 {
            _ = b.connectionDied(.closedAfterHandshake)
            var most: UInt64 = 0
            for _ in 0..<200 { most = max(most, b.reconnectDelay(nowNanoseconds: 0)) }
            ceilings.append(most)
        }
        XCTAssertLessThanOrEqual(ceilings[0], 100_000_000)
        XCTAssertGreaterThan(ceilings[4], 800_000_000, "\(ceilings)")
        XCTAssertTrue(ceilings.allSatisfy { $0 <= 30_000_000_000 })
        XCTAssertTrue(ceilings.allSatisfy { $0 >= 1_000_000 })
    }

    func testRefusalsTripOnlyWhenTheyLastWithoutAnswers() {
        var b = breaker(streams: 10, stall: 8_000_000_000)
        b.activity(nowNanoseconds: 0)
        // A burst of refusals at once is not enough (a server may refuse streams over its limit).
        for _ in 0..<50 { XCTAssertNil(b.streamFailed(.refusedStream, nowNanoseconds: 1_000_000)) }
        // Still refusing after a quarter of the stall timeout with no answer: broken.
        let trip = b.streamFailed(.refusedStream, nowNanoseconds: 2_000_000_000)
        XCTAssertTrue(trip?.contains("every stream refused") ?? false, "\(trip ?? "nil")")
        // GOAWAY-unprocessed and never-sent are connection matters, not counted here.
        var c = breaker(streams: 1, stall: 4)
        c.activity(nowNanoseconds: 0)
        XCTAssertNil(c.streamFailed(.goAwayUnprocessed, nowNanoseconds: 10))
        XCTAssertNil(c.streamFailed(.notSent, nowNanoseconds: 10))
        XCTAssertTrue(c.streamFailed(.reset(errorCode: 2), nowNanoseconds: 10)?.contains("every stream reset (RST_STREAM error code 2)") ?? false)
    }

    func testStallTripsOnlyWhileSomethingWaits() {
        var b = breaker(stall: 1_000)
        XCTAssertNil(b.stalled(nowNanoseconds: 1_000_000), "nothing waiting: an idle or paused lane is not stalled")
        b.activity(nowNanoseconds: 10)
        XCTAssertNil(b.stalled(nowNanoseconds: 500))
        XCTAssertEqual(b.stallDeadline, 1_010)
        XCTAssertNotNil(b.stalled(nowNanoseconds: 1_010))
        b.answered()
        XCTAssertNil(b.stalled(nowNanoseconds: 5_000))
    }
}
