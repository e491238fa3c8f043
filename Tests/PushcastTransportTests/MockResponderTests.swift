// The mock's per-request rules on their byte-level fast path: device-token shape, outcomes by
// token prefix, apns-id echo or generation, and the status counters.

import PushcastCore
@testable import PushcastMock
@testable import PushcastTransport
import PushcastWire
import XCTest

final class MockResponderTests: XCTestCase {
    private func isToken(_ text: String) -> Bool {
        Array(text.utf8).withUnsafeBytes { MockAPNsRules.isDeviceToken($0) }
    }

    func testDeviceTokenShape() {
        let valid = String(repeating: "0123456789abcdefABCDEF", count: 4).prefix(64)
        XCTAssertTrue(isToken(String(valid)))
        XCTAssertTrue(isToken(String(repeating: "a1", count: 100)))          // 200 digits
        XCTAssertFalse(isToken(String(repeating: "a1", count: 31)))          // 62
        XCTAssertFalse(isToken(String(repeating: "a1", count: 101)))         // 202
        XCTAssertFalse(isToken(String(repeating: "a", count: 65)))           // odd
        // Every non-hex byte, at every position of a word and of the tail.
        let base = Array(repeating: UInt8(ascii: "f"), count: 66)
        for byte in 0...255 where !(48...57).contains(byte) && !(97...102).contains(byte) && !(65...70).contains(byte) {
            for position in [0, 3, 7, 8, 31, 63, 64, 65] {
                var token = base
                token[position] = UInt8(byte)
                XCTAssertFalse(token.withUnsafeBytes { MockAPNsRules.isDeviceToken($0) }, "byte \(byte) at \(position)")
            }
        }
    }

    func testRandomUUIDsAreCanonicalVersion4() {
        let random = SplitMix64(seed: 42)
        var seen = Set<String>()
        for _ in 0..<1000 {
            let id = MockResponder.randomUUID(random)
            let bytes = Array(id.utf8)
            XCTAssertEqual(bytes.count, 36)
            for (i, b) in bytes.enumerated() {
                if [8, 13, 18, 23].contains(i) {
                    XCTAssertEqual(b, UInt8(ascii: "-"), id)
                } else {
                    XCTAssertTrue((48...57).contains(b) || (97...102).contains(b), id)
                }
            }
            XCTAssertEqual(bytes[14], UInt8(ascii: "4"), id)
            XCTAssertTrue(Array("89ab".utf8).contains(bytes[19]), id)
            seen.insert(id)
        }
        XCTAssertEqual(seen.count, 1000)
    }

    func testAnswersByTokenPrefixAndApnsID() throws {
        let board = MockStatisticsBoard(workers: 1)
        var behavior = MockBehavior()
        behavior.authentication = .none
        let responder = MockResponder(behavior: behavior, board: board, workerIndex: 0, shared: MockSharedState(),
                                      rateLimiter: nil, log: nil, streamsMax: 100)
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
}
