// TLSError: every way the TLS layer can fail, as a kind to switch on and a message for a person.
// Messages name the file, peer or protocol involved; they never contain passphrases or key bytes.
import COpenSSL

public struct TLSError: Error, CustomStringConvertible, Equatable {
    public enum Kind: Sendable, Equatable {
        /// A file, key, passphrase or option could not be used; nothing was sent.
        case configuration
        /// The peer's certificate chain, host name or IP address did not verify.
        case verificationFailed
        /// The handshake finished (or was refused) without ALPN selecting "h2".
        case alpnNotNegotiated
        /// The handshake failed for another reason (protocol version, cipher, alert from the peer).
        case handshakeFailed
        /// The session is over: close_notify arrived, the stream ended, or it was shut down locally.
        case closed
        /// The peer sent something that broke the TLS record protocol after the handshake.
        case protocolError
    }

    public let kind: Kind
    public let description: String

    public init(kind: Kind, description: String) {
        self.kind = kind
        self.description = description
    }
}

/// The calling thread's OpenSSL error queue, read and emptied in one step so that no error is
/// left behind to be misread by the next `SSL_get_error` (which consults the queue first).
struct OpenSSLErrorQueue {
    /// Reason codes (`ERR_GET_REASON`) of the drained errors, oldest first.
    var reasons: [Int32] = []
    /// Lines such as "SSL routines: certificate verify failed", oldest first, without duplicates.
    var lines: [String] = []

    /// Empties the queue into a value.
    static func drain() -> OpenSSLErrorQueue {
        var queue = OpenSSLErrorQueue()
        var data: UnsafePointer<CChar>? = nil
        var flags: Int32 = 0
        while true {
            let code = ERR_get_error_all(nil, nil, nil, &data, &flags)
            if code == 0 { break }
            queue.reasons.append(ERR_GET_REASON(code))
            var line = describe(code)
            if flags & ERR_TXT_STRING != 0, let data, data.pointee != 0 {
                line += " (" + String(cString: data) + ")"
            }
            if !queue.lines.contains(line) { queue.lines.append(line) }
        }
        return queue
    }

    /// "lib: reason" for one packed error code, falling back to OpenSSL's own hex rendering.
    private static func describe(_ code: UInt) -> String {
        let reason = ERR_reason_error_string(code).map { String(cString: $0) }
        let library = ERR_lib_error_string(code).map { String(cString: $0) }
        switch (library, reason) {
        case let (library?, reason?): return library + ": " + reason
        case let (nil, reason?): return reason
        case (_, nil):
            return "OpenSSL error " + String(code, radix: 16)
        }
    }

    func contains(reason: Int32) -> Bool { reasons.contains(reason) }

    /// The drained errors as one clause, or `fallback` when OpenSSL recorded none.
    func message(or fallback: String = "no detail from OpenSSL") -> String {
        lines.isEmpty ? fallback : lines.joined(separator: "; ")
    }
}

extension TLSError {
    /// A `.configuration` error whose text has `secret` blanked out wherever it appears, as a last
    /// line of defence: OpenSSL does not echo passphrases, and this keeps it that way.
    static func configuration(_ message: String, redacting secret: String?) -> TLSError {
        guard let secret, !secret.isEmpty else { return TLSError(kind: .configuration, description: message) }
        return TLSError(kind: .configuration, description: message.replacing(secret, with: "<redacted>"))
    }
}
