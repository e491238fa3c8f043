// The mock's worker responder around a provider's responder (APNs's here): the answers reach the
// wire (inline apns-id or ordinary headers), the status counters, the faults it adds, and
// `GET /stats`. The provider's rules themselves are tested in PushcastAPNsTests and PushcastFCMTests.

import PushcastAPNs
import PushcastCore
@testable import PushcastMock
import PushcastProviderKit
@testable import PushcastTransport
import PushcastWire
import XCTest

final class MockResponderTests: XCTestCase {
    /// A worker of the first listener answering as `provider`.
    static func responder(_ provider: any ProviderResponder, behavior: MockBehavior = MockBehavior(),
                          board: MockStatisticsBoard) -> MockResponder {
        let shared = MockListenerShared(provider: provider, listener: .first, board: board, once: FirstTimeSet(), rateLimiter: nil,
                                        quota: nil, retryAfterSeconds: 1, log: nil, wallMilliseconds: { 1_800_000_000_000 })
        return MockResponder(behavior: behavior, shared: shared, slot: 0, workerIndex: 0, streamsMax: 100)
    }

    func testAnswersByTokenPrefixAndApnsID() throws {
        let board = MockStatisticsBoard(workers: 1)
        let responder = Self.responder(APNsResponder(authentication: .none), board: board)
        let control = ServerConnectionControl(id: 1, session: try HTTP2ServerSession(limits: .init()))
        func answer(_ path: String, method: String = "POST", headers: [HTTP2Header] = []) -> (Int, String?, String) {
            let request = HTTP2ServerRequest(streamID: 1, method: method, path: path, authority: "localhost", headers: headers, body: [])
            switch responder.handle(request, on: control) {
            case .respondInline(let status, let header, let body, _):
                return (status, header?.value, String(decoding: body, as: UTF8.self))
            case .respond(let status, let headers, let body, _):
                return (status, headers.first { $0.name == "apns-id" }?.value, String(decoding: body, as: UTF8.self))
            case .refuse:
                return (0, nil, "")
            }
        }
        let token = String(repeating: "a1", count: 32)
        let ok = answer("/3/device/" + token)
        XCTAssertEqual(ok.0, 200)
        XCTAssertEqual(ok.1?.utf8.count, 36)
        XCTAssertEqual(ok.2, "")
        XCTAssertEqual(answer("/3/device/" + token, headers: [HTTP2Header("apns-id", "echo-me")]).1, "echo-me")
        let longID = String(repeating: "z", count: 80)
        XCTAssertEqual(answer("/3/device/" + token, headers: [HTTP2Header("apns-id", longID)]).1, longID)
        let dead = answer("/3/device/DEAD" + token.dropFirst(4))
        XCTAssertEqual(dead.0, 410)
        XCTAssertTrue(dead.2.hasPrefix("{\"reason\":\"Unregistered\",\"timestamp\":"), dead.2)
        XCTAssertEqual(answer("/3/device/bad0" + token.dropFirst(4)).0, 400)
        XCTAssertEqual(answer("/3/device/5030" + token.dropFirst(4)).0, 503)
        XCTAssertEqual(answer("/3/device/5030" + token.dropFirst(4)).0, 200, "fails once")
        XCTAssertEqual(answer("/3/device/" + token, method: "GET").0, 405)
        XCTAssertEqual(answer("/4/device/" + token).0, 404)
        XCTAssertEqual(answer("/3/device/").0, 400)
        XCTAssertEqual(answer("/3/device/xyz").2, "{\"reason\":\"BadDeviceToken\"}")

        responder.turnEnded()
        let total = board.total()
        XCTAssertEqual(total.statusCounts, [200: 4, 410: 1, 400: 3, 503: 1, 405: 1, 404: 1])
        XCTAssertEqual(total.delivered, 4)
        XCTAssertEqual(total.requests, 11)
        let stats = answer("/stats", method: "GET")
        XCTAssertEqual(stats.0, 200)
        XCTAssertTrue(stats.2.contains("\"requests\":11"), stats.2)
    }

    func testTheErrorRateAnswersInTheProvidersWordsAndCounts() throws {
        let board = MockStatisticsBoard(workers: 1)
        var behavior = MockBehavior()
        behavior.errorRate = 1
        behavior.errorStatus = 500
        let responder = Self.responder(APNsResponder(authentication: .none), behavior: behavior, board: board)
        let control = ServerConnectionControl(id: 1, session: try HTTP2ServerSession(limits: .init()))
        let token = String(repeating: "a1", count: 32)
        for path in ["/3/device/" + token, "/3/device/bad0" + token.dropFirst(4)] {
            let request = HTTP2ServerRequest(streamID: 1, method: "POST", path: path, authority: "localhost",
                                             headers: [HTTP2Header("apns-id", "echo-me")], body: [])
            guard case .respondInline(let status, let header, let body, _) = responder.handle(request, on: control) else {
                return XCTFail("an APNs answer goes out with its apns-id inline")
            }
            XCTAssertEqual(header?.value, "echo-me")
            if path.contains("bad0") {
                XCTAssertEqual(status, 400, "only accepted requests are turned into faults")
            } else {
                XCTAssertEqual(status, 500)
                XCTAssertEqual(String(decoding: body, as: UTF8.self), #"{"reason":"InternalServerError"}"#)
            }
        }
        responder.turnEnded()
        XCTAssertEqual(board.total().statusCounts, [500: 1, 400: 1])
        XCTAssertEqual(board.total().delivered, 0)
    }
}
