// HTTP1ServerSession in memory: requests fed in random pieces, answers out of order written in
// order, keep-alive and Connection: close, and every bound refusing with an answer and a close.
// Our own HTTP1ClientSession reads the answers, so the two ends agree on the wire.

import PushcastCore
import XCTest
@testable import PushcastWire

final class HTTP1ServerSessionTests: XCTestCase {
    private func request(_ path: String, body: String = "", extra: String = "") -> [UInt8] {
        Array("POST \(path) HTTP/1.1\r\nHost: push.example\r\nTTL: 60\r\n\(extra)Content-Length: \(body.utf8.count)\r\n\r\n\(body)".utf8)
    }

    /// Feeds `bytes` in random pieces; the events seen.
    private func feed(_ session: HTTP1ServerSession, _ bytes: [UInt8], random: inout SplitMix64) throws -> [HTTP2ServerEvent] {
        var events: [HTTP2ServerEvent] = []
        var offset = 0
        while offset < bytes.count {
            let n = min(bytes.count - offset, 1 + Int(random.next() % 40))
            try bytes[offset..<(offset + n)].withUnsafeBytes { try session.receive($0) }
            offset += n
            session.takeEvents { events.append($0) }
        }
        return events
    }

    private func drain(_ session: HTTP1ServerSession) -> String {
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 7)  // small, so produce runs many times
        while session.wantsWrite {
            let n = buffer.withUnsafeMutableBytes { session.produce(into: $0) }
            out += buffer[0..<n]
        }
        return String(decoding: out, as: UTF8.self)
    }

    private func requests(_ events: [HTTP2ServerEvent]) -> [HTTP2ServerRequest] {
        events.compactMap { if case .request(let r) = $0 { return r } else { return nil } }
    }

    func testPipelinedRequestsInRandomPiecesAreAnsweredInOrder() throws {
        for seed in 0..<50 as Range<UInt64> {
            var random = SplitMix64(seed: seed)
            let session = HTTP1ServerSession(limits: Limits())
            let bytes = (1...5).flatMap { request("/push/\($0)", body: String(repeating: "x", count: $0 * 3)) }
            let seen = requests(try feed(session, bytes, random: &random))
            XCTAssertEqual(seen.map(\.path), (1...5).map { "/push/\($0)" })
            XCTAssertEqual(seen.map(\.body.count), [3, 6, 9, 12, 15])
            XCTAssertEqual(seen.first?.authority, "push.example")
            XCTAssertEqual(seen.first?.method, "POST")
            // Answers given backwards go out in request order.
            for r in seen.reversed() { session.respond(streamID: r.streamID, status: 201, headers: [HTTP2Header("x-id", "\(r.streamID)")], body: []) }
            let wire = drain(session)
            let ids = wire.components(separatedBy: "x-id: ").dropFirst().map { $0.prefix(1) }
            XCTAssertEqual(ids, ["1", "2", "3", "4", "5"], wire)
            XCTAssertFalse(session.isClosed)
        }
    }

    func testOurClientReadsTheAnswersAndTheServerCloseLosesNothing() throws {
        let clock = ManualClock()
        var http1 = HTTP1Limits()
        http1.pipelineDepth = 3
        let client = HTTP1ClientSession(limits: Limits(), http1: http1, clock: clock)
        let server = HTTP1ServerSession(limits: Limits())
        for tag in 1...3 as ClosedRange<UInt64> {
            XCTAssertNotNil(client.submit(HTTP2Request(authority: "push.example", path: "/p/\(tag)", body: [1, 2]), tag: tag))
        }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let n = buffer.withUnsafeMutableBytes { client.produce(into: $0) }
        try buffer[0..<n].withUnsafeBytes { try server.receive($0) }
        var seen: [HTTP2ServerRequest] = []
        server.takeEvents { if case .request(let r) = $0 { seen.append(r) } }
        XCTAssertEqual(seen.count, 3)
        // The server answers the first and closes: the two behind it were never processed.
        server.respond(streamID: seen[0].streamID, status: 200, headers: [], body: Array("ok".utf8), closeAfterAnswer: true)
        let answer = Array(drain(server).utf8)
        XCTAssertTrue(server.isClosed)
        try answer.withUnsafeBytes { try client.receive($0) }
        var outcome: [String] = []
        client.takeEvents { event in
            switch event {
            case .response(let tag, let r): outcome.append("\(tag):\(r.status)")
            case .failed(let tag, let f): outcome.append("\(tag):\(f.isSafeToRetry ? "resend" : "unknown")")
            default: break
            }
        }
        XCTAssertEqual(outcome, ["1:200", "2:resend", "3:resend"])
    }

    func testConnectionCloseFromTheClientClosesAfterItsAnswer() throws {
        var random = SplitMix64(seed: 1)
        let session = HTTP1ServerSession(limits: Limits())
        let bytes = request("/a", extra: "Connection: close\r\n") + request("/b")
        let seen = requests(try feed(session, bytes, random: &random))
        XCTAssertEqual(seen.map(\.path), ["/a"], "nothing is read after a closing request")
        session.respond(streamID: seen[0].streamID, status: 200, headers: [], body: [])
        XCTAssertTrue(drain(session).contains("connection: close\r\n"))
        var closed = false
        session.takeEvents { if case .closed = $0 { closed = true } }
        XCTAssertTrue(closed)
        XCTAssertTrue(session.isClosed)
    }

    func testEveryBoundAndMalformedInputIsRefusedWithAnAnswerAndAClose() throws {
        var limits = Limits()
        limits.requestBodyBytesMax = 16
        var http1 = HTTP1Limits()
        http1.headerCountMax = 4
        http1.headerLineBytesMax = 64
        let cases: [(String, Int)] = [
            ("GARBAGE\r\n\r\n", 400),
            ("GET /x HTTP/2.0\r\nHost: a\r\n\r\n", 505),
            ("GET x HTTP/1.1\r\nHost: a\r\n\r\n", 400),
            ("GET /x HTTP/1.1\r\n\r\n", 400),  // no Host
            ("POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n", 501),
            ("POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 17\r\n\r\n", 413),
            ("POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400),
            ("POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n", 400),
            ("GET /x HTTP/1.1\r\nHost: a\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\nE: 5\r\n\r\n", 431),
            ("GET /x HTTP/1.1\r\nHost: a\r\nX: \(String(repeating: "v", count: 80))\r\n\r\n", 431),
            ("GET /x HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n", 400),
            ("GET /x HTTP/1.1\nHost: a\n\n", 400),
            ("GET /x HTTP/1.1\r\nHost: a\r\nX: a\u{1}b\r\n\r\n", 400),
        ]
        for (text, status) in cases {
            let session = HTTP1ServerSession(limits: limits, http1: http1)
            try Array(text.utf8).withUnsafeBytes { try session.receive($0) }
            var events: [HTTP2ServerEvent] = []
            session.takeEvents { events.append($0) }
            XCTAssertTrue(requests(events).isEmpty, text)
            let wire = drain(session)
            XCTAssertTrue(wire.hasPrefix("HTTP/1.1 \(status) "), "\(text.debugDescription): \(wire)")
            XCTAssertTrue(wire.contains("connection: close"), text)
            XCTAssertTrue(session.isClosed, text)
            XCTAssertThrowsError(try [UInt8]("GET / HTTP/1.1\r\n".utf8).withUnsafeBytes { try session.receive($0) })
        }
    }

    func testEndlessHeadIsRefusedWithinTheBound() throws {
        let session = HTTP1ServerSession(limits: Limits())
        var random = SplitMix64(seed: 9)
        let endless = Array("GET /x HTTP/1.1\r\nHost: a\r\n".utf8) + [UInt8](repeating: UInt8(ascii: "a"), count: session.inputBytesMax)
        _ = try feed(session, endless, random: &random)
        XCTAssertTrue(drain(session).hasPrefix("HTTP/1.1 431 "))
        XCTAssertTrue(session.isClosed)
    }

    func testPendingRequestsAreBoundedAndReadOnAsAnswersGoOut() throws {
        let session = HTTP1ServerSession(limits: Limits(), requestsPendingMax: 2)
        let bytes = (1...4).flatMap { request("/q/\($0)") }
        try bytes.withUnsafeBytes { try session.receive($0) }
        var seen: [HTTP2ServerRequest] = []
        session.takeEvents { if case .request(let r) = $0 { seen.append(r) } }
        XCTAssertEqual(seen.count, 2)
        session.respond(streamID: seen[0].streamID, status: 200, headers: [], body: [])
        session.takeEvents { if case .request(let r) = $0 { seen.append(r) } }
        XCTAssertEqual(seen.map(\.path), ["/q/1", "/q/2", "/q/3"])
    }

    func testResponseHeadersThatWouldInjectLinesAreLeftOut() {
        let wire = String(decoding: HTTP1ServerSession.serialize(status: 200, headers: [HTTP2Header("x-a", "1\r\nx-evil: 2"), HTTP2Header("x-b", "ok")],
                                                                 body: [], closes: false), as: UTF8.self)
        XCTAssertFalse(wire.contains("x-evil"))
        XCTAssertTrue(wire.contains("x-b: ok\r\n"))
    }
}
