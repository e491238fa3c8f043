// `pushcast mock --misbehave MODE` (ServerMisbehavior in ServerWorker): the mock as a hostile
// HTTP/2 server, seen from a hand-driven client over real loopback TLS. The probe keeps every
// decrypted byte, so a test checks what the server really put on the wire, not only what a
// client's retry machinery made of it. Every wait is bounded by a deadline.

import Foundation
import PushcastCore
import PushcastMock
import PushcastReactor
import PushcastSystem
import PushcastTransport
import PushcastWire
import XCTest

/// One client connection driven by hand: a blocking loopback socket, a TLSSession and an
/// HTTP2ClientSession glued together as SecureChannel glues them, plus a copy of every plaintext
/// byte the server sent.
final class HostileServerProbe {
    private let fd: Int32
    private let tls: TLSSession
    let http2: HTTP2ClientSession
    private var chunk = [UInt8](repeating: 0, count: 64 * 1024)
    private(set) var handshakeComplete = false
    /// Every decrypted byte from the server, in order.
    private(set) var plaintext: [UInt8] = []
    private(set) var responses: [HTTP2Response] = []
    private(set) var failures: [HTTP2StreamFailure] = []
    private(set) var goAways: [(lastStreamID: Int32, errorCode: UInt32)] = []
    /// The HTTP/2 connection error the client session raised, if any.
    private(set) var sessionError: String?
    /// Why the transport ended (EOF, a reset, a TLS failure), once it has.
    private(set) var transportClosed: String?
    /// Ciphertext bytes received after the handshake.
    private(set) var bytesAfterHandshake = 0

    init(port: UInt16, tls context: TLSContext) throws {
        tls = try TLSSession(context: context, serverName: "localhost")
        http2 = try HTTP2ClientSession(limits: Limits(), clock: SystemClock.Monotonic())
        fd = try Self.connectLoopback(port: port)
        _ = try tls.advanceHandshake()  // the ClientHello
    }

    deinit { close(fd) }

    /// A connected, blocking TCP socket to 127.0.0.1:`port`.
    private static func connectLoopback(port: UInt16) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw TransportError("socket: errno \(errno)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard rc == 0 else {
            close(fd)
            throw TransportError("connect to port \(port): errno \(errno)")
        }
        return fd
    }

    /// Runs the connection until `done` holds, the transport ends, or `seconds` pass. Returns
    /// whether `done` held.
    @discardableResult
    func pump(seconds: Double, until done: () -> Bool) -> Bool {
        let deadline = Reactor.nowNanoseconds() + UInt64(seconds * 1e9)
        while !done() {
            guard transportClosed == nil else { return false }
            writeOut()
            let now = Reactor.nowNanoseconds()
            guard now < deadline else { return false }
            var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            if poll(&descriptor, 1, Int32(min((deadline - now) / 1_000_000 + 1, 50))) > 0 { readIn() }
            http2.tick()
            drainEvents()
        }
        return true
    }

    /// Submits `count` requests; false when the session would not open a stream.
    func submit(_ count: Int, authority: String, path: String = devicePath) -> Bool {
        for tag in 0..<count {
            let request = HTTP2Request(authority: authority, path: path, body: Array("{}".utf8))
            guard http2.submit(request, tag: UInt64(tag)) != nil else { return false }
        }
        return true
    }

    var summary: String {
        "handshake=\(handshakeComplete) plaintext=\(plaintext.count)B responses=\(responses.map(\.status)) failures=\(failures) "
            + "goAways=\(goAways) sessionError=\(sessionError ?? "none") closed=\(transportClosed ?? "no")"
    }

    private func writeOut() {
        if handshakeComplete {
            while http2.wantsWrite {
                let n = chunk.withUnsafeMutableBytes { http2.produce(into: $0) }
                if n == 0 { break }
                do { try chunk.withUnsafeBytes { try tls.writePlaintext(UnsafeRawBufferPointer(rebasing: $0[0..<n])) } } catch {
                    transportClosed = "TLS write: \(error)"
                    return
                }
            }
        }
        while tls.pendingCiphertextBytes > 0 {
            let n = chunk.withUnsafeMutableBytes { tls.takeCiphertext(into: $0) }
            var offset = 0
            while offset < n {
                let sent = chunk.withUnsafeBytes { send(fd, $0.baseAddress! + offset, n - offset, Int32(MSG_NOSIGNAL)) }
                guard sent > 0 else {
                    lost("send: errno \(errno)")
                    return
                }
                offset += sent
            }
        }
    }

    private func readIn() {
        let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
        if n < 0 && (errno == EAGAIN || errno == EINTR) { return }
        guard n > 0 else {
            lost(n == 0 ? "EOF" : "recv: errno \(errno)")
            return
        }
        chunk.withUnsafeBytes { tls.feedCiphertext(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
        if handshakeComplete { bytesAfterHandshake += n }
        do {
            if !handshakeComplete {
                guard try tls.advanceHandshake() else { return }
                handshakeComplete = true
            }
            while true {
                let count = try chunk.withUnsafeMutableBytes { try tls.readPlaintext(into: $0) }
                if count == 0 { break }
                plaintext.append(contentsOf: chunk[0..<count])
                guard sessionError == nil else { continue }
                do { try chunk.withUnsafeBytes { try http2.receive(UnsafeRawBufferPointer(rebasing: $0[0..<count])) } } catch {
                    sessionError = "\(error)"
                }
            }
        } catch {
            lost("TLS: \(error)")
        }
    }

    private func lost(_ reason: String) {
        transportClosed = reason
        http2.connectionLost()
        drainEvents()
    }

    private func drainEvents() {
        http2.takeEvents { event in
            switch event {
            case .response(_, let response): responses.append(response)
            case .failed(_, let failure): failures.append(failure)
            case .goAway(let last, let code, _): goAways.append((last, code))
            case .settingsChanged, .pingTimedOut, .closed: break
            }
        }
    }
}

/// A frame as it came off the wire (RFC 9113 §4.1).
struct WireFrame {
    var type: UInt8
    var flags: UInt8
    var streamID: UInt32
    var payload: ArraySlice<UInt8>

    static let data: UInt8 = 0x0, headers: UInt8 = 0x1, rstStream: UInt8 = 0x3, settings: UInt8 = 0x4, goAway: UInt8 = 0x7

    /// The well-formed frames at the start of `bytes`, and what follows them: parsing stops at a
    /// header of an unknown type, a length over 16 KiB, or a frame cut short.
    static func parse(_ bytes: [UInt8]) -> (frames: [WireFrame], rest: ArraySlice<UInt8>) {
        var frames: [WireFrame] = []
        var at = 0
        while bytes.count - at >= 9 {
            let length = Int(bytes[at]) << 16 | Int(bytes[at + 1]) << 8 | Int(bytes[at + 2])
            let type = bytes[at + 3]
            guard type <= 0x10, length <= 16_384, bytes.count - at - 9 >= length else { break }
            let stream = UInt32(bytes[at + 5]) << 24 | UInt32(bytes[at + 6]) << 16 | UInt32(bytes[at + 7]) << 8 | UInt32(bytes[at + 8])
            frames.append(WireFrame(type: type, flags: bytes[at + 4], streamID: stream & 0x7FFF_FFFF,
                                    payload: bytes[(at + 9)..<(at + 9 + length)]))
            at += 9 + length
        }
        return (frames, bytes[at...])
    }

    /// A GOAWAY's last-stream-id and error code.
    var goAwayFields: (lastStreamID: UInt32, errorCode: UInt32)? {
        guard type == Self.goAway, payload.count >= 8 else { return nil }
        let p = Array(payload.prefix(8))
        let last = (UInt32(p[0]) << 24 | UInt32(p[1]) << 16 | UInt32(p[2]) << 8 | UInt32(p[3])) & 0x7FFF_FFFF
        return (last, UInt32(p[4]) << 24 | UInt32(p[5]) << 16 | UInt32(p[6]) << 8 | UInt32(p[7]))
    }
}

final class ServerMisbehaviorTests: XCTestCase {
    private var pki: TestPKI!
    private var server: MockServer?

    override func setUpWithError() throws { pki = try TestPKI() }

    override func tearDown() {
        server?.stop()
        server = nil
    }

    private func startMock(_ mode: ServerMisbehavior, backend: IOBackendKind = .epoll, fcm: Bool = false,
                           after: Int? = nil) throws -> MockServer {
        server?.stop()
        var configuration = MockServerConfiguration(certificate: .files(certificateChain: pki.certFile, privateKey: pki.keyFile))
        configuration.workers = 1
        configuration.reactor.backend = backend
        configuration.misbehavior = mode
        configuration.misbehaveAfter = after
        if fcm { configuration.fcm = MockFCMConfiguration(credentials: .generated(directory: pki.directory)) }
        let started = try MockServer(configuration: configuration)
        server = started
        return started
    }

    /// A probe on `port` that has seen the server's SETTINGS, so requests can go.
    private func connectedProbe(_ port: UInt16, file: StaticString = #filePath, line: UInt = #line) throws -> HostileServerProbe {
        let probe = try HostileServerProbe(port: port, tls: try pki.clientTLS())
        let ready = probe.pump(seconds: 5) { probe.http2.peerSettingsReceived }
        XCTAssertTrue(ready, "no SETTINGS from the server: \(probe.summary)", file: file, line: line)
        return probe
    }

    /// A mock in `mode` and a probe that sent it `count` requests (on the FCM port's token
    /// endpoint with `fcm`) and saw each of them fail.
    private func failedRequests(_ mode: ServerMisbehavior, _ count: Int, fcm: Bool = false, file: StaticString = #filePath,
                                line: UInt = #line) throws -> (MockServer, HostileServerProbe) {
        let server = try startMock(mode, fcm: fcm)
        let port = fcm ? try XCTUnwrap(server.fcm).port : server.port
        let probe = try connectedProbe(port, file: file, line: line)
        XCTAssertTrue(probe.submit(count, authority: "127.0.0.1:\(port)", path: fcm ? "/token" : devicePath), file: file, line: line)
        XCTAssertTrue(probe.pump(seconds: 10) { probe.failures.count == count }, probe.summary, file: file, line: line)
        return (server, probe)
    }

    /// Waits (bounded) until the mock's published counters satisfy `condition`, pumping the probe.
    private func pumpUntilCounted(_ probe: HostileServerProbe, _ server: MockServer, _ condition: (MockStatistics) -> Bool) -> Bool {
        probe.pump(seconds: 5) { condition(server.board.total()) }
    }

    func testModeNames() {
        XCTAssertEqual(ServerMisbehavior.modeNames,
                       ["refuse-all", "reset-all", "goaway-zero", "close-after-handshake", "silent", "garbage-after-preface",
                        "huge-body", "huge-headers", "trickle", "window-zero", "answer-then-refuse", "answer-then-goaway",
                        "close-half-answered", "ping-flood"])
        for name in ServerMisbehavior.modeNames { XCTAssertEqual(ServerMisbehavior(rawValue: name)?.rawValue, name) }
        XCTAssertNil(ServerMisbehavior(rawValue: "refuse"))
    }

    /// The control: the same probe against a well-behaved mock gets its answers.
    func testWellBehavedMockAnswersTheProbe() throws {
        let server = try startMock(.none)
        let probe = try connectedProbe(server.port)
        XCTAssertTrue(probe.submit(2, authority: "127.0.0.1:\(server.port)"))
        XCTAssertTrue(probe.pump(seconds: 5) { probe.responses.count == 2 }, probe.summary)
        XCTAssertEqual(probe.responses.map(\.status), [200, 200])
        XCTAssertEqual(server.stop().misbehavior, MockMisbehaviorStatistics())
    }

    func testRefuseAllResetsEveryStreamWithRefusedStream() throws {
        let (server, probe) = try failedRequests(.refuseAll, 3)
        XCTAssertEqual(probe.failures, [.refusedStream, .refusedStream, .refusedStream])
        XCTAssertTrue(probe.responses.isEmpty && probe.goAways.isEmpty, probe.summary)
        XCTAssertNil(probe.transportClosed, "the connection stays open")
        XCTAssertTrue(pumpUntilCounted(probe, server) { $0.misbehavior.streamsRefused == 3 }, "\(server.board.total().misbehavior)")
        XCTAssertEqual(server.stop().requests, 0, "the responder never saw a request")
    }

    func testResetAllResetsEveryStreamWithInternalError() throws {
        let (server, probe) = try failedRequests(.resetAll, 3)
        let internalError = HTTP2ServerSession.internalErrorCode
        XCTAssertEqual(probe.failures, Array(repeating: .reset(errorCode: internalError), count: 3))
        XCTAssertFalse(probe.failures[0].isSafeToRetry)
        XCTAssertTrue(probe.responses.isEmpty, probe.summary)
        let resets = WireFrame.parse(probe.plaintext).frames.filter { $0.type == WireFrame.rstStream }
        XCTAssertEqual(resets.map { Array($0.payload) }, Array(repeating: [0, 0, 0, 2], count: 3))
        XCTAssertTrue(pumpUntilCounted(probe, server) { $0.misbehavior.streamsReset == 3 }, "\(server.board.total().misbehavior)")
    }

    func testGoAwayZeroComesFirstAndThenTheConnectionCloses() throws {
        for backend in [IOBackendKind.epoll, .uring] {
            let server = try startMock(.goAwayZero, backend: backend)
            let probe = try HostileServerProbe(port: server.port, tls: try pki.clientTLS())
            XCTAssertFalse(probe.pump(seconds: 5) { false }, "\(backend)")
            XCTAssertNotNil(probe.transportClosed, "\(backend): the server closes: \(probe.summary)")
            XCTAssertEqual(probe.goAways.map(\.lastStreamID), [0], "\(backend): \(probe.summary)")
            XCTAssertTrue(probe.responses.isEmpty, "\(backend): \(probe.summary)")
            let (frames, rest) = WireFrame.parse(probe.plaintext)
            XCTAssertTrue(rest.isEmpty, "\(backend): \(rest.count) bytes that are not frames")
            XCTAssertEqual(frames.first?.type, WireFrame.settings, "\(backend)")
            let goAways = frames.compactMap(\.goAwayFields)
            XCTAssertEqual(goAways.map(\.lastStreamID), [0], "\(backend)")
            XCTAssertEqual(goAways.map(\.errorCode), [0], "\(backend)")
            XCTAssertFalse(frames.contains { $0.type == WireFrame.headers || $0.type == WireFrame.data }, "\(backend): an answer went out")
            let counted = server.stop().misbehavior
            XCTAssertEqual(counted.goAwaysSent, 1, "\(backend)")
            XCTAssertEqual(counted.connectionsClosed, 1, "\(backend)")
        }
    }

    func testCloseAfterHandshakeClosesBeforeAnyHTTP2Byte() throws {
        for backend in [IOBackendKind.epoll, .uring] {
            let server = try startMock(.closeAfterHandshake, backend: backend)
            let probe = try HostileServerProbe(port: server.port, tls: try pki.clientTLS())
            XCTAssertFalse(probe.pump(seconds: 5) { false }, "\(backend)")
            XCTAssertTrue(probe.handshakeComplete, "\(backend): the handshake completes first: \(probe.summary)")
            XCTAssertNotNil(probe.transportClosed, "\(backend): the server closes: \(probe.summary)")
            XCTAssertEqual(probe.plaintext, [], "\(backend): not even SETTINGS")
            XCTAssertFalse(probe.http2.peerSettingsReceived, "\(backend)")
            XCTAssertEqual(server.stop().misbehavior.connectionsClosed, 1, "\(backend)")
        }
    }

    func testSilentTakesRequestsAndNeverAnswers() throws {
        let server = try startMock(.silent)
        let probe = try connectedProbe(server.port)
        XCTAssertTrue(probe.submit(2, authority: "127.0.0.1:\(server.port)"))
        XCTAssertTrue(pumpUntilCounted(probe, server) { $0.misbehavior.requestsIgnored == 2 }, "\(server.board.total().misbehavior)")
        // The server has both requests; watch the connection a while for any answer or close.
        XCTAssertFalse(probe.pump(seconds: 0.3) { !probe.responses.isEmpty || !probe.failures.isEmpty || !probe.goAways.isEmpty })
        XCTAssertTrue(probe.responses.isEmpty && probe.failures.isEmpty && probe.goAways.isEmpty, probe.summary)
        XCTAssertNil(probe.transportClosed, "the connection stays open")
        XCTAssertNil(probe.sessionError)
        XCTAssertEqual(probe.http2.streamsOpen, 2)
        XCTAssertEqual(server.stop().requests, 0)
    }

    func testGarbageAfterPrefaceFollowsTheServerSettings() throws {
        let server = try startMock(.garbageAfterPreface)
        let probe = try HostileServerProbe(port: server.port, tls: try pki.clientTLS())
        XCTAssertTrue(probe.pump(seconds: 5) { probe.sessionError != nil }, "the client must reject the stream: \(probe.summary)")
        XCTAssertNil(probe.transportClosed, "the server keeps the connection open")
        let (frames, rest) = WireFrame.parse(probe.plaintext)
        XCTAssertEqual(frames.first?.type, WireFrame.settings)
        XCTAssertEqual(frames.first.map { $0.flags & 1 }, 0, "the server's own SETTINGS, not an ACK")
        XCTAssertFalse(frames.contains { $0.type == WireFrame.headers || $0.type == WireFrame.goAway })
        XCTAssertGreaterThanOrEqual(rest.count, 64, "garbage after \(frames.count) frames")
        XCTAssertEqual(Array(rest.prefix(64)), Array(repeating: 0xFF, count: 64))
        XCTAssertTrue(pumpUntilCounted(probe, server) { $0.misbehavior.garbageSent == 1 }, "\(server.board.total().misbehavior)")
    }

    /// The FCM listener misbehaves the same way, token endpoint included.
    func testMisbehaviorAppliesToTheFCMPort() throws {
        let (server, probe) = try failedRequests(.refuseAll, 1, fcm: true)
        XCTAssertEqual(probe.failures, [.refusedStream])
        XCTAssertTrue(pumpUntilCounted(probe, server) { $0.fcm.misbehavior.streamsRefused == 1 }, "\(server.board.total().fcm.misbehavior)")
        let statistics = server.stop()
        XCTAssertEqual(statistics.fcm.tokenRequests, 0)
        XCTAssertEqual(statistics.misbehavior, MockMisbehaviorStatistics(), "the APNs listener saw nothing")
    }

    // MARK: - Answers a client must bound

    /// The token endpoint answers as hugely as the sends: a client bounds both.
    func testHugeAnswersComeFromTheFCMPortToo() throws {
        for (mode, failure) in [(ServerMisbehavior.hugeBody, HTTP2StreamFailure.responseBodyTooLarge), (.hugeHeaders, .responseHeadersTooLarge)] {
            let (server, probe) = try failedRequests(mode, 1, fcm: true)
            XCTAssertEqual(probe.failures, [failure], "\(mode)")
            let statistics = server.stop()
            XCTAssertEqual(statistics.fcm.tokenRequests, 0, "\(mode)")
            XCTAssertEqual(statistics.fcm.misbehavior.hugeBodiesSent + statistics.fcm.misbehavior.hugeHeadersSent, 1, "\(mode)")
        }
    }

    func testHugeBodyNeverEndsAndTheClientResetsItPastItsLimit() throws {
        let (server, probe) = try failedRequests(.hugeBody, 2)
        XCTAssertEqual(probe.failures, [.responseBodyTooLarge, .responseBodyTooLarge])
        XCTAssertFalse(probe.failures[0].isSafeToRetry, "the server took the request")
        XCTAssertTrue(probe.responses.isEmpty, probe.summary)
        let frames = WireFrame.parse(probe.plaintext).frames
        let headers = frames.filter { $0.type == WireFrame.headers }
        XCTAssertEqual(headers.count, 2, "a 200 answer opens each stream")
        XCTAssertFalse(frames.contains { $0.type == WireFrame.data && $0.flags & 1 != 0 }, "a body that ends")
        let dataBytes = frames.filter { $0.type == WireFrame.data }.reduce(0) { $0 + $1.payload.count }
        XCTAssertGreaterThan(dataBytes, 2 * Limits().responseBodyBytesAccepted, "the body went on past the limit on both streams")
        XCTAssertNil(probe.transportClosed, "the connection stays usable")
        XCTAssertEqual(probe.http2.streamsOpen, 0)
        XCTAssertTrue(pumpUntilCounted(probe, server) { $0.misbehavior.hugeBodiesSent == 2 }, "\(server.board.total().misbehavior)")
        XCTAssertEqual(server.stop().requests, 0, "the responder never saw a request")
    }

    func testHugeHeadersAreCutOffPastTheClientsLimit() throws {
        let (server, probe) = try failedRequests(.hugeHeaders, 2)
        XCTAssertEqual(probe.failures, [.responseHeadersTooLarge, .responseHeadersTooLarge])
        XCTAssertTrue(probe.responses.isEmpty, probe.summary)
        XCTAssertNil(probe.sessionError, "the block is valid HTTP/2, only too large")
        let frames = WireFrame.parse(probe.plaintext).frames
        XCTAssertTrue(frames.contains { $0.type == 0x9 }, "the block goes on in CONTINUATION frames")
        XCTAssertTrue(pumpUntilCounted(probe, server) { $0.misbehavior.hugeHeadersSent == 2 }, "\(server.board.total().misbehavior)")
    }

    func testTrickleWritesAnAnswerOneByteAtATime() throws {
        let server = try startMock(.trickle)
        let probe = try connectedProbe(server.port)
        probe.pump(seconds: 0.3) { false }  // the SETTINGS ACK, at full speed
        let before = probe.bytesAfterHandshake
        XCTAssertTrue(probe.submit(1, authority: "127.0.0.1:\(server.port)"))
        XCTAssertTrue(pumpUntilCounted(probe, server) { $0.misbehavior.connectionsTrickled == 1 && $0.requests == 1 },
                      "\(server.board.total())")
        let start = Date()
        probe.pump(seconds: 1.2) { !probe.responses.isEmpty }
        let elapsed = Date().timeIntervalSince(start)
        let trickled = probe.bytesAfterHandshake - before
        XCTAssertTrue(probe.responses.isEmpty && probe.failures.isEmpty, "no answer completes so soon: \(probe.summary)")
        XCTAssertGreaterThanOrEqual(trickled, 1, "the answer is on its way")
        XCTAssertLessThanOrEqual(Double(trickled), elapsed / 0.5 + 2, "one byte per half second at most")
        XCTAssertNil(probe.transportClosed)
    }

    func testWindowZeroNeverLetsARequestBodyThrough() throws {
        let server = try startMock(.windowZero)
        let probe = try connectedProbe(server.port)
        let settings = try XCTUnwrap(WireFrame.parse(probe.plaintext).frames.first { $0.type == WireFrame.settings && $0.flags & 1 == 0 })
        var window: UInt32? = nil
        var at = settings.payload.startIndex
        while at + 6 <= settings.payload.endIndex {
            let p = settings.payload
            if UInt16(p[at]) << 8 | UInt16(p[at + 1]) == 0x4 {
                window = UInt32(p[at + 2]) << 24 | UInt32(p[at + 3]) << 16 | UInt32(p[at + 4]) << 8 | UInt32(p[at + 5])
            }
            at += 6
        }
        XCTAssertEqual(window, 0, "SETTINGS_INITIAL_WINDOW_SIZE")
        XCTAssertTrue(probe.submit(2, authority: "127.0.0.1:\(server.port)"))
        XCTAssertFalse(probe.pump(seconds: 0.5) { !probe.responses.isEmpty || !probe.failures.isEmpty }, probe.summary)
        XCTAssertEqual(probe.http2.streamsBlockedByFlowControl, 2)
        XCTAssertFalse(WireFrame.parse(probe.plaintext).frames.contains { $0.type == 0x8 }, "a WINDOW_UPDATE")
        // The connection goes: the requests never completed, so the client may send them again.
        probe.http2.connectionLost()
        var failures: [HTTP2StreamFailure] = []
        probe.http2.takeEvents { if case .failed(_, let failure) = $0 { failures.append(failure) } }
        XCTAssertEqual(failures, [.flowControlBlocked, .flowControlBlocked])
        XCTAssertTrue(failures[0].isSafeToRetry)
        let statistics = server.stop()
        XCTAssertEqual(statistics.misbehavior.windowsWithheld, 1)
        XCTAssertEqual(statistics.requests, 0)
    }

    // MARK: - A server that turns bad

    /// A mock in `mode` that turns bad after `after` requests, and a probe whose first request
    /// it answered and that has sent `next` more.
    private func answeredOnceThenSent(_ mode: ServerMisbehavior, after: Int, next: Int) throws -> (MockServer, HostileServerProbe) {
        let server = try startMock(mode, after: after)
        let probe = try connectedProbe(server.port)
        XCTAssertTrue(probe.submit(1, authority: "127.0.0.1:\(server.port)"))
        XCTAssertTrue(probe.pump(seconds: 5) { probe.responses.count == 1 }, probe.summary)
        XCTAssertTrue(probe.submit(next, authority: "127.0.0.1:\(server.port)"))
        return (server, probe)
    }

    func testMisbehaveAfterAnswersTheFirstRequestsThenTurns() throws {
        let (server, probe) = try answeredOnceThenSent(.refuseAll, after: 2, next: 3)
        XCTAssertTrue(probe.pump(seconds: 5) { probe.responses.count + probe.failures.count == 4 }, probe.summary)
        XCTAssertEqual(probe.responses.map(\.status), [200, 200])
        XCTAssertEqual(probe.failures, [.refusedStream, .refusedStream])
        XCTAssertTrue(pumpUntilCounted(probe, server) { $0.misbehavior.streamsRefused == 2 }, "\(server.board.total().misbehavior)")
        XCTAssertEqual(server.stop().requests, 2)
    }

    /// A mode that acts when a connection starts: the open connection goes at the first request
    /// past the gate, unanswered, and the next connection meets the mode.
    func testMisbehaveAfterClosesAnOpenConnectionForAConnectionMode() throws {
        let (server, probe) = try answeredOnceThenSent(.closeAfterHandshake, after: 1, next: 1)
        XCTAssertFalse(probe.pump(seconds: 5) { false })
        XCTAssertNotNil(probe.transportClosed, probe.summary)
        XCTAssertEqual(probe.responses.count, 1)
        XCTAssertEqual(probe.failures, [.connectionLost])
        let next = try HostileServerProbe(port: server.port, tls: try pki.clientTLS())
        XCTAssertFalse(next.pump(seconds: 5) { false })
        XCTAssertTrue(next.handshakeComplete && next.plaintext.isEmpty, next.summary)
        let statistics = server.stop().misbehavior
        XCTAssertEqual(statistics.connectionsDropped, 1)
        XCTAssertEqual(statistics.connectionsClosed, 1)
    }
}
