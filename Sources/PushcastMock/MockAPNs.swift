import PushcastAPNs
import PushcastCore
import PushcastWire
import Synchronization

/// How the mock checks the `authorization` header of APNs requests.
public enum MockAuthentication: Sendable {
    /// Accept any POST to /3/device/<token>, without header, payload or provider-token checks:
    /// a generic HTTP/2 load target for tools such as h2load. Token-prefix outcomes still apply.
    case none
    /// Verify the ES256 provider token, as APNs does.
    case token(APNsJWTVerifier)
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
/// provider token, then the deterministic outcomes by token prefix (`dead`, `bad0`, `5030`,
/// `4290`). Checks run in the order APNs documents them; the first failure answers.
struct MockAPNsRules {
    let authentication: MockAuthentication
    let shared: MockSharedState
    let wallClock: WallClock

    func evaluate(_ request: HTTP2ServerRequest) -> MockAPNsAnswer {
        guard request.method == "POST" else { return MockAPNsAnswer(status: 405, reason: "MethodNotAllowed") }
        guard request.path.hasPrefix("/3/device/") else { return MockAPNsAnswer(status: 404, reason: "BadPath") }
        let token = request.path.dropFirst("/3/device/".count)
        guard !token.isEmpty else { return MockAPNsAnswer(status: 400, reason: "MissingDeviceToken") }
        guard Self.isDeviceToken(token) else { return MockAPNsAnswer(status: 400, reason: "BadDeviceToken") }

        if case .token(let verifier) = authentication {
            if let failure = checkHeaders(request) { return failure }
            switch verifier.verify(authorization: request.header("authorization")) {
            case .valid: break
            case .rejected(let reason): return MockAPNsAnswer(status: 403, reason: reason.rawValue)
            }
            if let failure = checkPayload(request) { return failure }
        }
        return outcome(forToken: token)
    }

    /// Lower-case or upper-case hex, even length, 64…200 digits (APNs tokens vary in length).
    static func isDeviceToken(_ token: Substring) -> Bool {
        let utf8 = token.utf8
        guard utf8.count >= 64, utf8.count <= 200, utf8.count % 2 == 0 else { return false }
        return utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) || (0x41...0x46).contains($0) }
    }

    private func checkHeaders(_ request: HTTP2ServerRequest) -> MockAPNsAnswer? {
        var seen = Set<String>()
        for header in request.headers where header.name.hasPrefix("apns-") || header.name == "authorization" {
            guard seen.insert(header.name).inserted else { return MockAPNsAnswer(status: 400, reason: "DuplicateHeaders") }
        }
        guard let topic = request.header("apns-topic"), !topic.isEmpty else {
            return MockAPNsAnswer(status: 400, reason: "MissingTopic")
        }
        var pushType: APNsPushType? = nil
        if let value = request.header("apns-push-type") {
            guard let parsed = APNsPushType(rawValue: value) else { return MockAPNsAnswer(status: 400, reason: "InvalidPushType") }
            pushType = parsed
            // The topic must carry the push type's suffix (protocol-facts 1.4).
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

    private func outcome(forToken token: Substring) -> MockAPNsAnswer {
        let prefix = token.prefix(4).lowercased()
        switch prefix {
        case "dead":
            return MockAPNsAnswer(status: 410, reason: "Unregistered",
                                  timestampMilliseconds: wallClock.secondsSinceEpoch() * 1000 - 86_400_000)
        case "bad0":
            return MockAPNsAnswer(status: 400, reason: "BadDeviceToken")
        case "5030":
            return shared.firstTime("5030/" + token) ? MockAPNsAnswer(status: 503, reason: "ServiceUnavailable") : .ok
        case "4290":
            return shared.firstTime("4290/" + token) ? MockAPNsAnswer(status: 429, reason: "TooManyRequests") : .ok
        default:
            return .ok
        }
    }
}
