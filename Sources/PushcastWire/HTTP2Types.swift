// HTTP/2 value types shared by the sans-I/O client and server sessions (HTTP2ClientSession,
// HTTP2ServerSession). Everything here is a plain value: the sessions record these as events
// while nghttp2 runs, and the caller drains them afterwards (design.md 2.3).

import CNGHTTP2

/// One header field. Names are lowercase, as RFC 9113 §8.2.1 requires on the wire.
public struct HTTP2Header: Sendable, Equatable {
    public var name: String
    public var value: String
    public init(_ name: String, _ value: String) {
        self.name = name
        self.value = value
    }
}

/// A request the client session sends on a new stream.
public struct HTTP2Request: Sendable {
    public var method: String = "POST"
    public var scheme: String = "https"
    public var authority: String
    public var path: String
    /// Regular headers only (lowercase names); pseudo-headers come from the fields above.
    public var headers: [HTTP2Header]
    public var body: [UInt8]

    public init(authority: String, path: String, headers: [HTTP2Header] = [], body: [UInt8] = [], method: String = "POST") {
        self.method = method
        self.authority = authority
        self.path = path
        self.headers = headers
        self.body = body
    }
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

    public var isSafeToRetry: Bool {
        switch self {
        case .refusedStream, .goAwayUnprocessed, .notSent: return true
        case .reset, .connectionLost, .deadlineExceeded: return false
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
}

/// A complete request as the server session saw it.
public struct HTTP2ServerRequest: Sendable {
    public var streamID: Int32
    public var method: String
    public var path: String
    public var authority: String
    /// Regular headers only, at most `HTTP2Response.headersKeptMax`.
    public var headers: [HTTP2Header]
    /// At most `Limits.requestBodyBytesMax` bytes (a longer body resets the stream instead).
    public var body: [UInt8]

    public init(streamID: Int32, method: String, path: String, authority: String, headers: [HTTP2Header], body: [UInt8]) {
        self.streamID = streamID
        self.method = method
        self.path = path
        self.authority = authority
        self.headers = headers
        self.body = body
    }

    public func header(_ name: String) -> String? {
        findHeader(headers, name)
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
