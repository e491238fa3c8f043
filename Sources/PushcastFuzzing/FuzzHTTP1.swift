// The HTTP/1.1 client session fed hostile server bytes.
//
// Each input: three requests (the second with a body, the first a HEAD when asked) go to an
// HTTP1ClientSession, and the input arrives as the server's bytes, in pieces. One request at a
// time, the next one is written when the session can take it after each piece; pipelined, all
// three are written before the input, and then the input read in pieces must give exactly what it
// gives read whole. Invariants: no crash, no endless output; every request ends once, in the
// order it was written; a request reported safe to send again is one the server cannot have
// processed (`.notSent`: no byte of it handed out; `.goAwayUnprocessed`: only after an answer
// that closed the connection); answers stay within the bounds; a throw or the end closes the
// session, and a closed session is quiet.

import PushcastCore
import PushcastWire

enum FuzzHTTP1 {
    static let pieceSizes = [1, 2, 3, 7, 16, 64, 512, Int.max]

    /// Flags (the input's first byte): bits 0-2 pick the piece size; bit 3 small limits (every
    /// bound within a few bytes); bit 4 pipelining (depth 3); bit 5 the first request is a HEAD;
    /// bit 6 the server ends its side cleanly (`receiveEnd`) instead of the connection being
    /// lost; bit 7 the clock passes every deadline and the idle close before the end.
    /// `record` sees every event of the run in pieces (the replay test checks that the harness
    /// reaches the requests).
    static func run(_ input: [UInt8], record: ((HTTP2ClientEvent) -> Void)? = nil) {
        let flags = input.first ?? 0
        let serverBytes = input.dropFirst()
        let pieceSize = pieceSizes[Int(flags & 0x07)]
        let lines = FuzzHTTP1Run(flags: flags, record: record).run(serverBytes, pieceSize: pieceSize)
        if flags & 0x10 != 0 && pieceSize != Int.max {
            let whole = FuzzHTTP1Run(flags: flags, record: nil).run(serverBytes, pieceSize: Int.max)
            precondition(lines == whole, "pipelined answers read differently in pieces of \(pieceSize): \(lines) whole: \(whole)")
        }
    }
}

/// One run of the HTTP/1.1 body: the session, the requests written, and what came back.
final class FuzzHTTP1Run {
    static let requestCount: UInt64 = 3
    /// Output calls allowed before the session counts as looping.
    static let produceCallsMax = 1000

    let flags: UInt8
    let record: ((HTTP2ClientEvent) -> Void)?
    let clock = ManualClock()
    let limits: Limits
    let session: HTTP1ClientSession
    /// Where each request's bytes start in the session's output (by tag), and the bytes handed
    /// out so far.
    var starts: [UInt64: Int] = [:]
    var produced = 0
    var lines: [String] = []
    var ended: [UInt64] = []
    var goAwaySeen = false
    var closedEvents = 0

    init(flags: UInt8, record: ((HTTP2ClientEvent) -> Void)?) {
        self.flags = flags
        self.record = record
        var limits = Limits()
        var http1 = HTTP1Limits()
        if flags & 0x08 != 0 {
            limits.responseBodyBytesAccepted = 256
            limits.responseBodyBytesMax = 16
            limits.responseHeaderBytesAccepted = 256
            http1.statusLineBytesMax = 32
            http1.headerLineBytesMax = 48
            http1.headerCountMax = 4
            http1.chunkSizeDigitsMax = 3
            http1.chunkLineBytesMax = 24
            http1.chunksMax = 4
            http1.interimResponsesMax = 2
        }
        http1.pipelineDepth = flags & 0x10 != 0 ? Int(Self.requestCount) : 1
        self.limits = limits
        session = HTTP1ClientSession(limits: limits, http1: http1, clock: clock)
    }

    /// Feeds `serverBytes` in pieces of `pieceSize`, ends the connection, checks the invariants,
    /// and returns the events as lines.
    func run(_ serverBytes: ArraySlice<UInt8>, pieceSize: Int) -> [String] {
        submitAvailable()
        pushOutput()
        FuzzPieces.feed(serverBytes, pieceSize: pieceSize, to: session) { threw in
            precondition(!threw || (session.isClosed && session.protocolError != nil), "a throw left the session open")
            drain()
            if flags & 0x10 == 0 { submitAvailable() }
            pushOutput()
            return true
        }
        if flags & 0x80 != 0 {
            clock.advance(nanoseconds: limits.requestTimeoutNanoseconds + HTTP1Limits().idleCloseNanoseconds)
            session.tick()
            drain()
        }
        if flags & 0x40 != 0 { session.receiveEnd() } else { session.connectionLost() }
        drain()
        checkEnd()
        return lines
    }

    func submitAvailable() {
        while UInt64(starts.count) < Self.requestCount && session.canOpenStream {
            let tag = UInt64(starts.count + 1)
            let start = produced + session.outputPendingBytes
            let request = HTTP2Request(authority: "push.example", path: "/push/", pathSuffix: "fuzz\(tag)",
                                       headers: [HTTP2Header("ttl", "60"), HTTP2Header("urgency", "normal")],
                                       body: tag == 2 ? [UInt8](repeating: 0x7B, count: 300) : [],
                                       method: tag == 1 && flags & 0x20 != 0 ? "HEAD" : "POST")
            guard session.submit(request, tag: tag) != nil else { preconditionFailure("request \(tag) refused while the session could take it") }
            starts[tag] = start
        }
    }

    func pushOutput() {
        var sink = [UInt8](repeating: 0, count: 4096)
        for _ in 0..<Self.produceCallsMax {
            let n = sink.withUnsafeMutableBytes { session.produce(into: $0) }
            if n == 0 { return }
            produced += n
        }
        preconditionFailure("the session produced output \(Self.produceCallsMax) times in a row")
    }

    func drain() {
        session.takeEvents { event in
            record?(event)
            check(event)
        }
    }

    /// One switch over the event kinds, each with its own invariants.
    func check(_ event: HTTP2ClientEvent) {
        precondition(closedEvents == 0, "an event after .closed")
        switch event {
        case .response(let tag, let response):
            ended(tag)
            guard let start = starts[tag], produced > start else { preconditionFailure("an answer to request \(tag), never written") }
            precondition(response.status >= 200 && response.status <= 599, "status \(response.status)")
            precondition(response.body.count <= limits.responseBodyBytesMax, "a body of \(response.body.count) bytes kept")
            precondition(response.headers.count <= HTTP2Response.headersKeptMax, "\(response.headers.count) headers kept")
            precondition(response.headers.allSatisfy { limits.responseHeadersKept.contains($0.name) }, "a header kept that is not asked for")
            precondition(!(tag == 1 && flags & 0x20 != 0) || response.body.isEmpty, "an answer to HEAD with a body")
            lines.append("response \(tag) \(response.status) \(response.body.count) \(response.bodyTruncated) \(response.headers.count)")
        case .failed(let tag, let failure):
            ended(tag)
            switch failure {
            case .notSent:
                precondition(produced <= starts[tag] ?? 0, "request \(tag) reported not sent after \(produced - starts[tag]!) bytes")
            case .goAwayUnprocessed:
                precondition(goAwaySeen, "request \(tag) reported unprocessed without an answer that closed the connection")
            case .refusedStream, .reset, .flowControlBlocked:
                preconditionFailure("an HTTP/2 failure from the HTTP/1.1 session: \(failure)")
            default:
                precondition(produced > starts[tag] ?? 0, "request \(tag) of unknown fate (\(failure)) but never written")
            }
            lines.append("failed \(tag) \(failure)")
        case .goAway(let id, _, _):
            precondition(ended.last == UInt64(id), "a close announced by an answer other than the last one")
            goAwaySeen = true
            lines.append("goAway \(id)")
        case .closed:
            closedEvents += 1
            lines.append("closed")
        case .settingsChanged, .pingTimedOut:
            preconditionFailure("an HTTP/2 event from the HTTP/1.1 session")
        }
    }

    func ended(_ tag: UInt64) {
        precondition(starts[tag] != nil, "an outcome for request \(tag), never submitted")
        precondition(tag == UInt64(ended.count + 1), "request \(tag) ended out of order after \(ended)")
        ended.append(tag)
    }

    func checkEnd() {
        precondition(session.isClosed, "the end left the session open")
        precondition(closedEvents == 1, "\(closedEvents) closed events")
        precondition(ended.count == starts.count, "\(starts.count) requests, \(ended.count) outcomes")
        precondition(session.streamsOpen == 0 && !session.wantsWrite && session.nextDeadlineNanoseconds == nil, "a closed session is busy")
        var sink = [UInt8](repeating: 0, count: 64)
        precondition(sink.withUnsafeMutableBytes { session.produce(into: $0) } == 0, "a closed session has output")
    }
}
