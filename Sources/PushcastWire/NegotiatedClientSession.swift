// NegotiatedClientSession: the client session of one TLS connection, whichever HTTP version the
// handshake settles on. It starts as HTTP/2 (nothing is produced before the handshake) and
// becomes HTTP/1.1 when ALPN selects "http/1.1", or selects nothing and the client offered
// "http/1.1" (TLSSession.applicationProtocol). Every call goes to the one session inside: a
// client offering only "h2" drives the same HTTP2ClientSession as before, behind one branch.

import PushcastCore

public final class NegotiatedClientSession {
    public enum Version: Sendable, Equatable { case http2, http1 }

    private enum Inner {
        case http2(HTTP2ClientSession)
        case http1(HTTP1ClientSession)
    }

    private var inner: Inner
    private let limits: Limits
    private let http1Limits: HTTP1Limits
    private let clock: MonotonicClock

    public init(limits: Limits, http1: HTTP1Limits = HTTP1Limits(), clock: MonotonicClock) throws(HTTP2Error) {
        self.limits = limits
        self.http1Limits = http1
        self.clock = clock
        inner = .http2(try HTTP2ClientSession(limits: limits, clock: clock))
    }

    /// The version the connection speaks (HTTP/2 until the handshake says otherwise).
    public var version: Version {
        switch inner {
        case .http2: return .http2
        case .http1: return .http1
        }
    }

    /// The HTTP/2 session, when the connection speaks HTTP/2 (tests and diagnoses).
    public var http2: HTTP2ClientSession? {
        if case .http2(let session) = inner { return session }
        return nil
    }

    /// The HTTP/1.1 session, when the connection speaks HTTP/1.1.
    public var http1: HTTP1ClientSession? {
        if case .http1(let session) = inner { return session }
        return nil
    }

    /// Why `request` cannot go on this connection at all, or nil (HTTP/1.1 refuses bytes that
    /// would inject lines; HTTP/2 carries any request its session takes).
    public func problem(in request: UnsafePointer<HTTP2Request>) -> String? {
        guard case .http1 = inner else { return nil }
        return HTTP1ClientSession.problem(in: request.pointee)
    }
}

extension NegotiatedClientSession: PlaintextSession {
    /// Settles the version: HTTP/1.1 for "http/1.1", HTTP/2 otherwise (TLSSession refused any
    /// outcome the configuration does not allow).
    public func handshakeCompleted(applicationProtocol: String?) {
        guard applicationProtocol == TLSContext.http1, case .http2 = inner else { return }
        inner = .http1(HTTP1ClientSession(limits: limits, http1: http1Limits, clock: clock))
    }

    public func receive(_ bytes: UnsafeRawBufferPointer) throws(HTTP2Error) {
        switch inner {
        case .http2(let s): try s.receive(bytes)
        case .http1(let s): try s.receive(bytes)
        }
    }

    public var wantsWrite: Bool {
        switch inner {
        case .http2(let s): return s.wantsWrite
        case .http1(let s): return s.wantsWrite
        }
    }

    public func produce(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        switch inner {
        case .http2(let s): return s.produce(into: buffer)
        case .http1(let s): return s.produce(into: buffer)
        }
    }
}

extension NegotiatedClientSession: HTTPClientSession {
    /// The one session inside, as the protocol both conform to (the calls that are not per
    /// request go through it; the per-request ones switch, so that HTTP/2 stays direct).
    private var any: any HTTPClientSession {
        switch inner {
        case .http2(let s): return s
        case .http1(let s): return s
        }
    }

    public var streamsAllowed: Int {
        switch inner {
        case .http2(let s): return s.streamsAllowed
        case .http1(let s): return s.streamsAllowed
        }
    }

    public var streamsOpen: Int {
        switch inner {
        case .http2(let s): return s.streamsOpen
        case .http1(let s): return s.streamsOpen
        }
    }

    public var canOpenStream: Bool {
        switch inner {
        case .http2(let s): return s.canOpenStream
        case .http1(let s): return s.canOpenStream
        }
    }

    public func submit(_ request: UnsafePointer<HTTP2Request>, tag: UInt64) -> Int32? {
        switch inner {
        case .http2(let s): return s.submit(request, tag: tag)
        case .http1(let s): return s.submit(request, tag: tag)
        }
    }

    public func submit(_ request: HTTP2Request, tag: UInt64) -> Int32? {
        withUnsafePointer(to: request) { submit($0, tag: tag) }
    }

    public func takeEvents(upcoming: (_ tag: UInt64, _ near: Bool) -> Void, _ body: (HTTP2ClientEvent) -> Void) {
        switch inner {
        case .http2(let s): s.takeEvents(upcoming: upcoming, body)
        case .http1(let s): s.takeEvents(upcoming: upcoming, body)
        }
    }

    public var peerSettingsReceived: Bool { any.peerSettingsReceived }
    public var isGoingAway: Bool { any.isGoingAway }
    public var isClosed: Bool { any.isClosed }
    public var outputPendingBytes: Int { any.outputPendingBytes }
    public var streamsBlockedByFlowControl: Int { any.streamsBlockedByFlowControl }
    public var nextDeadlineNanoseconds: UInt64? { any.nextDeadlineNanoseconds }
    public func tick() { any.tick() }
    public func connectionLost() { any.connectionLost() }
    public func receiveEnd() { any.receiveEnd() }
    public func close() { any.close() }
}
