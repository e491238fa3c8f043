// In-memory client-to-server tests of HTTP2ClientSession and HTTP2ServerSession.

import CNGHTTP2
import PushcastCore
import PushcastWire
import XCTest

final class HTTP2SessionTests: XCTestCase {
    // MARK: 1. Concurrency cap over many requests

    func testTenThousandRequestsNeverExceedPeerConcurrencyAndAllRoundTrip() throws {
        var serverLimits = Limits()
        serverLimits.streamsPerConnectionMax = 100
        let pair = try HTTP2Pair(serverLimits: serverLimits)
        pair.scansFrames = false
        try pair.pump()
        XCTAssertEqual(pair.client.streamsAllowed, 100)

        let total = 10_000
        var serverOpenMax = 0
        pair.onServerEvent = { event, server in
            serverOpenMax = max(serverOpenMax, server.streamsOpen)
            if case .request(let request) = event {
                let echo = Array("echo:\(request.path):\(request.body.count)".utf8)
                server.respond(streamID: request.streamID, status: 200, headers: [HTTP2Header("apns-id", request.path)], body: echo)
            }
        }
        var responses = [HTTP2Response?](repeating: nil, count: total)
        var failures = 0
        pair.onClientEvent = { event in
            switch event {
            case .response(let tag, let response):
                XCTAssertNil(responses[Int(tag)], "tag \(tag) answered twice")
                responses[Int(tag)] = response
            case .failed: failures += 1
            default: break
            }
        }
        var next = 0
        var clientOpenMax = 0
        while next < total || pair.client.streamsOpen > 0 {
            while next < total {
                if pair.client.canOpenStream {
                    let body = Array(repeating: UInt8(next & 0xFF), count: 64)
                    XCTAssertNotNil(pair.client.submit(HTTP2Pair.request("/3/device/\(next)", body: body), tag: UInt64(next)))
                    XCTAssertLessThanOrEqual(pair.client.streamsOpen, 100)
                    clientOpenMax = max(clientOpenMax, pair.client.streamsOpen)
                    next += 1
                } else if pair.client.streamsOpen < pair.client.streamsAllowed && pair.client.wantsWrite {
                    try pair.moveClientToServer()  // output back-pressure: write, then open more
                } else {
                    break
                }
            }
            try pair.pump()
        }
        XCTAssertEqual(failures, 0)
        XCTAssertEqual(clientOpenMax, 100, "the client should use the whole advertised concurrency")
        XCTAssertLessThanOrEqual(serverOpenMax, 100)
        XCTAssertGreaterThan(serverOpenMax, 1)
        for tag in 0..<total {
            guard let response = responses[tag] else { return XCTFail("no response for tag \(tag)") }
            XCTAssertEqual(response.status, 200)
            XCTAssertEqual(String(decoding: response.body, as: UTF8.self), "echo:/3/device/\(tag):64")
            XCTAssertEqual(response.header("apns-id"), "/3/device/\(tag)")
            XCTAssertFalse(response.bodyTruncated)
        }
        XCTAssertEqual(pair.server.streamsOpen, 0)
    }

    // MARK: 2. SETTINGS lowered mid-run

    func testLoweredMaxConcurrentStreamsIsObeyedMidRun() throws {
        var serverLimits = Limits()
        serverLimits.streamsPerConnectionMax = 100
        let pair = try HTTP2Pair(serverLimits: serverLimits)
        pair.scansFrames = false
        try pair.pump()

        let total = 3_000
        var completed = Set<UInt64>()
        var retry: [UInt64] = []
        var sawSettingsOne = false
        var clientDrainedUnderOne = false
        var serverOpenAfterDrain = 0
        pair.onClientEvent = { event in
            switch event {
            case .response(let tag, let response):
                XCTAssertEqual(response.status, 200)
                XCTAssertEqual(String(decoding: response.body, as: UTF8.self), "/p/\(tag)")
                XCTAssertTrue(completed.insert(tag).inserted)
            case .failed(let tag, let failure):
                XCTAssertEqual(failure, .refusedStream, "only streams in flight when the limit dropped may be refused")
                XCTAssertTrue(failure.isSafeToRetry)
                retry.append(tag)
            case .settingsChanged(let n):
                if n == 1 { sawSettingsOne = true }
            default: break
            }
        }
        pair.onServerEvent = { event, server in
            if clientDrainedUnderOne { serverOpenAfterDrain = max(serverOpenAfterDrain, server.streamsOpen) }
            if case .request(let request) = event {
                server.respond(streamID: request.streamID, status: 200, headers: [], body: Array(request.path.utf8))
            }
        }
        var next: UInt64 = 0
        var lowered = false
        while completed.count < total {
            if !lowered && completed.count >= 1_000 {
                pair.server.setMaxConcurrentStreams(1)
                lowered = true
            }
            if sawSettingsOne && pair.client.streamsOpen <= 1 { clientDrainedUnderOne = true }
            while pair.client.canOpenStream {
                let tag: UInt64
                if let retried = retry.popLast() { tag = retried } else if next < UInt64(total) { tag = next; next += 1 } else { break }
                XCTAssertNotNil(pair.client.submit(HTTP2Pair.request("/p/\(tag)"), tag: tag))
                if clientDrainedUnderOne { XCTAssertLessThanOrEqual(pair.client.streamsOpen, 1) }
            }
            try pair.pump()
        }
        XCTAssertTrue(sawSettingsOne, "a .settingsChanged(1) event")
        XCTAssertTrue(clientDrainedUnderOne)
        XCTAssertEqual(pair.client.streamsAllowed, 1)
        XCTAssertLessThanOrEqual(serverOpenAfterDrain, 1)
        XCTAssertEqual(completed.count, total)
    }

    // MARK: 3. GOAWAY

    func testGoAwayFailsStreamsAboveLastStreamIDAsRetryableAndCompletesTheRest() throws {
        let pair = try HTTP2Pair()
        try pair.pump()
        var held: [HTTP2ServerRequest] = []
        pair.onServerEvent = { event, _ in
            if case .request(let request) = event { held.append(request) }
        }
        var streamIDs: [UInt64: Int32] = [:]
        for tag in UInt64(0)..<20 {
            streamIDs[tag] = try XCTUnwrap(pair.client.submit(HTTP2Pair.request("/g/\(tag)"), tag: tag))
        }
        try pair.moveClientToServer()
        XCTAssertEqual(held.count, 20)
        let last = try XCTUnwrap(streamIDs[9])
        pair.server.goAway(lastStreamID: last, errorCode: 0, debugData: "{\"reason\":\"Shutdown\"}")
        // Three more requests are submitted but not yet written when the GOAWAY arrives.
        for tag in UInt64(20)..<23 {
            streamIDs[tag] = try XCTUnwrap(pair.client.submit(HTTP2Pair.request("/g/\(tag)"), tag: tag))
        }
        try pair.moveServerToClient()
        XCTAssertTrue(pair.client.isGoingAway)
        XCTAssertFalse(pair.client.canOpenStream)
        XCTAssertEqual(pair.client.streamsAllowed, 0)
        XCTAssertNil(pair.client.submit(HTTP2Pair.request("/late"), tag: 99))

        for request in held where request.streamID <= last {
            pair.server.respond(streamID: request.streamID, status: 200, headers: [], body: Array(request.path.utf8))
        }
        try pair.pump()

        var goAways = 0
        var outcome: [UInt64: HTTP2ClientEvent] = [:]
        for event in pair.clientEvents {
            if case .goAway(let id, let code, let debug) = event {
                goAways += 1
                XCTAssertEqual(id, last)
                XCTAssertEqual(code, 0)
                XCTAssertEqual(debug, "{\"reason\":\"Shutdown\"}")
            }
            if let tag = event.tag {
                XCTAssertNil(outcome[tag], "one outcome per stream")
                outcome[tag] = event
            }
        }
        XCTAssertEqual(goAways, 1)
        XCTAssertEqual(outcome.count, 23)
        for (tag, event) in outcome {
            if streamIDs[tag]! <= last {
                XCTAssertEqual(event.response?.status, 200, "tag \(tag)")
            } else {
                XCTAssertEqual(event.failure, .goAwayUnprocessed, "tag \(tag)")
                XCTAssertEqual(event.failure?.isSafeToRetry, true)
            }
        }
        XCTAssertTrue(pair.clientEvents.last?.isClosed ?? false, "closed once every stream is done")
        XCTAssertTrue(pair.client.isClosed)
        XCTAssertEqual(pair.clientFrames.frames.filter { $0.type == WireFrame.headers && $0.streamID > last }.count, 10,
                       "the three queued requests never reach the wire")
    }

    // MARK: 4. REFUSED_STREAM

    func testNoStreamOpensBeforeThePeersSettingsAndItsLimitHoldsFromTheStart() throws {
        var serverLimits = Limits()
        serverLimits.streamsPerConnectionMax = 1
        let pair = try HTTP2Pair(serverLimits: serverLimits)
        // Before the server's SETTINGS arrive, nghttp2 would assume 100; we assume nothing.
        XCTAssertFalse(pair.client.canOpenStream)
        XCTAssertNil(pair.client.submit(HTTP2Pair.request("/early"), tag: 0))
        try pair.moveClientToServer()
        try pair.moveServerToClient()
        XCTAssertTrue(pair.client.peerSettingsReceived)
        XCTAssertEqual(pair.client.streamsAllowed, 1)
        XCTAssertNotNil(pair.client.submit(HTTP2Pair.request("/one"), tag: 1))
        XCTAssertFalse(pair.client.canOpenStream)
        XCTAssertNil(pair.client.submit(HTTP2Pair.request("/two"), tag: 2))
        try pair.pump()
        XCTAssertEqual(pair.clientEvents.filter { $0.tag == 1 }.first?.response?.status, 200)
        XCTAssertTrue(pair.client.canOpenStream)
    }

    func testRefusedStreamIsRetryable() throws {
        let pair = try HTTP2Pair()
        try pair.pump()
        pair.onServerEvent = { event, server in
            guard case .request(let request) = event else { return }
            if request.path == "/refuse" {
                server.refuse(streamID: request.streamID)
            } else {
                server.respond(streamID: request.streamID, status: 200, headers: [], body: [])
            }
        }
        XCTAssertNotNil(pair.client.submit(HTTP2Pair.request("/ok"), tag: 1))
        XCTAssertNotNil(pair.client.submit(HTTP2Pair.request("/refuse"), tag: 2))
        try pair.pump()
        let outcomes = pair.clientEvents.filter { $0.tag != nil }
        XCTAssertEqual(outcomes.count, 2)
        XCTAssertEqual(outcomes.first { $0.tag == 1 }?.response?.status, 200)
        XCTAssertEqual(outcomes.first { $0.tag == 1 }?.response?.body, [])
        let refused = try XCTUnwrap(outcomes.first { $0.tag == 2 }?.failure)
        XCTAssertEqual(refused, .refusedStream)
        XCTAssertTrue(refused.isSafeToRetry)
        XCTAssertEqual(pair.client.streamsOpen, 0)
        XCTAssertEqual(pair.server.streamsOpen, 0)
        XCTAssertFalse(pair.client.isClosed)
    }

    /// A proxy that contradicts itself: `:status` first, then RST_STREAM(REFUSED_STREAM) or a
    /// GOAWAY whose last-stream-id is below the stream. The stream was processed: not retryable.
    func testAStreamThatGotItsStatusIsNeverSafeToRetryWhateverFollows() throws {
        for viaGoAway in [false, true] {
            let pair = try HTTP2Pair()
            try pair.pump()
            pair.onServerEvent = { event, server in
                guard case .request(let request) = event else { return }
                server.sendStatusOnly(streamID: request.streamID, status: 200,
                                      thenReset: viaGoAway ? nil : HTTP2ServerSession.refusedStreamErrorCode)
                if viaGoAway { server.goAwayZeroAfterStatus(errorCode: 0, debugData: "") }
            }
            XCTAssertNotNil(pair.client.submit(HTTP2Pair.request("/cut"), tag: 1))
            try pair.pump()
            let failure = try XCTUnwrap(pair.clientEvents.first { $0.tag == 1 }?.failure, "viaGoAway \(viaGoAway)")
            XCTAssertEqual(failure, .cutAfterResponse(status: 200), "viaGoAway \(viaGoAway)")
            XCTAssertFalse(failure.isSafeToRetry)
            XCTAssertEqual(pair.clientFrames.frames.filter { $0.type == WireFrame.headers }.count, 1, "one request on the wire")
        }
    }

    /// A request that arrives while the half answer and its GOAWAY(0) are still queued (the
    /// server's writes held back) is refused, not processed: the GOAWAY will disown it, so the
    /// client may send it again, and the server must not have acted on it.
    func testAStreamOpenedBehindAQueuedGoAwayZeroIsRefusedUnprocessed() throws {
        let pair = try HTTP2Pair()
        try pair.pump()
        var processed: [String] = []
        pair.onServerEvent = { event, server in
            guard case .request(let request) = event else { return }
            processed.append(request.path)
            server.sendStatusOnly(streamID: request.streamID, status: 200, thenReset: nil)
            server.goAwayZeroAfterStatus(errorCode: 0, debugData: "")
        }
        XCTAssertNotNil(pair.client.submit(HTTP2Pair.request("/cut"), tag: 1))
        try pair.moveClientToServer()
        XCTAssertEqual(processed, ["/cut"])
        // The server has not written yet: the client opens another stream meanwhile.
        XCTAssertNotNil(pair.client.submit(HTTP2Pair.request("/later"), tag: 2))
        try pair.moveClientToServer()
        XCTAssertEqual(processed, ["/cut"], "a stream the GOAWAY(0) disowns was processed")
        try pair.pump()
        XCTAssertEqual(pair.clientEvents.first { $0.tag == 1 }?.failure, .cutAfterResponse(status: 200))
        let later = try XCTUnwrap(pair.clientEvents.first { $0.tag == 2 }?.failure)
        XCTAssertTrue(later.isSafeToRetry, "\(later)")
    }

    // MARK: 5. Flow control

    func testBodyStallsAtPeerWindowAndResumesOnWindowUpdate() throws {
        var serverLimits = Limits()
        serverLimits.windowBytes = 16_384
        serverLimits.requestBodyBytesMax = 200_000
        let pair = try HTTP2Pair(serverLimits: serverLimits)
        try pair.pump()

        var body = [UInt8](repeating: 0, count: 100_000)
        let random = SplitMix64(seed: 7)
        for i in body.indices { body[i] = UInt8(truncatingIfNeeded: random.next()) }
        XCTAssertNotNil(pair.client.submit(HTTP2Pair.request("/big", body: body), tag: 5))

        var stalls = 0
        var windowUpdatesBefore = pair.serverFrames.count(of: WireFrame.windowUpdate)
        for _ in 0..<1_000 {
            try pair.moveClientToServer()
            if pair.serverEvents.contains(where: { if case .request = $0 { return true } else { return false } }) { break }
            // The client said all it could: the stream window is spent, so nothing moves until
            // the server's WINDOW_UPDATE arrives.
            XCTAssertFalse(pair.client.wantsWrite)
            XCTAssertEqual(try pair.moveClientToServer(), 0, "no progress without a WINDOW_UPDATE")
            let dataBytes = pair.clientFrames.frames.filter { $0.type == WireFrame.data }.reduce(0) { $0 + $1.length }
            XCTAssertLessThan(dataBytes, body.count)
            stalls += 1
            try pair.moveServerToClient()
            let windowUpdates = pair.serverFrames.count(of: WireFrame.windowUpdate)
            XCTAssertGreaterThan(windowUpdates, windowUpdatesBefore, "the stall is cleared by a WINDOW_UPDATE")
            windowUpdatesBefore = windowUpdates
        }
        XCTAssertGreaterThanOrEqual(stalls, 100_000 / 16_384, "the body must have stopped at the window")
        let requests = pair.serverEvents.compactMap { event -> HTTP2ServerRequest? in
            if case .request(let request) = event { return request } else { return nil }
        }
        XCTAssertEqual(requests.count, 1)
        XCTAssertEqual(requests.first?.body, body)
        try pair.pump()
        XCTAssertEqual(pair.clientEvents.first { $0.tag == 5 }?.response?.body, Array("/big".utf8))
    }

    // MARK: 6. Per-request deadline

    func testRequestDeadlineResetsTheStreamAndFailsIt() throws {
        var clientLimits = Limits()
        clientLimits.requestTimeoutNanoseconds = 1_000_000_000
        let pair = try HTTP2Pair(clientLimits: clientLimits)
        try pair.pump()
        var hangingStreamID: Int32 = 0
        pair.onServerEvent = { event, server in
            guard case .request(let request) = event else { return }
            if request.path == "/hang" { hangingStreamID = request.streamID; return }
            server.respond(streamID: request.streamID, status: 200, headers: [], body: [])
        }
        pair.clock.advance(milliseconds: 10)
        let hang = try XCTUnwrap(pair.client.submit(HTTP2Pair.request("/hang"), tag: 1))
        XCTAssertNotNil(pair.client.submit(HTTP2Pair.request("/ok"), tag: 2))
        XCTAssertEqual(pair.client.nextDeadlineNanoseconds, 1_010_000_000)
        try pair.pump()
        XCTAssertEqual(hangingStreamID, hang)
        XCTAssertEqual(pair.clientEvents.first { $0.tag == 2 }?.response?.status, 200)
        XCTAssertNil(pair.clientEvents.first { $0.tag == 1 })

        pair.clock.advance(milliseconds: 999)
        pair.client.tick()
        pair.drainClientEvents()
        XCTAssertNil(pair.clientEvents.first { $0.tag == 1 }, "not before the deadline")

        pair.clock.advance(milliseconds: 2)
        pair.client.tick()
        pair.drainClientEvents()
        XCTAssertEqual(pair.clientEvents.first { $0.tag == 1 }?.failure, .deadlineExceeded)
        XCTAssertEqual(pair.client.streamsOpen, 0)
        try pair.pump()
        let rst = pair.clientFrames.frames.first { $0.type == WireFrame.rstStream && $0.streamID == hang }
        XCTAssertEqual(rst?.payloadPrefix, [0, 0, 0, 8], "RST_STREAM(CANCEL)")
        XCTAssertTrue(pair.serverEvents.contains {
            if case .streamCancelled(let id) = $0 { return id == hang } else { return false }
        })
        XCTAssertEqual(pair.server.streamsOpen, 0)
        XCTAssertEqual(pair.clientEvents.filter { $0.tag == 1 }.count, 1, "exactly one outcome")
    }

    // MARK: 7. PING liveness

    func testPingIsSentAfterSilenceAndItsAbsenceKillsTheConnection() throws {
        var clientLimits = Limits()
        clientLimits.pingIntervalNanoseconds = 5_000_000_000
        clientLimits.pingTimeoutNanoseconds = 2_000_000_000
        clientLimits.requestTimeoutNanoseconds = 60_000_000_000
        let pair = try HTTP2Pair(clientLimits: clientLimits)
        try pair.pump()
        XCTAssertEqual(pair.client.nextDeadlineNanoseconds, 5_000_000_000)

        pair.clock.advance(milliseconds: 4_999)
        pair.client.tick()
        XCTAssertFalse(pair.client.wantsWrite)
        pair.clock.advance(milliseconds: 1)
        pair.client.tick()
        XCTAssertTrue(pair.client.wantsWrite)
        try pair.moveClientToServer()
        XCTAssertEqual(pair.clientFrames.count(of: WireFrame.ping), 1)
        XCTAssertEqual(pair.client.nextDeadlineNanoseconds, 7_000_000_000)
        try pair.moveServerToClient()
        XCTAssertEqual(pair.serverFrames.count(of: WireFrame.ping, flags: WireFrame.ack), 1, "the server ACKs")

        pair.clock.advance(milliseconds: 3_000)
        pair.client.tick()
        pair.drainClientEvents()
        XCTAssertFalse(pair.clientEvents.contains { if case .pingTimedOut = $0 { return true } else { return false } })
        XCTAssertFalse(pair.client.isClosed)

        // Now the link goes dark: a request is in flight, then the next PING is lost.
        pair.onServerEvent = { _, _ in }
        XCTAssertNotNil(pair.client.submit(HTTP2Pair.request("/inflight"), tag: 7))
        try pair.moveClientToServer()
        pair.clock.advance(milliseconds: 5_000)
        pair.client.tick()
        pair.dropClientOutput()
        XCTAssertEqual(pair.clientFrames.count(of: WireFrame.ping), 2)
        pair.clock.advance(milliseconds: 1_999)
        pair.client.tick()
        XCTAssertFalse(pair.client.isClosed)
        pair.clock.advance(milliseconds: 1)
        pair.client.tick()
        pair.drainClientEvents()
        let tail = Array(pair.clientEvents.suffix(3))
        guard tail.count == 3, case .pingTimedOut = tail[0] else { return XCTFail("expected .pingTimedOut, got \(tail)") }
        XCTAssertEqual(tail[1].tag, 7)
        XCTAssertEqual(tail[1].failure, .connectionLost)
        XCTAssertTrue(tail[2].isClosed)
        XCTAssertTrue(pair.client.isClosed)
        XCTAssertNil(pair.client.nextDeadlineNanoseconds)
        XCTAssertNil(pair.client.submit(HTTP2Pair.request("/after"), tag: 8))
    }

    // MARK: 8. Transport loss

    func testConnectionLostSplitsWrittenFromUnwrittenStreams() throws {
        let pair = try HTTP2Pair()
        try pair.pump()
        pair.onServerEvent = { _, _ in }
        for tag in UInt64(1)...3 { XCTAssertNotNil(pair.client.submit(HTTP2Pair.request("/w/\(tag)"), tag: tag)) }
        try pair.moveClientToServer()
        // Tag 4: only the first byte of its HEADERS is handed out.
        XCTAssertNotNil(pair.client.submit(HTTP2Pair.request("/partial"), tag: 4))
        var one = [UInt8](repeating: 0, count: 1)
        XCTAssertEqual(one.withUnsafeMutableBytes { pair.client.produce(into: $0) }, 1)
        // Tag 5: submitted, nothing of it produced.
        XCTAssertNotNil(pair.client.submit(HTTP2Pair.request("/unsent"), tag: 5))
        pair.client.connectionLost()
        pair.drainClientEvents()
        let failures = Dictionary(uniqueKeysWithValues: pair.clientEvents.compactMap { event in
            event.failure.map { (event.tag!, $0) }
        })
        XCTAssertEqual(failures, [1: .connectionLost, 2: .connectionLost, 3: .connectionLost, 4: .connectionLost, 5: .notSent])
        XCTAssertTrue(pair.clientEvents.last?.isClosed ?? false)
        XCTAssertEqual(pair.clientEvents.filter(\.isClosed).count, 1)
        XCTAssertTrue(pair.client.isClosed)
        XCTAssertFalse(pair.client.wantsWrite)
        XCTAssertEqual(pair.client.streamsOpen, 0)
    }

    // MARK: 9. Graceful close

    func testGracefulCloseWaitsForStreamsThenSendsGoAway() throws {
        let pair = try HTTP2Pair()
        try pair.pump()
        var held: [HTTP2ServerRequest] = []
        pair.onServerEvent = { event, _ in
            if case .request(let request) = event { held.append(request) }
        }
        for tag in UInt64(1)...3 { XCTAssertNotNil(pair.client.submit(HTTP2Pair.request("/c/\(tag)"), tag: tag)) }
        try pair.moveClientToServer()
        pair.client.close()
        XCTAssertTrue(pair.client.isGoingAway)
        XCTAssertFalse(pair.client.canOpenStream)
        XCTAssertNil(pair.client.submit(HTTP2Pair.request("/late"), tag: 9))
        try pair.pump()
        XCTAssertEqual(pair.clientFrames.count(of: WireFrame.goAway), 0, "no GOAWAY while streams are open")
        XCTAssertFalse(pair.client.isClosed)

        for request in held { pair.server.respond(streamID: request.streamID, status: 200, headers: [], body: []) }
        try pair.pump()
        XCTAssertEqual(pair.clientEvents.compactMap(\.response).count, 3)
        XCTAssertTrue(pair.clientEvents.last?.isClosed ?? false, ".closed comes after the responses")
        let goAway = pair.clientFrames.frames.first { $0.type == WireFrame.goAway }
        XCTAssertEqual(goAway.map { Array($0.payloadPrefix[4..<8]) }, [0, 0, 0, 0], "GOAWAY(NO_ERROR)")
        XCTAssertTrue(pair.client.isClosed)
        XCTAssertTrue(pair.server.isClosed, "the server is done once the client's GOAWAY arrived and streams are closed")
        XCTAssertTrue(pair.serverEvents.contains { if case .closed = $0 { return true } else { return false } })
    }

    // MARK: 10. Hostile input

    func testGarbageToClientThrowsAndFailsOpenStreams() throws {
        let pair = try HTTP2Pair()
        try pair.pump()
        pair.onServerEvent = { _, _ in }
        XCTAssertNotNil(pair.client.submit(HTTP2Pair.request("/x"), tag: 1))
        try pair.moveClientToServer()
        XCTAssertNotNil(pair.client.submit(HTTP2Pair.request("/y"), tag: 2))

        let garbage = [UInt8](repeating: 0xFF, count: 64)
        XCTAssertThrowsError(try garbage.withUnsafeBytes { try pair.client.receive($0) }) { error in
            XCTAssertFalse(String(describing: error).isEmpty)
        }
        pair.drainClientEvents()
        XCTAssertEqual(pair.clientEvents.first { $0.tag == 1 }?.failure, .connectionLost)
        XCTAssertEqual(pair.clientEvents.first { $0.tag == 2 }?.failure, .notSent)
        XCTAssertTrue(pair.clientEvents.last?.isClosed ?? false)
        XCTAssertTrue(pair.client.isClosed)
        XCTAssertThrowsError(try garbage.withUnsafeBytes { try pair.client.receive($0) })
    }

    func testGarbageToServerThrows() throws {
        let server = try HTTP2ServerSession(limits: Limits())
        let garbage = Array("GET / HTTP/1.1\r\nHost: x\r\n\r\n".utf8)
        XCTAssertThrowsError(try garbage.withUnsafeBytes { try server.receive($0) })
        XCTAssertTrue(server.isClosed)
        var sawClosed = false
        server.takeEvents { if case .closed = $0 { sawClosed = true } }
        XCTAssertTrue(sawClosed)
    }

    func testSeededRandomInputNeverCrashesTheClient() throws {
        for seed in UInt64(1)...50 {
            let pair = try HTTP2Pair()
            try pair.pump()
            pair.onServerEvent = { _, _ in }
            XCTAssertNotNil(pair.client.submit(HTTP2Pair.request("/r"), tag: 1))
            try pair.moveClientToServer()
            let random = SplitMix64(seed: seed)
            var bytes = [UInt8](repeating: 0, count: 9 + Int(random.next(below: 200)))
            for i in bytes.indices { bytes[i] = UInt8(truncatingIfNeeded: random.next()) }
            do {
                try bytes.withUnsafeBytes { try pair.client.receive($0) }
            } catch {
                XCTAssertTrue(pair.client.isClosed, "seed \(seed): a thrown error closes the session")
            }
            // Whatever happened, the stream ends with exactly one outcome once the link is dropped.
            pair.client.connectionLost()
            pair.drainClientEvents()
            XCTAssertEqual(pair.clientEvents.filter { $0.tag == 1 }.count, 1, "seed \(seed)")
        }
    }

    // MARK: Bounds

    func testResponseBodyIsTruncatedAtTheLimit() throws {
        var clientLimits = Limits()
        clientLimits.responseBodyBytesMax = 10
        let pair = try HTTP2Pair(clientLimits: clientLimits)
        try pair.pump()
        pair.onServerEvent = { event, server in
            if case .request(let request) = event {
                server.respond(streamID: request.streamID, status: 400, headers: [HTTP2Header("apns-id", "abc")],
                               body: Array("{\"reason\":\"BadDeviceToken\"}".utf8))
            }
        }
        XCTAssertNotNil(pair.client.submit(HTTP2Pair.request("/t"), tag: 1))
        try pair.pump()
        let response = try XCTUnwrap(pair.clientEvents.first { $0.tag == 1 }?.response)
        XCTAssertEqual(response.status, 400)
        XCTAssertEqual(response.body, Array("{\"reason\":".utf8))
        XCTAssertTrue(response.bodyTruncated)
        XCTAssertEqual(response.header("APNS-ID"), "abc")
    }

    func testOversizedRequestBodyIsResetWithoutAnEvent() throws {
        var serverLimits = Limits()
        serverLimits.requestBodyBytesMax = 100
        let pair = try HTTP2Pair(serverLimits: serverLimits)
        try pair.pump()
        XCTAssertNotNil(pair.client.submit(HTTP2Pair.request("/big", body: [UInt8](repeating: 1, count: 101)), tag: 1))
        XCTAssertNotNil(pair.client.submit(HTTP2Pair.request("/fits", body: [UInt8](repeating: 1, count: 100)), tag: 2))
        try pair.pump()
        XCTAssertEqual(pair.serverEvents.count, 1)
        XCTAssertEqual(pair.clientEvents.first { $0.tag == 1 }?.failure, .reset(errorCode: 8))
        XCTAssertEqual(pair.clientEvents.first { $0.tag == 2 }?.response?.status, 200)
        XCTAssertEqual(pair.server.streamsOpen, 0)
    }

    func testOutputBackPressureStopsNewStreams() throws {
        var clientLimits = Limits()
        clientLimits.pendingOutputBytesMax = 4_096
        let pair = try HTTP2Pair(clientLimits: clientLimits)
        try pair.pump()
        var submitted = 0
        while pair.client.canOpenStream {
            XCTAssertNotNil(pair.client.submit(HTTP2Pair.request("/b", body: [UInt8](repeating: 2, count: 1_000)), tag: UInt64(submitted)))
            submitted += 1
        }
        XCTAssertGreaterThan(pair.client.outputPendingBytes, 4_096)
        XCTAssertLessThan(submitted, 10, "stops soon after 4 KiB is queued")
        XCTAssertLessThan(pair.client.streamsOpen, pair.client.streamsAllowed)
        XCTAssertNil(pair.client.submit(HTTP2Pair.request("/b"), tag: 99))
        try pair.moveClientToServer()
        XCTAssertEqual(pair.client.outputPendingBytes, 0)
        XCTAssertTrue(pair.client.canOpenStream)
    }
}

extension HTTP2SessionTests {
    /// After the preface, nghttp2 answers a connection error with GOAWAY and ignores the rest; the
    /// server session reports `.closed` once that GOAWAY is out.
    func testGarbageToServerAfterPrefaceEndsTheSessionWithGoAway() throws {
        let pair = try HTTP2Pair()
        try pair.pump()
        pair.onServerEvent = { _, _ in }
        XCTAssertNotNil(pair.client.submit(HTTP2Pair.request("/x"), tag: 1))
        try pair.moveClientToServer()
        XCTAssertEqual(pair.server.streamsOpen, 1)
        let garbage = [UInt8](repeating: 0xFF, count: 64)
        do {
            try garbage.withUnsafeBytes { try pair.server.receive($0) }
        } catch {
            XCTAssertTrue(pair.server.isClosed)
        }
        var output = [UInt8](repeating: 0, count: 4096)
        var scanner = FrameScanner(skipsClientPreface: false)
        while true {
            let n = output.withUnsafeMutableBytes { pair.server.produce(into: $0) }
            if n == 0 { break }
            output.withUnsafeBytes { scanner.scan(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
        }
        pair.drainServerEvents()
        XCTAssertTrue(pair.server.isClosed)
        XCTAssertTrue(pair.serverEvents.contains { if case .closed = $0 { return true } else { return false } })
        let goAway = try XCTUnwrap(scanner.frames.first { $0.type == WireFrame.goAway })
        XCTAssertNotEqual(Array(goAway.payloadPrefix[4..<8]), [0, 0, 0, 0], "GOAWAY carries an error code")
    }
}
