import PushcastCore
import PushcastWire

/// What a provider's answer means for one notification, in the engine's terms. Each provider's
/// adapter maps its own error table onto these (docs/PROTOCOL.md §1.6 and §2.3).
public enum ProviderVerdict: Sendable, Equatable {
    /// `messageID`: the id the provider gave the message, when it gave one (APNs's apns-id
    /// header, FCM's message name); the request's own id is kept otherwise.
    case delivered(messageID: String?)
    case prune(reason: String, unregisteredAt: String?)
    case fail(reason: String)
    /// Retry after a back-off (at least `retryAfterSeconds` when the server said so). `throttle`:
    /// the provider as a whole is over its quota, so its rate halves and it pauses.
    case retry(reason: String, retryAfterSeconds: Double?, throttle: ThrottleScope)
    /// The credential was refused as expired: get a fresh one and retry once.
    case reauthenticate(reason: String)
    /// The credential itself is bad: record this outcome and stop the run (exit 2).
    case stopRun(reason: String, message: String)
}

/// A provider's answer: its HTTP status and what it means.
public struct ProviderAnswer: Sendable, Equatable {
    public var status: Int
    public var verdict: ProviderVerdict
    public init(status: Int, verdict: ProviderVerdict) {
        self.status = status
        self.verdict = verdict
    }
}

/// What to do after the provider refused a credential as expired.
public enum CredentialDecision: Sendable, Equatable {
    /// A newer credential exists or is being fetched: send again (once it is ready).
    case retry
    /// The credential cannot be renewed: stop the run with this message.
    case stop(String)
    /// The credential of this lane's server (one of a routed provider's) cannot be renewed: this
    /// lane stops with this message (exit 2, as for `stop`), its unsent rows left for a resume;
    /// the other lanes carry on.
    case stopLane(String)
}

/// Where a notification's own parts go in the provider's request. The body always goes in the
/// request's body. The engine moves them in and out (`SendWorkload`): a provider never touches a
/// notification's buffers.
public struct RequestLayout: Sendable, Equatable {
    /// The token follows `path` in `:path` (APNs's `/3/device/<token>`); otherwise the rendered
    /// body carries it.
    public var tokenInPath: Bool
    /// The notification's id is the value of `request.packedHeader`, whose name the adapter sets
    /// (APNs's apns-id); an empty value when the notification has none.
    public var idInHeader: Bool
    /// The rendered body is not sent as it is: the worker has the adapter seal it into the
    /// request's body for each attempt (`ProviderAdapter.seal`; Web Push encrypts it for the
    /// subscription's key, with a fresh salt and key each time). Otherwise the body is lent to
    /// the request as it is, at no cost.
    public var sealsBody: Bool
    public init(tokenInPath: Bool, idInHeader: Bool, sealsBody: Bool = false) {
        self.tokenInPath = tokenInPath
        self.idInHeader = idInHeader
        self.sealsBody = sealsBody
    }
}

/// One provider's side of a send loop: builds requests, reads answers, renews credentials. One
/// adapter per worker thread; anything shared (a JWT, an access token) lives in a `Sendable`
/// source the adapters hold.
public protocol ProviderAdapter: AnyObject {
    var provider: ProviderID { get }
    /// Where the notification's token and id go in the request.
    var layout: RequestLayout { get }
    /// The request every send of this worker starts from (authority, path, method).
    func makeRequest() -> HTTP2Request
    /// Brings the request's headers (the worker's one request, kept between sends) up to date
    /// with the current credential; returns its generation, or nil when no credential is ready
    /// yet (ask again after `credentialPollNanoseconds`).
    func authorize(_ request: inout HTTP2Request) -> UInt64?
    var credentialPollNanoseconds: UInt64 { get }
    /// Whether a credential is at hand now (checked before a rate permit is taken for a request).
    var credentialReady: Bool { get }
    func classify(_ response: HTTP2Response) -> ProviderAnswer
    /// The provider refused the credential of this generation as expired.
    func credentialRejected(generation: UInt64) -> CredentialDecision
    /// With `layout.sealsBody`: writes the request body for the rendered `payload` into `body`
    /// (the worker's own buffer, its capacity reused), on the worker thread, once per attempt.
    /// Nil when it is ready; otherwise the row ends as the refusal says and is never sent (a key
    /// that is not a key).
    func seal(payload: [UInt8], into body: inout [UInt8]) -> SealRefusal?
}

/// Why `seal` could not make a row's body; the row ends unsent.
public enum SealRefusal: Sendable, Equatable {
    /// The row's own data cannot be sealed for (a key that is not a key): `invalid`, with the
    /// problem's reason and the field it names in the error.
    case invalid(RowProblem)
    /// Sealing failed for a reason that is not the row's: `failed` with this reason.
    case failed(reason: String)
}

extension ProviderAdapter {
    /// Only called with `layout.sealsBody`; a provider without it never gets here.
    public func seal(payload: [UInt8], into body: inout [UInt8]) -> SealRefusal? {
        body.removeAll(keepingCapacity: true)
        body.append(contentsOf: payload)
        return nil
    }
}
