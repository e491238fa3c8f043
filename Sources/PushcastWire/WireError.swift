// PushcastWire: sans-I/O TLS (OpenSSL over memory BIOs) and HTTP/2 (nghttp2 mem_recv/mem_send),
// in client and server roles. Ciphertext goes in, ciphertext comes out, and what happened comes
// back as event values. Nothing here touches a socket, a file or a clock of its own: the reactor
// moves the bytes and the caller injects time. The same sessions run in the mock server, the tests
// and the client, so each side tests the other (swift-nio-http2's habit).

/// Why a connection failed: the TLS layer or the HTTP/2 layer said so.
public enum WireError: Error, CustomStringConvertible {
    case tls(TLSError)
    case http2(HTTP2Error)

    public var description: String {
        switch self {
        case .tls(let e): return "TLS: \(e.description)"
        case .http2(let e): return "HTTP/2: \(e.description)"
        }
    }
}
