// The mock's Web Push listener (`mock --webpush`): its configuration and what it announces. Its
// answers are the Web Push responder's (PushcastWebPush): every message is VAPID-verified
// against the origin it arrived on and decrypted, with keys derived from the endpoint's path (or
// read from a subscription file); the listener adds the mock's faults around them.

public struct MockWebPushConfiguration: Sendable {
    /// 0 picks a free port.
    public var port: UInt16 = 0
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

    /// The stdout line: `WEBPUSH_PORT=PORT WEBPUSH_ORIGIN=https://127.0.0.1:PORT`.
    public var announcement: String { "WEBPUSH_PORT=\(port) WEBPUSH_ORIGIN=\(origin)" }
}
