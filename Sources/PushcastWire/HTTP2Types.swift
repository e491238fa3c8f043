// HTTP/2 value types shared by the sans-I/O client and server sessions (HTTP2ClientSession,
// HTTP2ServerSession). Everything here is a plain value: the sessions record these as events
// while nghttp2 runs, and the caller drains them afterwards (docs/DESIGN.md §2.3).

import PushcastCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import CNGHTTP2

/// One header field. Names are lowercase, as RFC 9113 §8.2.1 requires on the wire.
public struct HTTP2Header: Sendable, Equatable {
    public var name: String
    public var value: String
    /// True for a value that differs on every request (an id): HPACK sends it as a literal that
    /// is never indexed (RFC 7541 §6.2.3), so it neither costs a dynamic-table insertion nor
    /// evicts the campaign's repeated headers from the table (the server side's
    /// `HTTP2InlineHeader.neverIndexed` does the same for answers).
    public var neverIndexed: Bool
    public init(_ name: String, _ value: String) {
        self.init(name, value, neverIndexed: false)
    }
    public init(_ name: String, _ value: String, neverIndexed: Bool) {
        self.name = name
        self.value = value
        self.neverIndexed = neverIndexed
    }
}

/// A request the client session sends on a new stream.
public struct HTTP2Request: Sendable {
    public var method: String = "POST"
    public var scheme: String = "https"
    public var authority: String
    public var path: String
    /// Sent right after `path` in `:path`: a per-request part (a device token) that is not joined
    /// to a fixed prefix in a new String for every request. Packed: an APNs token is its 32
    /// bytes, formatted straight into the header block (no String per request).
    public var packedPathSuffix: PackedText
    /// `packedPathSuffix` as text.
    public var pathSuffix: String {
        get { packedPathSuffix.string }
        set { packedPathSuffix = PackedText(newValue) }
    }
    /// The whole `:path` as sent.
    public var fullPath: String { path + String(decoding: Array(pathSuffix.utf8).dropFirst(pathSuffixSkip), as: UTF8.self) }
    /// Regular headers that many requests share (a campaign's fixed headers and its bearer
    /// token), sent before `headers`; nil when there are none.
    public var fixedHeaders: HTTP2HeaderTemplate?
    /// Regular headers only (lowercase names); pseudo-headers come from the fields above.
    public var headers: [HTTP2Header]
    /// One more regular header, sent after `headers`, whose value changes with every request
    /// and is kept packed (an apns-id as its 16 bytes); `HTTP2PackedHeader.absent` for none.
    public var packedHeader: HTTP2PackedHeader = .absent
    public var body: [UInt8]
    /// Leading bytes of `packedPathSuffix` left out of `:path`: a Web Push endpoint (the token)
    /// starts with its origin, which `authority` already names.
    public var pathSuffixSkip = 0
    /// Every regular header as sent: `fixedHeaders`, then `headers`, then `packedHeader`.
    public var allHeaders: [HTTP2Header] {
        (fixedHeaders?.headers ?? []) + headers
            + (packedHeader.isPresent ? [HTTP2Header(packedHeader.name, packedHeader.value.string, neverIndexed: packedHeader.neverIndexed)] : [])
    }

    public init(authority: String, path: String, pathSuffix: String = "", headers: [HTTP2Header] = [], body: [UInt8] = [],
                method: String = "POST") {
        self.method = method
        self.authority = authority
        self.path = path
        packedPathSuffix = PackedText(pathSuffix)
        self.headers = headers
        self.body = body
    }
}

/// A request header whose value is a `PackedText` (`HTTP2Request.packedHeader`).
public struct HTTP2PackedHeader: Sendable {
    public var name: String
    public var value: PackedText
    public var neverIndexed: Bool
    /// False only for `absent`.
    public let isPresent: Bool

    public init(name: String, value: PackedText, neverIndexed: Bool = false) {
        self.name = name
        self.value = value
        self.neverIndexed = neverIndexed
        isPresent = true
    }

    private init() {
        name = ""
        value = .empty
        neverIndexed = false
        isPresent = false
    }

    /// No header.
    public static let absent = HTTP2PackedHeader()
}

/// A complete response as the client session saw it.
public struct HTTP2Response: Sendable {
    public var status: Int
    /// At most `HTTP2Response.headersKeptMax` regular headers are kept.
    public var headers: [HTTP2Header]
    /// At most `Limits.responseBodyBytesMax` bytes are kept; `bodyTruncated` says more arrived.
    public var body: [UInt8]
    public var bodyTruncated: Bool

    /// The most response headers a client stream keeps (APNs sends two or three).
    public static let headersKeptMax = 32

    public init(status: Int, headers: [HTTP2Header] = [], body: [UInt8] = [], bodyTruncated: Bool = false) {
        self.status = status
        self.headers = headers
        self.body = body
        self.bodyTruncated = bodyTruncated
    }

    /// The first header with this name (compared in lowercase), if any.
    public func header(_ name: String) -> String? {
        findHeader(headers, name)
    }
}

/// Why a client stream ended without a response. The split between "safe to retry" and "fate
/// unknown" is the one RFC 9113 §8.7 draws: only a stream the server provably did not process
/// may be sent again without risking a duplicate notification.
public enum HTTP2StreamFailure: Sendable, Equatable {
    /// RST_STREAM(REFUSED_STREAM): not processed (RFC 9113 §8.7).
    case refusedStream
    /// The stream id is above a GOAWAY's last-stream-id: not processed (RFC 9113 §6.8).
    case goAwayUnprocessed
    /// The connection was lost before any byte of the request was handed out for writing.
    case notSent
    /// RST_STREAM with another code after the request was sent: fate unknown.
    case reset(errorCode: UInt32)
    /// The connection died after the request was (at least partly) handed out: fate unknown.
    case connectionLost
    /// The per-request deadline passed; the stream was reset with CANCEL. Fate unknown.
    case deadlineExceeded
    /// The response body went over `Limits.responseBodyBytesAccepted`; the stream was reset
    /// with CANCEL. The server took the request, so its fate is unknown.
    case responseBodyTooLarge
    /// The response header block went over `Limits.responseHeaderBytesAccepted`; the stream
    /// was reset with CANCEL. Fate unknown.
    case responseHeadersTooLarge
    /// The request body never went out: the peer's flow-control window stayed closed (no
    /// WINDOW_UPDATE) until the deadline or the connection's end. The server has at most the
    /// HEADERS, without END_STREAM: an incomplete request it cannot have acted on.
    case flowControlBlocked
    /// The server sent the response's HEADERS (`:status`) and then reset the stream or went
    /// away before the answer ended. A stream that got its `:status` was processed, whatever a
    /// later RST_STREAM(REFUSED_STREAM) or GOAWAY(last-stream-id below it) claims (a proxy or
    /// load balancer can say both): its fate is unknown, and it is never sent again.
    case cutAfterResponse(status: Int)
    /// The connection's protocol cannot carry the request at all (HTTP/1.1: a header value with
    /// CR, LF or NUL, a path with a space; `HTTP1ClientSession.problem(in:)`). No byte of it was
    /// written; sending it again would fail the same way, so it is not retried.
    case unsendable(reason: String)

    /// What happened, in words, for a message.
    public var explanation: String {
        switch self {
        case .refusedStream: return "stream refused (RST_STREAM REFUSED_STREAM)"
        case .goAwayUnprocessed: return "GOAWAY before the request was processed"
        case .notSent: return "the connection was lost before the request went out"
        case .reset(let code): return "stream reset (RST_STREAM error code \(code))"
        case .connectionLost: return "the connection was lost after the request went out"
        case .deadlineExceeded: return "no answer within --request-timeout"
        case .responseBodyTooLarge: return "a response body over Limits.responseBodyBytesAccepted"
        case .responseHeadersTooLarge: return "a response header block over Limits.responseHeaderBytesAccepted"
        case .flowControlBlocked: return "the server never opened its flow-control window: the request body could not be sent"
        case .cutAfterResponse(let status):
            return "the server answered :status \(status), then reset the stream or went away before the answer ended"
        case .unsendable(let reason): return "the request cannot be sent over this connection's protocol: \(reason)"
        }
    }

    public var isSafeToRetry: Bool {
        switch self {
        case .refusedStream, .goAwayUnprocessed, .notSent, .flowControlBlocked: return true
        case .reset, .connectionLost, .deadlineExceeded, .responseBodyTooLarge, .responseHeadersTooLarge, .cutAfterResponse,
             .unsendable: return false
        }
    }
}

/// What happened on a client session, in the order it happened.
public enum HTTP2ClientEvent: Sendable {
    /// The stream closed cleanly with a full response.
    case response(tag: UInt64, HTTP2Response)
    case failed(tag: UInt64, HTTP2StreamFailure)
    /// The peer sent GOAWAY; no new stream opens after this.
    case goAway(lastStreamID: Int32, errorCode: UInt32, debugData: String)
    /// The peer's SETTINGS_MAX_CONCURRENT_STREAMS changed.
    case settingsChanged(maxConcurrentStreams: Int)
    /// No PING ACK within the timeout; the connection is dead.
    case pingTimedOut
    /// The session accepts nothing more.
    case closed

    /// The request's tag, for the events that end one.
    @inline(__always)
    public var tag: UInt64? {
        switch self {
        case .response(let tag, _), .failed(let tag, _): return tag
        default: return nil
        }
    }
}

/// A complete request as the server session saw it.
///
/// Its fields are kept as bytes, not Strings: `fields` holds the pseudo-header values and then
/// one record per regular header (name and value lengths as two little-endian UInt32s, then the
/// name and the value). The server session reuses the same buffers for the next request on the
/// same stream slot once the caller has let go of this value (copy-on-write), so reporting a
/// request allocates nothing in the steady state (docs/DESIGN.md §2.4). The String properties decode
/// on demand; the byte accessors (`method(is:)`, `withPath`, `withHeader`, `forEachHeader`) do
/// not allocate.
public struct HTTP2ServerRequest: Sendable {
    public var streamID: Int32
    /// Where the session keeps this stream (its slab index), or -1. Passed back to `respond`, it
    /// spares a lookup in nghttp2's stream map, a cache miss per answer with thousands of streams
    /// open; the session checks it against the stream id, which a connection never reuses.
    public var slotHint: Int32 = -1
    /// Pseudo-header values, then header records.
    @usableFromInline var fields: [UInt8]
    @usableFromInline var methodSpan: HTTP2ByteSpan
    @usableFromInline var pathSpan: HTTP2ByteSpan
    @usableFromInline var authoritySpan: HTTP2ByteSpan
    /// Where the header records start in `fields`.
    @usableFromInline var headersStart: Int
    /// Regular headers kept (at most `HTTP2Response.headersKeptMax`).
    public private(set) var headerCount: Int
    /// At most `Limits.requestBodyBytesMax` bytes (a longer body resets the stream instead).
    public var body: [UInt8]

    public init(streamID: Int32, method: String, path: String, authority: String, headers: [HTTP2Header], body: [UInt8]) {
        var builder = HTTP2ServerRequestFields()
        builder.setPseudo(.method, Array(method.utf8))
        builder.setPseudo(.path, Array(path.utf8))
        builder.setPseudo(.authority, Array(authority.utf8))
        for header in headers { builder.appendHeader(name: Array(header.name.utf8), value: Array(header.value.utf8)) }
        self.init(streamID: streamID, fields: builder, body: body)
    }

    init(streamID: Int32, slotHint: Int32 = -1, fields builder: HTTP2ServerRequestFields, body: [UInt8]) {
        self.streamID = streamID
        self.slotHint = slotHint
        fields = builder.bytes
        methodSpan = builder.method
        pathSpan = builder.path
        authoritySpan = builder.authority
        headersStart = builder.headersStart
        headerCount = builder.headerCount
        self.body = body
    }

    public var method: String { string(methodSpan) }
    public var path: String { string(pathSpan) }
    /// `:authority`, or the `host` header when the request had no `:authority`.
    public var authority: String { string(authoritySpan) }

    /// Regular headers only, at most `HTTP2Response.headersKeptMax`, in arrival order.
    public var headers: [HTTP2Header] {
        var out: [HTTP2Header] = []
        out.reserveCapacity(headerCount)
        forEachHeader { name, value in
            out.append(HTTP2Header(String(decoding: name, as: UTF8.self), String(decoding: value, as: UTF8.self)))
            return true
        }
        return out
    }

    /// The first header with this name (compared in lowercase), if any.
    public func header(_ name: String) -> String? {
        var wanted = name.utf8.contains(where: { $0 >= 0x41 && $0 <= 0x5A }) ? name.lowercased() : name
        return wanted.withUTF8 { wantedBytes in
            withHeader(UnsafeRawBufferPointer(wantedBytes)) { value in value.map { String(decoding: $0, as: UTF8.self) } }
        }
    }

    // MARK: Byte access (no allocation)

    /// True when `:method` is exactly `literal`.
    @inlinable
    public func method(is literal: StaticString) -> Bool {
        withSpan(methodSpan) { bytesEqual($0, literal) }
    }

    @inlinable
    public func withPath<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try withSpan(pathSpan, body)
    }

    /// The first header named `name` (lowercase), or nil.
    public func withHeader<R>(_ name: StaticString, _ body: (UnsafeRawBufferPointer?) throws -> R) rethrows -> R {
        try withHeader(UnsafeRawBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount), body)
    }

    func withHeader<R>(_ name: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer?) throws -> R) rethrows -> R {
        try fields.withUnsafeBytes { bytes in
            var found: UnsafeRawBufferPointer? = nil
            Self.scanHeaders(bytes, from: headersStart, count: headerCount) { headerName, value in
                guard headerName.count == name.count, memcmpBytes(headerName.baseAddress, name.baseAddress, name.count) else { return true }
                found = value
                return false
            }
            return try body(found)
        }
    }

    /// Calls `body` with each header's name and value, in arrival order, until it returns false.
    public func forEachHeader(_ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Bool) rethrows {
        try fields.withUnsafeBytes { bytes in try Self.scanHeaders(bytes, from: headersStart, count: headerCount, body) }
    }

    /// Walks the `count` headers stored from `offset` (8 bytes of name and value lengths, then
    /// the name and the value) until `visit` returns false.
    private static func scanHeaders(_ bytes: UnsafeRawBufferPointer, from offset: Int, count: Int,
                                    _ visit: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Bool) rethrows {
        var offset = offset
        for _ in 0..<count {
            let lengths = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
            let nameLength = Int(truncatingIfNeeded: lengths & 0xFFFF_FFFF), valueLength = Int(truncatingIfNeeded: lengths >> 32)
            let nameStart = offset + 8, valueStart = nameStart + nameLength
            offset = valueStart + valueLength
            guard try visit(UnsafeRawBufferPointer(rebasing: bytes[nameStart..<valueStart]),
                            UnsafeRawBufferPointer(rebasing: bytes[valueStart..<offset])) else { return }
        }
    }

    @inlinable
    func withSpan<R>(_ span: HTTP2ByteSpan, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try fields.withUnsafeBytes { bytes in
            try body(UnsafeRawBufferPointer(rebasing: bytes[Int(span.start)..<Int(span.start + span.count)]))
        }
    }

    private func string(_ span: HTTP2ByteSpan) -> String {
        withSpan(span) { String(decoding: $0, as: UTF8.self) }
    }
}

/// True when `bytes` are exactly the UTF-8 of `literal`.
@inlinable @inline(__always)
public func bytesEqual(_ bytes: UnsafeRawBufferPointer, _ literal: StaticString) -> Bool {
    bytes.count == literal.utf8CodeUnitCount
        && (bytes.count == 0 || memcmp(bytes.baseAddress!, literal.utf8Start, bytes.count) == 0)
}

@inline(__always)
func memcmpBytes(_ a: UnsafeRawPointer?, _ b: UnsafeRawPointer?, _ count: Int) -> Bool {
    guard count > 0, let a, let b else { return true }
    return memcmp(a, b, count) == 0
}

/// Where a value lies in `HTTP2ServerRequest.fields`.
@usableFromInline
struct HTTP2ByteSpan: Sendable {
    @usableFromInline var start: Int32 = 0
    @usableFromInline var count: Int32 = 0
}

/// The server session's per-slot request builder: the bytes of `HTTP2ServerRequest.fields`,
/// kept across requests so that its capacity is reused.
struct HTTP2ServerRequestFields {
    enum Pseudo { case method, path, authority }
    var bytes: [UInt8] = []
    var method = HTTP2ByteSpan()
    var path = HTTP2ByteSpan()
    var authority = HTTP2ByteSpan()
    var headersStart = 0
    var headerCount = 0

    /// Starts a new request. When the last request's bytes are still held by a caller, the
    /// array is not uniquely referenced and `removeAll` gives this slot a fresh buffer.
    mutating func reset() {
        bytes.removeAll(keepingCapacity: true)
        method = HTTP2ByteSpan()
        path = HTTP2ByteSpan()
        authority = HTTP2ByteSpan()
        headersStart = 0
        headerCount = 0
    }

    /// Pseudo-headers precede regular ones (RFC 9113 §8.3; nghttp2 resets a stream that breaks
    /// this), so one arriving after a regular header is ignored: the records stay contiguous.
    mutating func setPseudo(_ which: Pseudo, _ value: UnsafeRawBufferPointer) {
        guard headerCount == 0 else { return }
        appendLoose(value, as: which)
    }

    mutating func setPseudo(_ which: Pseudo, _ value: [UInt8]) {
        value.withUnsafeBytes { setPseudo(which, $0) }
    }

    /// Appends `value` after everything else and points the span at it. Used directly only for
    /// the last bytes a request adds (see the server session's `host` handling).
    mutating func appendLoose(_ value: UnsafeRawBufferPointer, as which: Pseudo) {
        let span = HTTP2ByteSpan(start: Int32(bytes.count), count: Int32(value.count))
        append(value)
        switch which {
        case .method: method = span
        case .path: path = span
        case .authority: authority = span
        }
    }

    /// Appends a regular header; returns where its value starts.
    @discardableResult
    mutating func appendHeader(name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) -> Int {
        if headerCount == 0 { headersStart = bytes.count }
        let lengths = UInt64(UInt32(name.count)) | UInt64(UInt32(value.count)) << 32
        withUnsafeBytes(of: lengths.littleEndian) { append($0) }
        append(name)
        let valueStart = bytes.count
        append(value)
        headerCount += 1
        return valueStart
    }

    mutating func appendHeader(name: [UInt8], value: [UInt8]) {
        name.withUnsafeBytes { n in value.withUnsafeBytes { v in _ = appendHeader(name: n, value: v) } }
    }

    /// Appends raw bytes through Array's contiguous fast path (the generic
    /// `append(contentsOf: UnsafeRawBufferPointer)` copies byte by byte).
    @inline(__always)
    mutating func append(_ value: UnsafeRawBufferPointer) {
        guard value.count > 0 else { return }
        bytes.append(contentsOf: value.assumingMemoryBound(to: UInt8.self))
    }
}

/// What happened on a server session.
public enum HTTP2ServerEvent: Sendable {
    /// A request arrived complete (END_STREAM seen).
    case request(HTTP2ServerRequest)
    /// The client reset a stream whose request we had reported but not yet answered.
    case streamCancelled(streamID: Int32)
    /// The client sent GOAWAY and every stream is done, or a fatal error ended the session.
    case closed
}

/// A session-level failure, with nghttp2's own words where it gave any.
public struct HTTP2Error: Error, CustomStringConvertible {
    public let description: String

    init(_ description: String) {
        self.description = description
    }

    init(code: Int, _ context: String) {
        let text = String(cString: nghttp2_strerror(Int32(truncatingIfNeeded: code)))
        self.description = "\(context): \(text) (\(code))"
    }
}

@inline(__always)
func findHeader(_ headers: [HTTP2Header], _ name: String) -> String? {
    let wanted = name.utf8.contains(where: { $0 >= 0x41 && $0 <= 0x5A }) ? name.lowercased() : name
    for header in headers where header.name == wanted {
        return header.value
    }
    return nil
}
