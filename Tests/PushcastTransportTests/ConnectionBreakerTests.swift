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

    /// Failures that end a row's chances (a reset, a timeout, an oversized answer) trip at the
    /// count, with no wait: the rows they cost are gone already.
    func testResetsTimeoutsAndOversizedAnswersTripAtTheCount() {
        var limits = Limits()
        limits.requestTimeoutNanoseconds = 2_000_000_000
        let cases: [(HTTP2StreamFailure, String)] = [
            (.reset(errorCode: 2), "every stream reset (RST_STREAM error code 2), 10 in a row with no answer"),
            (.deadlineExceeded, "every response took longer than --request-timeout (2 s), 10 in a row with no answer"),
            (.responseBodyTooLarge, "every response body over 64 KiB (Limits.responseBodyBytesAccepted; streams reset), 10 in a row"),
            (.responseHeadersTooLarge, "every response header block over 64 KiB (Limits.responseHeaderBytesAccepted; streams reset), 10 in a row"),
        ]
        for (failure, diagnosis) in cases {
            var b = ConnectionBreaker(deadConnectionsMax: 8, failedStreamsMax: 10, stallNanoseconds: 60_000_000_000,
                                      reconnectBaseNanoseconds: 100_000_000, endpoint: "https://example:443", nowNanoseconds: 0, limits: limits)
            b.activity(nowNanoseconds: 0)
            for _ in 1...9 { XCTAssertNil(b.streamFailed(failure, nowNanoseconds: 1_000)) }
            let trip = b.streamFailed(failure, nowNanoseconds: 1_000) ?? ""
            XCTAssertTrue(trip.contains(diagnosis), "\(failure): \(trip)")
        }
    }

    /// Bodies stuck behind a window the server never opens are like refusals: the server never
    /// had the request, so they must go on a while before they trip.
    func testAShutWindowTripsOnlyWhenItLasts() {
        var b = breaker(streams: 10, stall: 8_000_000_000)
        b.activity(nowNanoseconds: 0)
        for _ in 0..<50 { XCTAssertNil(b.streamFailed(.flowControlBlocked, nowNanoseconds: 1_000_000)) }
        let trip = b.streamFailed(.flowControlBlocked, nowNanoseconds: 2_000_000_000) ?? ""
        XCTAssertTrue(trip.contains("the server never opened its flow-control window"), trip)
        // An answer in between starts the count over.
        var c = breaker(streams: 3, stall: 4)
        c.activity(nowNanoseconds: 0)
        XCTAssertNil(c.streamFailed(.deadlineExceeded, nowNanoseconds: 10))
        XCTAssertNil(c.streamFailed(.deadlineExceeded, nowNanoseconds: 10))
        c.answered()
        XCTAssertNil(c.streamFailed(.deadlineExceeded, nowNanoseconds: 10))
        XCTAssertNil(c.streamFailed(.deadlineExceeded, nowNanoseconds: 10))
        XCTAssertNotNil(c.streamFailed(.deadlineExceeded, nowNanoseconds: 10))
    }
}
