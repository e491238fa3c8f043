// The mock's Web Push listener (`mock --webpush`): its configuration and what it announces. Its
// answers are the Web Push responder's (PushcastWebPush): every message is VAPID-verified
// against the origin it arrived on and decrypted, with keys derived from the endpoint's path (or
// read from a subscription file); the listener adds the mock's faults around them.

public struct MockWebPushConfiguration: Sendable {
    /// 0 picks a free port.
    public var port: UInt16 = 0
    /// `--webpush-http1-port N`: a second listener whose TLS offers ALPN http/1.1 alone, so its
    /// origin is an HTTP/1.1-only push service (the same certificate, responder and log); 0
    /// picks a free port; nil: none.
    public var http1Port: UInt16? = nil
    /// SETTINGS_MAX_CONCURRENT_STREAMS on Web Push connections.
    public var streamsPerConnectionMax = 100
    /// `--webpush-seed`: the demo subscriptions' seed; nil: the default the demo data uses.
    public var seed: String? = nil
    /// `--webpush-subscriptions FILE`: JSON lines of endpoint, private_key, auth.
    public var subscriptionsPath: String? = nil
    /// Wall time in milliseconds since the epoch (VAPID expiry); nil: the system's. Tests inject
    /// their own.
    public var wallMilliseconds: (@Sendable () -> Int64)? = nil

    public init() {}

    /// The largest body the listener reads; above the 4096 bytes a push service must take, so a
    /// larger one gets 413, not a reset.
    static let requestBodyBytesMax = 64 * 1024
    /// The largest subscription file read.
    static let subscriptionFileBytesMax = 256 << 20
}

/// What the mock tells clients about its Web Push side.
public struct MockWebPushEndpoint: Sendable, Equatable {
    public let port: UInt16
    /// `https://HOST:PORT`: an origin whose endpoints the listener serves.
    public let origin: String
    /// The HTTP/1.1-only listener (`http1Port`), when configured, and its origin.
    public let http1Port: UInt16?
    public let http1Origin: String?

    public init(port: UInt16, origin: String, http1Port: UInt16? = nil, http1Origin: String? = nil) {
        self.port = port
        self.origin = origin
        self.http1Port = http1Port
        self.http1Origin = http1Origin
    }

    /// The stdout line: `WEBPUSH_PORT=PORT WEBPUSH_ORIGIN=https://127.0.0.1:PORT`, then, with an
    /// HTTP/1.1-only listener, `WEBPUSH_HTTP1_PORT=PORT2 WEBPUSH_HTTP1_ORIGIN=https://127.0.0.1:PORT2`.
    public var announcement: String {
        let main = "WEBPUSH_PORT=\(port) WEBPUSH_ORIGIN=\(origin)"
        guard let http1Port, let http1Origin else { return main }
        return main + " WEBPUSH_HTTP1_PORT=\(http1Port) WEBPUSH_HTTP1_ORIGIN=\(http1Origin)"
    }
}
