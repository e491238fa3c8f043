// The client connection that settles its HTTP version in the TLS handshake: a SecureChannel over
// NegotiatedClientSession against a bare server TLSSession, in memory. The server side writes
// HTTP/1.1 by hand, so what goes over the wire is checked byte for byte.

import PushcastCore
import PushcastSystem
import XCTest
@testable import PushcastWire

final class NegotiatedClientSessionTests: XCTestCase {
    /// The directory and the PKI in it, made by the first `pair` of a test (XCTest makes a new
    /// instance per test, and the directory goes with it).
    private var fixtures: (directory: TemporaryDirectory, pki: TestPKI)?

    private var pki: TestPKI {
        get throws {
            if let fixtures { return fixtures.pki }
            let directory = try TemporaryDirectory()
            let made = (directory, try TestPKI(directory: directory))
            fixtures = made
            return made.1
        }
    }

    /// A client offering `offered` and a server supporting `supported`.
    private func pair(offered: [String], supported: [String]) throws -> (SecureChannel<NegotiatedClientSession>, TLSSession, ManualClock) {
        let pki = try self.pki
        var clientConfiguration = pki.clientConfiguration()
        clientConfiguration.alpnProtocols = offered
        var serverConfiguration = pki.serverConfiguration()
        serverConfiguration.alpnProtocols = supported
        let clock = ManualClock()
        let client = try SecureChannel<NegotiatedClientSession>(
            context: TLSContext(role: .client, configuration: clientConfiguration, files: SecretFile.read),
            serverName: "localhost", limits: Limits(), http1: HTTP1Limits(), clock: clock)
        let server = try TLSSession(context: TLSContext(role: .server, configuration: serverConfiguration, files: SecretFile.read), serverName: nil)
        return (client, server, clock)
    }

    /// Moves ciphertext both ways until neither side has any; the client's error, if it threw.
    @discardableResult
    private func pump(_ client: SecureChannel<NegotiatedClientSession>, _ server: TLSSession) -> WireError? {
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        for _ in 0..<32 {
            let toServer = buffer.withUnsafeMutableBytes { client.produceCiphertext(into: $0) }
            buffer.withUnsafeBytes { server.feedCiphertext(UnsafeRawBufferPointer(rebasing: $0[0..<toServer])) }
            if !server.isHandshakeComplete { _ = try? server.advanceHandshake() }
            let toClient = buffer.withUnsafeMutableBytes { server.takeCiphertext(into: $0) }
            if toClient > 0 {
                do {
                    try buffer.withUnsafeBytes { try client.receivedCiphertext(UnsafeRawBufferPointer(rebasing: $0[0..<toClient])) }
                } catch { return error as? WireError }
            }
            if toServer == 0 && toClient == 0 && !client.wantsWrite { return nil }
        }
        XCTFail("no quiet after 32 rounds")
        return nil
    }

    private func events(_ session: NegotiatedClientSession) -> [HTTP2ClientEvent] {
        var events: [HTTP2ClientEvent] = []
        session.takeEvents(upcoming: { _, _ in }) { events.append($0) }
        return events
    }

    private let request = HTTP2Request(authority: "localhost", path: "/push/abc", headers: [HTTP2Header("ttl", "60")], body: Array("{}".utf8))

    func testClientOfferingBothSpeaksHTTP1ToAServerThatSpeaksOnlyHTTP1() throws {
        let (client, server, _) = try pair(offered: ["h2", "http/1.1"], supported: ["http/1.1"])
        XCTAssertNil(pump(client, server))
        XCTAssertEqual(client.applicationProtocol, "http/1.1")
        XCTAssertEqual(client.session.version, .http1)
        XCTAssertEqual(client.session.streamsAllowed, 1)  // pipelineDepth, not the HTTP/2 allowance
        XCTAssertEqual(client.session.submit(request, tag: 7), 1)
        XCTAssertNil(pump(client, server))
        let wire = String(decoding: try readAvailable(server, upTo: 4096), as: UTF8.self)
        XCTAssertTrue(wire.hasPrefix("POST /push/abc HTTP/1.1\r\n"), wire)
        XCTAssertTrue(wire.contains("\r\nttl: 60\r\n"), wire)
        XCTAssertTrue(wire.hasSuffix("\r\n\r\n{}"), wire)
        try write(server, Array("HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok".utf8))
        XCTAssertNil(pump(client, server))
        let answered = events(client.session)
        XCTAssertEqual(answered.count, 1)
        guard case .response(let tag, let response) = answered.first else { return XCTFail("\(answered)") }
        XCTAssertEqual(tag, 7)
        XCTAssertEqual(response.status, 201)
        XCTAssertEqual(response.body, Array("ok".utf8))
    }

    func testClientOfferingBothGetsH2FromAServerThatSpeaksH2() throws {
        let (client, server, _) = try pair(offered: ["h2", "http/1.1"], supported: ["h2", "http/1.1"])
        XCTAssertNil(pump(client, server))
        XCTAssertEqual(client.applicationProtocol, "h2")
        XCTAssertEqual(client.session.version, .http2)
        XCTAssertNotNil(client.session.http2)
        // The HTTP/2 connection preface went out, not an HTTP/1.1 request line.
        let wire = try readAvailable(server, upTo: 24)
        XCTAssertEqual(String(decoding: wire.prefix(24), as: UTF8.self), "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
    }

    func testServerWithoutALPNIsSpokenToInHTTP1OnlyWhenTheClientOffersIt() throws {
        let (client, server, _) = try pair(offered: ["h2", "http/1.1"], supported: [])
        XCTAssertNil(pump(client, server))
        XCTAssertNil(try XCTUnwrap(server).negotiatedALPN)
        XCTAssertEqual(client.session.version, .http1)

        let (strict, other, _) = try pair(offered: ["h2"], supported: [])
        let error = try XCTUnwrap(pump(strict, other))
        XCTAssertTrue("\(error)".contains("peer did not select ALPN protocol h2"), "\(error)")
    }

    func testH2OnlyClientAgainstHTTP1OnlyServerNamesBothProtocols() throws {
        let (client, server, _) = try pair(offered: ["h2"], supported: ["http/1.1"])
        let error = try XCTUnwrap(pump(client, server))
        guard case .tls(let tls) = error else { return XCTFail("\(error)") }
        XCTAssertEqual(tls.kind, .alpnNotNegotiated)
        XCTAssertTrue(tls.description.contains("offered: h2"), tls.description)
        XCTAssertTrue(tls.description.contains("http/1.1"), tls.description)
    }

    func testCloseNotifyCompletesABodyThatRunsToTheClose() throws {
        let (client, server, _) = try pair(offered: ["http/1.1", "h2"], supported: ["http/1.1"])
        XCTAssertNil(pump(client, server))
        XCTAssertEqual(client.session.submit(request, tag: 3), 1)
        XCTAssertNil(pump(client, server))
        _ = try readAvailable(server, upTo: 4096)
        // No Content-Length, no chunking: the body runs to the close.
        try write(server, Array("HTTP/1.1 200 OK\r\n\r\nall of it".utf8))
        server.shutdown()
        let error = try XCTUnwrap(pump(client, server))
        XCTAssertTrue(client.peerClosedCleanly, "\(error)")
        client.session.receiveEnd()
        let seen = events(client.session)
        guard case .response(3, let response) = seen.first else { return XCTFail("\(seen)") }
        XCTAssertEqual(response.body, Array("all of it".utf8))
        XCTAssertTrue(client.session.isClosed)
    }

    func testLostTLSStreamIsNotACleanClose() throws {
        let (client, server, _) = try pair(offered: ["http/1.1"], supported: ["http/1.1"])
        XCTAssertNil(pump(client, server))
        XCTAssertFalse(client.peerClosedCleanly)
        // Garbage where a TLS record belongs: a failure, not the peer's close_notify.
        XCTAssertThrowsError(try [UInt8](repeating: 0x17, count: 64).withUnsafeBytes { try client.receivedCiphertext($0) })
        XCTAssertFalse(client.peerClosedCleanly)
    }

    func testRequestHTTP1CannotCarryIsRefusedAsUnsendableNotRetried() throws {
        let (client, server, _) = try pair(offered: ["h2", "http/1.1"], supported: ["http/1.1"])
        XCTAssertNil(pump(client, server))
        let injecting = HTTP2Request(authority: "localhost", path: "/push/abc", headers: [HTTP2Header("ttl", "60\r\nx-evil: 1")])
        XCTAssertTrue(client.session.canOpenStream)
        XCTAssertNil(client.session.submit(injecting, tag: 1))
        let problem = try withUnsafePointer(to: injecting) { try XCTUnwrap(client.session.problem(in: $0)) }
        XCTAssertFalse(problem.isEmpty)
        XCTAssertEqual(client.session.streamsOpen, 0)
        XCTAssertFalse(client.wantsWrite, "nothing of it was written")
        let failure = HTTP2StreamFailure.unsendable(reason: problem)
        XCTAssertFalse(failure.isSafeToRetry)
        XCTAssertTrue(failure.explanation.contains(problem))
        // The same request is fine over HTTP/2, which carries header values as bytes in HPACK.
        let (h2, h2Server, _) = try pair(offered: ["h2", "http/1.1"], supported: ["h2"])
        XCTAssertNil(pump(h2, h2Server))
        XCTAssertNil(withUnsafePointer(to: injecting) { h2.session.problem(in: $0) })
    }

    func testIdleHTTP1ConnectionClosesAfterItsIdleTime() throws {
        let (client, server, clock) = try pair(offered: ["http/1.1"], supported: ["http/1.1"])
        XCTAssertNil(pump(client, server))
        let idleClose = try XCTUnwrap(client.session.nextDeadlineNanoseconds)
        clock.advance(nanoseconds: idleClose - clock.nowNanoseconds())
        client.session.tick()
        XCTAssertTrue(client.session.isClosed)
        guard case .closed = events(client.session).last else { return XCTFail("no .closed") }
    }
}
