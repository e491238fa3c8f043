import PushcastCore
@testable import PushcastWire
import XCTest

/// Regression: streams that reach the server after it submitted GOAWAY(K) but before the frame
/// went out were processed, although the client (rightly) reports them as unprocessed and sends
/// them again: a duplicate delivery. Found by the 50,000-row end-to-end run with --goaway-after.
final class HTTP2GoAwayRaceTests: XCTestCase {
    func testStreamsArrivingAfterASubmittedGoAwayAreNeverProcessed() throws {
        let pair = try HTTP2Pair()
        try pair.pump()
        var served: [Int32] = []
        pair.onServerEvent = { event, server in
            guard case .request(let request) = event else { return }
            served.append(request.streamID)
            server.respond(streamID: request.streamID, status: 200, headers: [], body: [])
        }
        for tag in 0..<5 { XCTAssertNotNil(pair.client.submit(HTTP2Pair.request("/a\(tag)"), tag: UInt64(tag))) }
        try pair.moveClientToServer()
        XCTAssertEqual(served.count, 5)
        pair.server.goAway(lastStreamID: nil, errorCode: 0, debugData: "")
        let lastServed = try XCTUnwrap(served.max())
        // More requests reach the server before its GOAWAY has been written out.
        for tag in 5..<10 { XCTAssertNotNil(pair.client.submit(HTTP2Pair.request("/b\(tag)"), tag: UInt64(tag))) }
        try pair.moveClientToServer()
        try pair.pump()

        XCTAssertEqual(served.count, 5, "streams above the GOAWAY's last-stream-id were processed: \(served)")
        XCTAssertTrue(served.allSatisfy { $0 <= lastServed })
        let outcomes = pair.clientEvents.filter { $0.tag != nil }
        XCTAssertEqual(outcomes.count, 10)
        for tag in 0..<5 { XCTAssertEqual(outcomes.first { $0.tag == UInt64(tag) }?.response?.status, 200) }
        for tag in 5..<10 {
            let failure = try XCTUnwrap(outcomes.first { $0.tag == UInt64(tag) }?.failure)
            XCTAssertTrue(failure.isSafeToRetry, "\(failure)")
        }
    }
}
