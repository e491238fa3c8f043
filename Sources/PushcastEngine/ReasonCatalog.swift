import PushcastAPNs
import PushcastCore

/// Every reason a results line can carry that pushcast knows by name: APNs's documented reasons,
/// FCM's error codes and canonical statuses, and pushcast's own. Each says what it means and
/// what to do (docs/PROTOCOL.md §1.6 and §2.3, docs/USAGE.md, "Output files"). Two uses: a label for a
/// metric, where a reason outside this fixed set becomes `other` (a hostile server cannot grow
/// the label set), and the campaign report's table of failure reasons.
public enum ReasonCatalog {
    public struct Entry: Sendable {
        public let reason: String
        /// "APNs", "FCM" or "pushcast".
        public let source: String
        public let meaning: String
        public let action: String
        /// Where the full table is (the report links to it).
        public var reference: String {
            switch source {
            case "APNs": "docs/PROTOCOL.md §1.6"
            case "FCM": "docs/PROTOCOL.md §2.3"
            default: "docs/USAGE.md, Output files"
            }
        }
    }

    /// The label for reasons outside the catalog.
    public static let other = "other"

    /// The metric label for `reason`: the reason itself when the catalog has it, `Status4xx` or
    /// `Status5xx` for an answer without a reason (`Status503`), else `other`.
    public static func label(_ reason: String) -> String {
        if byReason[reason] != nil { return reason }
        let utf8 = Array(reason.utf8)
        if utf8.count == 9, reason.hasPrefix("Status"), utf8[6...].allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) {
            return "Status\(Character(UnicodeScalar(utf8[6])))xx"
        }
        return other
    }

    /// What the catalog says about a reason (nil for reasons it does not know).
    public static func entry(_ reason: String) -> Entry? { byReason[reason] }

    private static let byReason: [String: Entry] = {
        var table: [String: Entry] = [:]
        for entry in apns + fcm + own { table[entry.reason] = entry }
        return table
    }()

    private static func entries(_ source: String, _ rows: [(String, String, String)]) -> [Entry] {
        rows.map { Entry(reason: $0.0, source: source, meaning: $0.1, action: $0.2) }
    }

    static let apns = entries("APNs", [
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

    static let fcm = entries("FCM", [
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

    static let own = entries("pushcast", [
        (OutcomeReason.invalidToken, "the token is not a token (bad hex, bad length, bad characters)", "pruned: fix or delete the row"),
        (OutcomeReason.malformedRow, "the row could not be read (bad quoting, wrong field count, bad JSON)", "fix the export; the error column names the line and field"),
        (OutcomeReason.missingToken, "the row has no token", "fix the export"),
        (OutcomeReason.payloadTooLarge, "the rendered payload is over the provider's limit", "shorten the template or the row's values"),
        (OutcomeReason.duplicate, "the same token appears on an earlier row", "none: sent once; clean the export"),
        (OutcomeReason.providerNotConfigured, "the row's provider has no credentials in this run", "give that provider's options and resend"),
        (OutcomeReason.unknownProvider, "the platform column names no known provider", "fix the export's platform column"),
        (OutcomeReason.timeout, "no answer within --request-timeout", "fate unknown; resend with --retry-unknown if duplicates are acceptable"),
        (OutcomeReason.connectionLost, "the connection died after the request was sent", "fate unknown; resend with --retry-unknown if duplicates are acceptable"),
        (OutcomeReason.streamReset, "the server reset the stream after the request was sent", "fate unknown; check the server"),
        (OutcomeReason.answerCut, "the server answered (:status), then reset the stream or went away", "processed, fate unknown: never resent; check the proxy in front of the provider"),
        (OutcomeReason.retryAfterPastDeadline, "the server's Retry-After ends after the row's --request-timeout", "resend the failed rows later, or give a longer --request-timeout"),
        (OutcomeReason.retriesExhausted, "every attempt got a retryable answer (429, 5xx)", "resend the failed rows later"),
        (OutcomeReason.refusedStream, "the server refused the stream every time", "never processed: resend later"),
        (OutcomeReason.goAwayUnprocessed, "every connection went away before processing it", "never processed: resend later"),
        (OutcomeReason.notSent, "every connection died before the request went out", "never processed: resend later"),
        (OutcomeReason.responseTooLarge, "the answer was over pushcast's size limits", "fate unknown; check the server"),
        (OutcomeReason.flowControlBlocked, "the server never let the request body out", "never processed: resend later"),
        (OutcomeReason.interrupted, "the run was stopped while the request was in flight", "fate unknown; send --resume records it"),
        (OutcomeReason.interruptedInFlight, "an interrupted run may have sent it", "not sent again; --retry-unknown sends it"),
        (OutcomeReason.credentialRejected, "the provider rejected the credentials", "configuration: fix the key or service account"),
        (OutcomeReason.internalError, "pushcast failed on this row", "a bug: report it with pushcast --version"),
    ])
}
