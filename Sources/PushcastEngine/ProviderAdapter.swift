import PushcastAPNs
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
}

/// One provider's side of a `SendWorkload`: builds requests, reads answers, renews credentials.
/// One adapter per worker thread; anything shared (a JWT, an access token) lives in a `Sendable`
/// source the adapters hold.
public protocol ProviderAdapter: AnyObject {
    var provider: ProviderID { get }
    /// The request every send of this worker starts from (authority, path, method).
    func makeRequest() -> HTTP2Request
    /// Turns `request` (the worker's one request, changed in place between sends) into the request
    /// for the notification; returns the generation of the credential it carries, or nil when no
    /// credential is ready yet (ask again after `credentialPollNanoseconds`; nothing was lent).
    /// Both are read and written in place: passing them by value would retain and release each
    /// of their buffers. The notification's own buffers (token, apns-id, body) are lent to the
    /// request, moved in by swaps: a copy would retain each one on the worker thread, an atomic
    /// write to memory the reader thread allocated and will free. `restore` gives them back.
    func prepare(_ request: UnsafeMutablePointer<HTTP2Request>, for notification: UnsafeMutablePointer<PreparedNotification>) -> UInt64?
    /// Moves what `prepare` lent back from the request into the notification; called as soon as
    /// the request has been handed over (the session copies what it sends).
    func restore(_ request: UnsafeMutablePointer<HTTP2Request>, into notification: UnsafeMutablePointer<PreparedNotification>)
    var credentialPollNanoseconds: UInt64 { get }
    /// Whether a credential is at hand now (checked before a rate permit is taken for a request).
    var credentialReady: Bool { get }
    func classify(_ response: HTTP2Response) -> ProviderAnswer
    /// The provider refused the credential of this generation as expired.
    func credentialRejected(generation: UInt64) -> CredentialDecision
}

extension ProviderAdapter {
    /// Default: for an adapter whose `prepare` copies (retains) what it needs and lends nothing.
    public func restore(_ request: UnsafeMutablePointer<HTTP2Request>, into notification: UnsafeMutablePointer<PreparedNotification>) {}
}

/// Campaign-wide APNs settings every worker shares.
public struct APNsSendSettings: Sendable {
    public var headers: APNsCampaignHeaders
    /// Token auth: the shared JWT source. Nil with certificate auth.
    public var tokenSource: APNsTokenSource?
    public var authority: String
    public var retry: RetryPolicy
    /// Retry requests whose fate is unknown (connection lost after writing, timeout).
    public var retryUnknown: Bool

    public init(headers: APNsCampaignHeaders, tokenSource: APNsTokenSource?, authority: String, retry: RetryPolicy, retryUnknown: Bool) {
        self.headers = headers
        self.tokenSource = tokenSource
        self.authority = authority
        self.retry = retry
        self.retryUnknown = retryUnknown
    }
}

/// APNs: `POST /3/device/<token>` with the campaign's pre-built headers and the shared JWT.
public final class APNsAdapter: ProviderAdapter {
    private let settings: APNsSendSettings
    private var bearer: APNsBearerToken?
    private var bearerGeneration: UInt64 = 0
    /// The credential generation the request's fixed headers carry: per request only apns-id
    /// changes, in place, so no header array is built per request.
    private var headersGeneration: UInt64 = .max
    /// Whether the notification being sent had an apns-id of its own (`restore` gives it back).
    private var lentMessageID = false

    public init(settings: APNsSendSettings) {
        self.settings = settings
        bearer = settings.tokenSource?.current()
        bearerGeneration = bearer?.generation ?? 0
    }

    public var provider: ProviderID { .apns }
    public var credentialPollNanoseconds: UInt64 { 0 }
    public var credentialReady: Bool { true }

    public func makeRequest() -> HTTP2Request { HTTP2Request(authority: settings.authority, path: "/3/device/") }

    public func prepare(_ request: UnsafeMutablePointer<HTTP2Request>, for n: UnsafeMutablePointer<PreparedNotification>) -> UInt64? {
        var generation: UInt64 = 0
        if let source = settings.tokenSource {
            // The cached token is only touched when it changes: copying it would retain and
            // release its JWT on every request.
            if !source.isCurrent(generation: bearerGeneration) {
                let fresh = source.current()
                bearer = fresh
                bearerGeneration = fresh.generation
            }
            generation = bearerGeneration
        }
        if generation != headersGeneration || request.pointee.fixedHeaders == nil {
            // The campaign's headers and the bearer are laid out once per credential; apns-id is
            // the only header left to change per request.
            let all = settings.headers.headers(authorization: bearer?.authorization, apnsID: "")
            request.pointee.fixedHeaders = HTTP2HeaderTemplate(all.filter { $0.name != "apns-id" })
            request.pointee.headers = []
            let id = all.first { $0.name == "apns-id" }!
            request.pointee.packedHeader = HTTP2PackedHeader(name: id.name, value: .empty, neverIndexed: id.neverIndexed)
            headersGeneration = generation
        }
        // The token and apns-id stay packed (the session formats them into the header block);
        // they are lent by swaps like the body, which copies no bits beyond the values themselves.
        lentMessageID = n.pointee.packedMessageID != nil
        if lentMessageID {
            swap(&request.pointee.packedHeader.value, &n.pointee.packedMessageID!)
        } else {
            request.pointee.packedHeader.value = .empty
        }
        swap(&request.pointee.packedPathSuffix, &n.pointee.packedToken)
        swap(&request.pointee.body, &n.pointee.payload)
        return generation
    }

    public func restore(_ request: UnsafeMutablePointer<HTTP2Request>, into n: UnsafeMutablePointer<PreparedNotification>) {
        swap(&request.pointee.packedPathSuffix, &n.pointee.packedToken)
        swap(&request.pointee.body, &n.pointee.payload)
        if lentMessageID { swap(&request.pointee.packedHeader.value, &n.pointee.packedMessageID!) }
    }

    public func classify(_ response: HTTP2Response) -> ProviderAnswer {
        let summary = APNsResponseSummary(response: response)
        let verdict: ProviderVerdict
        switch summary.verdict {
        case .delivered: verdict = .delivered(messageID: summary.apnsID)
        case .prune(let reason): verdict = .prune(reason: reason, unregisteredAt: summary.unregisteredAt)
        case .fail(let reason): verdict = .fail(reason: reason)
        // APNs's 429 is per device token (TooManyRequests), not a provider-wide quota: retry that
        // notification later without slowing the whole campaign.
        case .retry(let reason):
            verdict = .retry(reason: reason, retryAfterSeconds: nil, throttle: summary.status == 429 ? .device : .none)
        case .refreshTokenAndRetry: verdict = .reauthenticate(reason: "ExpiredProviderToken")
        case .stopRun(let reason):
            verdict = .stopRun(reason: reason, message: "APNs rejected the credential: \(summary.status) \(reason)")
        }
        return ProviderAnswer(status: summary.status, verdict: verdict)
    }

    public func credentialRejected(generation: UInt64) -> CredentialDecision {
        guard let source = settings.tokenSource, let seen = bearer else {
            return .stop("APNs answered 403 ExpiredProviderToken to certificate authentication")
        }
        switch source.refreshAfterExpired(seenToken: seen) {
        case .refreshed(let fresh):
            bearer = fresh
            bearerGeneration = fresh.generation
            return .retry
        case .tooSoon(_, let seconds):
            return .stop("APNs rejected a provider token signed less than 20 minutes ago as expired "
                + "(403 ExpiredProviderToken); check this host's clock. A new token may be signed in \(seconds) s.")
        }
    }
}
