// HTTP1ServerSession: the server role of HTTP/1.1 (RFC 9112) over one keep-alive connection,
// sans-I/O, shaped like HTTP2ServerSession so that a worker drives either: bytes in through
// `receive`, requests out of `takeEvents` as HTTP2ServerRequest values (ids 1, 2, 3... in
// arrival order, as `streamID`), answers in through `respond` in any order, written in request
// order through `produce`.
//
// It reads a request line, headers and a Content-Length body. What it does not take it refuses
// with an answer and a close, never by guessing where the next request starts:
//
// | what came                                                    | answer, then close        |
// |--------------------------------------------------------------|---------------------------|
// | a malformed request line or header, a bad Content-Length     | 400                       |
// | a line, the header count or the buffered input over a bound  | 431 (headers) / 400       |
// | a body over `Limits.requestBodyBytesMax`                     | 413                       |
// | Transfer-Encoding (chunked request bodies are not supported) | 501                       |
// | a version other than HTTP/1.0 or HTTP/1.1                    | 505                       |
//
// `Connection: close` from the client (or HTTP/1.0 without keep-alive) closes after that
// request's answer; `closeAfterAnswer` lets the server do the same (the answer says
// `Connection: close`, and requests read after it are never reported: the client resends them).
// At most `requestsPendingMax` requests wait for answers; past that, input waits in the buffer.

import PushcastCore

public final class HTTP1ServerSession {
    private let limits: Limits
    private let http1: HTTP1Limits
    /// Requests reported and not yet written out, oldest first: their answers, once given.
    private var pending: [(id: Int32, answer: [UInt8]?, closes: Bool)] = []
    private var input: [UInt8] = []
    private var inputStart = 0
    private var output: [UInt8] = []
    private var outputStart = 0
    private var nextID: Int32 = 1
    /// No more requests are read: an answer that closes is queued (or the input broke).
    private var closing = false
    private var closed = false
    /// The next answer given says `Connection: close` (`closeAfterNextAnswer`).
    private var closeNext = false
    private var events: [HTTP2ServerEvent] = []

    /// How many requests may wait for answers at once (pipelined requests beyond wait unread).
    public let requestsPendingMax: Int
    /// Why the session stopped reading, when the input broke (for tests and logs).
    public private(set) var refusal: String?

    public init(limits: Limits, http1: HTTP1Limits = HTTP1Limits(), requestsPendingMax: Int = 16) {
        precondition(requestsPendingMax >= 1)
        self.limits = limits
        self.http1 = http1
        self.requestsPendingMax = requestsPendingMax
    }

    /// Requests reported and not yet answered.
    public var streamsOpen: Int { pending.count }
    public var isClosed: Bool { closed }
    /// The most input kept unread: a full request head and body.
    var inputBytesMax: Int { http1.statusLineBytesMax + http1.headerLineBytesMax * 2 + limits.requestBodyBytesMax }

    // MARK: Input

    /// Takes bytes from the client; complete requests become events. Throws only once closed.
    public func receive(_ bytes: UnsafeRawBufferPointer) throws(HTTP2Error) {
        if closed { throw HTTP2Error("HTTP/1.1 input after the connection closed") }
        guard !closing else { return }  // after a closing answer nothing more is read
        if inputStart > 0 && inputStart == input.count {
            input.removeAll(keepingCapacity: true)
            inputStart = 0
        }
        input.append(contentsOf: bytes)
        parseAvailable()
    }

    /// The client ended its side: nothing more comes; answers still go out, then `.closed`.
    public func receiveEnd() {
        guard !closed else { return }
        closing = true
        finishIfDone()
    }

    private func parseAvailable() {
        while !closing && pending.count < requestsPendingMax {
            switch HTTP1RequestReader.read(input, from: inputStart, limits: limits, http1: http1) {
            case .incomplete:
                if input.count - inputStart > inputBytesMax { refuse(400, "request over \(inputBytesMax) bytes") }
                return
            case .refused(let status, let why):
                refuse(status, why)
                return
            case .request(let head, let body, let end):
                inputStart = end
                let id = nextID
                nextID += 1
                pending.append((id, nil, !head.keepAlive))
                if !head.keepAlive { closing = true }
                events.append(.request(HTTP2ServerRequest(streamID: id, method: head.method, path: head.target,
                                                          authority: head.host, headers: head.headers, body: body)))
            }
        }
    }

    /// Answers `status` with a close after the requests already read, and reads no more.
    private func refuse(_ status: Int, _ why: String) {
        refusal = why
        closing = true
        let id = nextID
        nextID += 1
        pending.append((id, Self.serialize(status: status, headers: [], body: Array(why.utf8), closes: true), true))
        writeReady()
    }

    // MARK: Answers

    /// The answer to request `streamID`; written once every earlier request has its answer.
    /// `closeAfterAnswer`: the answer says `Connection: close`, and the connection ends after it
    /// (requests read after this one are dropped unanswered: the client sends them again).
    public func respond(streamID: Int32, status: Int, headers: [HTTP2Header], body: [UInt8], closeAfterAnswer: Bool = false) {
        guard let index = pending.firstIndex(where: { $0.id == streamID }), pending[index].answer == nil else { return }
        let closes = closeAfterAnswer || closeNext || pending[index].closes
        if closes {
            closing = true
            pending.removeSubrange((index + 1)...)
        }
        pending[index].closes = closes
        pending[index].answer = Self.serialize(status: status, headers: headers, body: body, closes: closes)
        writeReady()
    }

    /// The server goes away: the next answer says `Connection: close`, and the connection ends
    /// after it (or now, when no request waits).
    public func closeAfterNextAnswer() {
        guard !closing else { return }
        closeNext = true
        if pending.isEmpty {
            closing = true
            finishIfDone()
        }
    }

    private func writeReady() {
        while let first = pending.first, let answer = first.answer {
            if outputStart > 0 && outputStart == output.count {
                output.removeAll(keepingCapacity: true)
                outputStart = 0
            }
            output.append(contentsOf: answer)
            pending.removeFirst()
            if first.closes {
                pending.removeAll()
                closing = true
            }
        }
        if !closing { parseAvailable() }
        finishIfDone()
    }

    /// Closed once no more is read, every request read is answered and written out.
    private func finishIfDone() {
        guard closing, !closed, pending.isEmpty, output.count == outputStart else { return }
        closed = true
        events.append(.closed)
    }

    static func serialize(status: Int, headers: [HTTP2Header], body: [UInt8], closes: Bool) -> [UInt8] {
        var text = "HTTP/1.1 \(status) \(reasonPhrase(status))\r\n"
        for header in headers where HTTP1RequestReader.isSafe(header) {
            text += header.name + ": " + header.value + "\r\n"
        }
        text += "content-length: \(body.count)\r\n"
        if closes { text += "connection: close\r\n" }
        text += "\r\n"
        return Array(text.utf8) + body
    }

    private static func reasonPhrase(_ status: Int) -> String {
        switch status {
        case 200: return "OK"
        case 201: return "Created"
        case 400: return "Bad Request"
        case 403: return "Forbidden"
        case 404: return "Not Found"
        case 410: return "Gone"
        case 413: return "Content Too Large"
        case 429: return "Too Many Requests"
        case 431: return "Request Header Fields Too Large"
        case 500: return "Internal Server Error"
        case 501: return "Not Implemented"
        case 503: return "Service Unavailable"
        case 505: return "HTTP Version Not Supported"
        default: return "Status"
        }
    }

    // MARK: Output

    public var wantsWrite: Bool { output.count > outputStart }

    public func produce(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        let n = min(buffer.count, output.count - outputStart)
        guard n > 0 else { return 0 }
        output.withUnsafeBytes { source in
            buffer.baseAddress!.copyMemory(from: source.baseAddress! + outputStart, byteCount: n)
        }
        outputStart += n
        finishIfDone()
        return n
    }

    /// Hands every recorded event to `body`, in order.
    public func takeEvents(_ body: (HTTP2ServerEvent) -> Void) {
        let taken = events
        events.removeAll(keepingCapacity: true)
        for event in taken { body(event) }
    }
}

extension HTTP1ServerSession: PlaintextSession {}
