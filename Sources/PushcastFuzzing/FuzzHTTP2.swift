// The HTTP/2 client session fed hostile server bytes after a valid handshake.
//
// Each input: a real HTTP2ServerSession completes the handshake in memory (as in
// Tests/PushcastWireTests/HTTP2TestSupport.swift), three requests are submitted (stream ids 1, 3
// and 5; the second has a body) and their frames are taken off, then the server is gone and the
// input arrives as the server's bytes. Invariants: no crash, the session goes quiet (no endless
// output), and once the connection is lost every request has had exactly one outcome.

import PushcastCore
import PushcastWire

/// Server bytes fed to a client session in pieces.
enum FuzzPieces {
    /// Feeds `bytes` to `session` in pieces of `pieceSize` while the session is open; after each
    /// piece, `after` hears whether `receive` threw and says whether to go on.
    static func feed<Session: HTTPClientSession>(_ bytes: ArraySlice<UInt8>, pieceSize: Int, to session: Session,
                                                 after: (_ threw: Bool) -> Bool) {
        var offset = bytes.startIndex
        while offset < bytes.endIndex && !session.isClosed {
            let end = bytes.endIndex - offset <= pieceSize ? bytes.endIndex : offset + pieceSize
            let threw: Bool = bytes[offset..<end].withUnsafeBytes { piece in
                do throws(HTTP2Error) {
                    try session.receive(piece)
                    return false
                } catch {
                    return true
                }
            }
            guard after(threw) else { return }
            offset = end
        }
    }
}

enum FuzzHTTP2 {
    static let requestCount = 3
    /// Output calls allowed before the session counts as looping (each moves up to 16 KiB).
    static let produceCallsMax = 1000

    /// Flags (the input's first byte): bits 0-2 pick the size of the pieces the rest is fed in;
    /// bit 3 submits one more request after the input; bit 4 moves the clock past every request
    /// deadline and the ping timeout; bit 5 closes gracefully before the connection is lost.
    /// `record` sees every client event (the replay test checks that the harness reaches streams).
    /// Longer than 70 lines: one scenario whose nested helpers share its counters and sink; split,
    /// its steps would pass five locals back and forth.
    static func run(_ input: [UInt8], record: ((HTTP2ClientEvent) -> Void)? = nil) {
        let flags = input.first ?? 0
        let serverBytes = input.dropFirst()
        let clock = ManualClock()
        var limits = Limits()
        limits.streamsPerConnectionMax = 16
        guard let client = try? HTTP2ClientSession(limits: limits, clock: clock) else {
            preconditionFailure("client session init failed")
        }
        let sink = UnsafeMutableRawBufferPointer.allocate(byteCount: 16 * 1024, alignment: 16)
        defer { sink.deallocate() }
        handshake(client, limits: limits, buffer: sink)

        var outcomes: [UInt64: Int] = [:]
        var closedEvents = 0
        func drain() {
            client.takeEvents { event in
                record?(event)
                switch event {
                case .response(let tag, _), .failed(let tag, _): outcomes[tag, default: 0] += 1
                case .closed: closedEvents += 1
                case .goAway, .settingsChanged, .pingTimedOut: break
                }
            }
        }
        func discardOutput() {
            for _ in 0..<produceCallsMax {
                if client.produce(into: sink) == 0 {
                    drain()
                    return
                }
            }
            preconditionFailure("the client session produced output \(produceCallsMax) times in a row")
        }

        var submitted: [UInt64] = []
        for tag in 1...UInt64(requestCount) {
            let body = tag == 2 ? [UInt8](repeating: 0x7B, count: 300) : []
            guard client.submit(request(body: body), tag: tag) != nil else {
                preconditionFailure("request \(tag) not submitted after the handshake")
            }
            submitted.append(tag)
        }
        discardOutput()

        let pieceSizes = [1, 2, 9, 17, 64, 512, 4096, Int.max]
        let pieceSize = pieceSizes[Int(flags & 0x07)]
        FuzzPieces.feed(serverBytes, pieceSize: pieceSize, to: client) { threw in
            drain()
            discardOutput()
            return !threw
        }

        if flags & 0x08 != 0, client.submit(request(body: []), tag: 4) != nil { submitted.append(4) }
        discardOutput()
        if flags & 0x10 != 0 {
            clock.advance(nanoseconds: limits.requestTimeoutNanoseconds + limits.pingIntervalNanoseconds)
            client.tick()
            discardOutput()
            clock.advance(nanoseconds: limits.pingTimeoutNanoseconds)
            client.tick()
            discardOutput()
        }
        if flags & 0x20 != 0 {
            client.close()
            discardOutput()
        }
        client.connectionLost()
        drain()
        precondition(client.isClosed, "connectionLost left the session open")
        precondition(closedEvents == 1, "\(closedEvents) closed events")
        for tag in submitted {
            precondition(outcomes[tag] == 1, "request \(tag) had \(outcomes[tag] ?? 0) outcomes")
        }
        precondition(outcomes.count == submitted.count, "outcomes for requests never submitted: \(outcomes)")
        precondition(client.produce(into: sink) == 0 && !client.wantsWrite, "a closed session has output")
    }

    static func request(body: [UInt8]) -> HTTP2Request {
        HTTP2Request(authority: "api.push.example", path: "/3/device/", pathSuffix: "00fuzz",
                     headers: [HTTP2Header("apns-topic", "com.example.app"), HTTP2Header("apns-push-type", "alert")],
                     body: body)
    }

    /// Exchanges prefaces and SETTINGS with a real server session until both are quiet.
    static func handshake(_ client: HTTP2ClientSession, limits: Limits, buffer: UnsafeMutableRawBufferPointer) {
        guard let server = try? HTTP2ServerSession(limits: limits) else { preconditionFailure("server session init failed") }
        for _ in 0..<16 {
            var moved = 0
            do {
                while case let n = client.produce(into: buffer), n > 0 {
                    try server.receive(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
                    moved += n
                }
                while case let n = server.produce(into: buffer), n > 0 {
                    try client.receive(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
                    moved += n
                }
            } catch {
                preconditionFailure("handshake failed: \(error)")
            }
            client.takeEvents { _ in }
            server.takeEvents { _ in }
            if moved == 0 && !client.wantsWrite && !server.wantsWrite {
                precondition(client.peerSettingsReceived && client.canOpenStream, "handshake left the client unable to open streams")
                return
            }
        }
        preconditionFailure("handshake did not go quiet")
    }
}
