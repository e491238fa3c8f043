// The server's request value (bytes kept in reused per-slot buffers) and its inline answers.

import PushcastCore
@testable import PushcastWire
import XCTest

final class HTTP2ServerRequestTests: XCTestCase {
    func testStringAndByteAccessorsAgree() {
        let request = HTTP2ServerRequest(streamID: 3, method: "POST", path: "/3/device/ab", authority: "example.com",
                                         headers: [HTTP2Header("apns-topic", "com.example"), HTTP2Header("apns-id", "x-1"),
                                                   HTTP2Header("apns-topic", "second")],
                                         body: Array("{}".utf8))
        XCTAssertEqual(request.method, "POST")
        XCTAssertTrue(request.method(is: "POST"))
        XCTAssertFalse(request.method(is: "GET"))
        XCTAssertFalse(request.method(is: "POSTX"))
        XCTAssertEqual(request.path, "/3/device/ab")
        XCTAssertEqual(request.withPath { Array($0) }, Array("/3/device/ab".utf8))
        XCTAssertEqual(request.authority, "example.com")
        XCTAssertEqual(request.headerCount, 3)
        XCTAssertEqual(request.headers, [HTTP2Header("apns-topic", "com.example"), HTTP2Header("apns-id", "x-1"),
                                         HTTP2Header("apns-topic", "second")])
        XCTAssertEqual(request.header("apns-topic"), "com.example", "the first of duplicates")
        XCTAssertEqual(request.header("APNS-ID"), "x-1")
        XCTAssertNil(request.header("apns"))
        XCTAssertEqual(request.withHeader("apns-id") { $0.map { Array($0) } }, Array("x-1".utf8))
        XCTAssertNil(request.withHeader("authorization") { $0.map { Array($0) } })
        var seen: [String] = []
        request.forEachHeader { name, _ in seen.append(String(decoding: name, as: UTF8.self)); return seen.count < 2 }
        XCTAssertEqual(seen, ["apns-topic", "apns-id"])
        XCTAssertEqual(request.body, Array("{}".utf8))
    }

    func testEmptyRequestValue() {
        let request = HTTP2ServerRequest(streamID: 1, method: "", path: "", authority: "", headers: [], body: [])
        XCTAssertEqual(request.method, "")
        XCTAssertEqual(request.path, "")
        XCTAssertEqual(request.headers, [])
        XCTAssertNil(request.header("host"))
    }

    /// A request the caller keeps must not change when its stream slot serves the next request
    /// (the slot's buffers are reused only when nobody else holds them).
    func testHeldRequestsSurviveSlotReuse() throws {
        var serverLimits = Limits()
        serverLimits.streamsPerConnectionMax = 1  // one slot: every request reuses it
        let pair = try HTTP2Pair(serverLimits: serverLimits)
        var held: [HTTP2ServerRequest] = []
        pair.onServerEvent = { event, server in
            guard case .request(let request) = event else { return }
            held.append(request)
            server.respond(streamID: request.streamID, status: 200, headers: [], body: [])
        }
        try pair.pump()
        for index in 0..<20 {
            var request = HTTP2Pair.request("/r/\(index)/" + String(repeating: "p", count: index * 7),
                                            body: Array(repeating: UInt8(index), count: index * 3))
            request.headers.append(HTTP2Header("x-index", String(index)))
            XCTAssertNotNil(pair.client.submit(request, tag: UInt64(index)))
            try pair.pump()
        }
        XCTAssertEqual(held.count, 20)
        for (index, request) in held.enumerated() {
            XCTAssertEqual(request.path, "/r/\(index)/" + String(repeating: "p", count: index * 7))
            XCTAssertEqual(request.header("x-index"), String(index))
            XCTAssertEqual(request.body, Array(repeating: UInt8(index), count: index * 3))
            XCTAssertTrue(request.method(is: "POST"))
        }
    }

    func testInlineHeaderAnswerRoundTrips() throws {
        let pair = try HTTP2Pair()
        let id = "0a0b0c0d-0000-4000-8000-000000000001"
        pair.onServerEvent = { event, server in
            guard case .request(let request) = event else { return }
            let header = Array(id.utf8).withUnsafeBytes { HTTP2InlineHeader(name: "apns-id", value: $0) }
            let status = request.path == "/bad" ? 400 : 200
            let body = status == 200 ? [] : Array("{\"reason\":\"BadPath\"}".utf8)
            server.respond(streamID: request.streamID, status: status, header: header, body: body)
        }
        try pair.pump()
        XCTAssertNotNil(pair.client.submit(HTTP2Pair.request("/ok"), tag: 1))
        XCTAssertNotNil(pair.client.submit(HTTP2Pair.request("/bad"), tag: 2))
        try pair.pump()
        let ok = try XCTUnwrap(pair.clientEvents.first { $0.tag == 1 }?.response)
        XCTAssertEqual(ok.status, 200)
        XCTAssertEqual(ok.header("apns-id"), id)
        XCTAssertEqual(ok.body, [])
        let bad = try XCTUnwrap(pair.clientEvents.first { $0.tag == 2 }?.response)
        XCTAssertEqual(bad.status, 400)
        XCTAssertEqual(bad.header("apns-id"), id)
        XCTAssertEqual(String(decoding: bad.body, as: UTF8.self), "{\"reason\":\"BadPath\"}")
    }

    func testInlineHeaderLimits() {
        let long = Array(repeating: UInt8(ascii: "a"), count: HTTP2InlineHeader.capacity + 1)
        XCTAssertNil(long.withUnsafeBytes { HTTP2InlineHeader(name: "apns-id", value: $0) })
        let full = Array(repeating: UInt8(ascii: "b"), count: HTTP2InlineHeader.capacity)
        let header = full.withUnsafeBytes { HTTP2InlineHeader(name: "apns-id", value: $0) }
        XCTAssertEqual(header?.value, String(repeating: "b", count: HTTP2InlineHeader.capacity))
        XCTAssertEqual(header?.header, HTTP2Header("apns-id", String(repeating: "b", count: HTTP2InlineHeader.capacity)))
        let empty = HTTP2InlineHeader(name: "x", count: 0) { _ in }
        XCTAssertEqual(empty.value, "")
    }
}
