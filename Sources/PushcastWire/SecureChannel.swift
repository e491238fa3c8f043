import PushcastCore

/// What a `SecureChannel` carries: an HTTP session in either role, as plaintext bytes.
public protocol PlaintextSession: AnyObject {
    func receive(_ bytes: UnsafeRawBufferPointer) throws(HTTP2Error)
    var wantsWrite: Bool { get }
    func produce(into buffer: UnsafeMutableRawBufferPointer) -> Int
    /// The handshake completed on the protocol `TLSSession.applicationProtocol` names, before any
    /// plaintext moves: a session that speaks more than one version settles it here.
    func handshakeCompleted(applicationProtocol: String?)
}

extension PlaintextSession {
    /// Default: the session speaks one version.
    public func handshakeCompleted(applicationProtocol: String?) {}
}

extension HTTP2ClientSession: PlaintextSession {}
extension HTTP2ServerSession: PlaintextSession {}

/// A TLS session carrying a plaintext session, sans-I/O: ciphertext in, ciphertext out.
///
/// Plaintext from nghttp2 is gathered into one buffer of up to `Limits.tlsWriteBatchBytes`
/// (16 KiB) before each SSL_write, so many small frames share one TLS record instead of one record
/// per frame. Nothing is written before the handshake completes. Buffers are allocated once.
public final class SecureChannel<Session: PlaintextSession> {
    public let session: Session
    private let tls: TLSSession
    private let plaintextOut: UnsafeMutableRawBufferPointer
    private let plaintextIn: UnsafeMutableRawBufferPointer
    public private(set) var failure: WireError?
    private var handshakeStarted: Bool
    /// The session heard `handshakeCompleted`.
    private var sessionStarted = false

    public init(tls: TLSSession, session: Session, limits: Limits) {
        self.tls = tls
        self.session = session
        self.handshakeStarted = false
        plaintextOut = .allocate(byteCount: limits.tlsWriteBatchBytes, alignment: 16)
        plaintextIn = .allocate(byteCount: 16 * 1024 + 256, alignment: 16)
    }

    deinit {
        plaintextOut.deallocate()
        plaintextIn.deallocate()
    }

    public var isHandshakeComplete: Bool { tls.isHandshakeComplete }

    /// The protocol the connection speaks (`TLSSession.applicationProtocol`), once the handshake
    /// is complete.
    public var applicationProtocol: String? { tls.applicationProtocol }

    /// Whether the failure that ended `receivedCiphertext` was the peer's close_notify: a clean end
    /// of its side (an HTTP/1.1 body that runs to the close is then complete).
    public var peerClosedCleanly: Bool { tls.peerSentCloseNotify }

    private func startSession() {
        guard !sessionStarted, tls.isHandshakeComplete else { return }
        sessionStarted = true
        session.handshakeCompleted(applicationProtocol: tls.applicationProtocol)
    }

    /// Bytes that arrived from the network. A failure is remembered and rethrown; later calls do
    /// nothing.
    public func receivedCiphertext(_ bytes: UnsafeRawBufferPointer) throws(WireError) {
        guard failure == nil else { return }
        tls.feedCiphertext(bytes)
        handshakeStarted = true
        do {
            if !tls.isHandshakeComplete {
                guard try tls.advanceHandshake() else { return }
            }
            startSession()
            while true {
                let n = try tls.readPlaintext(into: plaintextIn)
                if n == 0 { break }
                do {
                    try session.receive(UnsafeRawBufferPointer(rebasing: plaintextIn[0..<n]))
                } catch {
                    failure = .http2(error)
                    throw error
                }
            }
        } catch let error as TLSError {
            failure = .tls(error)
            throw .tls(error)
        } catch let error as HTTP2Error {
            throw .http2(error)
        } catch {
            preconditionFailure("unexpected error: \(error)")
        }
    }

    /// True when there are bytes to send now.
    public var wantsWrite: Bool {
        if failure != nil { return tls.pendingCiphertextBytes > 0 }
        return !handshakeStarted || tls.pendingCiphertextBytes > 0 || (tls.isHandshakeComplete && session.wantsWrite)
    }

    /// Writes up to `buffer.count` bytes of ciphertext to send; returns how many.
    public func produceCiphertext(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        if !handshakeStarted && failure == nil {
            // The client speaks first: SSL_do_handshake writes the ClientHello into the BIO.
            handshakeStarted = true
            do { _ = try tls.advanceHandshake() } catch { failure = .tls(error) }
        }
        if tls.isHandshakeComplete && failure == nil {
            startSession()
            // Queue no more ciphertext than the caller can take, so back-pressure reaches nghttp2.
            while tls.pendingCiphertextBytes < buffer.count && session.wantsWrite {
                let n = session.produce(into: plaintextOut)
                if n == 0 { break }
                do {
                    try tls.writePlaintext(UnsafeRawBufferPointer(rebasing: plaintextOut[0..<n]))
                } catch {
                    failure = .tls(error)
                    break
                }
            }
        }
        return tls.takeCiphertext(into: buffer)
    }

    /// Queue TLS close_notify.
    public func shutdown() { tls.shutdown() }

    // MARK: Test and mock only (`pushcast mock --misbehave`)

    /// Encrypts whatever the session has queued now, then `bytes`, as if the session had produced
    /// them: a hostile server's way to put arbitrary bytes (not HTTP/2 frames) on the wire. It
    /// ignores the caller's back-pressure, so keep `bytes` small. False, and nothing written,
    /// before the handshake completes or after a failure. Never used by the client.
    public func injectPlaintext(_ bytes: [UInt8]) -> Bool {
        guard tls.isHandshakeComplete, failure == nil else { return false }
        while session.wantsWrite {
            let n = session.produce(into: plaintextOut)
            if n == 0 { break }
            guard write(UnsafeRawBufferPointer(rebasing: plaintextOut[0..<n])) else { return false }
        }
        return bytes.withUnsafeBytes { write($0) }
    }

    private func write(_ plaintext: UnsafeRawBufferPointer) -> Bool {
        do {
            try tls.writePlaintext(plaintext)
            return true
        } catch {
            failure = .tls(error)
            return false
        }
    }

    /// Moves ciphertext the TLS layer already holds (the end of the handshake, session tickets,
    /// alerts) into `buffer`, without pulling any session output: for closing a connection right
    /// after the handshake, before any HTTP/2 frame. Returns how many bytes.
    public func takeTLSCiphertext(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        tls.takeCiphertext(into: buffer)
    }
}

public typealias ClientConnection = SecureChannel<NegotiatedClientSession>
public typealias ServerConnection = SecureChannel<HTTP2ServerSession>

extension SecureChannel where Session == HTTP2ClientSession {
    public convenience init(context: TLSContext, serverName: String?, limits: Limits, clock: MonotonicClock) throws(WireError) {
        let tls: TLSSession
        do { tls = try TLSSession(context: context, serverName: serverName) } catch { throw .tls(error) }
        let http2: HTTP2ClientSession
        do { http2 = try HTTP2ClientSession(limits: limits, clock: clock) } catch { throw .http2(error) }
        self.init(tls: tls, session: http2, limits: limits)
    }
}

extension SecureChannel {
    /// The TLS session a convenience init starts from, its failure as a WireError.
    fileprivate static func tlsSession(_ context: TLSContext, _ serverName: String?) throws(WireError) -> TLSSession {
        do { return try TLSSession(context: context, serverName: serverName) } catch { throw .tls(error) }
    }
}

extension SecureChannel where Session == NegotiatedClientSession {
    /// A client connection that speaks HTTP/2 or HTTP/1.1, as the handshake settles (the TLS
    /// context's ALPN list says which it offers).
    public convenience init(context: TLSContext, serverName: String?, limits: Limits, http1: HTTP1Limits,
                            clock: MonotonicClock) throws(WireError) {
        let tls = try Self.tlsSession(context, serverName)
        let session: NegotiatedClientSession
        do { session = try NegotiatedClientSession(limits: limits, http1: http1, clock: clock) } catch { throw .http2(error) }
        self.init(tls: tls, session: session, limits: limits)
    }
}

extension SecureChannel where Session == HTTP1ClientSession {
    /// A client connection that speaks only HTTP/1.1 (its context should offer "http/1.1").
    public convenience init(context: TLSContext, serverName: String?, limits: Limits, http1: HTTP1Limits,
                            clock: MonotonicClock) throws(WireError) {
        self.init(tls: try Self.tlsSession(context, serverName), session: HTTP1ClientSession(limits: limits, http1: http1, clock: clock),
                  limits: limits)
    }
}

extension SecureChannel where Session == HTTP2ServerSession {
    public convenience init(context: TLSContext, limits: Limits) throws(WireError) {
        let tls: TLSSession
        do { tls = try TLSSession(context: context, serverName: nil) } catch { throw .tls(error) }
        let http2: HTTP2ServerSession
        do { http2 = try HTTP2ServerSession(limits: limits) } catch { throw .http2(error) }
        self.init(tls: tls, session: http2, limits: limits)
    }
}
