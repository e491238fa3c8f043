import PushcastCore
import PushcastJSON
import PushcastProviderKit
import PushcastWire
import Synchronization

/// The VAPID credential of one push service's lane, shared by its workers: the signer's token
/// for the origin, numbered (a new generation each time the token renews), and the one retry a
/// refused token gets.
public final class WebPushLaneCredential: Sendable {
    public let origin: String
    public let signer: VAPIDSigner
    private struct State: Sendable {
        var authorization: String?
        var generation: UInt64 = 0
        var renewedAfterRefusal = false
    }
    private let state = Mutex(State())

    public init(origin: String, signer: VAPIDSigner) {
        self.origin = origin
        self.signer = signer
    }

    /// The Authorization header value and its generation; nil when OpenSSL cannot sign.
    public func current() -> (authorization: String, generation: UInt64)? {
        guard let authorization = signer.authorization(origin: origin) else { return nil }
        return state.withLock { state in
            if state.authorization != authorization {
                state.authorization = authorization
                state.generation += 1
            }
            return (authorization, state.generation)
        }
    }

    /// The push service refused the token of `generation` (401/403): a newer one is retried; the
    /// first refusal renews the token once; a renewed token refused again stops this push
    /// service's lane (the others carry on: another service may take the same key).
    public func rejected(generation: UInt64) -> CredentialDecision {
        state.withLock { state in
            if generation < state.generation { return .retry }
            guard !state.renewedAfterRefusal else {
                return .stopLane("\(origin) refused the VAPID token twice (a fresh one too): the key is not the one these subscriptions "
                             + "were made with, or the subject is refused; check --vapid-key and --vapid-subject")
            }
            state.renewedAfterRefusal = true
            signer.renew(origin: origin)
            return .retry
        }
    }
}

/// What one lane's workers share: the origin's credential and the campaign's headers.
public struct WebPushSendSettings: Sendable {
    public var authority: String
    public var credential: WebPushLaneCredential
    public var headers: WebPushMessageHeaders
    public init(authority: String, credential: WebPushLaneCredential, headers: WebPushMessageHeaders) {
        self.authority = authority
        self.credential = credential
        self.headers = headers
    }
}

/// Web Push (RFC 8030 §5): `POST <endpoint>` with the encrypted body, the VAPID Authorization,
/// TTL, Urgency and Topic. The endpoint is the token: `:path` is the token with its origin left
/// out (`pathSuffixSkip`). Each attempt's body is sealed on the worker (`seal`).
public final class WebPushAdapter: ProviderAdapter {
    private let settings: WebPushSendSettings
    private let encryptor: WebPushEncryptor?
    private var generation: UInt64 = 0

    public init(settings: WebPushSendSettings, keys: (any WebPushKeySource)? = nil) {
        self.settings = settings
        encryptor = try? WebPushEncryptor(keys: keys ?? OpenSSLWebPushKeys())
    }

    public var provider: ProviderID { .webpush }
    public var layout: RequestLayout { RequestLayout(tokenInPath: true, idInHeader: false, sealsBody: true) }
    public var credentialPollNanoseconds: UInt64 { 20_000_000 }
    public var credentialReady: Bool { true }

    public func makeRequest() -> HTTP2Request {
        var request = HTTP2Request(authority: settings.authority, path: "")
        request.pathSuffixSkip = settings.credential.origin.utf8.count
        return request
    }

    public func authorize(_ request: inout HTTP2Request) -> UInt64? {
        guard let (authorization, current) = settings.credential.current() else { return nil }
        if current != generation || request.fixedHeaders == nil {
            generation = current
            let headers = [HTTP2Header("authorization", authorization)] + settings.headers.fields.map { HTTP2Header($0.name, $0.value) }
            request.fixedHeaders = HTTP2HeaderTemplate(headers)
        }
        return current
    }

    static let offCurve = RowProblem(reason: WebPushReason.invalidSubscription, field: "p256dh", message: "not a point on the P-256 curve")
    static let noKeys = RowProblem(reason: WebPushReason.invalidSubscription, field: nil, message: "the rendered body holds no subscription keys")

    /// Encrypts the rendered payload (`WebPushRendering`: key, auth secret, payload) with a fresh
    /// salt and ephemeral key. A p256dh that is not on the curve ends the row unsent, `invalid`.
    public func seal(payload: [UInt8], into body: inout [UInt8]) -> SealRefusal? {
        let keyBytes = WebPushRendering.keyBytes
        guard payload.count >= keyBytes else { return .invalid(Self.noKeys) }
        return payload.withUnsafeBytes { bytes -> SealRefusal? in
            let point = UnsafeRawBufferPointer(rebasing: bytes[0..<P256Key.pointBytes])
            guard let encryptor else { return .failed(reason: "EncryptionFailed") }
            let plaintext = UnsafeRawBufferPointer(rebasing: bytes[keyBytes...])
            let total = WebPushContentCoding.bodyBytes(plaintextBytes: plaintext.count)
            if body.count != total {
                body.removeAll(keepingCapacity: true)
                body.append(contentsOf: repeatElement(0, count: total))
            }
            let auth = UnsafeRawBufferPointer(rebasing: bytes[P256Key.pointBytes..<keyBytes])
            let sealed = body.withUnsafeMutableBytes { out in
                Result { () throws(WebPushEncryptionError) in
                    try encryptor.encrypt(plaintext, userAgentPublic: point, authSecret: auth, into: out)
                }
            }
            switch sealed {
            case .success: return nil
            case .failure(.notOnCurve): return .invalid(Self.offCurve)
            case .failure: return .failed(reason: "EncryptionFailed")
            }
        }
    }

    public func classify(_ response: HTTP2Response) -> ProviderAnswer {
        ProviderAnswer(status: response.status, verdict: WebPushAnswer.verdict(response))
    }

    public func credentialRejected(generation: UInt64) -> CredentialDecision {
        settings.credential.rejected(generation: generation)
    }
}

/// A push service's answer, as a verdict (RFC 8030 §5-§8, RFC 8292 §4). The reason is one of
/// `WebPushReason`; Mozilla's `errno` and Apple's `reason` from a JSON body follow it in
/// parentheses ("Gone (errno 106)", "BadVAPID (BadJwtToken)").
public enum WebPushAnswer {
    public static func verdict(_ response: HTTP2Response, nowEpochSeconds: Int64? = nil) -> ProviderVerdict {
        let status = response.status
        if (200..<300).contains(status) {
            return .delivered(messageID: response.headers.first { $0.name == "location" }.map { String($0.value.prefix(512)) })
        }
        let retryAfter = response.headers.first { $0.name == "retry-after" }.flatMap { RetryAfter.seconds($0.value, nowEpochSeconds: nowEpochSeconds) }
        // A detail that only repeats the reason ({"reason":"Gone"} with 410) adds nothing.
        func reason(_ base: String) -> String { detail(response.body).flatMap { $0 == base ? nil : "\(base) (\($0))" } ?? base }
        switch status {
        case 404: return .prune(reason: reason(WebPushReason.notFound), unregisteredAt: nil)
        case 410: return .prune(reason: reason(WebPushReason.gone), unregisteredAt: nil)
        case 413: return .fail(reason: reason(WebPushReason.tooLarge))
        case 429: return .retry(reason: reason(WebPushReason.tooManyRequests), retryAfterSeconds: retryAfter, throttle: .provider)
        case 401, 403: return .reauthenticate(reason: reason(WebPushReason.badVAPID))
        case 400: return .fail(reason: reason(WebPushReason.badRequest))
        case 500...599: return .retry(reason: reason(WebPushReason.serverError), retryAfterSeconds: retryAfter, throttle: .none)
        default: return .fail(reason: reason("Status\(status)"))
        }
    }

    /// Mozilla's `{"errno": 106, …}` or Apple's `{"reason": "BadJwtToken"}`: a number, or a word
    /// of at most 40 letters and digits; anything else is left out.
    static func detail(_ body: [UInt8]) -> String? {
        body.withUnsafeBufferPointer { bytes in
            let scanner = JSONScanner(bytes)
            guard let root = scanner.rootObject() else { return nil }
            if let errno = scanner.member("errno", ofObjectAt: root), errno.count <= 6,
               bytes[errno].allSatisfy(JSONScanner.isDigit), !errno.isEmpty {
                return "errno \(String(decoding: bytes[errno], as: UTF8.self))"
            }
            if let reason = scanner.member("reason", ofObjectAt: root).flatMap({ scanner.string($0, bytesMax: 41) }),
               (1...40).contains(reason.utf8.count), reason.utf8.allSatisfy(JSONScanner.isWordByte) {
                return reason
            }
            return nil
        }
    }
}

/// Each worker's adapter for one push service.
public struct WebPushAdapterFactory: AdapterFactory {
    public let settings: WebPushSendSettings
    public init(settings: WebPushSendSettings) { self.settings = settings }
    public func makeAdapter() -> WebPushAdapter { WebPushAdapter(settings: settings) }
}
