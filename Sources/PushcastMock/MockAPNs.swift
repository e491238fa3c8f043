import PushcastAPNs
import PushcastCore
import PushcastJSON
import PushcastWire
import Synchronization

/// How the mock checks the `authorization` header of APNs requests.
public enum MockAuthentication: Sendable {
    /// Accept any POST to /3/device/<token>, without header, payload or provider-token checks:
    /// a generic HTTP/2 load target for tools such as h2load. Token-prefix outcomes still apply.
    case none
    /// Verify the ES256 provider token, as APNs does.
    case token(APNsJWTVerifier)
    /// Certificate auth (`pushcast mock --client-ca`): the TLS handshake has verified the client's
    /// certificate; the connection's topic and environment come from it, as at APNs, and no
    /// provider token is checked. The mock plays this environment's host.
    case certificate(MockAPNsEnvironment)
}

/// Which APNs host the mock plays for certificate auth: api.push.apple.com (production) or
/// api.sandbox.push.apple.com (sandbox).
public enum MockAPNsEnvironment: String, Sendable, CaseIterable {
    case production
    case sandbox

    /// The environments a push certificate is good for, by its subject CN, as Apple names them:
    /// "Apple Development IOS Push Services: <bundle>" is sandbox only, "Apple Production IOS Push
    /// Services: <bundle>" production only, and the universal "Apple Push Services: <bundle>" both.
    /// Any other CN (a test certificate) is taken as universal.
    static func accepted(byCommonName commonName: String?) -> Set<MockAPNsEnvironment> {
        let name = commonName ?? ""
        if name.hasPrefix("Apple Development IOS Push Services") { return [.sandbox] }
        if name.hasPrefix("Apple Production IOS Push Services") { return [.production] }
        return [.production, .sandbox]
    }
}

/// What APNs would answer, before latency and connection effects.
struct MockAPNsAnswer: Equatable {
    var status: Int
    var reason: String?
    /// Milliseconds since the epoch, for 410 answers.
    var timestampMilliseconds: Int64?

    static let ok = MockAPNsAnswer(status: 200, reason: nil, timestampMilliseconds: nil)

    /// APNs's error body: `{"reason":"…"}`, plus `timestamp` on 410.
    var body: [UInt8] {
        guard let reason else { return [] }
        if let timestampMilliseconds {
            return Array("{\"reason\":\"\(reason)\",\"timestamp\":\(timestampMilliseconds)}".utf8)
        }
        return Array("{\"reason\":\"\(reason)\"}".utf8)
    }
}

/// State the mock's workers share: which "fail once" tokens have failed already. Touched only for
/// tokens with those prefixes, so the lock is off the common path.
final class MockSharedState: Sendable {
    private let failedOnce = Mutex<Set<String>>([])

    /// True the first time `key` is seen.
    func firstTime(_ key: String) -> Bool {
        failedOnce.withLock { $0.insert(key).inserted }
    }
}

/// The APNs rules the mock applies to one request: method, path, token shape, headers, payload,
/// provider token (or the client certificate's topic and environment), then the deterministic outcomes by token prefix (`dead`, `bad0`, `5030`,
/// `4290`). Checks run in the order APNs documents them; the first failure answers.
struct MockAPNsRules {
    let authentication: MockAuthentication
    let shared: MockSharedState
    let wallClock: WallClock

    /// `clientCertificate` is the connection's, for certificate auth.
    func evaluate(_ request: HTTP2ServerRequest, clientCertificate: TLSClientCertificate? = nil) -> MockAPNsAnswer {
        guard request.method(is: "POST") else { return MockAPNsAnswer(status: 405, reason: "MethodNotAllowed") }
        return request.withPath { path -> MockAPNsAnswer in
            guard Self.hasPrefix(path, Self.devicePrefix) else { return MockAPNsAnswer(status: 404, reason: "BadPath") }
            let token = UnsafeRawBufferPointer(rebasing: path[Self.devicePrefix.utf8CodeUnitCount...])
            guard !token.isEmpty else { return MockAPNsAnswer(status: 400, reason: "MissingDeviceToken") }
            guard Self.isDeviceToken(token) else { return MockAPNsAnswer(status: 400, reason: "BadDeviceToken") }

            switch authentication {
            case .none:
                break
            case .token(let verifier):
                if let failure = checkHeaders(request, topicRule: .header) { return failure }
                switch verifier.verify(authorization: request.header("authorization")) {
                case .valid: break
                case .rejected(let reason): return MockAPNsAnswer(status: 403, reason: reason.rawValue)
                }
                if let failure = checkPayload(request) { return failure }
            case .certificate(let environment):
                if let failure = Self.checkCertificate(clientCertificate, environment: environment) { return failure }
                if let failure = checkHeaders(request, topicRule: .certificate(uid: clientCertificate?.subjectUID)) { return failure }
                if let failure = checkPayload(request) { return failure }
            }
            return outcome(forToken: token)
        }
    }

    static let devicePrefix: StaticString = "/3/device/"

    @inline(__always)
    static func hasPrefix(_ bytes: UnsafeRawBufferPointer, _ prefix: StaticString) -> Bool {
        let n = prefix.utf8CodeUnitCount
        guard bytes.count >= n else { return false }
        for i in 0..<n where bytes[i] != prefix.utf8Start[i] { return false }
        return true
    }

    /// Lower-case or upper-case hex, even length, 64…200 digits (APNs tokens vary in length).
    static func isDeviceToken(_ token: Substring) -> Bool {
        var token = String(token)
        return token.withUTF8 { isDeviceToken(UnsafeRawBufferPointer($0)) }
    }

    static func isDeviceToken(_ token: UnsafeRawBufferPointer) -> Bool {
        guard token.count >= 64, token.count <= 200, token.count % 2 == 0 else { return false }
        // Eight bytes at a time (SWAR), then the tail.
        var offset = 0
        while offset + 8 <= token.count {
            guard isHexWord(token.loadUnaligned(fromByteOffset: offset, as: UInt64.self)) else { return false }
            offset += 8
        }
        while offset < token.count {
            let byte = token[offset]
            // 0-9, or a-f / A-F (folding case with 0x20).
            guard byte &- 0x30 < 10 || (byte | 0x20) &- 0x61 < 6 else { return false }
            offset += 1
        }
        return true
    }

    /// True when all eight bytes of `word` are ASCII hex digits. For bytes below 0x80, adding
    /// (0x80 - n) sets a byte's top bit exactly when it is >= n, and no carry crosses bytes.
    @inline(__always)
    static func isHexWord(_ word: UInt64) -> Bool {
        let high: UInt64 = 0x8080_8080_8080_8080
        guard word & high == 0 else { return false }
        let ge30 = word &+ 0x5050_5050_5050_5050           // >= '0'
        let ge3A = word &+ 0x4646_4646_4646_4646           // >= ':'
        let lower = word | 0x2020_2020_2020_2020
        let ge61 = lower &+ 0x1F1F_1F1F_1F1F_1F1F          // >= 'a'
        let ge67 = lower &+ 0x1919_1919_1919_1919          // >= 'g'
        let digit = ge30 & ~ge3A
        let letter = ge61 & ~ge67
        return (digit | letter) & high == high
    }

    /// A certificate connection's certificate: it verified (a context that admits unverified
    /// certificates lets others through to here), and it is good for this environment.
    static func checkCertificate(_ certificate: TLSClientCertificate?, environment: MockAPNsEnvironment) -> MockAPNsAnswer? {
        guard let certificate, certificate.verificationError == nil else { return MockAPNsAnswer(status: 403, reason: "BadCertificate") }
        guard MockAPNsEnvironment.accepted(byCommonName: certificate.commonName).contains(environment) else {
            return MockAPNsAnswer(status: 403, reason: "BadCertificateEnvironment")
        }
        return nil
    }

    /// The topic of a request on a certificate connection: apns-topic when given, which must be
    /// the certificate's UID (the bundle ID) or the UID with a push type's suffix (Apple's
    /// universal certificates cover those: `.voip`, `.complication`…); without the header, the
    /// UID. A certificate without a UID is good for no topic.
    /// Returns the topic, or the answer refusing the request.
    static func certificateTopic(header: String?, uid: String?) -> (topic: String?, refusal: MockAPNsAnswer?) {
        guard let header, !header.isEmpty else {
            guard let uid, !uid.isEmpty else { return (nil, MockAPNsAnswer(status: 400, reason: "MissingTopic")) }
            return (uid, nil)
        }
        guard let uid, !uid.isEmpty, header.hasPrefix(uid) else { return (nil, MockAPNsAnswer(status: 400, reason: "BadTopic")) }
        let suffix = header.dropFirst(uid.count)
        guard suffix.isEmpty || APNsPushType.allCases.contains(where: { !$0.topicSuffix.isEmpty && $0.topicSuffix == suffix }) else {
            return (nil, MockAPNsAnswer(status: 400, reason: "BadTopic"))
        }
        return (header, nil)
    }

    /// Where a request's topic comes from.
    enum TopicRule {
        /// Token auth: apns-topic is required.
        case header
        /// Certificate auth: `certificateTopic` with the certificate's UID (nil: it has none).
        case certificate(uid: String?)
    }

    private func checkHeaders(_ request: HTTP2ServerRequest, topicRule: TopicRule) -> MockAPNsAnswer? {
        var seen = Set<String>()
        for header in request.headers where header.name.hasPrefix("apns-") || header.name == "authorization" {
            guard seen.insert(header.name).inserted else { return MockAPNsAnswer(status: 400, reason: "DuplicateHeaders") }
        }
        let topic: String
        switch topicRule {
        case .certificate(let uid):
            let (derived, refusal) = Self.certificateTopic(header: request.header("apns-topic"), uid: uid)
            guard let derived else { return refusal }
            topic = derived
        case .header:
            guard let given = request.header("apns-topic"), !given.isEmpty else {
                return MockAPNsAnswer(status: 400, reason: "MissingTopic")
            }
            topic = given
        }
        var pushType: APNsPushType? = nil
        if let value = request.header("apns-push-type") {
            guard let parsed = APNsPushType(rawValue: value) else { return MockAPNsAnswer(status: 400, reason: "InvalidPushType") }
            pushType = parsed
            // The topic must carry the push type's suffix (docs/PROTOCOL.md §1.4).
            if !parsed.topicSuffix.isEmpty && !topic.hasSuffix(parsed.topicSuffix) {
                return MockAPNsAnswer(status: 400, reason: "BadTopic")
            }
        }
        if let value = request.header("apns-priority") {
            guard let priority = Int(value), [10, 5, 1].contains(priority) else {
                return MockAPNsAnswer(status: 400, reason: "BadPriority")
            }
            if pushType == .background && priority != 5 { return MockAPNsAnswer(status: 400, reason: "BadPriority") }
        }
        if let value = request.header("apns-expiration") {
            guard let expiration = Int64(value), expiration >= 0 else {
                return MockAPNsAnswer(status: 400, reason: "BadExpirationDate")
            }
        }
        if let value = request.header("apns-collapse-id"), value.utf8.count > 64 {
            return MockAPNsAnswer(status: 400, reason: "BadCollapseId")
        }
        if let value = request.header("apns-id"), !APNsID.isCanonical(value.lowercased()) {
            return MockAPNsAnswer(status: 400, reason: "BadMessageId")
        }
        return nil
    }

    private func checkPayload(_ request: HTTP2ServerRequest) -> MockAPNsAnswer? {
        guard !request.body.isEmpty else { return MockAPNsAnswer(status: 400, reason: "PayloadEmpty") }
        let limit = request.header("apns-push-type") == APNsPushType.voip.rawValue ? 5120 : 4096
        guard request.body.count <= limit else { return MockAPNsAnswer(status: 413, reason: "PayloadTooLarge") }
        let valid = request.body.withUnsafeBytes { JSONValidation.isObject($0) }
        guard valid else { return MockAPNsAnswer(status: 400, reason: "BadPayload") }
        return nil
    }

    /// The outcome by the token's first four hex digits, in either case (`token` is hex).
    private func outcome(forToken token: UnsafeRawBufferPointer) -> MockAPNsAnswer {
        guard token.count >= 4 else { return .ok }
        // Hex digits and letters both lower-case with `| 0x20`.
        let prefix = UInt32(token[0] | 0x20) | UInt32(token[1] | 0x20) << 8 | UInt32(token[2] | 0x20) << 16 | UInt32(token[3] | 0x20) << 24
        switch prefix {
        case Self.word("dead"):
            return MockAPNsAnswer(status: 410, reason: "Unregistered",
                                  timestampMilliseconds: wallClock.secondsSinceEpoch() * 1000 - 86_400_000)
        case Self.word("bad0"):
            return MockAPNsAnswer(status: 400, reason: "BadDeviceToken")
        case Self.word("5030"):
            return shared.firstTime("5030/" + String(decoding: token, as: UTF8.self)) ? MockAPNsAnswer(status: 503, reason: "ServiceUnavailable") : .ok
        case Self.word("4290"):
            return shared.firstTime("4290/" + String(decoding: token, as: UTF8.self)) ? MockAPNsAnswer(status: 429, reason: "TooManyRequests") : .ok
        default:
            return .ok
        }
    }

    /// Four ASCII bytes as a little-endian word.
    private static func word(_ text: StaticString) -> UInt32 {
        let p = text.utf8Start
        return UInt32(p[0]) | UInt32(p[1]) << 8 | UInt32(p[2]) << 16 | UInt32(p[3]) << 24
    }
}
