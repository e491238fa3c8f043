import PushcastCore
import PushcastJSON
import PushcastProviderKit
import PushcastWire

// APNs as a pushcast provider: its routing and token rules, its bodies, its send adapter and
// its reason table. The catalog line is `APNsPushProvider()` (PushcastProviders).

public struct APNsPushProvider: PushProvider {
    public init() {}
    public var id: ProviderID { .apns }
    public var displayName: String { "APNs" }
    public var platformAliases: [String] { ["ios", "ipados", "macos", "watchos", "tvos"] }
    public var messageIDField: String { "apns_id" }
    public func normalize(token raw: UnsafeRawBufferPointer, into output: inout [UInt8]) -> TokenProblem? {
        do { try APNsDeviceToken.normalize(raw, into: &output) } catch { return TokenProblem(error.description) }
        return nil
    }
    public var reasons: ReasonTable { Self.reasonTable }

    /// APNs's documented reasons (docs/PROTOCOL.md §1.6).
    static let reasonTable = ReasonTable(source: "APNs", reference: "docs/PROTOCOL.md §1.6", [
        ("BadCollapseId", "collapse id over 64 bytes", "fix --collapse-id; do not retry"),
        ("BadDeviceToken", "malformed token, or a token of the other environment (sandbox/production)", "pruned; check --apns-environment if many"),
        ("BadExpirationDate", "bad apns-expiration", "fix --expiration"),
        ("BadMessageId", "bad apns-id", "a client bug: report it"),
        ("BadPriority", "bad apns-priority", "fix --priority"),
        ("BadTopic", "bad apns-topic", "configuration: fix --apns-topic"),
        ("DeviceTokenNotForTopic", "the token belongs to another app or topic", "pruned for this topic"),
        ("DuplicateHeaders", "a header appears twice", "a client bug: report it"),
        ("IdleTimeout", "the connection sat idle too long", "none: pushcast reconnects and resends"),
        ("InvalidPushType", "bad apns-push-type", "fix --push-type"),
        ("MissingDeviceToken", "no token in the request path", "fix the input's token column"),
        ("MissingTopic", "a topic is required (multi-topic certificate)", "give --apns-topic"),
        ("PayloadEmpty", "empty body", "fix the payload template"),
        ("TopicDisallowed", "pushing to this topic is not allowed", "configuration: check the topic and key"),
        ("BadCertificate", "the certificate was rejected", "configuration: renew or replace --apns-cert"),
        ("BadCertificateEnvironment", "the certificate is for the other environment", "configuration: match --apns-environment"),
        ("ExpiredProviderToken", "the JWT is more than an hour old", "none: pushcast signs a new one and resends"),
        ("Forbidden", "the action is not allowed", "do not retry; check the account"),
        ("InvalidProviderToken", "the JWT is invalid or its signature fails", "configuration: check --apns-key, --apns-key-id, --apns-team-id"),
        ("MissingProviderToken", "neither a certificate nor a JWT", "configuration: give credentials"),
        ("UnrelatedKeyIdInToken", "the key id differs from the one the connection first used", "none: pushcast moves to a new connection"),
        ("BadEnvironmentKeyIdInToken", "the key id is not valid for this environment", "configuration: match the key and --apns-environment"),
        ("BadPath", "bad request path", "a client bug: report it"),
        ("MethodNotAllowed", "a method other than POST", "a client bug: report it"),
        ("ExpiredToken", "the device token expired", "pruned: delete the token"),
        ("Unregistered", "the token is no longer active for the topic (the app was removed, or notifications turned off)",
         "pruned: delete the token (compare unregistered_at with when it was registered)"),
        ("PayloadTooLarge", "payload over the limit (4 KB, 5 KB for VoIP)", "shorten the payload template; the token is fine"),
        ("TooManyProviderTokenUpdates", "the JWT changed too often", "none: pushcast keeps its JWT and resends later"),
        ("TooManyRequests", "too many pushes in a row to one device", "retried after a delay; send less often to that device"),
        ("InternalServerError", "APNs failed internally", "retried with backoff; resend the failed rows later"),
        ("ServiceUnavailable", "APNs is unavailable", "retried with backoff; resend the failed rows later"),
        ("Shutdown", "this APNs server is shutting down", "none: pushcast resends on another connection"),
    ])
}

/// APNs bodies: the payload template, 4096 bytes (5120 for voip), and the apns-id derived from
/// (campaign, token).
public struct APNsRendering: ProviderRendering {
    public let template: PayloadTemplate
    public let payloadBytesMax: Int
    public init(template: PayloadTemplate, payloadBytesMax: Int) {
        self.template = template
        self.payloadBytesMax = payloadBytesMax
    }
    public func makeRenderer(campaign: String) -> any NotificationRenderer { Renderer(self, campaign: campaign) }

    final class Renderer: NotificationRenderer {
        let rendering: APNsRendering
        /// One SHA-256 context for the reader thread's apns-id derivations.
        let ids: APNsIDGenerator
        init(_ rendering: APNsRendering, campaign: String) {
            self.rendering = rendering
            ids = APNsIDGenerator(campaign: campaign)
        }
        var bodyBytesMax: Int { rendering.payloadBytesMax }
        var bodyName: String { "payload" }
        func render(token: UnsafeRawBufferPointer, into buffer: inout [UInt8], field: (Int) -> UnsafeRawBufferPointer?) -> Int {
            rendering.template.render(into: &buffer, value: field)
        }
        func notificationID(token: UnsafeRawBufferPointer) -> PackedText? { ids.derivePacked(token: token) }
    }
}

/// Campaign-wide APNs settings every worker shares.
public struct APNsSendSettings: Sendable {
    public var headers: APNsCampaignHeaders
    /// Token auth: the shared JWT source. Nil with certificate auth.
    public var tokenSource: APNsTokenSource?
    public var authority: String

    public init(headers: APNsCampaignHeaders, tokenSource: APNsTokenSource?, authority: String) {
        self.headers = headers
        self.tokenSource = tokenSource
        self.authority = authority
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

    public init(settings: APNsSendSettings) {
        self.settings = settings
        bearer = settings.tokenSource?.current()
        bearerGeneration = bearer?.generation ?? 0
    }

    public var provider: ProviderID { .apns }
    /// The token and apns-id stay packed: the session formats them into the header block.
    public var layout: RequestLayout { RequestLayout(tokenInPath: true, idInHeader: true) }
    public var credentialPollNanoseconds: UInt64 { 0 }
    public var credentialReady: Bool { true }

    public func makeRequest() -> HTTP2Request { HTTP2Request(authority: settings.authority, path: "/3/device/") }

    public func authorize(_ request: inout HTTP2Request) -> UInt64? {
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
        if generation != headersGeneration || request.fixedHeaders == nil {
            // The campaign's headers and the bearer are laid out once per credential; apns-id is
            // the only header left to change per request.
            let all = settings.headers.headers(authorization: bearer?.authorization, apnsID: "")
            request.fixedHeaders = HTTP2HeaderTemplate(all.filter { $0.name != "apns-id" })
            request.headers = []
            let id = all.first { $0.name == "apns-id" }!
            request.packedHeader = HTTP2PackedHeader(name: id.name, value: .empty, neverIndexed: id.neverIndexed)
            headersGeneration = generation
        }
        return generation
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
