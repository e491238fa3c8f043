import PushcastCore
import PushcastJSON
import PushcastProviderKit
import PushcastWire

// FCM HTTP v1 as a pushcast provider: its routing and token rules, its bodies, its send adapter
// and its reason table. The catalog line is `FCMPushProvider()` (PushcastProviders); the OAuth2
// access token it sends with is `FCMAccessTokens`.

public struct FCMPushProvider: PushProvider {
    public init() {}
    public var id: ProviderID { .fcm }
    public var displayName: String { "FCM" }
    public var platformAliases: [String] { ["android", "firebase"] }
    public var messageIDField: String { "fcm_name" }
    /// FCM's default quota is per project: 600,000 messages a minute.
    public var defaultRatePerSecond: Double? { 10_000 }
    public func normalize(token raw: UnsafeRawBufferPointer, into output: inout [UInt8]) -> TokenProblem? {
        do { try FCMToken.normalize(raw, into: &output) } catch { return TokenProblem(error.description) }
        return nil
    }
    public var reasons: ReasonTable { Self.reasonTable }

    /// FCM's error codes and canonical statuses (docs/PROTOCOL.md §2.3).
    static let reasonTable = ReasonTable(source: "FCM", reference: "docs/PROTOCOL.md §2.3", [
        ("UNSPECIFIED_ERROR", "nothing more is known", "look at the status; resend later"),
        ("INVALID_ARGUMENT", "a bad request: malformed token, wrong package, message too big, bad field",
         "pruned when about the token; otherwise fix the FCM message template"),
        ("UNREGISTERED", "the app instance is gone (uninstalled, token expired or refreshed)", "pruned: delete the token"),
        ("SENDER_ID_MISMATCH", "the token belongs to another Firebase project", "pruned for this project"),
        ("QUOTA_EXCEEDED", "over the project, device or topic rate", "retried with backoff; lower --rate fcm=N/s"),
        ("UNAVAILABLE", "FCM is overloaded", "retried with backoff; resend the failed rows later"),
        ("INTERNAL", "FCM failed internally", "retried with backoff; resend the failed rows later"),
        ("THIRD_PARTY_AUTH_ERROR", "the app's APNs or web-push credential in Firebase is invalid or missing",
         "configuration: fix the credential in the Firebase console"),
        ("APNS_AUTH_ERROR", "older name of THIRD_PARTY_AUTH_ERROR", "configuration: fix the APNs credential in Firebase"),
        ("NOT_FOUND", "404 without UNREGISTERED (a wrong project id answers this too)", "check the service account's project"),
        ("PERMISSION_DENIED", "the service account may not send for this project", "configuration: grant it the FCM sender role"),
        ("UNAUTHENTICATED", "the access token expired or was rejected", "none: pushcast fetches a new one; if it persists, check the key"),
        ("RESOURCE_EXHAUSTED", "a quota was exceeded", "retried with backoff; lower --rate fcm=N/s"),
        ("DEADLINE_EXCEEDED", "FCM did not finish in time", "resend the failed rows later"),
    ])
}

/// FCM bodies: `{"message":{…}}` from the message template, the token inside; 4096 bytes.
public struct FCMRendering: ProviderRendering {
    public let template: FCMMessageTemplate
    public init(template: FCMMessageTemplate) { self.template = template }
    public func makeRenderer(campaign: String) -> any NotificationRenderer { Renderer(template) }

    final class Renderer: NotificationRenderer {
        let template: FCMMessageTemplate
        init(_ template: FCMMessageTemplate) { self.template = template }
        var bodyBytesMax: Int { FCMMessageTemplate.messageBytesMax }
        var bodyName: String { "FCM message" }
        func render(token: UnsafeRawBufferPointer, into buffer: inout [UInt8], field: (Int) -> UnsafeRawBufferPointer?) -> Int {
            template.render(token: token, into: &buffer, value: field)
        }
        func notificationID(token: UnsafeRawBufferPointer) -> PackedText? { nil }
    }
}

/// FCM send settings every worker shares.
public struct FCMSendSettings: Sendable {
    public var authority: String
    /// `/v1/projects/{project}/messages:send`.
    public var path: String
    public var tokens: FCMAccessTokens
    public init(authority: String, project: String, tokens: FCMAccessTokens) {
        self.authority = authority
        self.path = FCMProvider.sendPath(project: project)
        self.tokens = tokens
    }
}

/// FCM HTTP v1: `POST /v1/projects/{project}/messages:send` with the shared bearer token.
public final class FCMAdapter: ProviderAdapter {
    private let settings: FCMSendSettings
    private var generation: UInt64 = 0

    public init(settings: FCMSendSettings) { self.settings = settings }

    public var provider: ProviderID { .fcm }
    /// The token is inside the body; FCM names the message in its answer.
    public var layout: RequestLayout { RequestLayout(tokenInPath: false, idInHeader: false) }
    public var credentialPollNanoseconds: UInt64 { 20_000_000 }
    public var credentialReady: Bool { settings.tokens.current() != nil }

    public func makeRequest() -> HTTP2Request { HTTP2Request(authority: settings.authority, path: settings.path) }

    public func authorize(_ request: inout HTTP2Request) -> UInt64? {
        guard let (token, current) = settings.tokens.current() else { return nil }
        if current != generation || request.fixedHeaders == nil {
            generation = current
            request.fixedHeaders = HTTP2HeaderTemplate([HTTP2Header("authorization", "Bearer " + token),
                                                        HTTP2Header("content-type", "application/json")])
        }
        return current
    }

    public func classify(_ response: HTTP2Response) -> ProviderAnswer {
        let summary = FCMResponseSummary(response: response)
        let verdict: ProviderVerdict
        switch summary.verdict {
        case .delivered(let name): verdict = .delivered(messageID: name)
        case .prune(let reason): verdict = .prune(reason: reason, unregisteredAt: nil)
        case .fail(let reason): verdict = .fail(reason: reason)
        case .retry(let reason, let retryAfter, let throttle): verdict = .retry(reason: reason, retryAfterSeconds: retryAfter, throttle: throttle)
        case .refreshTokenAndRetry: verdict = .reauthenticate(reason: summary.errorCode ?? "UNAUTHENTICATED")
        case .stopRun(let reason):
            verdict = .stopRun(reason: reason, message: "FCM rejected the credential: \(summary.status) \(reason)"
                + (summary.message.map { " (\($0))" } ?? ""))
        }
        return ProviderAnswer(status: summary.status, verdict: verdict)
    }

    public func credentialRejected(generation: UInt64) -> CredentialDecision {
        settings.tokens.rejected(generation: generation)
    }
}
