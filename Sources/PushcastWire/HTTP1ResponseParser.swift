// HTTP1ResponseParser: HTTP/1.1 responses (RFC 9112) read incrementally from any split of the
// input, with no I/O and no allocation per byte. Lines (status, header, chunk-size, trailer) are
// gathered into one buffer allocated at init and bounded by the limits; bodies are copied in
// slices. Everything a server controls is bounded (HTTP1Limits, Limits): a response over a bound,
// or one that breaks the grammar, is an `HTTP1ResponseError`, never a crash or unbounded growth.

import PushcastCore

/// The HTTP/1.1 client's own bounds. The body and header-block bounds, the headers kept and the
/// request deadline are `Limits`' (`responseBodyBytesAccepted`, `responseBodyBytesMax`,
/// `responseHeaderBytesAccepted`, `responseHeadersKept`, `requestTimeoutNanoseconds`).
public struct HTTP1Limits: Sendable, Equatable {
    /// Requests written before the answer to the first has come (pipelining, RFC 9112 §9.3.2).
    /// 1, the default, sends one request at a time: a POST is not idempotent, and an answer cut
    /// short on a pipelined connection leaves every request behind it of unknown fate.
    public var pipelineDepth = 1
    /// The status line, without its line end.
    public var statusLineBytesMax = 1024
    /// One header or trailer line, name and value, without its line end.
    public var headerLineBytesMax = 8192
    /// Header fields in one response head; trailer fields count the same way, afresh.
    public var headerCountMax = 100
    /// Hex digits of a chunk size, leading zeros included (8 digits: 4 GiB, far past the body cap).
    public var chunkSizeDigitsMax = 8
    /// A chunk-size line with its extensions, without its line end.
    public var chunkLineBytesMax = 1024
    /// Chunks in one body (the last, empty chunk not counted).
    public var chunksMax = 4096
    /// 1xx interim answers (100 Continue, 103 Early Hints) before the final one.
    public var interimResponsesMax = 8
    /// `tick()` closes a connection that has had no request for this long, before the server's
    /// own idle timeout can close it under a request just written (whose fate would be unknown).
    /// `UInt64.max`: never.
    public var idleCloseNanoseconds: UInt64 = 4_000_000_000

    public init() {}

    /// The longest line of any kind.
    var lineBytesMax: Int { max(statusLineBytesMax, headerLineBytesMax, chunkLineBytesMax) }
}

/// Why a response could not be read. Each one ends the connection: after it, where the next
/// response starts is unknown.
public enum HTTP1ResponseError: Error, Equatable, Sendable, CustomStringConvertible {
    case statusLineTooLong
    case malformedStatusLine
    /// 101: pushcast never asks to upgrade.
    case switchingProtocols
    case tooManyInterimResponses
    case headerLineTooLong
    case malformedHeaderLine
    /// A header line that starts with a space or tab (RFC 9112 §5.2: obsolete line folding).
    case obsoleteLineFolding
    case tooManyHeaders
    /// The head's bytes (status line, header lines, line ends) over `Limits.responseHeaderBytesAccepted`.
    case headersTooLarge
    case invalidContentLength
    /// Both Transfer-Encoding and Content-Length, or Transfer-Encoding in an HTTP/1.0 answer
    /// (RFC 9112 §6.1, §6.3: a sign of smuggling; never guessed around).
    case conflictingFraming
    /// A transfer coding other than `chunked` alone.
    case unsupportedTransferEncoding
    /// A body over `Limits.responseBodyBytesAccepted` (declared, or as it arrived).
    case bodyTooLarge
    case chunkSizeTooLong
    case chunkLineTooLong
    case malformedChunk
    case tooManyChunks
    /// Bytes from the server while no request waits for an answer.
    case unsolicitedResponse

    public var description: String {
        switch self {
        case .statusLineTooLong: return "a status line over HTTP1Limits.statusLineBytesMax"
        case .malformedStatusLine: return "a malformed status line"
        case .switchingProtocols: return "101 Switching Protocols, which was never asked for"
        case .tooManyInterimResponses: return "more 1xx answers than HTTP1Limits.interimResponsesMax"
        case .headerLineTooLong: return "a header line over HTTP1Limits.headerLineBytesMax"
        case .malformedHeaderLine: return "a malformed header line"
        case .obsoleteLineFolding: return "a folded header line (obs-fold)"
        case .tooManyHeaders: return "more header fields than HTTP1Limits.headerCountMax"
        case .headersTooLarge: return "a response head over Limits.responseHeaderBytesAccepted"
        case .invalidContentLength: return "an invalid Content-Length"
        case .conflictingFraming: return "Transfer-Encoding with Content-Length, or in an HTTP/1.0 answer"
        case .unsupportedTransferEncoding: return "a transfer coding other than chunked"
        case .bodyTooLarge: return "a body over Limits.responseBodyBytesAccepted"
        case .chunkSizeTooLong: return "a chunk size over HTTP1Limits.chunkSizeDigitsMax hex digits"
        case .chunkLineTooLong: return "a chunk-size line over HTTP1Limits.chunkLineBytesMax"
        case .malformedChunk: return "a malformed chunk"
        case .tooManyChunks: return "more chunks than HTTP1Limits.chunksMax"
        case .unsolicitedResponse: return "bytes from the server with no request waiting for an answer"
        }
    }

    /// What the request being answered hears: an answer over a bound fails like HTTP/2's (fate
    /// unknown: the server took the request); any other broken answer is cut after its status,
    /// or lost when no status came.
    public func failure(status: Int) -> HTTP2StreamFailure {
        switch self {
        case .bodyTooLarge, .chunkSizeTooLong, .tooManyChunks: return .responseBodyTooLarge
        case .statusLineTooLong, .headerLineTooLong, .tooManyHeaders, .headersTooLarge: return .responseHeadersTooLarge
        default: return status == 0 ? .connectionLost : .cutAfterResponse(status: status)
        }
    }
}

/// One response at a time: `parse` until `isComplete`, then `takeResponse`, which readies the
/// parser for the next response on the connection.
public final class HTTP1ResponseParser {
    enum State: Equatable {
        case statusLine, headerLine, body, chunkSize, chunkData, chunkDataEnd, trailerLine, closeDelimited, complete
    }

    private let http1: HTTP1Limits
    private let headerBytesAccepted: Int
    private let bodyBytesAccepted: Int
    private let bodyBytesKept: Int
    private let keptHeaderNames: [[UInt8]]
    private let keepHeadersOnSuccess: Bool
    private let line: UnsafeMutablePointer<UInt8>
    private var lineLength = 0

    private(set) var state = State.statusLine
    /// The status of the answer being read, once its status line is read (1xx included).
    private var pendingStatus = 0
    private var minorVersion = 1
    private var interimCount = 0
    private var headerCount = 0
    private var headBytes = 0
    private var headers: [HTTP2Header] = []
    private var contentLength = -1
    private var transferCodings = 0
    private var chunked = false
    private var closeToken = false
    private var keepAliveToken = false
    private var remaining = 0
    private var chunkCount = 0
    private var body: [UInt8] = []
    private var bodyBytes = 0
    private var bodyTruncated = false

    /// The final status, once its status line is read; 0 before it and during 1xx answers. The
    /// server has answered the request from then on, whatever becomes of the rest.
    public var status: Int { pendingStatus >= 200 ? pendingStatus : 0 }

    /// Whether the request being answered was a HEAD: its answer has no body (RFC 9110 §9.3.2).
    /// Read when the head ends.
    public var responseToHead = false

    public init(limits: Limits, http1: HTTP1Limits) {
        self.http1 = http1
        headerBytesAccepted = limits.responseHeaderBytesAccepted
        bodyBytesAccepted = limits.responseBodyBytesAccepted
        bodyBytesKept = min(limits.responseBodyBytesMax, limits.responseBodyBytesAccepted)
        keptHeaderNames = limits.responseHeadersKept.map { Array($0.lowercased().utf8) }
        keepHeadersOnSuccess = limits.responseHeadersKeptOnSuccess
        // Room for the longest line, a CR and the byte that shows it too long.
        line = .allocate(capacity: http1.lineBytesMax + 2)
    }

    deinit { line.deallocate() }

    /// True once a whole final response is read; `takeResponse` hands it out.
    public var isComplete: Bool { state == .complete }

    /// True while the body runs until the connection closes (no Content-Length, not chunked).
    public var isCloseDelimited: Bool { state == .closeDelimited }

    /// The answer says `Connection: close`: the server closes after it and processes no request
    /// that followed it on the connection (RFC 9112 §9.6).
    public var promisesClose: Bool { closeToken }

    /// After this answer the connection carries no other: `Connection: close`, an HTTP/1.0 answer
    /// without keep-alive, or a body that runs to the close (RFC 9112 §9.3).
    public var closesConnection: Bool {
        closeToken || (minorVersion == 0 && !keepAliveToken) || (status != 0 && !chunked && contentLength < 0 && !bodyless)
    }

    /// Whether the final answer carries no body whatever its framing headers say.
    private var bodyless: Bool { responseToHead || status == 204 || status == 304 }

    /// Reads from `bytes` and returns how many it used: all of them, or fewer when a final
    /// response ended before them (`isComplete`; the rest belongs to the next response).
    public func parse(_ bytes: UnsafeRawBufferPointer) throws(HTTP1ResponseError) -> Int {
        guard let base = bytes.baseAddress else { return 0 }
        var offset = 0
        while offset < bytes.count && state != .complete {
            switch state {
            case .statusLine:
                guard try takeLine(base, bytes.count, &offset, max: http1.statusLineBytesMax, head: true, tooLong: .statusLineTooLong) else { break }
                try statusLine()
            case .headerLine, .trailerLine:
                guard try takeLine(base, bytes.count, &offset, max: http1.headerLineBytesMax, head: true, tooLong: .headerLineTooLong) else { break }
                try headerOrTrailerLine()
            case .chunkSize:
                guard try takeLine(base, bytes.count, &offset, max: http1.chunkLineBytesMax, head: false, tooLong: .chunkLineTooLong) else { break }
                try chunkSizeLine()
            case .chunkDataEnd:
                guard try takeLine(base, bytes.count, &offset, max: 0, head: false, tooLong: .malformedChunk) else { break }
                state = .chunkSize
            case .body, .chunkData:
                let n = min(remaining, bytes.count - offset)
                appendBody(base + offset, n)
                offset += n
                remaining -= n
                if remaining == 0 { state = state == .body ? .complete : .chunkDataEnd }
            case .closeDelimited:
                let n = bytes.count - offset
                guard bodyBytes + n <= bodyBytesAccepted else { throw .bodyTooLarge }
                appendBody(base + offset, n)
                offset += n
            case .complete:
                break
            }
        }
        return offset
    }

    /// The server closed its side cleanly: a body that runs to the close ends here. True when the
    /// response is complete.
    public func endOfInput() -> Bool {
        if state == .closeDelimited { state = .complete }
        return state == .complete
    }

    /// The complete response; the parser then waits for the next status line.
    public func takeResponse() -> HTTP2Response {
        precondition(state == .complete, "takeResponse before the response is complete")
        var kept: [HTTP2Header] = []
        var content: [UInt8] = []
        swap(&kept, &headers)
        swap(&content, &body)
        let response = HTTP2Response(status: status, headers: kept, body: content, bodyTruncated: bodyTruncated)
        interimCount = 0
        bodyBytes = 0
        bodyTruncated = false
        chunkCount = 0
        startHead()
        return response
    }

    // MARK: Lines

    /// Gathers the bytes up to the next LF into `line`; true when the line is whole (its length,
    /// without the LF and one CR before it, in `lineLength`). Looks no further than `max` + 2
    /// bytes, so a line without end is caught at the bound, whatever the split.
    private func takeLine(_ base: UnsafeRawPointer, _ count: Int, _ offset: inout Int, max: Int, head: Bool,
                          tooLong: HTTP1ResponseError) throws(HTTP1ResponseError) -> Bool {
        let window = min(count - offset, max + 2 - lineLength)
        let start = base + offset
        let newline = RawMemory.find(0x0A, in: start, count: window)
        let n = newline.map { UnsafeRawPointer($0) - start } ?? window
        if n > 0 { (line + lineLength).update(from: start.assumingMemoryBound(to: UInt8.self), count: n) }
        lineLength += n
        let used = newline == nil ? n : n + 1
        offset += used
        if head {
            headBytes += used
            guard headBytes <= headerBytesAccepted else { throw .headersTooLarge }
        }
        guard newline != nil else {
            guard lineLength <= max + 1 else { throw tooLong }
            return false
        }
        if lineLength > 0 && line[lineLength - 1] == 0x0D { lineLength -= 1 }
        guard lineLength <= max else { throw tooLong }
        return true
    }

    /// `HTTP/1.x SP 3DIGIT [SP reason]` (RFC 9112 §4; a missing SP before an empty reason is
    /// tolerated).
    private func statusLine() throws(HTTP1ResponseError) {
        let n = lineLength
        lineLength = 0
        guard n >= 12, bytesEqual(UnsafeRawBufferPointer(start: line, count: 7), "HTTP/1."),
              isDigit(line[7]), line[8] == 0x20, isDigit(line[9]), isDigit(line[10]), isDigit(line[11]),
              n == 12 || line[12] == 0x20 else { throw .malformedStatusLine }
        for i in 13..<max(13, n) where !isFieldByte(line[i]) { throw .malformedStatusLine }
        let code = Int(line[9] - 0x30) * 100 + Int(line[10] - 0x30) * 10 + Int(line[11] - 0x30)
        guard code >= 100 && code <= 599 else { throw .malformedStatusLine }
        guard code != 101 else { throw .switchingProtocols }
        minorVersion = Int(line[7] - 0x30)
        pendingStatus = code
        state = .headerLine
    }

    /// A header field, or the empty line that ends the head (or the trailers).
    private func headerOrTrailerLine() throws(HTTP1ResponseError) {
        let n = lineLength
        lineLength = 0
        guard n > 0 else {
            if state == .trailerLine { state = .complete } else { try endOfHead() }
            return
        }
        guard line[0] != 0x20 && line[0] != 0x09 else { throw .obsoleteLineFolding }
        headerCount += 1
        guard headerCount <= http1.headerCountMax else { throw .tooManyHeaders }
        var colon = 0
        while colon < n && isTokenByte(line[colon]) { colon += 1 }
        guard colon > 0, colon < n, line[colon] == 0x3A else { throw .malformedHeaderLine }
        var valueStart = colon + 1
        var valueEnd = n
        while valueStart < valueEnd && isWhitespace(line[valueStart]) { valueStart += 1 }
        while valueEnd > valueStart && isWhitespace(line[valueEnd - 1]) { valueEnd -= 1 }
        for i in valueStart..<valueEnd where !isFieldByte(line[i]) { throw .malformedHeaderLine }
        // Trailers are read for their syntax and bounds, and dropped; so are a 1xx answer's fields.
        guard state == .headerLine, pendingStatus >= 200 else { return }
        try headerField(name: UnsafeBufferPointer(start: line, count: colon),
                        value: UnsafeBufferPointer(start: line + valueStart, count: valueEnd - valueStart))
    }

    /// A final answer's field: framing and connection fields are read, kept names are kept.
    private func headerField(name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>) throws(HTTP1ResponseError) {
        if equalsIgnoringCase(name, "content-length") {
            try contentLengthField(value)
        } else if equalsIgnoringCase(name, "transfer-encoding") {
            try forEachListElement(value) { (coding) throws(HTTP1ResponseError) in
                transferCodings += 1
                guard transferCodings == 1, equalsIgnoringCase(coding, "chunked") else { throw .unsupportedTransferEncoding }
                chunked = true
            }
        } else if equalsIgnoringCase(name, "connection") {
            forEachListElement(value) { option in
                if equalsIgnoringCase(option, "close") { closeToken = true }
                if equalsIgnoringCase(option, "keep-alive") { keepAliveToken = true }
            }
        }
        guard headers.count < HTTP2Response.headersKeptMax, keepHeadersOnSuccess || pendingStatus / 100 != 2,
              let kept = keptHeaderNames.first(where: { equalsIgnoringCase(name, $0) }) else { return }
        headers.append(HTTP2Header(String(decoding: kept, as: UTF8.self), String(decoding: value, as: UTF8.self)))
    }

    /// `1*DIGIT`, or a list of equal ones (RFC 9112 §6.3, item 5); several fields must agree too.
    /// A value past the accepted body size is kept as that size plus one: too large either way.
    private func contentLengthField(_ value: UnsafeBufferPointer<UInt8>) throws(HTTP1ResponseError) {
        var elements = 0
        try forEachListElement(value) { (element) throws(HTTP1ResponseError) in
            elements += 1
            var length = 0
            for byte in element {
                guard isDigit(byte) else { throw .invalidContentLength }
                length = min(length * 10 + Int(byte - 0x30), bodyBytesAccepted + 1)
            }
            guard contentLength < 0 || contentLength == length else { throw .invalidContentLength }
            contentLength = length
        }
        guard elements > 0 else { throw .invalidContentLength }
    }

    /// The blank line: a 1xx answer is dropped and the next status line awaited; a final one
    /// decides how its body is framed (RFC 9112 §6.3).
    private func endOfHead() throws(HTTP1ResponseError) {
        guard pendingStatus >= 200 else {
            interimCount += 1
            guard interimCount <= http1.interimResponsesMax else { throw .tooManyInterimResponses }
            startHead()
            return
        }
        if bodyless {
            state = .complete
        } else if transferCodings > 0 {
            guard contentLength < 0 && minorVersion > 0 else { throw .conflictingFraming }
            state = .chunkSize
        } else if contentLength >= 0 {
            guard contentLength <= bodyBytesAccepted else { throw .bodyTooLarge }
            remaining = contentLength
            state = contentLength == 0 ? .complete : .body
        } else {
            state = .closeDelimited
        }
    }

    /// `1*HEXDIG [BWS ";" chunk-ext]`; a zero size is the last chunk, which trailers follow.
    private func chunkSizeLine() throws(HTTP1ResponseError) {
        let n = lineLength
        lineLength = 0
        var digits = 0
        var size = 0
        while digits < n, let value = hexValue(line[digits]) {
            digits += 1
            // 15 hex digits at most, whatever the limit says: the size stays a positive Int.
            guard digits <= min(http1.chunkSizeDigitsMax, 15) else { throw .chunkSizeTooLong }
            size = size << 4 | value
        }
        guard digits > 0 else { throw .malformedChunk }
        var i = digits
        while i < n && isWhitespace(line[i]) { i += 1 }
        guard i == n || line[i] == 0x3B else { throw .malformedChunk }
        for j in i..<n where !isFieldByte(line[j]) { throw .malformedChunk }
        guard size > 0 else {
            headerCount = 0
            headBytes = 0
            state = .trailerLine
            return
        }
        chunkCount += 1
        guard chunkCount <= http1.chunksMax else { throw .tooManyChunks }
        guard size <= bodyBytesAccepted - bodyBytes else { throw .bodyTooLarge }
        remaining = size
        state = .chunkData
    }

    // MARK: Helpers

    /// Ready for a status line, with a fresh head (the body so far is kept: a 1xx has none).
    private func startHead() {
        state = .statusLine
        pendingStatus = 0
        minorVersion = 1
        headerCount = 0
        headBytes = 0
        if !headers.isEmpty { headers.removeAll() }
        contentLength = -1
        transferCodings = 0
        chunked = false
        closeToken = false
        keepAliveToken = false
        remaining = 0
    }

    private func appendBody(_ start: UnsafeRawPointer, _ count: Int) {
        guard count > 0 else { return }
        bodyBytes += count
        let kept = min(count, bodyBytesKept - body.count)
        if kept < count { bodyTruncated = true }
        if kept > 0 { body.append(contentsOf: UnsafeBufferPointer(start: start.assumingMemoryBound(to: UInt8.self), count: kept)) }
    }
}

// MARK: - Bytes (RFC 9110 §5.6)

/// Calls `body` with each element of a comma-separated list, without its surrounding whitespace;
/// empty elements are skipped (RFC 9110 §5.6.1).
func forEachListElement<E: Error>(_ value: UnsafeBufferPointer<UInt8>, _ body: (UnsafeBufferPointer<UInt8>) throws(E) -> Void) throws(E) {
    guard let base = value.baseAddress else { return }
    var start = 0
    while start <= value.count {
        var end = start
        while end < value.count && value[end] != 0x2C { end += 1 }
        var first = start
        var last = end
        while first < last && isWhitespace(value[first]) { first += 1 }
        while last > first && isWhitespace(value[last - 1]) { last -= 1 }
        if last > first { try body(UnsafeBufferPointer(start: base + first, count: last - first)) }
        start = end + 1
    }
}

/// ASCII case-insensitive equality with a lower-case literal.
func equalsIgnoringCase(_ bytes: UnsafeBufferPointer<UInt8>, _ lower: StaticString) -> Bool {
    guard bytes.count == lower.utf8CodeUnitCount else { return false }
    let expected = lower.utf8Start
    for i in 0..<bytes.count where lowercased(bytes[i]) != expected[i] { return false }
    return true
}

func equalsIgnoringCase(_ bytes: UnsafeBufferPointer<UInt8>, _ lower: [UInt8]) -> Bool {
    guard bytes.count == lower.count else { return false }
    for i in 0..<bytes.count where lowercased(bytes[i]) != lower[i] { return false }
    return true
}

@inline(__always) func lowercased(_ byte: UInt8) -> UInt8 { byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte }
@inline(__always) func isDigit(_ byte: UInt8) -> Bool { byte >= 0x30 && byte <= 0x39 }
@inline(__always) func isWhitespace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 }

/// A field value's or reason phrase's byte: HTAB, SP, VCHAR or obs-text; never CR, LF, NUL or
/// another control.
@inline(__always) func isFieldByte(_ byte: UInt8) -> Bool { byte == 0x09 || (byte >= 0x20 && byte != 0x7F) }

/// A `tchar` (RFC 9110 §5.6.2): what field names and methods are made of.
@inline(__always) func isTokenByte(_ byte: UInt8) -> Bool {
    switch byte {
    case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: return true
    case 0x21, 0x23, 0x24, 0x25, 0x26, 0x27, 0x2A, 0x2B, 0x2D, 0x2E, 0x5E, 0x5F, 0x60, 0x7C, 0x7E: return true
    default: return false
    }
}

@inline(__always) func hexValue(_ byte: UInt8) -> Int? {
    switch byte {
    case 0x30...0x39: return Int(byte - 0x30)
    case 0x41...0x46: return Int(byte - 0x37)
    case 0x61...0x66: return Int(byte - 0x57)
    default: return nil
    }
}
