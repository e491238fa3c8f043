// FCM HTTP v1's server side (docs/PROTOCOL.md §2), for `pushcast mock` and the simulator. It
// plays both Google services a sender talks to:
// - the OAuth2 token endpoint, `POST /token`: a form body with a service account's RS256
//   assertion, checked with `OAuthAssertionVerifier`; answers an opaque access token or Google's
//   `{"error":"invalid_grant",…}`;
// - FCM, `POST /v1/projects/{project}/messages:send`: bearer token, project, content type, body
//   shape (exactly one target, string-only `data`, 4096 payload bytes), then the device's outcome:
//   the server's, or by token prefix. Errors use Google's envelope with an FcmError detail, as
//   §2.3 shows.
// Unknown paths get the HTML 404 page Google's front end serves, so clients meet a non-JSON body.

import PushcastCore
import PushcastJSON
import PushcastProviderKit
import PushcastWire
import Synchronization

/// What an FCM server knows once it is set up: the project sends must name, and who may sign
/// assertions for its token endpoint (one verifier per accepted audience).
public struct FCMServerSetup: Sendable {
    public let projectID: String
    public let sendPath: String
    public let verifiers: [OAuthAssertionVerifier]

    public init(projectID: String, verifiers: [OAuthAssertionVerifier]) {
        self.projectID = projectID
        sendPath = FCMProvider.sendPath(project: projectID)
        self.verifiers = verifiers
    }
}

/// How an FCM server behaves.
public struct FCMServerRules: Sendable {
    /// Sends must carry a bearer the token endpoint issued (off for `mock --auth none` and the
    /// simulator, whose clients bring their own).
    public var requiresBearer = true
    /// `expires_in` of issued access tokens; an older bearer gets 401 UNAUTHENTICATED.
    public var tokenTTLSeconds = 3600
    /// `retry-after` of the `4290` and `4291` prefixes' 429s.
    public var retryAfterSeconds = 1

    public init() {}
}

/// FCM's server side: the token endpoint and sends. Until `install` gives it its setup (the mock
/// knows its token URI only once its port is bound), every request gets 503. Shared by every
/// worker: the setup and the access tokens issued (token → expiry, ms) are locked. Bounded: past
/// `tokensMax` the expired tokens are dropped, then the oldest.
public final class FCMResponder: ProviderResponder {
    public static let tokensMax = 65_536
    public let rules: FCMServerRules
    private let setupState: Mutex<FCMServerSetup?>
    private let tokens = Mutex<[String: Int64]>([:])

    public init(rules: FCMServerRules, setup: FCMServerSetup? = nil) {
        self.rules = rules
        setupState = Mutex(setup)
    }

    public var provider: ProviderID { .fcm }
    public var streamsBeforeCredentials: Int? { nil }

    public var setup: FCMServerSetup? { setupState.withLock { $0 } }

    public func install(_ setup: FCMServerSetup) { setupState.withLock { $0 = setup } }

    public func respond(to request: HTTP2ServerRequest, context: ProviderRequestContext) -> ProviderServerAnswer {
        guard let setup else { return FCMAnswer.notReady.providerAnswer(token: nil, issued: request.path == "/token" ? false : nil) }
        if request.path == "/token" {
            let (answer, issued) = FCMTokenEndpoint(responder: self).evaluate(request, setup: setup, nowMilliseconds: context.wallMilliseconds())
            return answer.providerAnswer(token: nil, issued: issued)
        }
        let (answer, token) = FCMSendRules(responder: self).evaluate(request, setup: setup, context: context)
        return answer.providerAnswer(token: token, issued: nil)
    }

    public func answer(_ fault: ProviderServerFault, to request: HTTP2ServerRequest, context: ProviderRequestContext) -> ProviderServerAnswer {
        let answer: FCMAnswer
        switch fault {
        case .throttled(let seconds, .provider): answer = .projectQuotaExceeded(retryAfterSeconds: seconds)
        case .throttled(let seconds, _): answer = .deviceQuotaExceeded(retryAfterSeconds: seconds)
        case .serverError(500): answer = .googleError(code: 500, status: "INTERNAL", message: "Internal error encountered.", fcmErrorCode: "INTERNAL")
        case .serverError: answer = .googleError(code: 503, status: "UNAVAILABLE", message: "The service is currently unavailable.", fcmErrorCode: "UNAVAILABLE")
        }
        return answer.providerAnswer(token: nil, issued: nil)
    }

    /// The message's `token`, read as JSON.
    public func token(of request: HTTP2ServerRequest) -> String {
        guard case .success(let root) = JSONScanner.parse(request.body) else { return "" }
        return root["message"]?["token"]?.stringValue ?? ""
    }

    public func logMembers(_ request: HTTP2ServerRequest, _ answer: ProviderServerAnswer) -> String {
        var line = "\"path\":" + JSONWriter.quoted(String(request.path.prefix(256)))
        if let token = answer.token { line += ",\"token\":" + JSONWriter.quoted(token) }
        line += ",\"status\":\(answer.status)"
        if let error = answer.reason { line += ",\"error\":" + JSONWriter.quoted(error) }
        return line
    }

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
        let expiry = nowMilliseconds + Int64(rules.tokenTTLSeconds) * 1000
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
struct FCMRefusal: Error {
    let answer: FCMAnswer
    init(_ answer: FCMAnswer) { self.answer = answer }
}

/// One FCM answer before latency and connection effects.
struct FCMAnswer: Sendable {
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
                            violation: (field: String, description: String)? = nil, projectQuota: Bool = false) -> FCMAnswer {
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
        return FCMAnswer(status: code, body: body, error: fcmErrorCode ?? status)
    }

    static func invalidArgument(_ message: String, fcmErrorCode: String? = "INVALID_ARGUMENT",
                                violation: (field: String, description: String)? = nil) -> FCMAnswer {
        googleError(code: 400, status: "INVALID_ARGUMENT", message: message, fcmErrorCode: fcmErrorCode, violation: violation)
    }

    static let unauthenticated: FCMAnswer = {
        var answer = googleError(
            code: 401, status: "UNAUTHENTICATED",
            message: "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project.")
        answer.extraHeaders = [HTTP2Header("www-authenticate", #"Bearer realm="https://accounts.google.com/""#)]
        return answer
    }()

    /// As the provider-neutral answer: `token` the message's, `issued` whether a token-endpoint
    /// call issued a token.
    func providerAnswer(token: String?, issued: Bool?) -> ProviderServerAnswer {
        let kind: ProviderServerAnswer.Kind
        switch status {
        case 200: kind = .accepted
        case 404 where error == "UNREGISTERED": kind = .deviceGone
        case 401: kind = .credentialsRefused
        case 429, 500...599: kind = .busy
        default: kind = .refused
        }
        return ProviderServerAnswer(status: status, kind: kind, headers: headers, body: body, reason: error, token: token, issuedCredential: issued)
    }

    /// One device over its own limits (240 messages a minute, 5,000 an hour): QUOTA_EXCEEDED,
    /// and nothing that names the project's quota.
    static func deviceQuotaExceeded(retryAfterSeconds: Int) -> FCMAnswer {
        var answer = googleError(code: 429, status: "RESOURCE_EXHAUSTED", message: "Quota exceeded for the device's message rate.",
                                 fcmErrorCode: "QUOTA_EXCEEDED")
        answer.extraHeaders = [HTTP2Header("retry-after", String(retryAfterSeconds))]
        return answer
    }

    /// The project's quota (600,000 messages a minute), as FCM names it: a `google.rpc.ErrorInfo`
    /// with reason RATE_LIMIT_EXCEEDED and the quota's metric and limit.
    static func projectQuotaExceeded(retryAfterSeconds: Int) -> FCMAnswer {
        var answer = googleError(code: 429, status: "RESOURCE_EXHAUSTED",
                                 message: "Quota exceeded for quota metric 'Send requests' and limit 'Send requests per minute' of service 'fcm.googleapis.com'.",
                                 fcmErrorCode: "QUOTA_EXCEEDED", projectQuota: true)
        answer.extraHeaders = [HTTP2Header("retry-after", String(retryAfterSeconds))]
        return answer
    }

    /// Google's front end answers unknown paths with an HTML page.
    static let notFoundPage = FCMAnswer(
        status: 404,
        body: Array("<!DOCTYPE html>\n<html lang=en><meta charset=utf-8><title>Error 404 (Not Found)!!1</title><p><b>404.</b> <ins>That’s an error.</ins><p>The requested URL was not found on this server. <ins>That’s all we know.</ins>\n".utf8),
        error: "NOT_FOUND", contentType: "text/html; charset=UTF-8")

    static let notReady = googleError(code: 503, status: "UNAVAILABLE", message: "The server is still starting.", fcmErrorCode: "UNAVAILABLE")
}

/// The FCM rules for one send, in the order FCM applies them: path, bearer, project, content
/// type, body shape, payload size (4096 bytes to a token, 2048 to a topic or condition, §2.6);
/// then the device's outcome: the server's (`context.device`), else by token prefix (`dead`,
/// `bad0`, `mism`, `5030`, `4290` a device's quota, `4291` the project's; case-sensitive, as FCM
/// tokens are).
struct FCMSendRules {
    static let payloadBytesMax = 4096
    static let sendPrefix = "/v1/projects/"
    static let sendSuffix = "/messages:send"

    let responder: FCMResponder

    /// The answer, and the message's token (for the log) when the body named one.
    func evaluate(_ request: HTTP2ServerRequest, setup: FCMServerSetup, context: ProviderRequestContext) -> (FCMAnswer, String?) {
        let path = request.path
        guard path.hasPrefix(Self.sendPrefix), path.hasSuffix(Self.sendSuffix) else { return (.notFoundPage, nil) }
        guard request.method(is: "POST") else { return (.notFoundPage, nil) }
        if responder.rules.requiresBearer && !hasValidBearer(request, nowMilliseconds: context.wallMilliseconds()) { return (.unauthenticated, nil) }
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
        do throws(FCMRefusal) {
            let (message, validateOnly) = try Self.message(in: request.body)
            _ = try Self.target(of: message)
            token = message["token"]?.stringValue
            try Self.checkData(message)
            let payloadBytes = Self.payloadBytes(message)
            let limit = message["token"] == nil ? Self.payloadBytesMax / 2 : Self.payloadBytesMax
            guard payloadBytes <= limit else {
                // FCM's "too big" answer carries no FcmError detail (docs/PROTOCOL.md §2.3).
                throw FCMRefusal(.invalidArgument("Message is too big. Limit is \(limit) bytes, got \(payloadBytes).", fcmErrorCode: nil))
            }
            if let token, let answer = outcome(forToken: token, context: context) { return (answer, token) }
            return (FCMAnswer(status: 200, body: Self.successBody(setup: setup, validateOnly: validateOnly, context: context), error: nil), token)
        } catch {
            return (error.answer, token)
        }
    }

    private func hasValidBearer(_ request: HTTP2ServerRequest, nowMilliseconds: Int64) -> Bool {
        guard let value = request.header("authorization"), value.utf8.count > 7,
              value.prefix(7).lowercased() == "bearer " else { return false }
        return responder.isValid(value.dropFirst(7), nowMilliseconds: nowMilliseconds)
    }

    /// The body's `message` object and `validate_only`; unknown top-level members and a
    /// non-boolean `validate_only` are refused as FCM does.
    static func message(in body: [UInt8]) throws(FCMRefusal) -> (JSONValue, validateOnly: Bool) {
        guard case .success(let root) = JSONScanner.parse(body), let members = root.members else {
            throw FCMRefusal(.invalidArgument("Invalid JSON payload received. Unexpected token.", fcmErrorCode: nil))
        }
        var validateOnly = false
        for member in members {
            switch member.key {
            case "message": continue
            case "validate_only", "validateOnly":
                guard case .bool(let flag) = member.value else {
                    let text = "Invalid value at 'validate_only' (TYPE_BOOL), \(summary(member.value))"
                    throw FCMRefusal(.invalidArgument(text, fcmErrorCode: nil, violation: ("validate_only", text)))
                }
                validateOnly = flag
            default:
                let name = JSONWriter.quoted(UntrustedText.sanitized(member.key, limit: 64))
                throw FCMRefusal(.invalidArgument("Invalid JSON payload received. Unknown name \(name): Cannot find field.", fcmErrorCode: nil))
            }
        }
        guard let message = root["message"], message.members != nil else {
            throw FCMRefusal(.invalidArgument("Request contains an invalid argument.", violation: ("message", "The message is missing.")))
        }
        return (message, validateOnly)
    }

    /// Exactly one of `token`, `topic`, `condition`, a non-empty string.
    static func target(of message: JSONValue) throws(FCMRefusal) -> String {
        let targets = ["token", "topic", "condition"].filter { message[$0] != nil }
        guard let first = targets.first, let value = message[first] else { throw FCMRefusal(.invalidArgument("Recipient of the message is not set.")) }
        guard targets.count == 1 else {
            throw FCMRefusal(.invalidArgument("Invalid value at 'message' (oneof), oneof field 'target' is already set. Cannot set '\(targets[1])'"))
        }
        guard let text = value.stringValue, !text.isEmpty else {
            let description = "Invalid value at 'message.\(first)' (TYPE_STRING), \(summary(value))"
            throw FCMRefusal(.invalidArgument(description, violation: ("message.\(first)", description)))
        }
        return text
    }

    /// `data` is a map of string to string; the first other value is named by its index.
    static func checkData(_ message: JSONValue) throws(FCMRefusal) {
        guard let data = message["data"] else { return }
        guard let members = data.members else {
            let description = "Invalid value at 'message.data' (type.googleapis.com/google.firebase.fcm.v1.Message.DataEntry), \(summary(data))"
            throw FCMRefusal(.invalidArgument(description, violation: ("message.data", description)))
        }
        for (index, member) in members.enumerated() {
            guard case .string = member.value else {
                let field = "message.data[\(index)].value"
                let description = "Invalid value at '\(field)' (TYPE_STRING), \(summary(member.value))"
                throw FCMRefusal(.invalidArgument(description, violation: (field, description)))
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
    static func successBody(setup: FCMServerSetup, validateOnly: Bool, context: ProviderRequestContext) -> [UInt8] {
        var id = "fake_message_id"
        if !validateOnly {
            let suffix = String(context.random.next(), radix: 16)
            id = "0:\(context.wallMilliseconds() * 1000)%\(String(repeating: "0", count: 16 - suffix.count))\(suffix)"
        }
        var body: [UInt8] = Array(#"{"name":"#.utf8)
        JSONWriter.appendString("projects/\(setup.projectID)/messages/\(id)", to: &body)
        return body + [UInt8(ascii: "}")]
    }

    static let unregistered = FCMAnswer.googleError(code: 404, status: "NOT_FOUND", message: "Requested entity was not found.", fcmErrorCode: "UNREGISTERED")

    /// The device's outcome: the server's, else by the token's first four characters; nil: accepted.
    private func outcome(forToken token: String, context: ProviderRequestContext) -> FCMAnswer? {
        switch context.device {
        case .registered: return nil
        case .unregistered: return Self.unregistered
        case nil: break
        }
        switch token.prefix(4) {
        case "dead":
            return Self.unregistered
        case "bad0":
            let text = "The registration token is not a valid FCM registration token"
            return .invalidArgument(text, violation: ("message.token", text))
        case "mism":
            return .googleError(code: 403, status: "PERMISSION_DENIED", message: "SenderId mismatch", fcmErrorCode: "SENDER_ID_MISMATCH")
        case "5030":
            guard context.once.firstTime("fcm5030/" + token) else { return nil }
            return .googleError(code: 503, status: "UNAVAILABLE", message: "The service is currently unavailable.", fcmErrorCode: "UNAVAILABLE")
        case "4290":
            guard context.once.firstTime("fcm4290/" + token) else { return nil }
            return .deviceQuotaExceeded(retryAfterSeconds: responder.rules.retryAfterSeconds)
        case "4291":
            guard context.once.firstTime("fcm4291/" + token) else { return nil }
            return .projectQuotaExceeded(retryAfterSeconds: responder.rules.retryAfterSeconds)
        default:
            return nil
        }
    }
}

/// The OAuth2 token endpoint (RFC 6749 §5, RFC 7523): a form body with grant_type and assertion.
struct FCMTokenEndpoint {
    let responder: FCMResponder

    /// The answer, and whether it issued a token.
    func evaluate(_ request: HTTP2ServerRequest, setup: FCMServerSetup, nowMilliseconds: Int64) -> (FCMAnswer, issued: Bool) {
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
                let token = responder.issueToken(nowMilliseconds: nowMilliseconds)
                let body = OAuthTokenExchange.successBody(accessToken: token, expiresInSeconds: responder.rules.tokenTTLSeconds)
                return (FCMAnswer(status: 200, body: body, error: nil), true)
            case .failure(let error):
                failure = failure ?? error
            }
        }
        let error = failure ?? OAuthAssertionError(error: "invalid_grant", description: "Invalid JWT Signature.")
        return (Self.oauthError(400, error.error, error.description), false)
    }

    static func oauthError(_ status: Int, _ error: String, _ description: String) -> FCMAnswer {
        FCMAnswer(status: status, body: OAuthTokenExchange.errorBody(error: error, description: description), error: error)
    }
}
