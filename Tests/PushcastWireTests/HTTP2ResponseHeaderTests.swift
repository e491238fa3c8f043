import PushcastCore
@testable import PushcastWire
import XCTest

final class HTTP2ResponseHeaderTests: XCTestCase {
    func testOnlyTheConfiguredResponseHeadersAreKept() throws {
        var limits = Limits()
        limits.responseHeadersKept = ["apns-id", "Retry-After"]
        let pair = try HTTP2Pair(clientLimits: limits)
        try pair.pump()
        pair.onServerEvent = { event, server in
            guard case .request(let request) = event else { return }
            server.respond(streamID: request.streamID, status: 429, headers: [
                HTTP2Header("server", "mock"), HTTP2Header("apns-id", "0a0b0c0d-0000-5000-8000-000000000001"),
                HTTP2Header("retry-after", "2"), HTTP2Header("x-padding", String(repeating: "p", count: 100)),
            ], body: [])
        }
        XCTAssertNotNil(pair.client.submit(HTTP2Pair.request("/x"), tag: 1))
        try pair.pump()
        let response = try XCTUnwrap(pair.clientEvents.first { $0.tag == 1 }?.response)
        XCTAssertEqual(response.status, 429)
        XCTAssertEqual(response.headers.map(\.name), ["apns-id", "retry-after"])
        XCTAssertEqual(response.header("apns-id"), "0a0b0c0d-0000-5000-8000-000000000001")
        XCTAssertEqual(response.header("Retry-After"), "2")
        XCTAssertNil(response.header("server"))
    }

    func testSuccessHeadersAreSkippedWhenAskedAndErrorHeadersStillKept() throws {
        var limits = Limits()
        limits.responseHeadersKeptOnSuccess = false
        let pair = try HTTP2Pair(clientLimits: limits)
        try pair.pump()
        pair.onServerEvent = { event, server in
            guard case .request(let request) = event else { return }
            server.respond(streamID: request.streamID, status: request.path == "/ok" ? 200 : 503, headers: [
                HTTP2Header("apns-id", "0a0b0c0d-0000-5000-8000-000000000002"), HTTP2Header("retry-after", "3"),
            ], body: [])
        }
        XCTAssertNotNil(pair.client.submit(HTTP2Pair.request("/ok"), tag: 1))
        XCTAssertNotNil(pair.client.submit(HTTP2Pair.request("/busy"), tag: 2))
        try pair.pump()
        let ok = try XCTUnwrap(pair.clientEvents.first { $0.tag == 1 }?.response)
        XCTAssertEqual(ok.status, 200)
        XCTAssertTrue(ok.headers.isEmpty)
        let busy = try XCTUnwrap(pair.clientEvents.first { $0.tag == 2 }?.response)
        XCTAssertEqual(busy.status, 503)
        XCTAssertEqual(busy.header("retry-after"), "3")
        XCTAssertEqual(busy.header("apns-id"), "0a0b0c0d-0000-5000-8000-000000000002")
    }
}
