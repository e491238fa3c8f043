// TLSSession: one TLS connection, sans-I/O. Ciphertext from the network goes in with
// feedCiphertext; ciphertext for the network comes out with takeCiphertext; plaintext passes
// through readPlaintext and writePlaintext. OpenSSL sees only two memory BIOs, so nothing here
// blocks or makes a syscall, and the same code runs the client, the mock server and the tests.
import COpenSSL
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

public final class TLSSession {
    // Not Sendable: one thread drives a session (docs/DESIGN.md §6).

    private enum State {
        case handshaking
        case established
        /// Terminal: every later call throws this again.
        case failed(TLSError)
    }

    private let context: TLSContext
    /// The SSL; it owns both BIOs and frees them with itself.
    private let ssl: OpaquePointer
    /// Network to OpenSSL. Empty reads report "retry" (mem EOF return -1), never end of stream.
    private let readBIO: OpaquePointer
    /// OpenSSL to network.
    private let writeBIO: OpaquePointer
    /// Who the peer is, for messages: the expected server name, or "client".
    private let peerDescription: String
    private var state: State = .handshaking
    private var sentCloseNotify = false

    public private(set) var negotiatedALPN: String? = nil

    /// The peer's close_notify was read: its side ended cleanly.
    public private(set) var peerSentCloseNotify = false

    /// `serverName` is required for a client: it is sent as SNI (unless it is an IP literal) and
    /// the certificate must match it (DNS name, or IP address SAN). A server ignores it.
    public init(context: TLSContext, serverName: String?) throws(TLSError) {
        ERR_clear_error()
        if context.role == .client && (serverName ?? "").isEmpty {
            throw TLSError(kind: .configuration, description: "a TLS client session needs the server name to verify the certificate against")
        }
        guard let ssl = SSL_new(context.handle) else {
            throw TLSError(kind: .configuration, description: "cannot create SSL: \(OpenSSLErrorQueue.drain().message())")
        }
        let newReadBIO = BIO_new(BIO_s_mem())
        let newWriteBIO = BIO_new(BIO_s_mem())
        guard let readBIO = newReadBIO, let writeBIO = newWriteBIO else {
            let reason = OpenSSLErrorQueue.drain().message()
            BIO_free(newReadBIO)  // not yet owned by the SSL
            BIO_free(newWriteBIO)
            SSL_free(ssl)
            throw TLSError(kind: .configuration, description: "cannot create memory BIOs: \(reason)")
        }
        _ = pushcast_BIO_set_mem_eof_return(readBIO, -1)
        SSL_set_bio(ssl, readBIO, writeBIO)
        self.context = context
        self.ssl = ssl
        self.readBIO = readBIO
        self.writeBIO = writeBIO
        switch context.role {
        case .client:
            let name = serverName!  // checked above
            peerDescription = "peer '\(name)'"
            try expectServer(named: name)  // on a throw, deinit frees the SSL
            SSL_set_connect_state(ssl)
        case .server:
            peerDescription = "client"
            SSL_set_accept_state(ssl)
        }
    }

    deinit {
        SSL_free(ssl)
    }

    public var isHandshakeComplete: Bool {
        switch state {
        case .handshaking, .failed: return false
        case .established: return true
        }
    }

    /// Network bytes in. The read BIO grows as needed; it is drained by the next handshake step
    /// or read.
    public func feedCiphertext(_ bytes: UnsafeRawBufferPointer) {
        var offset = 0
        while offset < bytes.count {
            let chunk = Int32(clamping: bytes.count - offset)
            let written = BIO_write(readBIO, bytes.baseAddress! + offset, chunk)
            precondition(written == chunk, "a memory BIO write failed (out of memory)")
            offset += Int(written)
        }
    }

    /// Runs the handshake as far as the fed bytes allow. Returns true once it is complete; after
    /// that, any ciphertext it produced (the client's Finished) still has to be taken and sent.
    public func advanceHandshake() throws(TLSError) -> Bool {
        switch state {
        case .established: return true
        case .failed(let error): throw error
        case .handshaking: break
        }
        ERR_clear_error()
        let result = SSL_do_handshake(ssl)
        if result == 1 {
            try finishHandshake()
            return true
        }
        switch SSL_get_error(ssl, result) {
        case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE:
            return false
        default:
            throw fail(handshakeError())
        }
    }

    /// Decrypted bytes into `buffer`; 0 when more ciphertext is needed. Throws `.closed` once the
    /// peer's close_notify (or the end of the stream) has been read.
    public func readPlaintext(into buffer: UnsafeMutableRawBufferPointer) throws(TLSError) -> Int {
        switch state {
        case .established: break
        case .failed(let error): throw error
        case .handshaking: preconditionFailure("readPlaintext before the TLS handshake completed")
        }
        guard buffer.count > 0 else { return 0 }
        ERR_clear_error()
        let result = SSL_read(ssl, buffer.baseAddress, Int32(clamping: buffer.count))
        if result > 0 { return Int(result) }
        switch SSL_get_error(ssl, result) {
        case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE:
            // WANT_WRITE: OpenSSL queued a reply (a KeyUpdate); it waits in the write BIO.
            return 0
        case SSL_ERROR_ZERO_RETURN:
            peerSentCloseNotify = true
            throw fail(TLSError(kind: .closed, description: "the \(peerDescription) closed the TLS session (close_notify)"))
        default:
            throw fail(recordError(operation: "read"))
        }
    }

    /// Encrypts all of `bytes` into the write BIO. Memory BIOs never block, so one SSL_write takes
    /// the whole buffer; callers batch plaintext into writes of up to 16 KiB.
    public func writePlaintext(_ bytes: UnsafeRawBufferPointer) throws(TLSError) {
        switch state {
        case .established: break
        case .failed(let error): throw error
        case .handshaking: preconditionFailure("writePlaintext before the TLS handshake completed")
        }
        guard !sentCloseNotify else {
            throw TLSError(kind: .closed, description: "cannot write: this side already sent close_notify")
        }
        var offset = 0
        while offset < bytes.count {
            ERR_clear_error()
            let result = SSL_write(ssl, bytes.baseAddress! + offset, Int32(clamping: bytes.count - offset))
            guard result > 0 else {
                if SSL_get_error(ssl, result) == SSL_ERROR_ZERO_RETURN {
                    peerSentCloseNotify = true
            throw fail(TLSError(kind: .closed, description: "the \(peerDescription) closed the TLS session (close_notify)"))
                }
                throw fail(recordError(operation: "write"))
            }
            offset += Int(result)
        }
    }

    /// Ciphertext waiting in the write BIO.
    public var pendingCiphertextBytes: Int {
        Int(BIO_ctrl_pending(writeBIO))
    }

    /// Moves up to `buffer.count` bytes of ciphertext out of the write BIO; returns how many.
    public func takeCiphertext(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        guard buffer.count > 0 else { return 0 }
        let count = BIO_read(writeBIO, buffer.baseAddress, Int32(clamping: buffer.count))
        return max(Int(count), 0)  // an empty memory BIO answers -1 with "retry"
    }

    /// Queues close_notify in the write BIO (once). Reading may continue until the peer's
    /// close_notify arrives; writing throws `.closed` from now on.
    public func shutdown() {
        guard !sentCloseNotify else { return }
        sentCloseNotify = true
        switch state {
        case .established:
            ERR_clear_error()
            // 0 means "sent ours, the peer's is still to come", which is all we ask for here.
            _ = SSL_shutdown(ssl)
            ERR_clear_error()
        case .handshaking, .failed:
            break  // nothing established to close; the caller just drops the connection
        }
    }

    // MARK: - Internals

    /// Host name or IP address verification, and SNI for host names (RFC 6066 section 3 forbids
    /// literal IP addresses in SNI).
    private func expectServer(named name: String) throws(TLSError) {
        let parameters = SSL_get0_param(ssl)
        if Self.isIPAddressLiteral(name) {
            guard X509_VERIFY_PARAM_set1_ip_asc(parameters, name) == 1 else {
                throw configurationFailure("cannot expect IP address '\(name)'")
            }
        } else {
            X509_VERIFY_PARAM_set_hostflags(parameters, UInt32(X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS))
            guard X509_VERIFY_PARAM_set1_host(parameters, name, 0) == 1 else {
                throw configurationFailure("cannot expect host name '\(name)'")
            }
            guard pushcast_SSL_set_tlsext_host_name(ssl, name) == 1 else {
                throw configurationFailure("cannot send server name '\(name)'")
            }
        }
    }

    /// Records the negotiated protocol and enforces the configured list (RFC 9113 section 3.2:
    /// HTTP/2 over TLS is chosen with ALPN, never assumed; RFC 7301: a client that offers
    /// "http/1.1" takes a server that selects nothing to speak HTTP/1.1).
    private func finishHandshake() throws(TLSError) {
        var selected: UnsafePointer<UInt8>? = nil
        var length: UInt32 = 0
        SSL_get0_alpn_selected(ssl, &selected, &length)
        if let selected, length > 0 {
            negotiatedALPN = String(decoding: UnsafeBufferPointer(start: selected, count: Int(length)), as: UTF8.self)
        }
        if context.requiresH2 && applicationProtocol == nil {
            let chosen = negotiatedALPN.map { "; it selected \($0)" } ?? ""
            throw fail(TLSError(kind: .alpnNotNegotiated, description: alpnFailureText(detail: chosen)))
        }
        state = .established
    }

    /// The protocol the connection speaks once the handshake is done: the one ALPN selected when
    /// the configuration lists it; with none selected, HTTP/2 by prior knowledge for a server
    /// that accepts clients without ALPN, else HTTP/1.1 when the configuration lists it. Nil when
    /// the configuration lists "h2" and none of these holds (the handshake then failed), or the
    /// protocol selected is not one listed. A configuration without "h2" accepts any outcome:
    /// then nil means "whatever the peer speaks", as before ALPN.
    public var applicationProtocol: String? {
        if let negotiatedALPN { return context.alpnProtocols.contains(negotiatedALPN) ? negotiatedALPN : nil }
        // A server gets here without a protocol only when the client offered none (an offer
        // without a match fails in selectALPN); it may then take HTTP/2 by prior knowledge.
        if context.acceptsClientsWithoutALPN { return context.alpnProtocols.first }
        return context.offersHTTP1 ? TLSContext.http1 : nil
    }

    private func alpnFailureText(detail: String) -> String {
        let listed = context.alpnProtocols.joined(separator: ", ")
        let wanted = context.offersHTTP1 ? "h2 or http/1.1" : "h2"
        switch context.role {
        case .client: return "peer did not select ALPN protocol \(wanted) (offered: \(listed))\(detail)"
        case .server: return "client did not offer ALPN protocol \(wanted) (server supports: \(listed))\(detail)"
        }
    }

    /// Why a server refuses every protocol offered: an h2-only client meets a server that speaks
    /// only HTTP/1.1 (some push services do), or the reverse.
    static func noApplicationProtocolDetail(offered: [String]) -> String {
        let hint = offered.contains(TLSContext.http1) ? "" : offered.contains(TLSContext.h2)
            ? " (a server that speaks only http/1.1 refuses a client that offers only h2: offer http/1.1 too)"
            : ""
        return "; the server sent a no_application_protocol alert: it supports none of them" + hint
    }

    /// Classifies a failed SSL_do_handshake, draining the error queue.
    private func handshakeError() -> TLSError {
        let errors = OpenSSLErrorQueue.drain()
        let verifyResult = SSL_get_verify_result(ssl)
        if verifyResult != X509_V_OK && errors.contains(reason: SSL_R_CERTIFICATE_VERIFY_FAILED) {
            let reason = String(cString: X509_verify_cert_error_string(verifyResult))
            return TLSError(kind: .verificationFailed, description: "certificate verification failed: \(reason) (\(peerDescription))")
        }
        if errors.contains(reason: SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE) {
            return TLSError(kind: .verificationFailed,
                            description: "certificate verification failed: the client presented no certificate, and this server requires one")
        }
        if errors.contains(reason: SSL_R_TLSV1_ALERT_NO_APPLICATION_PROTOCOL) {
            return TLSError(kind: .alpnNotNegotiated, description: alpnFailureText(detail: Self.noApplicationProtocolDetail(offered: context.alpnProtocols)))
        }
        if errors.contains(reason: SSL_R_NO_APPLICATION_PROTOCOL) {
            let text = context.requiresH2
                ? alpnFailureText(detail: "")
                : "client offered no ALPN protocol this server supports (\(context.alpnProtocols.joined(separator: ", ")))"
            return TLSError(kind: .alpnNotNegotiated, description: text)
        }
        return TLSError(kind: .handshakeFailed, description: "TLS handshake with \(peerDescription) failed: \(errors.message())")
    }

    /// Classifies a failed SSL_read or SSL_write, draining the error queue.
    private func recordError(operation: String) -> TLSError {
        let errors = OpenSSLErrorQueue.drain()
        if errors.lines.isEmpty || errors.contains(reason: SSL_R_UNEXPECTED_EOF_WHILE_READING) {
            return TLSError(kind: .closed, description: "the TLS stream from the \(peerDescription) ended without close_notify")
        }
        return TLSError(kind: .protocolError, description: "TLS \(operation) with \(peerDescription) failed: \(errors.message())")
    }

    private func configurationFailure(_ what: String) -> TLSError {
        TLSError(kind: .configuration, description: "\(what): \(OpenSSLErrorQueue.drain().message())")
    }

    /// Enters the terminal state and returns the error to throw.
    private func fail(_ error: TLSError) -> TLSError {
        state = .failed(error)
        return error
    }

    private static func isIPAddressLiteral(_ name: String) -> Bool {
        var address = in6_addr()
        return inet_pton(AF_INET, name, &address) == 1 || inet_pton(AF_INET6, name, &address) == 1
    }
}
