// HTTP1ClientSession: the client role of HTTP/1.1 (RFC 9112) over one keep-alive connection, with
// no I/O, driven like HTTP2ClientSession (HTTPClientSession): requests go in through `submit`,
// their bytes come out of `produce`, the server's bytes go in through `receive`, time through
// `tick`, and what happened comes out of `takeEvents` as HTTP2ClientEvent values.
//
// Requests are answered in order; by default one is in flight at a time (HTTP1Limits.pipelineDepth).
// What a request that did not get its answer hears:
//
// | what happened                                                    | failure                     | retry? |
// |------------------------------------------------------------------|-----------------------------|--------|
// | no byte of it was handed to `produce`'s caller                   | `.notSent`                  | safe   |
// | an earlier answer said `Connection: close` (RFC 9112 §9.6: the   | `.goAwayUnprocessed`        | safe   |
// | server processes no later request) and it was written            |                             |        |
// | written, then the connection ended (an HTTP/1.0 close, a body to | `.connectionLost`           | never  |
// | the close, a lost or hostile connection) before its answer began |                             |        |
// | its answer's status line came, then the answer was cut or broken | `.cutAfterResponse(status:)`| never  |
// | its answer went over a bound                                     | `.responseBodyTooLarge` /   | never  |
// |                                                                  | `.responseHeadersTooLarge`  |        |
// | its deadline passed (the connection then ends)                   | `.deadlineExceeded`         | never  |
//
// A broken or hostile answer ends the connection (where the next answer would start is unknown):
// `receive` fails the requests as above, records `.closed` and throws.

import PushcastCore

public final class HTTP1ClientSession {
    enum Lifecycle: Equatable { case open, draining, closed }

    struct Request {
        var tag: UInt64 = 0
        var id: Int32 = 0
        var deadlineNanoseconds: UInt64 = 0
        var isHead = false
        /// Where its bytes lie in the session's output, counted from the connection's start.
        var start: Int64 = 0
        var end: Int64 = 0
    }

    private let limits: Limits
    private let http1: HTTP1Limits
    private let clock: MonotonicClock
    private let parser: HTTP1ResponseParser
    private var lifecycle = Lifecycle.open
    private var closeRequested = false

    /// Requests in flight, oldest first: a ring of `pipelineDepth` entries.
    private var requests: [Request]
    private var oldest = 0
    public private(set) var streamsOpen = 0
    private var nextID: Int32 = 1

    /// Request bytes not yet handed out (`output[outputStart..<outputEnd]`), and the byte counts
    /// since the connection's start: written by `submit`, handed out by `produce`.
    private var output: UnsafeMutablePointer<UInt8>
    private var outputCapacity: Int
    private var outputStart = 0
    private var outputEnd = 0
    private var outputWritten: Int64 = 0
    private var outputHandedOut: Int64 = 0
    /// When the connection last had nothing in flight (its start, or the last answer).
    private var idleSinceNanoseconds: UInt64

    private let events = HTTP2EventQueue<HTTP2ClientEvent>(capacity: 16)

    /// Why the last `receive` threw, for tests and diagnoses.
    public private(set) var protocolError: HTTP1ResponseError?

    public init(limits: Limits, http1: HTTP1Limits = HTTP1Limits(), clock: MonotonicClock) {
        precondition(http1.pipelineDepth >= 1)
        self.limits = limits
        self.http1 = http1
        self.clock = clock
        parser = HTTP1ResponseParser(limits: limits, http1: http1)
        requests = Array(repeating: Request(), count: http1.pipelineDepth)
        outputCapacity = 4096
        output = .allocate(capacity: outputCapacity)
        idleSinceNanoseconds = clock.nowNanoseconds()
    }

    deinit {
        output.deallocate()
    }

    // MARK: Capacity

    /// `HTTP1Limits.pipelineDepth` while open; 0 once going away or closed.
    public var streamsAllowed: Int { lifecycle == .open ? http1.pipelineDepth : 0 }

    /// HTTP/1.1 has no settings to wait for.
    public var peerSettingsReceived: Bool { true }

    public var outputPendingBytes: Int { outputEnd - outputStart }

    public var canOpenStream: Bool {
        lifecycle == .open && streamsOpen < http1.pipelineDepth && outputPendingBytes <= limits.pendingOutputBytesMax
            && nextID < Int32.max
    }

    public var isGoingAway: Bool { lifecycle != .open }
    public var isClosed: Bool { lifecycle == .closed }
    public var streamsBlockedByFlowControl: Int { 0 }

    // MARK: Requests

    /// Writes `request` (RFC 9112 §3: request line, Host from `authority`, the request's headers,
    /// Content-Length, the body) for sending; its id, or nil when `canOpenStream` is false or the
    /// request cannot be carried (`problem(in:)`), in which case nothing is written. The deadline
    /// is now plus `Limits.requestTimeoutNanoseconds`.
    public func submit(_ request: UnsafePointer<HTTP2Request>, tag: UInt64) -> Int32? {
        guard canOpenStream else { return nil }
        // The writer counts what it adds: making room may move the pending bytes.
        var writer = HTTP1RequestWriter(session: self)
        guard writer.write(request) else {
            outputEnd -= writer.count
            return nil
        }
        let id = nextID
        nextID += 1
        let slot = (oldest + streamsOpen) % requests.count
        requests[slot] = Request(tag: tag, id: id, deadlineNanoseconds: clock.nowNanoseconds() &+ limits.requestTimeoutNanoseconds,
                                 isHead: request.pointee.method == "HEAD", start: outputWritten,
                                 end: outputWritten + Int64(writer.count))
        outputWritten += Int64(writer.count)
        streamsOpen += 1
        return id
    }

    public func submit(_ request: HTTP2Request, tag: UInt64) -> Int32? {
        withUnsafePointer(to: request) { submit($0, tag: tag) }
    }

    /// Why `request` cannot be written as HTTP/1.1, or nil: a method that is not a token, a
    /// path or authority with spaces or control bytes, a header name that is not a token, or a
    /// value with CR, LF, NUL or another control byte. Such bytes would let a value inject
    /// lines (another header, another request) into the connection.
    public static func problem(in request: HTTP2Request) -> String? {
        HTTP1RequestWriter.problem(in: request)
    }

    // MARK: Output

    public var wantsWrite: Bool { lifecycle != .closed && outputEnd > outputStart }

    /// Copies up to `buffer.count` bytes of output into `buffer`; returns how many.
    public func produce(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        guard lifecycle != .closed, let base = buffer.baseAddress else { return 0 }
        let n = min(buffer.count, outputEnd - outputStart)
        guard n > 0 else { return 0 }
        base.copyMemory(from: output + outputStart, byteCount: n)
        outputStart += n
        outputHandedOut += Int64(n)
        if outputStart == outputEnd {
            outputStart = 0
            outputEnd = 0
        }
        return n
    }

    /// Room for `count` more bytes at `outputEnd`: the unsent bytes move to the front first, and
    /// the buffer grows only when they and the new ones do not fit.
    fileprivate func reserve(_ count: Int) -> UnsafeMutablePointer<UInt8> {
        if outputEnd + count > outputCapacity && outputStart > 0 {
            let pending = outputEnd - outputStart
            if pending > 0 { output.update(from: output + outputStart, count: pending) }
            outputStart = 0
            outputEnd = pending
        }
        if outputEnd + count > outputCapacity {
            let capacity = max(outputEnd + count, outputCapacity * 2)
            let grown = UnsafeMutablePointer<UInt8>.allocate(capacity: capacity)
            grown.update(from: output, count: outputEnd)
            output.deallocate()
            output = grown
            outputCapacity = capacity
        }
        return output + outputEnd
    }

    fileprivate func advance(_ count: Int) { outputEnd += count }

    // MARK: Input

    /// Feeds bytes from the server. An answer that breaks HTTP/1.1 or a bound, or bytes that no
    /// request waits for, end the connection: the requests fail (see the table above), `.closed`
    /// is recorded, and this throws.
    public func receive(_ bytes: UnsafeRawBufferPointer) throws(HTTP2Error) {
        guard lifecycle != .closed else { throw HTTP2Error("receive on a closed HTTP/1.1 client session") }
        var offset = 0
        while offset < bytes.count && lifecycle != .closed {
            // An answer to a request the server has not been handed a byte of answers nothing.
            guard streamsOpen > 0 && outputHandedOut > requests[oldest].start else { throw fail(.unsolicitedResponse) }
            parser.responseToHead = requests[oldest].isHead
            let used: Int
            do {
                used = try parser.parse(UnsafeRawBufferPointer(rebasing: bytes[offset...]))
            } catch {
                throw fail(error)
            }
            precondition(used > 0 || parser.isComplete, "the HTTP/1.1 parser made no progress")
            offset += used
            if parser.isComplete { answered() }
        }
    }

    /// The server ended its side cleanly: an answer whose body runs to the close is complete;
    /// everything else in flight fails as on a lost connection.
    public func receiveEnd() {
        guard lifecycle != .closed else { return }
        if streamsOpen > 0 && parser.endOfInput() { answered() }
        abandon()
    }

    /// The transport died: the requests in flight fail, then `.closed`.
    public func connectionLost() {
        abandon()
    }

    /// No new requests; `.closed` once those in flight have been answered.
    public func close() {
        guard lifecycle != .closed else { return }
        closeRequested = true
        if lifecycle == .open { lifecycle = .draining }
        if streamsOpen == 0 { abandon() }
    }

    // MARK: Time

    /// Fires the oldest request's deadline (HTTP/1.1 cannot cancel one request: the connection
    /// ends with it), and closes a connection idle for `HTTP1Limits.idleCloseNanoseconds`.
    public func tick() {
        guard lifecycle != .closed else { return }
        let now = clock.nowNanoseconds()
        if streamsOpen > 0 {
            guard requests[oldest].deadlineNanoseconds <= now else { return }
            let request = popOldest()
            events.append(.failed(tag: request.tag, outputHandedOut <= request.start ? .notSent : .deadlineExceeded))
            abandon(oldestAnswerBegun: false)
        } else if now &- idleSinceNanoseconds >= http1.idleCloseNanoseconds {
            abandon()
        }
    }

    /// The oldest request's deadline, or when an idle connection closes; nil once closed.
    public var nextDeadlineNanoseconds: UInt64? {
        guard lifecycle != .closed else { return nil }
        guard streamsOpen == 0 else { return requests[oldest].deadlineNanoseconds }
        let (idleClose, overflow) = idleSinceNanoseconds.addingReportingOverflow(http1.idleCloseNanoseconds)
        return overflow ? .max : idleClose
    }

    // MARK: Events

    /// Hands every recorded event to `body`, in order, as HTTP2ClientSession.takeEvents does.
    public func takeEvents(upcoming: (_ tag: UInt64, _ near: Bool) -> Void = { _, _ in }, _ body: (HTTP2ClientEvent) -> Void) {
        events.take { base, n in HTTP2EventBuffer.deliver(base, count: n, upcoming: upcoming, body) }
    }

    // MARK: Internals

    private func popOldest() -> Request {
        let request = requests[oldest]
        oldest = (oldest + 1) % requests.count
        streamsOpen -= 1
        return request
    }

    /// The oldest request's answer is complete. An answer that ends the connection, or one that
    /// came before its request was wholly handed out (the server would read the rest as a new
    /// request), leaves no use for the connection.
    private func answered() {
        let promisesClose = parser.promisesClose
        let closes = parser.closesConnection
        let request = popOldest()
        events.append(.response(tag: request.tag, parser.takeResponse()))
        if streamsOpen == 0 { idleSinceNanoseconds = clock.nowNanoseconds() }
        if closes {
            events.append(.goAway(lastStreamID: request.id, errorCode: 0,
                                  debugData: promisesClose ? "Connection: close" : "the answer ends the connection"))
            if lifecycle == .open { lifecycle = .draining }
            // RFC 9112 §9.6: after `Connection: close` the server processes no later request.
            while promisesClose && streamsOpen > 0 {
                let later = popOldest()
                events.append(.failed(tag: later.tag, outputHandedOut <= later.start ? .notSent : .goAwayUnprocessed))
            }
        }
        if closes || outputHandedOut < request.end || (closeRequested && streamsOpen == 0) { abandon() }
    }

    /// A broken answer: the request it answers fails as the error says, the rest as on a lost
    /// connection; returns the error to throw.
    private func fail(_ error: HTTP1ResponseError) -> HTTP2Error {
        protocolError = error
        if streamsOpen > 0 {
            let request = popOldest()
            let failure = outputHandedOut <= request.start ? .notSent : error.failure(status: parser.status)
            events.append(.failed(tag: request.tag, failure))
        }
        abandon(oldestAnswerBegun: false)
        return HTTP2Error("HTTP/1.1 answer: \(error.description)")
    }

    /// The connection is unusable: every request in flight fails in order, then `.closed`. The
    /// oldest may have its answer's status already (cut after it) unless `oldestAnswerBegun` is
    /// false (the parser's answer was someone else's); the others have no byte of their answers.
    private func abandon(oldestAnswerBegun: Bool = true) {
        guard lifecycle != .closed else { return }
        var first = oldestAnswerBegun
        while streamsOpen > 0 {
            let request = popOldest()
            let failure: HTTP2StreamFailure
            if first && parser.status != 0 {
                failure = .cutAfterResponse(status: parser.status)
            } else {
                failure = outputHandedOut <= request.start ? .notSent : .connectionLost
            }
            first = false
            events.append(.failed(tag: request.tag, failure))
        }
        lifecycle = .closed
        outputStart = 0
        outputEnd = 0
        events.append(.closed)
    }
}

extension HTTP1ClientSession: HTTPClientSession {}

/// Writes one request into the session's output, checking every byte it copies.
struct HTTP1RequestWriter {
    private let session: HTTP1ClientSession?
    private var valid = true
    private(set) var problem: String?
    /// Bytes added to the session's output.
    private(set) var count = 0

    fileprivate init(session: HTTP1ClientSession) { self.session = session }

    private init() { session = nil }

    static func problem(in request: HTTP2Request) -> String? {
        var checker = HTTP1RequestWriter()
        _ = withUnsafePointer(to: request) { checker.write($0) }
        return checker.problem
    }

    /// False, with `problem` set, when a byte cannot be carried.
    mutating func write(_ request: UnsafePointer<HTTP2Request>) -> Bool {
        let r = request.pointee
        // The target is `path`, then the suffix less its first `pathSuffixSkip` bytes (a Web Push
        // endpoint's origin, which Host names).
        r.packedPathSuffix.withUTF8 { suffix in
            let kept = UnsafeRawBufferPointer(rebasing: suffix[min(r.pathSuffixSkip, suffix.count)...])
            if r.method.isEmpty || (r.path.isEmpty && kept.isEmpty) || r.authority.isEmpty { reject("an empty method, path or authority") }
            text(r.method, "method", isTokenByte)
            literal(" ")
            text(r.path, "path", isTargetByte)
            bytes(kept.assumingMemoryBound(to: UInt8.self), "path", isTargetByte)
        }
        literal(" HTTP/1.1\r\nHost: ")
        text(r.authority, "authority", isTargetByte)
        literal("\r\n")
        for header in r.fixedHeaders?.headers ?? [] { field(header.name, header.value) }
        for header in r.headers { field(header.name, header.value) }
        if r.packedHeader.isPresent {
            let name = r.packedHeader.name
            r.packedHeader.value.withUTF8 { value in
                field(name) { $0.bytes(value.assumingMemoryBound(to: UInt8.self), name, isFieldByte) }
            }
        }
        if !r.body.isEmpty || r.method == "POST" || r.method == "PUT" || r.method == "PATCH" {
            literal("Content-Length: ")
            text(String(r.body.count), "Content-Length", isDigit)
            literal("\r\n")
        }
        literal("\r\n")
        r.body.withUnsafeBufferPointer { copy($0) }
        return valid
    }

    /// A header, unless it is one the session writes itself (Host, the framing, Connection).
    private mutating func field(_ name: String, _ value: String) {
        field(name) { $0.text(value, name, isFieldByte) }
    }

    private mutating func field(_ name: String, value: (inout HTTP1RequestWriter) -> Void) {
        guard !["host", "content-length", "transfer-encoding", "connection"].contains(name.lowercased()) else { return }
        if name.isEmpty { reject("an empty header name") }
        text(name, "header name", isTokenByte)
        literal(": ")
        value(&self)
        literal("\r\n")
    }

    private mutating func literal(_ text: StaticString) {
        copy(UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    private mutating func text(_ string: String, _ what: String, _ allowed: (UInt8) -> Bool) {
        var string = string
        string.withUTF8 { bytes($0, what, allowed) }
    }

    fileprivate mutating func bytes(_ utf8: UnsafeBufferPointer<UInt8>, _ what: String, _ allowed: (UInt8) -> Bool) {
        for byte in utf8 where !allowed(byte) {
            reject("a byte 0x\(String(byte, radix: 16)) in the \(what), which HTTP/1.1 cannot carry")
            return
        }
        copy(utf8)
    }

    private mutating func reject(_ text: String) {
        if valid { problem = text }
        valid = false
    }

    private mutating func copy(_ bytes: UnsafeBufferPointer<UInt8>) {
        guard valid, let session, let base = bytes.baseAddress, bytes.count > 0 else { return }
        session.reserve(bytes.count).update(from: base, count: bytes.count)
        session.advance(bytes.count)
        count += bytes.count
    }
}

/// A request target's or authority's byte: visible ASCII (RFC 3986 characters, percent-encoded
/// or not); never a space or a control byte.
@inline(__always) func isTargetByte(_ byte: UInt8) -> Bool { byte > 0x20 && byte < 0x7F }
