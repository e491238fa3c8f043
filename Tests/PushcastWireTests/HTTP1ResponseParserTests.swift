// The HTTP/1.1 response parser through the client session: every bound, every malformed answer,
// any split of the input, and a differential test of generated answers written and read back.

import PushcastCore
import PushcastWire
import XCTest

final class HTTP1ResponseParserTests: XCTestCase {
    /// One request answered by `input`, fed whole, then byte by byte: the same lines and error
    /// either way.
    func exchange(_ input: String, limits: Limits = Limits(), http1: HTTP1Limits = HTTP1Limits(),
                  file: StaticString = #filePath, line: UInt = #line) -> (lines: [String], error: HTTP1ResponseError?) {
        var results: [([String], HTTP1ResponseError?)] = []
        for bytewise in [false, true] {
            let client = HTTP1Client.sending(limits: limits, http1: http1)
            if bytewise { client.feedBytewise(Array(input.utf8)) } else { client.feed(input) }
            results.append((client.lines(), client.session.protocolError))
        }
        XCTAssertEqual(results[0].0, results[1].0, "whole and byte by byte differ", file: file, line: line)
        XCTAssertEqual(results[0].1, results[1].1, "whole and byte by byte differ", file: file, line: line)
        return results[0]
    }

    func headers(_ count: Int, bytes: Int = 10) -> String {
        (0..<count).map { "X-\($0): " + String(repeating: "v", count: bytes) + "\r\n" }.joined()
    }

    // MARK: Bounds

    func testEveryBoundEndsTheConnectionWithItsFailure() {
        var http1 = HTTP1Limits()
        http1.statusLineBytesMax = 30
        http1.headerLineBytesMax = 40
        http1.headerCountMax = 3
        http1.chunkSizeDigitsMax = 4
        http1.chunkLineBytesMax = 16
        http1.chunksMax = 2
        http1.interimResponsesMax = 2
        var limits = Limits()
        limits.responseBodyBytesAccepted = 100
        limits.responseHeaderBytesAccepted = 120
        let chunked = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        let cases: [(String, HTTP1ResponseError, String)] = [
            ("HTTP/1.1 200 " + String(repeating: "r", count: 18) + "\r\n\r\n", .statusLineTooLong, "responseHeadersTooLarge"),
            ("HTTP/1.1 200 OK\r\nX-Long: " + String(repeating: "a", count: 33) + "\r\n\r\n", .headerLineTooLong, "responseHeadersTooLarge"),
            ("HTTP/1.1 200 OK\r\n" + headers(4) + "\r\n", .tooManyHeaders, "responseHeadersTooLarge"),
            ("HTTP/1.1 200 OK\r\n" + headers(3, bytes: 30) + "\r\n", .headersTooLarge, "responseHeadersTooLarge"),
            ("HTTP/1.1 200 OK\r\nContent-Length: 101\r\n\r\n", .bodyTooLarge, "responseBodyTooLarge"),
            ("HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\n", .bodyTooLarge, "responseBodyTooLarge"),
            (chunked + "3c\r\n" + String(repeating: "b", count: 60) + "\r\n29\r\n", .bodyTooLarge, "responseBodyTooLarge"),
            ("HTTP/1.1 200 OK\r\n\r\n" + String(repeating: "c", count: 101), .bodyTooLarge, "responseBodyTooLarge"),
            (chunked + "00001\r\n", .chunkSizeTooLong, "responseBodyTooLarge"),
            (chunked + "1;" + String(repeating: "e", count: 15) + "\r\n", .chunkLineTooLong, "cutAfterResponse(status: 200)"),
            (chunked + "1\r\na\r\n1\r\nb\r\n1\r\n", .tooManyChunks, "responseBodyTooLarge"),
            (chunked + "0\r\n" + headers(4) + "\r\n", .tooManyHeaders, "responseHeadersTooLarge"),
            (String(repeating: "HTTP/1.1 100 Continue\r\n\r\n", count: 3), .tooManyInterimResponses, "connectionLost"),
        ]
        for (input, error, failure) in cases {
            let (lines, thrown) = exchange(input, limits: limits, http1: http1)
            XCTAssertEqual(thrown, error, input.debugDescription)
            XCTAssertEqual(lines, ["failed 1 \(failure)", "closed"], input.debugDescription)
        }
        // Just inside every bound.
        let fits = "HTTP/1.1 200 " + String(repeating: "r", count: 17) + "\r\nX-Long: " + String(repeating: "a", count: 32) + "\r\n"
            + "Transfer-Encoding: chunked\r\n\r\n" + "0032;" + String(repeating: "e", count: 11) + "\r\n" + String(repeating: "b", count: 50)
            + "\r\n32\r\n" + String(repeating: "b", count: 50) + "\r\n0\r\n" + headers(3) + "\r\n"
        XCTAssertEqual(exchange(fits, limits: limits, http1: http1).lines, ["response 1 200 " + String(repeating: "b", count: 100)])
    }

    func testALineWithoutEndIsCaughtAtItsBoundWhateverTheSplit() {
        var http1 = HTTP1Limits()
        http1.headerLineBytesMax = 64
        let client = HTTP1Client.sending(http1: http1)
        client.feed("HTTP/1.1 200 OK\r\nX: ")
        for _ in 0..<100 where !client.session.isClosed { client.feed("aaaaaaaaaa") }
        XCTAssertEqual(client.session.protocolError, .headerLineTooLong)
        XCTAssertEqual(client.lines(), ["failed 1 responseHeadersTooLarge", "closed"])
    }

    // MARK: Malformed answers

    func testMalformedAnswersEndTheConnection() {
        let ok = "HTTP/1.1 200 OK\r\n"
        let cases: [(String, HTTP1ResponseError, String)] = [
            (ok + "X-A: 1\r\n  folded\r\nContent-Length: 0\r\n\r\n", .obsoleteLineFolding, "cutAfterResponse(status: 200)"),
            (ok + "X-A: 1\r\n\tfolded\r\n\r\n", .obsoleteLineFolding, "cutAfterResponse(status: 200)"),
            (ok + "Content-Length : 0\r\n\r\n", .malformedHeaderLine, "cutAfterResponse(status: 200)"),
            (ok + ": empty name\r\n\r\n", .malformedHeaderLine, "cutAfterResponse(status: 200)"),
            (ok + "No colon\r\n\r\n", .malformedHeaderLine, "cutAfterResponse(status: 200)"),
            (ok + "X-A: a\rb\r\n\r\n", .malformedHeaderLine, "cutAfterResponse(status: 200)"),
            (ok + "X-A: a\u{0}b\r\n\r\n", .malformedHeaderLine, "cutAfterResponse(status: 200)"),
            (ok + "Content-Length: 12a\r\n\r\n", .invalidContentLength, "cutAfterResponse(status: 200)"),
            (ok + "Content-Length: -1\r\n\r\n", .invalidContentLength, "cutAfterResponse(status: 200)"),
            (ok + "Content-Length:\r\n\r\n", .invalidContentLength, "cutAfterResponse(status: 200)"),
            (ok + "Content-Length: 5, 6\r\n\r\n", .invalidContentLength, "cutAfterResponse(status: 200)"),
            (ok + "Content-Length: 5\r\nContent-Length: 6\r\n\r\n", .invalidContentLength, "cutAfterResponse(status: 200)"),
            (ok + "Content-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n", .conflictingFraming, "cutAfterResponse(status: 200)"),
            ("HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", .conflictingFraming, "cutAfterResponse(status: 200)"),
            (ok + "Transfer-Encoding: gzip, chunked\r\n\r\n", .unsupportedTransferEncoding, "cutAfterResponse(status: 200)"),
            (ok + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", .unsupportedTransferEncoding,
             "cutAfterResponse(status: 200)"),
            (ok + "Transfer-Encoding: identity\r\n\r\n", .unsupportedTransferEncoding, "cutAfterResponse(status: 200)"),
            (ok + "Transfer-Encoding: chunked\r\n\r\n5\r\nhelloX\r\n", .malformedChunk, "cutAfterResponse(status: 200)"),
            (ok + "Transfer-Encoding: chunked\r\n\r\ng\r\n", .malformedChunk, "cutAfterResponse(status: 200)"),
            (ok + "Transfer-Encoding: chunked\r\n\r\n5 x\r\n", .malformedChunk, "cutAfterResponse(status: 200)"),
            (ok + "Transfer-Encoding: chunked\r\n\r\n;x\r\n", .malformedChunk, "cutAfterResponse(status: 200)"),
            ("HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n", .switchingProtocols, "connectionLost"),
            ("HTTP/1.1 600 Nope\r\n\r\n", .malformedStatusLine, "connectionLost"),
            ("HTTP/1.1 099 Nope\r\n\r\n", .malformedStatusLine, "connectionLost"),
            ("HTTP/2.0 200 OK\r\n\r\n", .malformedStatusLine, "connectionLost"),
            ("HTTP/1.1 20 OK\r\n\r\n", .malformedStatusLine, "connectionLost"),
            ("HTTP/1.1 200OK\r\n\r\n", .malformedStatusLine, "connectionLost"),
            ("HTTP/1.1 200 O\u{1}K\r\n\r\n", .malformedStatusLine, "connectionLost"),
            ("http/1.1 200 OK\r\n\r\n", .malformedStatusLine, "connectionLost"),
            ("\r\nHTTP/1.1 200 OK\r\n\r\n", .malformedStatusLine, "connectionLost"),
            ("<html>hello</html>\r\n", .malformedStatusLine, "connectionLost"),
        ]
        for (input, error, failure) in cases {
            let (lines, thrown) = exchange(input)
            XCTAssertEqual(thrown, error, input.debugDescription)
            XCTAssertEqual(lines, ["failed 1 \(failure)", "closed"], input.debugDescription)
        }
    }

    // MARK: Splits

    func testAnswersReadTheSameWhateverTheSplit() {
        let streams = [
            answer(200, "one") + answer(400, #"{"reason":"bad"}"#, headers: ["Content-Type: application/json"]) + answer(204) + answer(201, "x"),
            "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;a=b\r\nabc\r\n0\r\nT: 1\r\n\r\n"
                + answer(500, "e") + "HTTP/1.1 200 OK\nContent-Length: 1\n\nz" + answer(202),
            answer(429, "slow", headers: ["Retry-After: 120"]) + answer(200) + answer(200, "a", headers: ["Connection: close"]) + "garbage",
        ]
        let random = SplitMix64(seed: 0x5350_4C49_54)
        for stream in streams {
            let bytes = Array(stream.utf8)
            var reference: [String]? = nil
            for pass in 0..<40 {
                let splits: [Int]
                switch pass {
                case 0: splits = []
                case 1: splits = Array(0..<bytes.count)
                default: splits = (0..<bytes.count).filter { _ in random.next(below: UInt64(1 + pass % 8)) == 0 }
                }
                let client = HTTP1Client.sending(4)
                client.feed(bytes, splits: splits)
                client.session.receiveEnd()
                let lines = client.lines()
                if let reference { XCTAssertEqual(lines, reference, "pass \(pass)") } else { reference = lines }
            }
            XCTAssertEqual(reference?.filter { $0.hasPrefix("response") || $0.hasPrefix("failed") }.count, 4, stream.debugDescription)
        }
    }

    // MARK: Differential

    /// Random well-formed answers (statuses, 1xx, fields in any case and spacing, kept and noise
    /// fields, Content-Length or chunked with extensions and trailers, any body bytes, CRLF or
    /// LF, the last one sometimes running to the close) are written, fed at random splits, and
    /// must read back as generated.
    func testGeneratedAnswersReadBackAsWritten() {
        let random = SplitMix64(seed: 0x4854_5450_3131)
        for trial in 0..<300 {
            let count = 1 + Int(random.next(below: 6))
            var stream: [UInt8] = []
            var expected: [String] = []
            let closeDelimited = random.next(below: 4) == 0
            for index in 1...count {
                let generated = GeneratedAnswer(random, runsToClose: closeDelimited && index == count)
                stream += generated.bytes
                expected.append("response \(index) " + generated.expected)
            }
            if closeDelimited { expected += ["goAway \(count) the answer ends the connection", "closed"] }
            let client = HTTP1Client.sending(count, depth: 8)
            let cut = 1 + random.next(below: 64)
            client.feed(stream, splits: (0..<stream.count).filter { _ in random.next(below: cut) == 0 })
            if closeDelimited { client.session.receiveEnd() }
            XCTAssertEqual(client.lines(), expected, "trial \(trial): \(String(decoding: stream, as: UTF8.self).debugDescription)")
            XCTAssertEqual(client.errors, [], "trial \(trial)")
        }
    }

    // MARK: The shared protocol

    /// Drives any client session as a worker would, against `serve` (client bytes in, server
    /// bytes out), until `count` requests are answered.
    func roundTrip<Session: HTTPClientSession>(_ session: Session, count: Int,
                                               serve: (UnsafeRawBufferPointer) throws -> [UInt8]) throws -> [String] {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 16 * 1024, alignment: 16)
        defer { buffer.deallocate() }
        var lines: [String] = []
        var submitted = 0
        for _ in 0..<1000 where lines.count < count {
            while submitted < count && session.canOpenStream {
                submitted += 1
                let request = HTTP2Request(authority: "push.example", path: "/r/\(submitted)")
                XCTAssertNotNil(withUnsafePointer(to: request) { session.submit($0, tag: UInt64(submitted)) })
            }
            var answers: [UInt8] = []
            while session.wantsWrite {
                let n = session.produce(into: buffer)
                if n == 0 { break }
                answers += try serve(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
            }
            if !answers.isEmpty { try answers.withUnsafeBytes { try session.receive($0) } }
            session.takeEvents(upcoming: { _, _ in }) { event in
                if case .response = event { lines.append(describe(event)) }
                if case .failed = event { lines.append(describe(event)) }
            }
        }
        return lines
    }

    func testBothSessionsServeTheSameDriverAndAnswerAlike() throws {
        let expected = (1...6).map { "response \($0) 200 /r/\($0)" }
        var limits = Limits()
        limits.streamsPerConnectionMax = 2
        let server = try HTTP2ServerSession(limits: Limits())
        let http2 = try roundTrip(try HTTP2ClientSession(limits: limits, clock: ManualClock()), count: 6) { bytes in
            try server.receive(bytes)
            server.takeEvents { event in
                if case .request(let request) = event {
                    server.respond(streamID: request.streamID, status: 200, headers: [], body: Array(request.path.utf8))
                }
            }
            var out: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 16 * 1024)
            while true {
                let n = chunk.withUnsafeMutableBytes { server.produce(into: $0) }
                if n == 0 { break }
                out += chunk[0..<n]
            }
            return out
        }
        XCTAssertEqual(http2, expected)
        var echo = EchoHTTP1Server()
        let http1 = try roundTrip(HTTP1ClientSession(limits: limits, clock: ManualClock()), count: 6) { echo.receive($0) }
        XCTAssertEqual(http1, expected)
    }
}

/// One generated answer: its bytes, and the line the session should report for it.
struct GeneratedAnswer {
    var bytes: [UInt8] = []
    var expected = ""

    init(_ random: SplitMix64, runsToClose: Bool) {
        let statuses = [200, 201, 202, 204, 400, 403, 404, 410, 413, 429, 500, 503]
        let status = runsToClose ? 200 : statuses[Int(random.next(below: UInt64(statuses.count)))]
        let newline = random.next(below: 3) == 0 ? "\n" : "\r\n"
        var head = ""
        for _ in 0..<random.next(below: 3) { head += "HTTP/1.1 \(random.next(below: 2) == 0 ? 100 : 103) Interim" + newline + newline }
        head += "HTTP/1.1 \(status) \(Self.text(random, 0..<12))" + newline
        var kept: [String] = []
        for _ in 0..<random.next(below: 5) {
            let name = ["apns-id", "retry-after", "content-type", "x-noise", "date", "server"][Int(random.next(below: 6))]
            let value = Self.text(random, 1..<40)
            head += Self.randomCase(name, random) + ":" + String(repeating: " ", count: Int(random.next(below: 3))) + value
                + String(repeating: "\t", count: Int(random.next(below: 2))) + newline
            if ["apns-id", "retry-after", "content-type"].contains(name) { kept.append(" \(name)=\(value)") }
        }
        let body = status == 204 ? [] : (0..<random.next(below: 300)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        let chunked = !runsToClose && random.next(below: 2) == 0
        if status == 204 {
            bytes = Array((head + newline).utf8)
        } else if runsToClose {
            bytes = Array((head + newline).utf8) + body
        } else if chunked {
            head += Self.randomCase("transfer-encoding", random) + ": chunked" + newline + newline
            bytes = Array(head.utf8) + Self.chunks(body, random, newline: newline)
        } else {
            head += Self.randomCase("content-length", random) + ": \(body.count)" + newline + newline
            bytes = Array(head.utf8) + body
        }
        expected = "\(status) \(String(decoding: body, as: UTF8.self))" + kept.joined()
    }

    static func chunks(_ body: [UInt8], _ random: SplitMix64, newline: String) -> [UInt8] {
        var out: [UInt8] = []
        var at = 0
        while at < body.count {
            let size = min(body.count - at, 1 + Int(random.next(below: 100)))
            let digits = String(size, radix: 16, uppercase: random.next(below: 2) == 0)
            let extensions = random.next(below: 3) == 0 ? ";x=\(text(random, 0..<8))" : ""
            out += Array((digits + extensions + newline).utf8) + body[at..<(at + size)] + Array(newline.utf8)
            at += size
        }
        out += Array(("0" + newline).utf8)
        for _ in 0..<random.next(below: 3) { out += Array(("Trailer-\(random.next(below: 9)): \(text(random, 1..<9))" + newline).utf8) }
        return out + Array(newline.utf8)
    }

    /// Visible ASCII, inner spaces, no leading or trailing space.
    static func text(_ random: SplitMix64, _ range: Range<Int>) -> String {
        let count = range.lowerBound + Int(random.next(below: UInt64(range.count)))
        var bytes = (0..<count).map { _ in UInt8(0x21 + random.next(below: 94)) }
        if bytes.count > 2 { bytes[bytes.count / 2] = 0x20 }
        return String(decoding: bytes, as: UTF8.self)
    }

    static func randomCase(_ name: String, _ random: SplitMix64) -> String {
        String(name.map { random.next(below: 2) == 0 ? Character($0.uppercased()) : $0 })
    }
}
