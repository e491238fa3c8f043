// A Web Push service's server side (docs/PROTOCOL.md §5), for `pushcast mock --webpush`: it
// verifies and decrypts everything. For `POST <endpoint path>` on the origin the request arrived
// on (`https://` + its authority, ":443" dropped), in this order:
// - `Authorization: vapid t=…, k=…` verified with `VAPIDVerifier` (signature, `aud` = the
//   origin, `exp` ahead by at most 24 h, `sub`): else 403 `{"reason":"BadJwtToken"}` (the log
//   names the rejection);
// - `TTL` (a non-negative integer) and `Content-Encoding: aes128gcm`: else 400;
// - a body of at most 4096 bytes: else 413 `{"reason":"PayloadTooLarge"}`;
// - the subscription's keys (the subscription file's, else `WebPushDemoSubscriptions` from the
//   path) decrypt the body: else 400 `{"reason":"DecryptionFailed"}`;
// - then the endpoint's kind, by its first path segment's prefix:
//     gone…      410 Gone (the subscription expired: prune it)
//     nf…, 404…  404 Not Found (unknown subscription: prune it)
//     big…       413 Payload Too Large
//     slow…      429 with `Retry-After: 1` the first time, then as any other
//     busy…      503 once, then as any other
//     otherwise  201 Created, `Location: <origin>/m/<id>`
// Time and the message ids come from the request's context (no clock reads). The log records
// the endpoint path, the status and the decrypted payload's SHA-256 (never the payload).

import PushcastCore
import PushcastJSON
import PushcastProviderKit
import PushcastWire

/// One subscription's private half: what the push service needs to decrypt for it (the private
/// key as its 32-byte scalar).
public struct WebPushPrivateSubscription: Sendable {
    public let scalar: [UInt8]
    public let authSecret: [UInt8]
    public init(scalar: [UInt8], authSecret: [UInt8]) {
        self.scalar = scalar
        self.authSecret = authSecret
    }
}

/// A clock that reads the request context's wall time.
final class ContextWallClock: WallClock {
    let milliseconds: () -> Int64
    init(_ milliseconds: @escaping () -> Int64) { self.milliseconds = milliseconds }
    func secondsSinceEpoch() -> Int64 { milliseconds() / 1000 }
}

public final class WebPushResponder: ProviderResponder, @unchecked Sendable {
    /// The largest body a push service must accept (RFC 8030 §7.2: at least 4096 bytes).
    public static let bodyBytesMax = 4096
    /// Subscriptions given by file, by endpoint path; others are derived from `seed`.
    public let subscriptions: [String: WebPushPrivateSubscription]
    public let seed: String
    /// VAPID headers whose signature this service has checked.
    let verifiedTokens = VAPIDSignatureCache()

    public init(seed: String = WebPushDemoSubscriptions.defaultSeed, subscriptions: [String: WebPushPrivateSubscription] = [:]) {
        self.seed = seed
        self.subscriptions = subscriptions
    }

    public var provider: ProviderID { .webpush }
    public var streamsBeforeCredentials: Int? { nil }

    /// The origin a request arrived on: `https://` + its authority, without a default port.
    public static func origin(authority: String) -> String {
        "https://" + (authority.hasSuffix(":443") ? String(authority.dropLast(4)) : authority)
    }

    public func respond(to request: HTTP2ServerRequest, context: ProviderRequestContext) -> ProviderServerAnswer {
        guard request.method == "POST" else { return refusal(405, "MethodNotAllowed") }
        let origin = Self.origin(authority: request.authority)
        let verifier = VAPIDVerifier(clock: ContextWallClock(context.wallMilliseconds), cache: verifiedTokens)
        if case .failure(let rejection) = verifier.verify(authorization: request.header("authorization") ?? "", origin: origin) {
            var answer = refusal(403, "BadJwtToken", kind: .credentialsRefused)
            answer.logNote = "\"vapid\":" + JSONWriter.quoted(rejection.rawValue)
            return answer
        }
        guard let ttl = request.header("ttl"), !ttl.isEmpty, ttl.utf8.count <= 10, ttl.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
            return refusal(400, "MissingTTL")
        }
        guard request.header("content-encoding")?.lowercased() == "aes128gcm" else { return refusal(400, "UnsupportedContentEncoding") }
        guard request.body.count <= Self.bodyBytesMax else { return refusal(413, "PayloadTooLarge") }
        let path = String(request.path.prefix(WebPushSubscription.endpointBytesMax))
        guard let keys = privateSubscription(path: path),
              let decryptor = try? WebPushDecryptor(scalar: keys.scalar, authSecret: keys.authSecret),
              let payload = try? decryptor.decrypt(request.body) else { return refusal(400, "DecryptionFailed") }
        var answer = kindAnswer(path: path, origin: origin, context: context)
        answer.logNote = "\"payload_sha256\":\"" + WebPushDemoSubscriptions.sha256Hex(payload) + "\""
        return answer
    }

    /// The subscription file's keys for `path`, else the demo derivation's.
    func privateSubscription(path: String) -> WebPushPrivateSubscription? {
        if let given = subscriptions[path] { return given }
        let (scalar, auth) = WebPushDemoSubscriptions.secrets(endpoint: path, seed: seed)
        guard let scalar, let auth else { return nil }
        return WebPushPrivateSubscription(scalar: scalar, authSecret: auth)
    }

    /// The outcome of an accepted, decrypted message, by the endpoint's first path segment.
    func kindAnswer(path: String, origin: String, context: ProviderRequestContext) -> ProviderServerAnswer {
        let segment = path.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: true).first ?? ""
        if segment.hasPrefix("gone") { return refusal(410, "Gone", kind: .deviceGone) }
        if segment.hasPrefix("nf") || segment.hasPrefix("404") { return refusal(404, "NotFound", kind: .deviceGone) }
        if segment.hasPrefix("big") { return refusal(413, "PayloadTooLarge") }
        if segment.hasPrefix("slow"), context.once.firstTime("slow" + path) {
            var answer = refusal(429, "TooManyRequests", kind: .busy)
            answer.headers.append(HTTP2Header("retry-after", "1"))
            return answer
        }
        if segment.hasPrefix("busy"), context.once.firstTime("busy" + path) { return refusal(503, "ServiceUnavailable", kind: .busy) }
        let id = String(context.random.next(), radix: 16) + String(context.random.next(), radix: 16)
        return ProviderServerAnswer(status: 201, kind: .accepted, headers: [HTTP2Header("location", origin + "/m/" + id)])
    }

    func refusal(_ status: Int, _ reason: String, kind: ProviderServerAnswer.Kind = .refused) -> ProviderServerAnswer {
        ProviderServerAnswer(status: status, kind: kind, headers: [HTTP2Header("content-type", "application/json")],
                             body: Array("{\"reason\":\"\(reason)\"}".utf8), reason: reason)
    }

    public func answer(_ fault: ProviderServerFault, to request: HTTP2ServerRequest, context: ProviderRequestContext) -> ProviderServerAnswer {
        switch fault {
        case .throttled(let seconds, _):
            var answer = refusal(429, "TooManyRequests", kind: .busy)
            answer.headers.append(HTTP2Header("retry-after", String(seconds)))
            return answer
        case .serverError(let status): return refusal(status, status == 500 ? "InternalServerError" : "ServiceUnavailable", kind: .busy)
        }
    }

    /// A Web Push "token" is the endpoint's path.
    public func token(of request: HTTP2ServerRequest) -> String { String(request.path.prefix(256)) }

    public func logMembers(_ request: HTTP2ServerRequest, _ answer: ProviderServerAnswer) -> String {
        var line = "\"endpoint\":" + JSONWriter.quoted(Self.origin(authority: request.authority) + request.path.prefix(256))
        line += ",\"status\":\(answer.status)"
        if let reason = answer.reason { line += ",\"reason\":" + JSONWriter.quoted(reason) }
        if let note = answer.logNote { line += "," + note }
        return line
    }
}

/// A push service's subscription file: JSON lines of `{"endpoint":…,"private_key":…,"auth":…}`
/// (the private scalar and the auth secret base64url), for subscriptions made elsewhere.
public enum WebPushSubscriptionFile {
    public static let linesMax = 1 << 20

    public struct Problem: Error, Sendable, Equatable, CustomStringConvertible {
        public let description: String
    }

    /// The subscriptions by endpoint path.
    public static func read(_ text: [UInt8]) throws(Problem) -> [String: WebPushPrivateSubscription] {
        var found: [String: WebPushPrivateSubscription] = [:]
        for (index, line) in text.split(separator: 0x0A).enumerated() where !line.allSatisfy({ $0 == 0x20 || $0 == 0x0D }) {
            guard index < linesMax else { throw Problem(description: "more than \(linesMax) lines") }
            guard case .success(let root) = JSONScanner.parse(Array(line)),
                  let endpoint = root["endpoint"]?.stringValue, let scalarText = root["private_key"]?.stringValue,
                  let authText = root["auth"]?.stringValue else {
                throw Problem(description: "line \(index + 1): expected {\"endpoint\":…,\"private_key\":…,\"auth\":…}")
            }
            guard let scalar = Base64URL.decode(ArraySlice(scalarText.utf8)), WebPushDemoSubscriptions.isPrivateScalar(scalar) else {
                throw Problem(description: "line \(index + 1): private_key is not a base64url P-256 scalar")
            }
            guard let auth = Base64URL.decode(ArraySlice(authText.utf8)), auth.count == WebPushSubscription.authSecretBytes else {
                throw Problem(description: "line \(index + 1): auth is not 16 base64url bytes")
            }
            found[String(WebPushDemoSubscriptions.path(of: endpoint))] = WebPushPrivateSubscription(scalar: scalar, authSecret: auth)
        }
        return found
    }
}
