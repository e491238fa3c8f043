// APNs answers as values (docs/DESIGN.md §2.9): the error body reader, the reason table (§1.6) and the
// verdict each (status, reason) leads to. The table is open-ended: an unknown reason is kept as
// text and classified by its status, never a crash.

import PushcastCore
import PushcastJSON
import PushcastWire

/// A `reason` string from an APNs error body (§1.6). `unknown` keeps anything new verbatim.
public enum APNsReason: Sendable, Hashable, CustomStringConvertible {
    case badCollapseId, badDeviceToken, badExpirationDate, badMessageId, badPriority, badTopic
    case deviceTokenNotForTopic, duplicateHeaders, idleTimeout, invalidPushType, missingDeviceToken
    case missingTopic, payloadEmpty, topicDisallowed
    case badCertificate, badCertificateEnvironment, expiredProviderToken, forbidden
    case invalidProviderToken, missingProviderToken, unrelatedKeyIdInToken, badEnvironmentKeyIdInToken
    case badPath, methodNotAllowed, expiredToken, unregistered, payloadTooLarge
    case tooManyProviderTokenUpdates, tooManyRequests, internalServerError, serviceUnavailable, shutdown
    case unknown(String)

    /// Every reason Apple documents, in the order of §1.6.
    public static let documented: [APNsReason] = [
        .badCollapseId, .badDeviceToken, .badExpirationDate, .badMessageId, .badPriority, .badTopic,
        .deviceTokenNotForTopic, .duplicateHeaders, .idleTimeout, .invalidPushType, .missingDeviceToken,
        .missingTopic, .payloadEmpty, .topicDisallowed,
        .badCertificate, .badCertificateEnvironment, .expiredProviderToken, .forbidden,
        .invalidProviderToken, .missingProviderToken, .unrelatedKeyIdInToken, .badEnvironmentKeyIdInToken,
        .badPath, .methodNotAllowed, .expiredToken, .unregistered, .payloadTooLarge,
        .tooManyProviderTokenUpdates, .tooManyRequests, .internalServerError, .serviceUnavailable, .shutdown,
    ]

    private static let byName: [String: APNsReason] = Dictionary(uniqueKeysWithValues: documented.map { ($0.rawValue, $0) })

    public init(_ text: String) {
        self = Self.byName[text] ?? .unknown(text)
    }

    /// The reason exactly as APNs spells it.
    public var rawValue: String {
        switch self {
        case .badCollapseId: return "BadCollapseId"
        case .badDeviceToken: return "BadDeviceToken"
        case .badExpirationDate: return "BadExpirationDate"
        case .badMessageId: return "BadMessageId"
        case .badPriority: return "BadPriority"
        case .badTopic: return "BadTopic"
        case .deviceTokenNotForTopic: return "DeviceTokenNotForTopic"
        case .duplicateHeaders: return "DuplicateHeaders"
        case .idleTimeout: return "IdleTimeout"
        case .invalidPushType: return "InvalidPushType"
        case .missingDeviceToken: return "MissingDeviceToken"
        case .missingTopic: return "MissingTopic"
        case .payloadEmpty: return "PayloadEmpty"
        case .topicDisallowed: return "TopicDisallowed"
        case .badCertificate: return "BadCertificate"
        case .badCertificateEnvironment: return "BadCertificateEnvironment"
        case .expiredProviderToken: return "ExpiredProviderToken"
        case .forbidden: return "Forbidden"
        case .invalidProviderToken: return "InvalidProviderToken"
        case .missingProviderToken: return "MissingProviderToken"
        case .unrelatedKeyIdInToken: return "UnrelatedKeyIdInToken"
        case .badEnvironmentKeyIdInToken: return "BadEnvironmentKeyIdInToken"
        case .badPath: return "BadPath"
        case .methodNotAllowed: return "MethodNotAllowed"
        case .expiredToken: return "ExpiredToken"
        case .unregistered: return "Unregistered"
        case .payloadTooLarge: return "PayloadTooLarge"
        case .tooManyProviderTokenUpdates: return "TooManyProviderTokenUpdates"
        case .tooManyRequests: return "TooManyRequests"
        case .internalServerError: return "InternalServerError"
        case .serviceUnavailable: return "ServiceUnavailable"
        case .shutdown: return "Shutdown"
        case .unknown(let text): return text
        }
    }

    public var description: String { rawValue }
}

/// What the sender does with one response.
public enum APNsVerdict: Sendable, Equatable {
    /// 200: accepted; keep the apns-id.
    case delivered
    /// The token is dead for this topic (410, BadDeviceToken, DeviceTokenNotForTopic): record it
    /// in the prune file; never retry.
    case prune(reason: String)
    /// Refused for a reason that retrying will not fix (other 4xx).
    case fail(reason: String)
    /// 429 and 5xx, and connection-level 4xx (IdleTimeout, UnrelatedKeyIdInToken): retry with
    /// backoff, on a fresh connection where the reason says so.
    case retry(reason: String)
    /// 403 ExpiredProviderToken: refresh the JWT once (`APNsTokenSource.refreshAfterExpired`) and
    /// resend.
    case refreshTokenAndRetry
    /// A configuration error that will fail every row (bad credential or topic): record what has
    /// arrived and stop the run with exit 2.
    case stopRun(reason: String)
}

/// An APNs error body, `{"reason":"…","timestamp":1234567890123}` (§1.5). Tolerant: a truncated,
/// non-JSON or hostile body yields whatever fields it had before the damage.
public struct APNsErrorBody: Sendable, Equatable {
    public var reason: String?
    /// Milliseconds since the Unix epoch at which APNs found the token invalid (410 only).
    public var timestampMilliseconds: Int64?

    public init(reason: String? = nil, timestampMilliseconds: Int64? = nil) {
        self.reason = reason
        self.timestampMilliseconds = timestampMilliseconds
    }

    public static func parse(_ body: [UInt8]) -> APNsErrorBody {
        body.withUnsafeBufferPointer { parse($0) }
    }

    public static func parse(_ body: UnsafeBufferPointer<UInt8>) -> APNsErrorBody {
        var result = APNsErrorBody()
        guard !body.isEmpty else { return result }
        for member in FlatObjectReader.read(body).members {
            switch (member.key, member.value) {
            case ("reason", .string(let text)) where result.reason == nil:
                result.reason = text
            case ("timestamp", .number(let text)) where result.timestampMilliseconds == nil,
                 ("timestamp", .string(let text)) where result.timestampMilliseconds == nil:
                result.timestampMilliseconds = Self.milliseconds(text)
            default:
                continue
            }
        }
        return result
    }

    /// `timestamp` as ISO 8601 UTC with milliseconds (`2026-01-02T03:04:05.678Z`), for
    /// `unregistered_at`; nil when absent or outside years 1970...9999.
    public var unregisteredAt: String? { timestampMilliseconds.flatMap(ISO8601.string(milliseconds:)) }

    /// An integer of milliseconds; a fraction is dropped, exponents and junk are refused.
    private static func milliseconds(_ text: String) -> Int64? {
        let whole = text.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? text
        return Int64(whole)
    }
}

/// The full reading of one response, for the results file.
public struct APNsResponseSummary: Sendable, Equatable {
    public let status: Int
    public let verdict: APNsVerdict
    /// The reason APNs gave (nil for 200 or a body without one).
    public let reason: APNsReason?
    public let timestampMilliseconds: Int64?
    /// The `apns-id` response header (APNs echoes ours or generates one).
    public let apnsID: String?

    public init(response: HTTP2Response) {
        let body = response.status == 200 ? APNsErrorBody() : APNsErrorBody.parse(response.body)
        status = response.status
        reason = body.reason.map(APNsReason.init)
        timestampMilliseconds = body.timestampMilliseconds
        apnsID = response.header("apns-id")
        verdict = APNsResponseClassifier.verdict(status: response.status, reason: reason)
    }

    public var unregisteredAt: String? { timestampMilliseconds.flatMap(ISO8601.string(milliseconds:)) }
}

/// The reason table (§1.6). Decisions where the sources leave room:
/// - BadTopic, MissingTopic and TopicDisallowed stop the run: the topic is per campaign, so every
///   row would fail the same way (docs/PROTOCOL.md §3 puts them in the abort set; the original table
///   lists BadTopic under "other 4xx", which would send millions of doomed requests).
/// - Forbidden fails the row (Apple: do not retry).
/// - IdleTimeout and UnrelatedKeyIdInToken are connection-level: retry (on a new connection).
/// - TooManyProviderTokenUpdates is a 429: retry later with the current token, never re-sign.
/// - Any other 403 reason, known or not, fails the row; unknown reasons under 429/5xx retry, under
///   410 prune, under other 4xx fail.
/// - A missing reason is reported as `Status<code>` (for example `Status503`).
public enum APNsResponseClassifier {
    public static func verdict(status: Int, reason: APNsReason?) -> APNsVerdict {
        if status == 200 { return .delivered }
        let text = reason?.rawValue ?? "Status\(status)"
        switch reason {
        case .badDeviceToken?, .deviceTokenNotForTopic?:
            return status == 400 ? .prune(reason: text) : byStatus(status, text)
        case .unregistered?, .expiredToken?:
            return .prune(reason: text)
        case .expiredProviderToken?:
            return .refreshTokenAndRetry
        case .invalidProviderToken?, .missingProviderToken?, .badCertificate?, .badCertificateEnvironment?,
             .badEnvironmentKeyIdInToken?, .badTopic?, .missingTopic?, .topicDisallowed?:
            return .stopRun(reason: text)
        case .idleTimeout?, .unrelatedKeyIdInToken?, .tooManyProviderTokenUpdates?, .tooManyRequests?,
             .internalServerError?, .serviceUnavailable?, .shutdown?:
            return .retry(reason: text)
        case .badCollapseId?, .badExpirationDate?, .badMessageId?, .badPriority?, .duplicateHeaders?,
             .invalidPushType?, .missingDeviceToken?, .payloadEmpty?, .forbidden?, .badPath?,
             .methodNotAllowed?, .payloadTooLarge?:
            return status == 429 || status >= 500 ? .retry(reason: text) : .fail(reason: text)
        case .unknown?, nil:
            return byStatus(status, text)
        }
    }

    private static func byStatus(_ status: Int, _ text: String) -> APNsVerdict {
        switch status {
        case 410: return .prune(reason: text)
        case 429, 500...599: return .retry(reason: text)
        default: return .fail(reason: text)
        }
    }
}

/// Proleptic Gregorian UTC formatting without Foundation (Howard Hinnant's days-to-civil).
enum ISO8601 {
    static let millisecondsMax: Int64 = 253_402_300_799_999  // 9999-12-31T23:59:59.999Z

    static func string(milliseconds: Int64) -> String? {
        guard milliseconds >= 0 && milliseconds <= millisecondsMax else { return nil }
        let time = CivilTime(epochSeconds: milliseconds / 1000)
        return time.text(separator: "T") + "." + CivilTime.pad(milliseconds % 1000, 3) + "Z"
    }
}
