// The FCM HTTP v1 side of the mock (docs/PROTOCOL.md §2), on a port of its own with FCM's
// SETTINGS (100 concurrent streams). It plays both Google services a sender talks to:
// - the OAuth2 token endpoint, `POST /token`: a form body with a service account's RS256
//   assertion, checked with `OAuthAssertionVerifier`; answers an opaque access token or Google's
//   `{"error":"invalid_grant",…}`;
// - FCM, `POST /v1/projects/{project}/messages:send`: bearer token, project, content type, body
//   shape (exactly one target, string-only `data`, 4096 payload bytes), then outcomes by token
//   prefix. Errors use Google's envelope with an FcmError detail, as §2.3 shows.
// Unknown paths get the HTML 404 page Google's front end serves, so clients meet a non-JSON body.

import PushcastCore
import PushcastFCM
import PushcastJSON
import PushcastSystem
import PushcastWire
import Synchronization

/// Where the mock's FCM service account comes from.
public enum MockFCMCredentials: Sendable {
    /// A fresh one, written (0600) as `fcm-service-account.json` into this directory once the port
    /// is known, since its `token_uri` names the mock's token endpoint.
    case generated(directory: String)
    /// An existing service-account file; the mock verifies assertions with its key's public half
    /// and accepts `aud` equal to either the advertised token URI or the file's `token_uri`.
    case serviceAccount(path: String)
}

public struct MockFCMConfiguration: Sendable {
    /// 0 picks a free port.
    public var port: UInt16 = 0
    /// SETTINGS_MAX_CONCURRENT_STREAMS on FCM connections (FCM advertises 100, §2.8).
    public var streamsPerConnectionMax = 100
    public var credentials: MockFCMCredentials
    /// The project sends must name; nil: the service account's, or `pushcast-demo` when generated.
    public var projectID: String? = nil
    /// `client_email` of a generated service account.
    public var clientEmail = "pushcast-mock@pushcast-demo.iam.gserviceaccount.com"
    /// `expires_in` of issued access tokens; an older bearer gets 401 UNAUTHENTICATED.
    public var tokenTTLSeconds = 3600
    /// `retry-after` of the `4290` prefix's 429.
    public var retryAfterSeconds = 1
    /// `--fcm-quota N/min`: the project quota, messages per rolling minute; nil: none.
    public var quotaPerMinute: Int? = nil
    /// Sends must carry a bearer the token endpoint issued (off with `mock --auth none`).
    public var requiresBearer = true
    /// Wall time in milliseconds since the epoch: token expiry and assertion times. Tests inject
    /// their own.
    public var wallMilliseconds: @Sendable () -> Int64 = { Int64(SystemClock.wallClockSeconds() * 1000) }

    public init(credentials: MockFCMCredentials) { self.credentials = credentials }

    /// The largest send body the FCM listener reads (bigger ones reset the stream); well above the
    /// 4096-byte payload limit so that an oversized message gets FCM's 400, not a reset.
    static let requestBodyBytesMax = 64 * 1024
}

/// What the mock tells clients about its FCM side.
public struct MockFCMEndpoint: Sendable, Equatable {
    public let port: UInt16
    /// `https://HOST:PORT`
    public let endpoint: String
    /// `https://HOST:PORT/token`
    public let tokenURI: String
    /// The service-account file a client signs with.
    public let credentialsPath: String
    public let projectID: String

    /// The stdout line: `FCM_ENDPOINT=https://127.0.0.1:PORT FCM_CREDENTIALS=/path/fcm-service-account.json FCM_TOKEN_URI=https://127.0.0.1:PORT/token`.
    public var announcement: String {
        "FCM_ENDPOINT=\(endpoint) FCM_CREDENTIALS=\(credentialsPath) FCM_TOKEN_URI=\(tokenURI)"
    }
}

/// What the FCM workers need that is known only once the port is bound (the token URI is the
/// assertions' audience). Until it is set, requests get 503.
struct MockFCMSetup: Sendable {
    let projectID: String
    let sendPath: String
    /// One per accepted audience.
    let verifiers: [OAuthAssertionVerifier]
}

/// State every FCM worker shares: the setup, and the access tokens issued (token → expiry, ms).
/// Bounded: past `tokensMax` the expired ones are dropped, then the oldest.
final class MockFCMShared: Sendable {
    static let tokensMax = 65_536
    let configuration: MockFCMConfiguration
    let failOnce: MockSharedState
    let quota: MockProjectQuota?
    private let setupState = Mutex<MockFCMSetup?>(nil)
    private let tokens = Mutex<[String: Int64]>([:])

    init(configuration: MockFCMConfiguration, failOnce: MockSharedState) {
        self.configuration = configuration
        self.failOnce = failOnce
        quota = configuration.quotaPerMinute.map(MockProjectQuota.init(perMinute:))
    }

    var setup: MockFCMSetup? {
        get { setupState.withLock { $0 } }
    }

    func install(_ setup: MockFCMSetup) { setupState.withLock { $0 = setup } }

    /// A new random opaque token, valid for the configured TTL from `nowMilliseconds`.
    func issueToken(nowMilliseconds: Int64) -> String {
        var generator = SystemRandomNumberGenerator()
        let digits = Array("0123456789abcdef".utf8)
        var token = Array("ya29.mock-".utf8)
        for _ in 0..<4 {
            let word = generator.next()
            for shift in stride(from: 60, through: 0, by: -4) { token.append(digits[Int(word >> UInt64(shift) & 15)]) }
        }
        let text = String(decoding: token, as: UTF8.self)
        let expiry = nowMilliseconds + Int64(configuration.tokenTTLSeconds) * 1000
        tokens.withLock { issued in
            if issued.count >= Self.tokensMax {
                issued = issued.filter { $0.value > nowMilliseconds }
                while issued.count >= Self.tokensMax, let oldest = issued.min(by: { $0.value < $1.value }) { issued.removeValue(forKey: oldest.key) }
            }
            issued[text] = expiry
        }
        return text
    }

    /// Whether `token` was issued here and has not expired at `nowMilliseconds`.
    func isValid(_ token: Substring, nowMilliseconds: Int64) -> Bool {
        let expiry = tokens.withLock { $0[String(token)] }
        guard let expiry else { return false }
        return nowMilliseconds < expiry
    }
}

/// A send the rules refuse, carried through the checks as a typed error.
struct MockFCMRefusal: Error {
    let answer: MockFCMAnswer
    init(_ answer: MockFCMAnswer) { self.answer = answer }
}

/// One FCM answer before latency and connection effects.
struct MockFCMAnswer: Sendable {
    var status: Int
    var body: [UInt8]
    /// The FcmError `errorCode`, else the canonical status, of a refusal (logs).
    var error: String?
    var extraHeaders: [HTTP2Header] = []
    var contentType = "application/json; charset=UTF-8"

    var headers: [HTTP2Header] { [HTTP2Header("content-type", contentType)] + extraHeaders }

    /// Google's error envelope (§2.3), with an FcmError detail when `fcmErrorCode` is given and a
    /// BadRequest field violation when `violation` is.
    static func googleError(code: Int, status: String, message: String, fcmErrorCode: String? = nil,
                            violation: (field: String, description: String)? = nil, projectQuota: Bool = false) -> MockFCMAnswer {
        var body: [UInt8] = Array(#"{"error":{"code":\#(code),"message":"#.utf8)
        JSONWriter.appendString(message, to: &body)
        body += Array(#","status":"#.utf8)
        JSONWriter.appendString(status, to: &body)
        var details: [[UInt8]] = []
        if let fcmErrorCode {
            var detail: [UInt8] = Array(#"{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"#.utf8)
            JSONWriter.appendString(fcmErrorCode, to: &detail)
            details.append(detail + [UInt8(ascii: "}")])
        }
        if projectQuota {
            details.append(Array((#"{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"RATE_LIMIT_EXCEEDED","domain":"googleapis.com","#
                + #""metadata":{"quota_metric":"fcm.googleapis.com/send_requests","quota_limit":"SendsPerMinutePerProject","#
                + #""service":"fcm.googleapis.com"}}"#).utf8))
        }
        if let violation {
            var detail: [UInt8] = Array(#"{"@type":"type.googleapis.com/google.rpc.BadRequest","fieldViolations":[{"field":"#.utf8)
            JSONWriter.appendString(violation.field, to: &detail)
            detail += Array(#","description":"#.utf8)
            JSONWriter.appendString(violation.description, to: &detail)
            details.append(detail + Array("}]}".utf8))
        }
        if !details.isEmpty { body += Array(#","details":["#.utf8) + details.joined(separator: [UInt8(ascii: ",")]) + [UInt8(ascii: "]")] }
        body += Array("}}".utf8)
        return MockFCMAnswer(status: code, body: body, error: fcmErrorCode ?? status)
    }

    static func invalidArgument(_ message: String, fcmErrorCode: String? = "INVALID_ARGUMENT",
                                violation: (field: String, description: String)? = nil) -> MockFCMAnswer {
        googleError(code: 400, status: "INVALID_ARGUMENT", message: message, fcmErrorCode: fcmErrorCode, violation: violation)
    }

    static let unauthenticated: MockFCMAnswer = {
        var answer = googleError(
            code: 401, status: "UNAUTHENTICATED",
            message: "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project.")
        answer.extraHeaders = [HTTP2Header("www-authenticate", #"Bearer realm="https://accounts.google.com/""#)]
        return answer
    }()

    /// What `--error-rate` and `--rate-limit` inject on the FCM port.
    static func fault(status: Int, retryAfterSeconds: Int) -> MockFCMAnswer {
        switch status {
        case 429: return projectQuotaExceeded(retryAfterSeconds: retryAfterSeconds)
        case 500: return googleError(code: 500, status: "INTERNAL", message: "Internal error encountered.", fcmErrorCode: "INTERNAL")
        default: return googleError(code: 503, status: "UNAVAILABLE", message: "The service is currently unavailable.", fcmErrorCode: "UNAVAILABLE")
        }
    }

    /// One device over its own limits (240 messages a minute, 5,000 an hour): QUOTA_EXCEEDED,
    /// and nothing that names the project's quota.
    static func deviceQuotaExceeded(retryAfterSeconds: Int) -> MockFCMAnswer {
        var answer = googleError(code: 429, status: "RESOURCE_EXHAUSTED", message: "Quota exceeded for the device's message rate.",
                                 fcmErrorCode: "QUOTA_EXCEEDED")
        answer.extraHeaders = [HTTP2Header("retry-after", String(retryAfterSeconds))]
        return answer
    }

    /// The project's quota (600,000 messages a minute), as FCM names it: a `google.rpc.ErrorInfo`
    /// with reason RATE_LIMIT_EXCEEDED and the quota's metric and limit.
    static func projectQuotaExceeded(retryAfterSeconds: Int) -> MockFCMAnswer {
        var answer = googleError(code: 429, status: "RESOURCE_EXHAUSTED",
                                 message: "Quota exceeded for quota metric 'Send requests' and limit 'Send requests per minute' of service 'fcm.googleapis.com'.",
                                 fcmErrorCode: "QUOTA_EXCEEDED", projectQuota: true)
        answer.extraHeaders = [HTTP2Header("retry-after", String(retryAfterSeconds))]
        return answer
    }

    /// Google's front end answers unknown paths with an HTML page.
    static let notFoundPage = MockFCMAnswer(
        status: 404,
        body: Array("<!DOCTYPE html>\n<html lang=en><meta charset=utf-8><title>Error 404 (Not Found)!!1</title><p><b>404.</b> <ins>That’s an error.</ins><p>The requested URL was not found on this server. <ins>That’s all we know.</ins>\n".utf8),
        error: "NOT_FOUND", contentType: "text/html; charset=UTF-8")

    static let notReady = googleError(code: 503, status: "UNAVAILABLE", message: "The mock is still starting.", fcmErrorCode: "UNAVAILABLE")
}

/// The FCM rules for one send, in the order FCM applies them: path, bearer, project, content
/// type, body shape, payload size (4096 bytes to a token, 2048 to a topic or condition, §2.6);
/// then the outcomes by token prefix (`dead`, `bad0`, `mism`, `5030`, `4290` a device's quota,
/// `4291` the project's; case-sensitive, as
/// FCM tokens are).
struct MockFCMRules {
    static let payloadBytesMax = 4096
    static let sendPrefix = "/v1/projects/"
    static let sendSuffix = "/messages:send"

    let shared: MockFCMShared

    /// The answer, and the message's token (for the log) when the body named one.
    func evaluate(_ request: HTTP2ServerRequest, setup: MockFCMSetup, nowMilliseconds: Int64) -> (MockFCMAnswer, String?) {
        let path = request.path
        guard path.hasPrefix(Self.sendPrefix), path.hasSuffix(Self.sendSuffix) else { return (.notFoundPage, nil) }
        guard request.method(is: "POST") else { return (.notFoundPage, nil) }
        if shared.configuration.requiresBearer && !hasValidBearer(request, nowMilliseconds: nowMilliseconds) { return (.unauthenticated, nil) }
        guard path == setup.sendPath else {
            let project = path.dropFirst(Self.sendPrefix.utf8.count).dropLast(Self.sendSuffix.utf8.count)
            return (.googleError(code: 403, status: "PERMISSION_DENIED",
                                 message: "Permission 'cloudmessaging.messages.create' denied on resource '//cloudresourcemanager.googleapis.com/projects/\(UntrustedText.sanitized(String(project), limit: 64))' (or it may not exist)."),
                    nil)
        }
        guard let contentType = request.header("content-type"), contentType.lowercased().hasPrefix("application/json") else {
            return (.invalidArgument("Invalid JSON payload received. The Content-Type must be application/json.", fcmErrorCode: nil), nil)
        }
        var token: String?
        do throws(MockFCMRefusal) {
            let (message, validateOnly) = try Self.message(in: request.body)
            _ = try Self.target(of: message)
            token = message["token"]?.stringValue
            try Self.checkData(message)
            let payloadBytes = Self.payloadBytes(message)
            let limit = message["token"] == nil ? Self.payloadBytesMax / 2 : Self.payloadBytesMax
            guard payloadBytes <= limit else {
                // FCM's "too big" answer carries no FcmError detail (docs/PROTOCOL.md §2.3).
                throw MockFCMRefusal(.invalidArgument("Message is too big. Limit is \(limit) bytes, got \(payloadBytes).", fcmErrorCode: nil))
            }
            if let token, let answer = outcome(forToken: token) { return (answer, token) }
            return (MockFCMAnswer(status: 200, body: Self.successBody(setup: setup, validateOnly: validateOnly), error: nil), token)
        } catch {
            return (error.answer, token)
        }
    }

    private func hasValidBearer(_ request: HTTP2ServerRequest, nowMilliseconds: Int64) -> Bool {
        guard let value = request.header("authorization"), value.utf8.count > 7,
              value.prefix(7).lowercased() == "bearer " else { return false }
        return shared.isValid(value.dropFirst(7), nowMilliseconds: nowMilliseconds)
    }

    /// The body's `message` object and `validate_only`; unknown top-level members and a
    /// non-boolean `validate_only` are refused as FCM does.
    static func message(in body: [UInt8]) throws(MockFCMRefusal) -> (JSONValue, validateOnly: Bool) {
        guard case .success(let root) = JSONScanner.parse(body), let members = root.members else {
            throw MockFCMRefusal(.invalidArgument("Invalid JSON payload received. Unexpected token.", fcmErrorCode: nil))
        }
        var validateOnly = false
        for member in members {
            switch member.key {
            case "message": continue
            case "validate_only", "validateOnly":
                guard case .bool(let flag) = member.value else {
                    let text = "Invalid value at 'validate_only' (TYPE_BOOL), \(summary(member.value))"
                    throw MockFCMRefusal(.invalidArgument(text, fcmErrorCode: nil, violation: ("validate_only", text)))
                }
                validateOnly = flag
            default:
                let name = JSONWriter.quoted(UntrustedText.sanitized(member.key, limit: 64))
                throw MockFCMRefusal(.invalidArgument("Invalid JSON payload received. Unknown name \(name): Cannot find field.", fcmErrorCode: nil))
            }
        }
        guard let message = root["message"], message.members != nil else {
            throw MockFCMRefusal(.invalidArgument("Request contains an invalid argument.", violation: ("message", "The message is missing.")))
        }
        return (message, validateOnly)
    }

    /// Exactly one of `token`, `topic`, `condition`, a non-empty string.
    static func target(of message: JSONValue) throws(MockFCMRefusal) -> String {
        let targets = ["token", "topic", "condition"].filter { message[$0] != nil }
        guard let first = targets.first, let value = message[first] else { throw MockFCMRefusal(.invalidArgument("Recipient of the message is not set.")) }
        guard targets.count == 1 else {
            throw MockFCMRefusal(.invalidArgument("Invalid value at 'message' (oneof), oneof field 'target' is already set. Cannot set '\(targets[1])'"))
        }
        guard let text = value.stringValue, !text.isEmpty else {
            let description = "Invalid value at 'message.\(first)' (TYPE_STRING), \(summary(value))"
            throw MockFCMRefusal(.invalidArgument(description, violation: ("message.\(first)", description)))
        }
        return text
    }

    /// `data` is a map of string to string; the first other value is named by its index.
    static func checkData(_ message: JSONValue) throws(MockFCMRefusal) {
        guard let data = message["data"] else { return }
        guard let members = data.members else {
            let description = "Invalid value at 'message.data' (type.googleapis.com/google.firebase.fcm.v1.Message.DataEntry), \(summary(data))"
            throw MockFCMRefusal(.invalidArgument(description, violation: ("message.data", description)))
        }
        for (index, member) in members.enumerated() {
            guard case .string = member.value else {
                let field = "message.data[\(index)].value"
                let description = "Invalid value at '\(field)' (TYPE_STRING), \(summary(member.value))"
                throw MockFCMRefusal(.invalidArgument(description, violation: (field, description)))
            }
        }
    }

    /// How FCM quotes a bad value: a scalar as written, a container by its kind.
    static func summary(_ value: JSONValue) -> String {
        switch value {
        case .number(let text): return String(text.prefix(40))
        case .bool(let flag): return flag ? "true" : "false"
        case .null: return "null"
        case .string(let text): return JSONWriter.quoted(UntrustedText.sanitized(text, limit: 40))
        case .object: return "Starting an object on a scalar field"
        case .array: return "Starting an array on a scalar field"
        }
    }

    /// The payload FCM's 4096-byte limit counts: the keys and values of everything in `message`
    /// but its target (`data`, `notification`, `android`, `apns`, `webpush`, …).
    static func payloadBytes(_ message: JSONValue) -> Int {
        func size(_ value: JSONValue) -> Int {
            switch value {
            case .object(let members): return members.reduce(0) { $0 + $1.key.utf8.count + size($1.value) }
            case .array(let elements): return elements.reduce(0) { $0 + size($1) }
            case .string(let text), .number(let text): return text.utf8.count
            case .bool(let flag): return flag ? 4 : 5
            case .null: return 4
            }
        }
        let members = message.members ?? []
        return members.reduce(0) { total, member in
            ["token", "topic", "condition", "name"].contains(member.key) ? total : total + member.key.utf8.count + size(member.value)
        }
    }

    /// `{"name":"projects/{p}/messages/0:<µs>%<hex>"}`; a dry run (`validate_only`) gets FCM's
    /// fixed `fake_message_id`.
    static func successBody(setup: MockFCMSetup, validateOnly: Bool) -> [UInt8] {
        var id = "fake_message_id"
        if !validateOnly {
            var generator = SystemRandomNumberGenerator()
            let suffix = String(generator.next() as UInt64, radix: 16)
            id = "0:\(Int64(SystemClock.wallClockSeconds() * 1_000_000))%\(String(repeating: "0", count: 16 - suffix.count))\(suffix)"
        }
        var body: [UInt8] = Array(#"{"name":"#.utf8)
        JSONWriter.appendString("projects/\(setup.projectID)/messages/\(id)", to: &body)
        return body + [UInt8(ascii: "}")]
    }

    /// The outcome by the token's first four characters.
    private func outcome(forToken token: String) -> MockFCMAnswer? {
        switch token.prefix(4) {
        case "dead":
            return .googleError(code: 404, status: "NOT_FOUND", message: "Requested entity was not found.", fcmErrorCode: "UNREGISTERED")
        case "bad0":
            let text = "The registration token is not a valid FCM registration token"
            return .invalidArgument(text, violation: ("message.token", text))
        case "mism":
            return .googleError(code: 403, status: "PERMISSION_DENIED", message: "SenderId mismatch", fcmErrorCode: "SENDER_ID_MISMATCH")
        case "5030":
            guard shared.failOnce.firstTime("fcm5030/" + token) else { return nil }
            return .googleError(code: 503, status: "UNAVAILABLE", message: "The service is currently unavailable.", fcmErrorCode: "UNAVAILABLE")
        case "4290":
            guard shared.failOnce.firstTime("fcm4290/" + token) else { return nil }
            return .deviceQuotaExceeded(retryAfterSeconds: shared.configuration.retryAfterSeconds)
        case "4291":
            guard shared.failOnce.firstTime("fcm4291/" + token) else { return nil }
            return .projectQuotaExceeded(retryAfterSeconds: shared.configuration.retryAfterSeconds)
        default:
            return nil
        }
    }
}

/// The OAuth2 token endpoint (RFC 6749 §5, RFC 7523): a form body with grant_type and assertion.
struct MockFCMTokenEndpoint {
    let shared: MockFCMShared

    /// The answer, and whether it issued a token.
    func evaluate(_ request: HTTP2ServerRequest, setup: MockFCMSetup, nowMilliseconds: Int64) -> (MockFCMAnswer, issued: Bool) {
        guard request.method(is: "POST") else {
            return (Self.oauthError(405, "invalid_request", "The token endpoint accepts POST only."), false)
        }
        guard let contentType = request.header("content-type"), contentType.lowercased().hasPrefix("application/x-www-form-urlencoded") else {
            return (Self.oauthError(400, "invalid_request", "Invalid Content-Type; expected application/x-www-form-urlencoded."), false)
        }
        let form = OAuthTokenExchange.parseRequestBody(request.body)
        guard let grantType = form.grantType else { return (Self.oauthError(400, "invalid_request", "Missing required parameter: grant_type"), false) }
        guard grantType == OAuthTokenExchange.grantType else {
            return (Self.oauthError(400, "unsupported_grant_type", "Invalid grant_type: \(UntrustedText.sanitized(grantType, limit: 80))"), false)
        }
        guard let assertion = form.assertion, !assertion.isEmpty else {
            return (Self.oauthError(400, "invalid_request", "Missing required parameter: assertion"), false)
        }
        var failure: OAuthAssertionError?
        for verifier in setup.verifiers {
            switch verifier.verify(assertion, nowSeconds: nowMilliseconds / 1000) {
            case .success:
                let token = shared.issueToken(nowMilliseconds: nowMilliseconds)
                let body = OAuthTokenExchange.successBody(accessToken: token, expiresInSeconds: shared.configuration.tokenTTLSeconds)
                return (MockFCMAnswer(status: 200, body: body, error: nil), true)
            case .failure(let error):
                failure = failure ?? error
            }
        }
        let error = failure ?? OAuthAssertionError(error: "invalid_grant", description: "Invalid JWT Signature.")
        return (Self.oauthError(400, error.error, error.description), false)
    }

    static func oauthError(_ status: Int, _ error: String, _ description: String) -> MockFCMAnswer {
        MockFCMAnswer(status: status, body: OAuthTokenExchange.errorBody(error: error, description: description), error: error)
    }
}
