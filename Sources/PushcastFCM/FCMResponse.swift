// FCM answers as values (docs/DESIGN.md §2.9): the Google error envelope reader, the error table
// (docs/PROTOCOL.md §2.3-§2.5) and the verdict each response leads to. Like the APNs table it is
// open-ended: an unknown errorCode is kept (bounded) and classified by its HTTP status, never a
// crash. Bodies are read defensively: a 502 HTML page, a truncated or hostile JSON body, or one
// cut at `Limits.responseBodyBytesMax` yields whatever it said before the damage.

import PushcastCore
import PushcastJSON
import PushcastProviderKit
import PushcastWire

/// What the sender does with one FCM response.
public enum FCMVerdict: Sendable, Equatable {
    /// 2xx: accepted. `name` is `projects/{project}/messages/{id}` when the body carried it.
    case delivered(name: String?)
    /// The token is dead for this project (UNREGISTERED, SENDER_ID_MISMATCH, or INVALID_ARGUMENT
    /// about the registration token): record it in the prune file; never retry.
    case prune(reason: String)
    /// Refused for a reason retrying will not fix (other INVALID_ARGUMENT, other 4xx).
    case fail(reason: String)
    /// 429 and 5xx: retry this message after a back-off (`retryAfterSeconds`: the Retry-After
    /// header when it was usable). `throttle` says whose limit the answer is about.
    case retry(reason: String, retryAfterSeconds: Double?, throttle: ThrottleScope)
    /// 401 UNAUTHENTICATED: the OAuth2 access token expired or was rejected; get a new one and
    /// resend. The engine must bound this (a credential that keeps failing is a stopRun).
    case refreshTokenAndRetry
    /// A configuration error that will fail every row (THIRD_PARTY_AUTH_ERROR, APNS_AUTH_ERROR,
    /// 403 PERMISSION_DENIED): stop the run with exit 2.
    case stopRun(reason: String)
}

/// The parts of a Google API error envelope that the table needs (§2.3):
/// `{"error":{"code":400,"message":"…","status":"INVALID_ARGUMENT","details":[{"@type":
/// "type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"…"},{"@type":
/// "type.googleapis.com/google.rpc.BadRequest","fieldViolations":[{"field":"message.token",…}]}]}}`.
public struct FCMErrorBody: Sendable, Equatable {
    /// The `errorCode` of the `FcmError` detail.
    public var errorCode: String?
    /// The canonical status (`error.status`, e.g. `NOT_FOUND`).
    public var status: String?
    /// `error.message`: at most `messageBytesMax` bytes, control characters turned into spaces.
    public var message: String?
    /// The `field` of each BadRequest field violation (at most `fieldViolationsKeptMax`).
    public var fieldViolations: [String]
    /// A `google.rpc.ErrorInfo` detail's `reason` (`RATE_LIMIT_EXCEEDED`) and its metadata's
    /// `quota_limit` (`SendsPerMinutePerProject`), which name the quota a 429 is about.
    public var errorInfoReason: String?
    public var quotaLimit: String?

    public static let messageBytesMax = 200
    public static let fieldViolationsKeptMax = 8
    /// Identifiers (errorCode, status) longer than this, or with bytes outside `[A-Za-z0-9_.]`,
    /// are dropped as hostile.
    public static let identifierBytesMax = 64

    public init(errorCode: String? = nil, status: String? = nil, message: String? = nil, fieldViolations: [String] = []) {
        self.errorCode = errorCode
        self.status = status
        self.message = message
        self.fieldViolations = fieldViolations
    }

    public static func parse(_ body: [UInt8]) -> FCMErrorBody {
        body.withUnsafeBufferPointer { parse($0) }
    }

    public static func parse(_ body: UnsafeBufferPointer<UInt8>) -> FCMErrorBody {
        var result = FCMErrorBody()
        let reader = JSONScanner(body)
        guard let root = reader.rootObject(), let error = reader.member("error", ofObjectAt: root) else { return result }
        for member in reader.members(ofObjectAt: error.lowerBound) {
            switch member.key {
            case "status" where result.status == nil:
                result.status = identifier(reader, member.value)
            case "message" where result.message == nil:
                result.message = reader.string(member.value, bytesMax: messageBytesMax)
            case "details":
                for detail in reader.elements(ofArrayAt: member.value.lowerBound) {
                    result.readDetail(reader, detail)
                }
            default:
                continue
            }
        }
        return result
    }

    private mutating func readDetail(_ reader: JSONScanner, _ detail: Range<Int>) {
        let members = reader.members(ofObjectAt: detail.lowerBound)
        guard let type = members.first(where: { $0.key == "@type" }).flatMap({ reader.string($0.value, bytesMax: 128) }) else { return }
        if type.hasSuffix("google.firebase.fcm.v1.FcmError") {
            if errorCode == nil, let code = members.first(where: { $0.key == "errorCode" }) {
                errorCode = Self.identifier(reader, code.value)
            }
        } else if type.hasSuffix("google.rpc.ErrorInfo") {
            if errorInfoReason == nil, let reason = members.first(where: { $0.key == "reason" }) {
                errorInfoReason = Self.identifier(reader, reason.value)
            }
            if quotaLimit == nil, let metadata = members.first(where: { $0.key == "metadata" }),
               let limit = reader.member("quota_limit", ofObjectAt: metadata.value.lowerBound) {
                quotaLimit = Self.identifier(reader, limit)
            }
        } else if type.hasSuffix("google.rpc.BadRequest"), let violations = members.first(where: { $0.key == "fieldViolations" }) {
            for violation in reader.elements(ofArrayAt: violations.value.lowerBound) where fieldViolations.count < Self.fieldViolationsKeptMax {
                if let field = reader.member("field", ofObjectAt: violation.lowerBound).flatMap({ reader.string($0, bytesMax: 128) }) {
                    fieldViolations.append(field)
                }
            }
        }
    }

    private static func identifier(_ reader: JSONScanner, _ range: Range<Int>) -> String? {
        guard let text = reader.string(range, bytesMax: identifierBytesMax + 1), !text.isEmpty, text.utf8.count <= identifierBytesMax,
              text.utf8.allSatisfy(isIdentifierByte)
        else { return nil }
        return text
    }

    private static func isIdentifierByte(_ byte: UInt8) -> Bool {
        JSONScanner.isWordByte(byte) || byte == UInt8(ascii: ".")
    }

    /// Whether a 429 names the project's quota (FCM's 600,000 messages a minute): an ErrorInfo
    /// with reason RATE_LIMIT_EXCEEDED, or a quota_limit that is per project. A 429 that names
    /// neither is about one device's own limits (240 a minute, 5,000 an hour).
    public var namesProjectQuota: Bool {
        errorInfoReason == "RATE_LIMIT_EXCEEDED" || (quotaLimit?.hasSuffix("PerProject") ?? false)
    }

    /// Whether the error is about the registration token (§2.4): a BadRequest violation on
    /// `message.token` says so; violations that all name other fields say it is not (a payload
    /// problem must never prune a live token); without violations, the message decides ("The
    /// registration token is not a valid FCM registration token").
    public var isAboutRegistrationToken: Bool {
        if !fieldViolations.isEmpty {
            return fieldViolations.contains { $0 == "message.token" || $0.hasPrefix("message.token.") }
        }
        guard let message else { return false }
        return Self.containsIgnoringASCIICase(message, "registration token")
    }

    private static func containsIgnoringASCIICase(_ text: String, _ needle: StaticString) -> Bool {
        let haystack = Array(text.utf8)
        let count = needle.utf8CodeUnitCount
        guard haystack.count >= count else { return false }
        return (0...(haystack.count - count)).contains { start in
            (0..<count).allSatisfy { haystack[start + $0] | 0x20 == needle.utf8Start[$0] | 0x20 }
        }
    }
}

/// The full reading of one response, for the results file.
public struct FCMResponseSummary: Sendable, Equatable {
    public let status: Int
    public let verdict: FCMVerdict
    /// The FcmError detail's `errorCode`, else the envelope's canonical `status`; nil on success
    /// or when the body said neither (a 502 HTML page).
    public let errorCode: String?
    /// `error.message`, bounded (see `FCMErrorBody.messageBytesMax`).
    public let message: String?
    /// The Retry-After header in seconds (delta-seconds, or an HTTP-date when `nowEpochSeconds` was
    /// given), capped at `RetryAfter.secondsMax`; nil when absent or unusable.
    public let retryAfterSeconds: Double?

    /// `nowEpochSeconds` (an injected wall clock) lets an HTTP-date Retry-After count; without it
    /// only delta-seconds do.
    public init(status: Int, headers: [HTTP2Header], body: [UInt8], nowEpochSeconds: Int64? = nil) {
        self.status = status
        retryAfterSeconds = headers.first { $0.name == "retry-after" }.flatMap { RetryAfter.seconds($0.value, nowEpochSeconds: nowEpochSeconds) }
        if (200..<300).contains(status) {
            errorCode = nil
            message = nil
            verdict = .delivered(name: FCMResponseSummary.messageName(body))
            return
        }
        let parsed = FCMErrorBody.parse(body)
        errorCode = parsed.errorCode ?? parsed.status
        message = parsed.message
        verdict = FCMResponseClassifier.verdict(status: status, body: parsed, retryAfterSeconds: retryAfterSeconds)
    }

    public init(response: HTTP2Response, nowEpochSeconds: Int64? = nil) {
        self.init(status: response.status, headers: response.headers, body: response.body, nowEpochSeconds: nowEpochSeconds)
    }

    /// The longest message name kept.
    public static let nameBytesMax = 256

    /// `name` of a success body `{"name":"projects/p/messages/0:123"}`.
    static func messageName(_ body: [UInt8]) -> String? {
        body.withUnsafeBufferPointer { bytes in
            let reader = JSONScanner(bytes)
            guard let root = reader.rootObject(), let name = reader.member("name", ofObjectAt: root) else { return nil }
            return reader.string(name, bytesMax: nameBytesMax)
        }
    }
}

/// The error table (§2.3, §2.4, §2.5). Decisions where the sources leave room:
/// - The FcmError `errorCode` decides when present and known; otherwise the HTTP status does
///   (the canonical `status` only names the reason).
/// - INVALID_ARGUMENT prunes only when it is about the registration token
///   (`FCMErrorBody.isAboutRegistrationToken`); otherwise it fails the row.
/// - A 404 without UNREGISTERED fails the row rather than pruning it: a wrong project id also
///   answers 404 NOT_FOUND, and pruning every token for it would be a disaster.
/// - 401 refreshes the access token unless the errorCode is THIRD_PARTY_AUTH_ERROR (or the older
///   APNS_AUTH_ERROR), which is the app's APNs/web-push credential in Firebase: stop the run.
/// - Any 403 other than SENDER_ID_MISMATCH stops the run (PERMISSION_DENIED: the service account
///   may not send for this project, so every row would fail).
/// - Any 2xx is delivered; every 5xx retries. A 429 (or QUOTA_EXCEEDED) that names the project
///   quota slows the whole provider; any other is about one device, and only its row waits
///   (the engine still slows the provider when such 429s come from many devices at once).
/// - UNSPECIFIED_ERROR and unknown codes fall back to the HTTP status.
/// - The reason is the errorCode, else the canonical status, else `Status<code>` (as for APNs).
public enum FCMResponseClassifier {
    public static func verdict(status: Int, body: FCMErrorBody, retryAfterSeconds: Double?) -> FCMVerdict {
        if (200..<300).contains(status) { return .delivered(name: nil) }
        let reason = body.errorCode ?? body.status ?? "Status\(status)"
        switch body.errorCode {
        case "UNREGISTERED"?, "SENDER_ID_MISMATCH"?:
            return .prune(reason: reason)
        case "THIRD_PARTY_AUTH_ERROR"?, "APNS_AUTH_ERROR"?:
            return .stopRun(reason: reason)
        case "QUOTA_EXCEEDED"?:
            return .retry(reason: reason, retryAfterSeconds: retryAfterSeconds, throttle: body.namesProjectQuota ? .provider : .device)
        case "UNAVAILABLE"?, "INTERNAL"?:
            return .retry(reason: reason, retryAfterSeconds: retryAfterSeconds, throttle: .none)
        case "INVALID_ARGUMENT"?:
            return body.isAboutRegistrationToken ? .prune(reason: reason) : .fail(reason: reason)
        default:
            break
        }
        switch status {
        case 429:
            return .retry(reason: reason, retryAfterSeconds: retryAfterSeconds, throttle: body.namesProjectQuota ? .provider : .device)
        case 500...599:
            return .retry(reason: reason, retryAfterSeconds: retryAfterSeconds, throttle: .none)
        case 401:
            return .refreshTokenAndRetry
        case 403:
            return .stopRun(reason: reason)
        case 400 where body.errorCode == nil && body.status == "INVALID_ARGUMENT" && body.isAboutRegistrationToken:
            return .prune(reason: reason)
        default:
            return .fail(reason: reason)
        }
    }
}
