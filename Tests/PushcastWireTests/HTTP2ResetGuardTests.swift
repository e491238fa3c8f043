// The server session's rapid-reset guard: wide enough for a client that resets every stream it
// opens (curl 7.88 does, to the mock), still there for a flood.

import PushcastCore
@testable import PushcastWire
import XCTest

final class HTTP2ResetGuardTests: XCTestCase {
    private static func frame(type: UInt8, flags: UInt8, stream: UInt32, payload: [UInt8]) -> [UInt8] {
        let n = payload.count
        return [UInt8(n >> 16 & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n & 0xFF), type, flags,
                UInt8(stream >> 24 & 0x7F), UInt8(stream >> 16 & 0xFF), UInt8(stream >> 8 & 0xFF), UInt8(stream & 0xFF)] + payload
    }

    /// The client preface, then `streams` requests (GET / on https for authority "a": HPACK
    /// static-table entries and one literal), each reset with CANCEL right after its HEADERS.
    private func frames(opening streams: Int, from first: Int = 0) -> [UInt8] {
        var bytes = first == 0 ? Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8) + Self.frame(type: WireFrame.settings, flags: 0, stream: 0, payload: []) : []
        for index in first..<(first + streams) {
            let stream = UInt32(2 * index + 1)
            bytes += Self.frame(type: WireFrame.headers, flags: 0x4, stream: stream, payload: [0x82, 0x87, 0x84, 0x41, 0x01, 0x61])
            bytes += Self.frame(type: WireFrame.rstStream, flags: 0, stream: stream, payload: [0, 0, 0, 8])
        }
        return bytes
    }

    /// Frames the server sends back.
    private func output(of server: HTTP2ServerSession) -> FrameScanner {
        var scanner = FrameScanner(skipsClientPreface: false)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 16)
        defer { buffer.deallocate() }
        while true {
            let n = server.produce(into: buffer)
            if n == 0 { break }
            scanner.scan(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
        }
        return scanner
    }

    func testAClientThatResetsEveryStreamKeepsItsConnection() throws {
        let server = try HTTP2ServerSession(limits: Limits())
        // nghttp2's default guard (1,000 resets, then 33 a second) would end this connection.
        try frames(opening: 5000).withUnsafeBytes { try server.receive($0) }
        XCTAssertEqual(output(of: server).count(of: WireFrame.goAway), 0, "the connection was torn down")
    }

    /// The guard is installed: a flood past its burst ends the connection. The guard here is
    /// narrow (a burst of 1,000, then 10 a second), so 20,000 resets exceed it on a machine of any
    /// speed; the production guard's width is the test above.
    func testAResetFloodStillEndsTheConnection() throws {
        let server = try HTTP2ServerSession(limits: Limits(), resetGuard: (burst: 1_000, perSecond: 10))
        try? frames(opening: 20_000).withUnsafeBytes { try server.receive($0) }
        XCTAssertEqual(output(of: server).count(of: WireFrame.goAway), 1, "a flood of resets must still end the connection")
    }

    /// The same guard lets 900 resets through: it is the flood, not resets as such, that it ends.
    func testResetsUnderTheGuardsBurstKeepTheConnection() throws {
        let server = try HTTP2ServerSession(limits: Limits(), resetGuard: (burst: 1_000, perSecond: 10))
        try frames(opening: 900).withUnsafeBytes { try server.receive($0) }
        XCTAssertEqual(output(of: server).count(of: WireFrame.goAway), 0)
    }
}
