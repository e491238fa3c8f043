import PushcastCore
import PushcastWire
import Synchronization

/// A provider's server side: what it answers to a request, in its own words (paths, headers,
/// credentials, body rules, reason bodies, and the mock's outcomes by token prefix). `pushcast
/// mock` and the simulator's servers answer through the same responders; each applies its own
/// transport faults around them (latency, GOAWAY, stream limits, `--misbehave`, rate limits, the
/// error rate, the seed's faults). A responder is shared by every worker of a server, so it keeps
/// its state thread-safe; what belongs to one request comes in its `ProviderRequestContext`.
public protocol ProviderResponder: AnyObject, Sendable {
    var provider: ProviderID { get }
    /// Streams a connection may open before a request's credentials are accepted (APNs: 1, until
    /// the first valid provider token); nil: no such limit.
    var streamsBeforeCredentials: Int? { get }
    /// The provider's rules for one request, in the order the provider applies them; then, for a
    /// request they accept, the device's outcome: `context.device` when the server decides it
    /// (the simulator), else the provider's token-prefix rules (the mock).
    func respond(to request: HTTP2ServerRequest, context: ProviderRequestContext) -> ProviderServerAnswer
    /// The provider's answer when its server injects `fault` instead of processing the request.
    func answer(_ fault: ProviderServerFault, to request: HTTP2ServerRequest, context: ProviderRequestContext) -> ProviderServerAnswer
    /// The device token `request` is addressed to ("" when it names none).
    func token(of request: HTTP2ServerRequest) -> String
    /// The request log's JSON members for one exchange, after the members every line has
    /// (`"token":"…","status":200,…`, no braces).
    func logMembers(_ request: HTTP2ServerRequest, _ answer: ProviderServerAnswer) -> String
}

/// What a server injects around a provider's rules.
public enum ProviderServerFault: Sendable, Equatable {
    /// 429: a rate limit or quota of this scope (`device`: one device's, `provider`: the
    /// provider's, such as FCM's project quota), with the seconds to wait when the provider says.
    case throttled(retryAfterSeconds: Int, scope: ThrottleScope)
    /// 500 or 503: the server failed or is unavailable.
    case serverError(status: Int)
}

/// One answer of a provider's server, before the server's faults.
public struct ProviderServerAnswer: Sendable {
    public enum Kind: Sendable, Equatable {
        /// The notification was accepted for the device.
        case accepted
        /// The device is gone (APNs 410, FCM 404 UNREGISTERED): the sender should prune it.
        case deviceGone
        /// The request, its token or its payload is refused.
        case refused
        /// The request's credentials are refused (a provider token, a bearer).
        case credentialsRefused
        /// Try again later: 429, 500, 503.
        case busy
    }

    public var status: Int
    public var kind: Kind
    public var headers: [HTTP2Header]
    /// One more header, held inline so that an ordinary answer allocates nothing (APNs's apns-id).
    public var inlineHeader: HTTP2InlineHeader?
    public var body: [UInt8]
    /// The provider's reason or error code (`BadDeviceToken`, `UNREGISTERED`), for the log.
    public var reason: String?
    /// The token the rules read from the body (FCM), for the log; nil when they read none or the
    /// token is in the path.
    public var token: String?
    /// For a credential exchange (FCM's OAuth2 token endpoint): whether it issued a credential;
    /// nil for every other request.
    public var issuedCredential: Bool?
    /// More request-log members the rules computed (`"payload_sha256":"…"`, no braces); nil: none.
    public var logNote: String?

    public init(status: Int, kind: Kind, headers: [HTTP2Header] = [], inlineHeader: HTTP2InlineHeader? = nil, body: [UInt8] = [],
                reason: String? = nil, token: String? = nil, issuedCredential: Bool? = nil, logNote: String? = nil) {
        self.status = status
        self.kind = kind
        self.headers = headers
        self.inlineHeader = inlineHeader
        self.body = body
        self.reason = reason
        self.token = token
        self.issuedCredential = issuedCredential
        self.logNote = logNote
    }

    /// The headers to send: `headers`, then the inline one.
    public var allHeaders: [HTTP2Header] { inlineHeader.map { headers + [$0.header] } ?? headers }
}

/// Whether the server knows a device: the simulator's servers decide each token's fate; the mock
/// leaves it to the provider's token-prefix rules.
public enum ServerDevice: Sendable, Equatable {
    case registered
    case unregistered
}

/// What one request's answer may need from its server.
public struct ProviderRequestContext {
    /// Wall time, milliseconds since the epoch (410 timestamps, credential expiry, message ids).
    public var wallMilliseconds: () -> Int64
    /// Draws for the ids an answer carries (apns-id, FCM message names).
    public var random: SplitMix64
    /// The connection's verified-or-not client certificate (APNs certificate auth).
    public var clientCertificate: TLSClientCertificate?
    /// The "fail once" tokens that have failed already, shared by the server's workers.
    public var once: FirstTimeSet
    /// The device's fate when the server decides it; nil: the provider's token-prefix rules.
    public var device: ServerDevice?

    public init(wallMilliseconds: @escaping () -> Int64, random: SplitMix64, clientCertificate: TLSClientCertificate? = nil,
                once: FirstTimeSet, device: ServerDevice? = nil) {
        self.wallMilliseconds = wallMilliseconds
        self.random = random
        self.clientCertificate = clientCertificate
        self.once = once
        self.device = device
    }
}

/// Keys seen once, shared by threads: which "fail once" tokens have failed already. Touched only
/// for tokens with those prefixes, so the lock is off the common path. Bounded: past `keysMax`
/// it forgets everything and starts again (a token then fails once more).
public final class FirstTimeSet: Sendable {
    public static let keysMax = 1 << 20
    private let seen = Mutex<Set<String>>([])

    public init() {}

    /// True the first time `key` is seen.
    public func firstTime(_ key: String) -> Bool {
        seen.withLock { keys in
            if keys.count >= Self.keysMax { keys.removeAll() }
            return keys.insert(key).inserted
        }
    }
}
