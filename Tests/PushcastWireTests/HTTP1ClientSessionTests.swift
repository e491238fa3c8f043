// HTTP1ClientSession in memory: requests as written, keep-alive, pipelining, chunked bodies,
// interim answers, and above all which requests a broken or closing connection leaves safe to send
// again (never one the server may have processed).

import PushcastCore
import PushcastWire
import XCTest

final class HTTP1ClientSessionTests: XCTestCase {
    func pipelined(_ depth: Int) -> HTTP1Limits {
        var http1 = HTTP1Limits()
        http1.pipelineDepth = depth
        return http1
    }

    // MARK: Requests

    func testRequestIsWrittenAsHTTP11WithHostHeadersAndContentLength() {
        let client = HTTP1Client()
        var request = HTTP2Request(authority: "push.example:8443", path: "/wpush/", pathSuffix: "v2/abc",
                                   headers: [HTTP2Header("TTL", "60"), HTTP2Header("Host", "other"), HTTP2Header("content-length", "99")],
                                   body: Array("{}".utf8))
        request.fixedHeaders = HTTP2HeaderTemplate([HTTP2Header("authorization", "vapid t=x, k=y")])
        request.packedHeader = HTTP2PackedHeader(name: "topic", value: PackedText("news"))
        XCTAssertEqual(client.submit(request, tag: 1), 1)
        client.flush()
        XCTAssertEqual(client.writtenText, "POST /wpush/v2/abc HTTP/1.1\r\nHost: push.example:8443\r\nauthorization: vapid t=x, k=y\r\n"
                       + "TTL: 60\r\ntopic: news\r\nContent-Length: 2\r\n\r\n{}")
        client.feed(answer(201))
        XCTAssertEqual(client.lines(), ["response 1 201 "])

        XCTAssertEqual(client.submit(HTTP1Client.request("/status", body: "", method: "GET", headers: []), tag: 2), 2)
        let before = client.written.count
        client.flush()
        XCTAssertEqual(String(decoding: client.written[before...], as: UTF8.self), "GET /status HTTP/1.1\r\nHost: push.example\r\n\r\n")
    }

    /// A Web Push endpoint is the token: the target leaves out its origin (`pathSuffixSkip`), as
    /// the HTTP/2 session's `:path` does.
    func testTheTargetLeavesOutTheSkippedPrefixOfTheSuffix() {
        let client = HTTP1Client()
        var request = HTTP2Request(authority: "push.example:8443", path: "", pathSuffix: "https://push.example:8443/wpush/v2/abc",
                                   body: Array("x".utf8))
        request.pathSuffixSkip = "https://push.example:8443".utf8.count
        XCTAssertNil(HTTP1ClientSession.problem(in: request))
        XCTAssertEqual(client.submit(request, tag: 1), 1)
        client.flush()
        XCTAssertEqual(client.writtenText, "POST /wpush/v2/abc HTTP/1.1\r\nHost: push.example:8443\r\nContent-Length: 1\r\n\r\nx")
        request.pathSuffixSkip = 500
        XCTAssertEqual(HTTP1ClientSession.problem(in: request), "an empty method, path or authority")
    }

    func testRequestsThatWouldInjectBytesAreRefusedAndNothingIsWritten() {
        let client = HTTP1Client()
        var packed = HTTP1Client.request()
        packed.packedHeader = HTTP2PackedHeader(name: "topic", value: PackedText("a\rb"))
        let refused: [(HTTP2Request, String)] = [
            (HTTP1Client.request(headers: [HTTP2Header("ttl", "60\r\nX-Injected: 1")]), "ttl"),
            (HTTP1Client.request("/a b"), "path"),
            (HTTP2Request(authority: "push.example", path: "/", pathSuffix: "x\ny"), "path"),
            (HTTP1Client.request(headers: [HTTP2Header("bad name", "x")]), "header name"),
            (HTTP1Client.request(headers: [HTTP2Header("", "x")]), "empty header name"),
            (HTTP1Client.request(method: "PO ST"), "method"),
            (HTTP2Request(authority: "push\u{0}.example", path: "/"), "authority"),
            (HTTP2Request(authority: "push.example", path: ""), "empty method, path or authority"),
            (packed, "topic"),
        ]
        for (request, what) in refused {
            let problem = HTTP1ClientSession.problem(in: request)
            XCTAssertTrue(problem?.contains(what) ?? false, "\(what): \(problem ?? "no problem")")
            XCTAssertNil(client.submit(request, tag: 9), what)
            XCTAssertEqual(client.session.outputPendingBytes, 0, what)
            XCTAssertEqual(client.session.streamsOpen, 0, what)
        }
        XCTAssertNil(HTTP1ClientSession.problem(in: HTTP1Client.request()))
        XCTAssertEqual(client.submit(tag: 1), 1)
        client.flush()
        XCTAssertTrue(client.writtenText.hasPrefix("POST /push/abc HTTP/1.1\r\n"))
        XCTAssertEqual(client.lines(), [])
    }

    func testRequestsAddedWhileEarlierOnesAreHalfWrittenKeepTheirBytesAndBounds() {
        // Each request outgrows the output buffer's first size, so making room moves the bytes
        // still pending; a refused request in between leaves nothing behind.
        let client = HTTP1Client(http1: pipelined(3))
        let bodies = ["a", "b", "c"].map { String(repeating: $0, count: 3000) }
        XCTAssertNotNil(client.submit(HTTP1Client.request("/1", body: bodies[0]), tag: 1))
        client.flush(limit: 2000)
        let refused = HTTP1Client.request("/x", headers: [HTTP2Header("long", String(repeating: "v", count: 2000)), HTTP2Header("bad", "\r\n")])
        XCTAssertNil(client.submit(refused, tag: 9))
        XCTAssertNotNil(client.submit(HTTP1Client.request("/2", body: bodies[1]), tag: 2))
        client.flush(limit: 2000)
        let beforeThird = client.written.count + client.session.outputPendingBytes
        XCTAssertNotNil(client.submit(HTTP1Client.request("/3", body: bodies[2]), tag: 3))
        client.flush(limit: beforeThird - client.written.count)
        XCTAssertEqual(client.written.count, beforeThird, "requests 1 and 2 are out, no byte of 3")
        XCTAssertEqual(client.writtenText, ["1", "2"].enumerated().map { index, path in
            "POST /\(path) HTTP/1.1\r\nHost: push.example\r\nttl: 60\r\nContent-Length: 3000\r\n\r\n" + bodies[index]
        }.joined())
        client.session.connectionLost()
        XCTAssertEqual(client.lines(), ["failed 1 connectionLost", "failed 2 connectionLost", "failed 3 notSent", "closed"])
    }

    // MARK: Keep-alive and pipelining

    func testKeepAliveCarriesRequestsOneAtATime() {
        let client = HTTP1Client()
        for turn in 1...5 {
            XCTAssertTrue(client.session.canOpenStream)
            XCTAssertEqual(client.submit(tag: UInt64(turn)), Int32(turn))
            XCTAssertFalse(client.session.canOpenStream, "one request in flight by default")
            XCTAssertNil(client.submit(tag: 99))
            client.flush()
            client.feed(answer(200, "ok\(turn)"))
            XCTAssertEqual(client.lines(), ["response \(turn) 200 ok\(turn)"])
        }
        XCTAssertFalse(client.session.isGoingAway)
        XCTAssertEqual(client.writtenText.components(separatedBy: "POST /push/abc HTTP/1.1\r\n").count, 6)
    }

    func testPipelinedAnswersMatchTheirRequestsInOrder() {
        let client = HTTP1Client(http1: pipelined(3))
        for tag in 1...3 { XCTAssertNotNil(client.submit(HTTP1Client.request("/\(tag)"), tag: UInt64(tag))) }
        XCTAssertFalse(client.session.canOpenStream)
        XCTAssertEqual(client.session.streamsAllowed, 3)
        client.flush()
        let answers = answer(200, "one") + answer(404, "two", headers: ["Retry-After: 7"]) + answer(410, "three")
        client.feed(Array(answers.utf8), splits: [10, 60, 61, 100])
        XCTAssertEqual(client.lines(), ["response 1 200 one", "response 2 404 two retry-after=7", "response 3 410 three"])
        XCTAssertTrue(client.session.canOpenStream)
    }

    func testOutputBackPressureStopsNewRequests() {
        var limits = Limits()
        limits.pendingOutputBytesMax = 1024
        let client = HTTP1Client(limits: limits, http1: pipelined(8))
        let big = HTTP1Client.request(body: String(repeating: "x", count: 600))
        XCTAssertNotNil(client.submit(big, tag: 1))
        XCTAssertNotNil(client.submit(big, tag: 2))
        XCTAssertGreaterThan(client.session.outputPendingBytes, 1024)
        XCTAssertFalse(client.session.canOpenStream)
        XCTAssertNil(client.submit(big, tag: 3))
        client.flush()
        XCTAssertTrue(client.session.canOpenStream)
    }

    // MARK: Bodies

    func testChunkedBodyWithExtensionsAndTrailers() {
        let client = HTTP1Client.sending()
        client.feed("HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\nRetry-After: 30\r\n\r\n5;name=value;x=\"q\"\r\nhello\r\n"
                    + "1 ; ext\r\n,\r\n006\r\n world\r\n0;last=1\r\nExpires: never\r\nRetry-After: 99\r\n\r\n")
        XCTAssertEqual(client.lines(), ["response 1 200 hello, world retry-after=30"], "trailers are read and dropped")
        client.submit(tag: 2)
        client.flush()
        client.feed(answer(200, "next"))
        XCTAssertEqual(client.lines(), ["response 2 200 next"])
    }

    func testInterimAnswersAreSkipped() {
        let client = HTTP1Client.sending()
        client.feed("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\nRetry-After: 5\r\nConnection: close\r\n\r\n"
                    + "HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok")
        XCTAssertEqual(client.lines(), ["response 1 201 ok"], "a 1xx answer's fields are dropped")
        XCTAssertFalse(client.session.isGoingAway)
    }

    func testHeadAnd204And304AnswersHaveNoBody() {
        let client = HTTP1Client(http1: pipelined(4))
        client.submit(HTTP1Client.request(body: "", method: "HEAD"), tag: 1)
        for tag in 2...4 { client.submit(tag: UInt64(tag)) }
        client.flush()
        client.feed("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nHTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n"
                    + "HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n" + answer(200, "body"))
        XCTAssertEqual(client.lines(), ["response 1 200 ", "response 2 204 ", "response 3 304 ", "response 4 200 body"])
    }

    func testBodyIsKeptUpToTheLimitAndMarkedTruncated() {
        var limits = Limits()
        limits.responseBodyBytesMax = 4
        let client = HTTP1Client.sending(limits: limits)
        client.feed(answer(400, "abcdefgh"))
        XCTAssertEqual(client.lines(), ["response 1 400 abcd truncated"])
    }

    func testFieldNamesAndConnectionOptionsIgnoreCase() {
        var limits = Limits()
        limits.responseHeadersKeptOnSuccess = false
        let client = HTTP1Client.sending(3, limits: limits)
        client.feed("HTTP/1.1 200 OK\r\nCONTENT-length: 1\r\nRETRY-after:   3  \r\n\r\nx"
                    + "HTTP/1.1 429 Too Many\r\ncontent-LENGTH: 2, 2\r\nretry-AFTER:3\r\n\r\nyy"
                    + "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nconnection: Keep-Alive, CLOSE\r\n\r\n")
        XCTAssertEqual(client.lines(), ["response 1 200 x", "response 2 429 yy retry-after=3", "response 3 200 ",
                                        "goAway 3 Connection: close", "closed"])
    }

    func testBareLineFeedsAndAnEmptyReasonAreAccepted() {
        let client = HTTP1Client.sending(2)
        client.feed("HTTP/1.1 200 OK\nContent-Length: 2\n\nok" + "HTTP/1.1 202\r\nTransfer-Encoding: chunked\n\n2\nab\n0\n\n")
        XCTAssertEqual(client.lines(), ["response 1 200 ok", "response 2 202 ab"])
    }

    // MARK: Which requests are safe to send again

    func testConnectionCloseFailsWrittenLaterRequestsAsUnprocessedAndUnwrittenAsNotSent() {
        for partly in [false, true] {
            let client = HTTP1Client(http1: pipelined(3))
            client.submit(tag: 1)
            let first = client.session.outputPendingBytes
            client.submit(tag: 2)
            let firstTwo = client.session.outputPendingBytes
            client.submit(tag: 3)
            client.flush(limit: partly ? first + 5 : firstTwo)
            client.feed(answer(200, "a", headers: ["Connection: close"]))
            XCTAssertEqual(client.lines(), ["response 1 200 a", "goAway 1 Connection: close", "failed 2 goAwayUnprocessed",
                                            "failed 3 notSent", "closed"], "partly \(partly)")
            XCTAssertTrue(client.session.isClosed)
            XCTAssertFalse(client.session.wantsWrite)
            XCTAssertEqual(client.flush(), 0, "nothing more is written")
            XCTAssertTrue(HTTP2StreamFailure.goAwayUnprocessed.isSafeToRetry && HTTP2StreamFailure.notSent.isSafeToRetry)
        }
    }

    func testALostConnectionLeavesWrittenRequestsUnknownAndUnwrittenOnesSafe() {
        let client = HTTP1Client(http1: pipelined(3))
        client.submit(tag: 1)
        client.submit(tag: 2)
        let firstTwo = client.session.outputPendingBytes
        client.submit(tag: 3)
        client.flush(limit: firstTwo)
        client.feed(answer(200, "a"))
        XCTAssertEqual(client.lines(), ["response 1 200 a"])
        client.session.connectionLost()
        XCTAssertEqual(client.lines(), ["failed 2 connectionLost", "failed 3 notSent", "closed"])
        XCTAssertFalse(HTTP2StreamFailure.connectionLost.isSafeToRetry)
    }

    func testTheServerClosingMidAnswerCutsItAfterItsStatus() {
        let cuts: [(String, String)] = [
            ("", "connectionLost"),
            ("HTTP/1.1 200 O", "connectionLost"),
            ("HTTP/1.1 100 Continue\r\n\r\n", "connectionLost"),
            ("HTTP/1.1 200 OK\r\n", "cutAfterResponse(status: 200)"),
            ("HTTP/1.1 410 Gone\r\nContent-Length: 10\r\n\r\nabcd", "cutAfterResponse(status: 410)"),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", "cutAfterResponse(status: 200)"),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX-Trailer: 1\r\n", "cutAfterResponse(status: 200)"),
        ]
        for (sent, failure) in cuts {
            for clean in [true, false] {
                let client = HTTP1Client.sending()
                client.feed(sent)
                if clean { client.session.receiveEnd() } else { client.session.connectionLost() }
                XCTAssertEqual(client.lines(), ["failed 1 \(failure)", "closed"], "\(sent.debugDescription) clean \(clean)")
            }
        }
        let unsent = HTTP1Client()
        unsent.submit(tag: 1)
        unsent.session.receiveEnd()
        XCTAssertEqual(unsent.lines(), ["failed 1 notSent", "closed"])
    }

    func testAnAnswerThatRunsToTheCloseEndsOnlyOnACleanEnd() {
        for version in ["1.0", "1.1"] {
            let client = HTTP1Client.sending()
            client.feed("HTTP/\(version) 200 OK\r\nContent-Type: text/plain\r\n\r\nbody to the ")
            client.feed("close")
            XCTAssertEqual(client.lines(), [], "the body has no end yet")
            client.session.receiveEnd()
            XCTAssertEqual(client.lines(), ["response 1 200 body to the close content-type=text/plain",
                                            "goAway 1 the answer ends the connection", "closed"])

            let cut = HTTP1Client.sending()
            cut.feed("HTTP/\(version) 200 OK\r\n\r\nbody to the ")
            cut.session.connectionLost()
            XCTAssertEqual(cut.lines(), ["failed 1 cutAfterResponse(status: 200)", "closed"], "a lost connection is no end of the body")
        }
    }

    func testAnHTTP10AnswerEndsTheConnectionUnlessItKeepsItAlive() {
        let client = HTTP1Client.sending(2)
        client.feed("HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok")
        XCTAssertEqual(client.lines(), ["response 1 200 ok", "goAway 1 the answer ends the connection",
                                        "failed 2 connectionLost", "closed"], "an HTTP/1.0 server promises nothing of request 2")

        let kept = HTTP1Client.sending()
        kept.feed("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok")
        kept.submit(tag: 2)
        kept.flush()
        kept.feed("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n")
        XCTAssertEqual(kept.lines(), ["response 1 200 ok", "response 2 200 "])
    }

    func testAnAnswerBeforeTheWholeRequestWentOutEndsTheConnection() {
        let client = HTTP1Client(http1: pipelined(2))
        client.submit(tag: 1)
        let first = client.session.outputPendingBytes
        client.submit(tag: 2)
        client.flush(limit: first - 3)
        client.feed(answer(413))
        XCTAssertEqual(client.lines(), ["response 1 413 ", "failed 2 notSent", "closed"],
                       "the rest of request 1 would read as a new request")
    }

    func testBytesNoRequestWaitsForEndTheConnection() {
        let idle = HTTP1Client()
        idle.feed(answer(408))
        XCTAssertEqual(idle.session.protocolError, .unsolicitedResponse)
        XCTAssertEqual(idle.errors.count, 1)
        XCTAssertEqual(idle.lines(), ["closed"])

        let unsent = HTTP1Client()
        unsent.submit(tag: 1)
        unsent.feed(answer(200))
        XCTAssertEqual(unsent.lines(), ["failed 1 notSent", "closed"], "an answer before the request went out answers nothing")

        let answered = HTTP1Client.sending()
        answered.feed(answer(200, "a") + "HTTP/1.1 200 OK\r\n")
        XCTAssertEqual(answered.lines(), ["response 1 200 a", "closed"])
        XCTAssertEqual(answered.session.protocolError, .unsolicitedResponse)
        XCTAssertThrowsError(try [UInt8]("x".utf8).withUnsafeBytes { try answered.session.receive($0) })
    }

    // MARK: Time and closing

    func testTheDeadlineFailsTheOldestRequestAndEndsTheConnection() {
        for written in [true, false] {
            var limits = Limits()
            limits.requestTimeoutNanoseconds = 1_000_000_000
            let client = HTTP1Client(limits: limits, http1: pipelined(2))
            client.clock.advance(milliseconds: 5)
            client.submit(tag: 1)
            client.submit(tag: 2)
            if written { client.flush() }
            XCTAssertEqual(client.session.nextDeadlineNanoseconds, 1_005_000_000)
            client.clock.advance(milliseconds: 999)
            client.session.tick()
            XCTAssertEqual(client.lines(), [])
            client.clock.advance(milliseconds: 1)
            client.session.tick()
            XCTAssertEqual(client.lines(), written ? ["failed 1 deadlineExceeded", "failed 2 connectionLost", "closed"]
                                                   : ["failed 1 notSent", "failed 2 notSent", "closed"])
            XCTAssertNil(client.session.nextDeadlineNanoseconds)
        }
    }

    func testAnIdleConnectionClosesItself() {
        let client = HTTP1Client()
        XCTAssertEqual(client.session.nextDeadlineNanoseconds, 4_000_000_000)
        client.clock.advance(milliseconds: 3000)
        client.submit(tag: 1)
        client.flush()
        client.clock.advance(milliseconds: 2000)
        client.feed(answer(200))
        XCTAssertEqual(client.lines(), ["response 1 200 "])
        XCTAssertEqual(client.session.nextDeadlineNanoseconds, 9_000_000_000, "idle from the answer on")
        client.clock.advance(milliseconds: 3999)
        client.session.tick()
        XCTAssertEqual(client.lines(), [])
        client.clock.advance(milliseconds: 1)
        client.session.tick()
        XCTAssertEqual(client.lines(), ["closed"])

        var never = HTTP1Limits()
        never.idleCloseNanoseconds = .max
        let kept = HTTP1Client(http1: never)
        kept.clock.advance(milliseconds: 1)
        XCTAssertEqual(kept.session.nextDeadlineNanoseconds, .max)
        kept.clock.advance(nanoseconds: 1 << 62)
        kept.session.tick()
        XCTAssertEqual(kept.lines(), [])
    }

    func testGracefulCloseWaitsForTheAnswerInFlight() {
        let client = HTTP1Client.sending()
        client.session.close()
        XCTAssertTrue(client.session.isGoingAway)
        XCTAssertFalse(client.session.canOpenStream)
        XCTAssertEqual(client.lines(), [])
        client.feed(answer(200, "ok"))
        XCTAssertEqual(client.lines(), ["response 1 200 ok", "closed"])

        let idle = HTTP1Client()
        idle.session.close()
        XCTAssertEqual(idle.lines(), ["closed"])
    }

    // MARK: Hostile input

    func testRandomBytesNeverCrashAndEveryRequestEndsOnce() {
        let random = SplitMix64(seed: 0x4854_5450)
        let alphabet = Array("HTTP/1.1 200 OK\r\n\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n0123456789abcdef;: \t\0\r\n".utf8)
        for trial in 0..<300 {
            let client = HTTP1Client(http1: pipelined(1 + Int(random.next(below: 3))))
            var tags = 0
            while client.session.canOpenStream { tags += 1; client.submit(tag: UInt64(tags)) }
            client.flush()
            var input = Array(answer(200, "hi").utf8)
            let garbage = (0..<Int(random.next(below: 200))).map { _ in
                random.next(below: 4) == 0 ? UInt8(truncatingIfNeeded: random.next()) : alphabet[Int(random.next(below: UInt64(alphabet.count)))]
            }
            input.insert(contentsOf: garbage, at: Int(random.next(below: UInt64(input.count + 1))))
            client.feed(input, splits: (0..<input.count).filter { _ in random.next(below: 5) == 0 })
            client.session.receiveEnd()
            let lines = client.lines()
            XCTAssertEqual(lines.last, "closed", "trial \(trial)")
            XCTAssertEqual(lines.filter { $0 == "closed" }.count, 1, "trial \(trial)")
            let ended = lines.compactMap { line -> String? in
                let words = line.split(separator: " ")
                return words[0] == "response" || words[0] == "failed" ? String(words[1]) : nil
            }
            XCTAssertEqual(ended, (1...tags).map(String.init), "trial \(trial): each request ends once, in order")
        }
    }
}
