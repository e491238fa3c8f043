import PushcastCore
import PushcastJSON
import PushcastProviderKit
import PushcastWire

/// How an APNs server checks a request's credentials.
public enum APNsServerAuthentication: Sendable {
    /// Accept any POST to /3/device/<token>, without header, payload or provider-token checks:
    /// a generic HTTP/2 load target for tools such as h2load. Token-prefix outcomes still apply.
    case none
    /// Check headers and payload as APNs does, but no credentials: the simulator's clients carry none.
    case headersOnly
    /// Verify the ES256 provider token, as APNs does.
    case token(APNsJWTVerifier)
    /// Certificate auth (`pushcast mock --client-ca`): the TLS handshake has verified the client's
    /// certificate; the connection's topic and environment come from it, as at APNs, and no
    /// provider token is checked. The server plays this environment's host.
    case certificate(APNsServerEnvironment)
}

/// Which APNs host a server plays for certificate auth: api.push.apple.com (production) or
/// api.sandbox.push.apple.com (sandbox).
public enum APNsServerEnvironment: String, Sendable, CaseIterable {
    case production
    case sandbox

    /// The environments a push certificate is good for, by its subject CN, as Apple names them:
    /// "Apple Development IOS Push Services: <bundle>" is sandbox only, "Apple Production IOS Push
    /// Services: <bundle>" production only, and the universal "Apple Push Services: <bundle>" both.
    /// Any other CN (a test certificate) is taken as universal.
    static func accepted(byCommonName commonName: String?) -> Set<APNsServerEnvironment> {
        let name = commonName ?? ""
        if name.hasPrefix("Apple Development IOS Push Services") { return [.sandbox] }
        if name.hasPrefix("Apple Production IOS Push Services") { return [.production] }
        return [.production, .sandbox]
    }
}

/// What APNs would answer, before the apns-id and the server's faults.
struct APNsRuling: Equatable {
    var status: Int
    var reason: String?
    /// Milliseconds since the epoch, for 410 answers.
    var timestampMilliseconds: Int64?

    static let ok = APNsRuling(status: 200, reason: nil, timestampMilliseconds: nil)

    /// APNs's error body: `{"reason":"…"}`, plus `timestamp` on 410.
    var body: [UInt8] {
        guard let reason else { return [] }
        if let timestampMilliseconds {
            return Array("{\"reason\":\"\(reason)\",\"timestamp\":\(timestampMilliseconds)}".utf8)
        }
        return Array("{\"reason\":\"\(reason)\"}".utf8)
    }

    var kind: ProviderServerAnswer.Kind {
        switch status {
        case 200: return .accepted
        case 410: return .deviceGone
        case 403: return .credentialsRefused
        case 429, 500...599: return .busy
        default: return .refused
        }
    }
}

/// APNs's server side (docs/PROTOCOL.md §1), for `pushcast mock` and the simulator: method, path,
/// token shape, headers, payload, provider token (or the client certificate's topic and
/// environment), then the device's outcome: the server's, or by token prefix (`dead` 410,
/// `bad0` 400, `5030` 503 once, `4290` 429 once). Checks run in the order APNs documents them;
/// the first failure answers. Every answer carries the request's apns-id, or a new one.
public final class APNsResponder: ProviderResponder {
    public let authentication: APNsServerAuthentication

    public init(authentication: APNsServerAuthentication) { self.authentication = authentication }

    public var provider: ProviderID { .apns }

    /// APNs allows one stream until the first request with a valid provider token.
    public var streamsBeforeCredentials: Int? {
        if case .token = authentication { return 1 }
        return nil
    }

    public func respond(to request: HTTP2ServerRequest, context: ProviderRequestContext) -> ProviderServerAnswer {
        answer(rule(request, context: context), to: request, random: context.random)
    }

    public func answer(_ fault: ProviderServerFault, to request: HTTP2ServerRequest, context: ProviderRequestContext) -> ProviderServerAnswer {
        let ruling: APNsRuling
        switch fault {
        case .throttled: ruling = APNsRuling(status: 429, reason: "TooManyRequests")
        case .serverError(let status): ruling = APNsRuling(status: status, reason: status == 500 ? "InternalServerError" : "ServiceUnavailable")
        }
        return answer(ruling, to: request, random: context.random)
    }

    public func token(of request: HTTP2ServerRequest) -> String {
        let path = request.path
        return path.hasPrefix("/3/device/") ? String(path.dropFirst(10)) : ""
    }

    public func logMembers(_ request: HTTP2ServerRequest, _ answer: ProviderServerAnswer) -> String {
        let apnsID = answer.inlineHeader?.value ?? answer.headers.first { $0.name == "apns-id" }?.value ?? ""
        var line = "\"token\":\(JSONWriter.quoted(token(of: request))),\"status\":\(answer.status),\"apns_id\":\(JSONWriter.quoted(apnsID))"
        if let reason = answer.reason { line += ",\"reason\":\(JSONWriter.quoted(reason))" }
        return line
    }

    /// The ruling with the client's apns-id echoed, or a new one; held inline, so answering
    /// allocates nothing. An id longer than an inline header holds is echoed the ordinary way.
    func answer(_ ruling: APNsRuling, to request: HTTP2ServerRequest, random: SplitMix64) -> ProviderServerAnswer {
        var tooLong = false
        let echoed = request.withHeader("apns-id") { value -> HTTP2InlineHeader? in
            guard let value else { return nil }
            guard let header = HTTP2InlineHeader(name: "apns-id", value: value) else { tooLong = true; return nil }
            return header
        }
        var answer = ProviderServerAnswer(status: ruling.status, kind: ruling.kind, body: ruling.body, reason: ruling.reason)
        if tooLong {
            answer.headers = [HTTP2Header("apns-id", request.header("apns-id") ?? "")]
        } else {
            answer.inlineHeader = echoed ?? Self.randomUUIDHeader(random)
        }
        return answer
    }

    /// The ruling for one request; certificate auth reads the connection's certificate from
    /// `context.clientCertificate`.
    func rule(_ request: HTTP2ServerRequest, context: ProviderRequestContext) -> APNsRuling {
        guard request.method(is: "POST") else { return APNsRuling(status: 405, reason: "MethodNotAllowed") }
        return request.withPath { path -> APNsRuling in
            guard Self.hasPrefix(path, Self.devicePrefix) else { return APNsRuling(status: 404, reason: "BadPath") }
            let token = UnsafeRawBufferPointer(rebasing: path[Self.devicePrefix.utf8CodeUnitCount...])
            guard !token.isEmpty else { return APNsRuling(status: 400, reason: "MissingDeviceToken") }
            guard Self.isDeviceToken(token) else { return APNsRuling(status: 400, reason: "BadDeviceToken") }

            switch authentication {
            case .none:
                break
            case .headersOnly:
                if let failure = checkHeaders(request, topicRule: .header) { return failure }
                if let failure = checkPayload(request) { return failure }
            case .token(let verifier):
                if let failure = checkHeaders(request, topicRule: .header) { return failure }
                switch verifier.verify(authorization: request.header("authorization")) {
                case .valid: break
                case .rejected(let reason): return APNsRuling(status: 403, reason: reason.rawValue)
                }
                if let failure = checkPayload(request) { return failure }
            case .certificate(let environment):
                let certificate = context.clientCertificate
                if let failure = Self.checkCertificate(certificate, environment: environment) { return failure }
                if let failure = checkHeaders(request, topicRule: .certificate(uid: certificate?.subjectUID)) { return failure }
                if let failure = checkPayload(request) { return failure }
            }
            switch context.device {
            case .registered: return .ok
            case .unregistered: return Self.unregistered(context)
            case nil: return outcome(forToken: token, context: context)
            }
        }
    }

    static func unregistered(_ context: ProviderRequestContext) -> APNsRuling {
        APNsRuling(status: 410, reason: "Unregistered", timestampMilliseconds: context.wallMilliseconds() - 86_400_000)
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
    static func checkCertificate(_ certificate: TLSClientCertificate?, environment: APNsServerEnvironment) -> APNsRuling? {
        guard let certificate, certificate.verificationError == nil else { return APNsRuling(status: 403, reason: "BadCertificate") }
        guard APNsServerEnvironment.accepted(byCommonName: certificate.commonName).contains(environment) else {
            return APNsRuling(status: 403, reason: "BadCertificateEnvironment")
        }
        return nil
    }

    /// The topic of a request on a certificate connection: apns-topic when given, which must be
    /// the certificate's UID (the bundle ID) or the UID with a push type's suffix (Apple's
    /// universal certificates cover those: `.voip`, `.complication`…); without the header, the
    /// UID. A certificate without a UID is good for no topic.
    /// Returns the topic, or the answer refusing the request.
    static func certificateTopic(header: String?, uid: String?) -> (topic: String?, refusal: APNsRuling?) {
        guard let header, !header.isEmpty else {
            guard let uid, !uid.isEmpty else { return (nil, APNsRuling(status: 400, reason: "MissingTopic")) }
            return (uid, nil)
        }
        guard let uid, !uid.isEmpty, header.hasPrefix(uid) else { return (nil, APNsRuling(status: 400, reason: "BadTopic")) }
        let suffix = header.dropFirst(uid.count)
        guard suffix.isEmpty || APNsPushType.allCases.contains(where: { !$0.topicSuffix.isEmpty && $0.topicSuffix == suffix }) else {
            return (nil, APNsRuling(status: 400, reason: "BadTopic"))
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

    private func checkHeaders(_ request: HTTP2ServerRequest, topicRule: TopicRule) -> APNsRuling? {
        var seen = Set<String>()
        for header in request.headers where header.name.hasPrefix("apns-") || header.name == "authorization" {
            guard seen.insert(header.name).inserted else { return APNsRuling(status: 400, reason: "DuplicateHeaders") }
        }
        let topic: String
        switch topicRule {
        case .certificate(let uid):
            let (derived, refusal) = Self.certificateTopic(header: request.header("apns-topic"), uid: uid)
            guard let derived else { return refusal }
            topic = derived
        case .header:
            guard let given = request.header("apns-topic"), !given.isEmpty else {
                return APNsRuling(status: 400, reason: "MissingTopic")
            }
            topic = given
        }
        var pushType: APNsPushType? = nil
        if let value = request.header("apns-push-type") {
            guard let parsed = APNsPushType(rawValue: value) else { return APNsRuling(status: 400, reason: "InvalidPushType") }
            pushType = parsed
            // The topic must carry the push type's suffix (docs/PROTOCOL.md §1.4).
            if !parsed.topicSuffix.isEmpty && !topic.hasSuffix(parsed.topicSuffix) {
                return APNsRuling(status: 400, reason: "BadTopic")
            }
        }
        if let value = request.header("apns-priority") {
            guard let priority = Int(value), [10, 5, 1].contains(priority) else {
                return APNsRuling(status: 400, reason: "BadPriority")
            }
            if pushType == .background && priority != 5 { return APNsRuling(status: 400, reason: "BadPriority") }
        }
        if let value = request.header("apns-expiration") {
            guard let expiration = Int64(value), expiration >= 0 else {
                return APNsRuling(status: 400, reason: "BadExpirationDate")
            }
        }
        if let value = request.header("apns-collapse-id"), value.utf8.count > 64 {
            return APNsRuling(status: 400, reason: "BadCollapseId")
        }
        if let value = request.header("apns-id"), !APNsID.isCanonical(value.lowercased()) {
            return APNsRuling(status: 400, reason: "BadMessageId")
        }
        return nil
    }

    private func checkPayload(_ request: HTTP2ServerRequest) -> APNsRuling? {
        guard !request.body.isEmpty else { return APNsRuling(status: 400, reason: "PayloadEmpty") }
        let limit = request.header("apns-push-type") == APNsPushType.voip.rawValue ? 5120 : 4096
        guard request.body.count <= limit else { return APNsRuling(status: 413, reason: "PayloadTooLarge") }
        let valid = request.body.withUnsafeBytes { JSONValidation.isObject($0) }
        guard valid else { return APNsRuling(status: 400, reason: "BadPayload") }
        return nil
    }

    /// The outcome by the token's first four hex digits, in either case (`token` is hex).
    private func outcome(forToken token: UnsafeRawBufferPointer, context: ProviderRequestContext) -> APNsRuling {
        guard token.count >= 4 else { return .ok }
        // Hex digits and letters both lower-case with `| 0x20`.
        let prefix = UInt32(token[0] | 0x20) | UInt32(token[1] | 0x20) << 8 | UInt32(token[2] | 0x20) << 16 | UInt32(token[3] | 0x20) << 24
        switch prefix {
        case Self.word("dead"):
            return Self.unregistered(context)
        case Self.word("bad0"):
            return APNsRuling(status: 400, reason: "BadDeviceToken")
        case Self.word("5030"):
            return context.once.firstTime("5030/" + String(decoding: token, as: UTF8.self)) ? APNsRuling(status: 503, reason: "ServiceUnavailable") : .ok
        case Self.word("4290"):
            return context.once.firstTime("4290/" + String(decoding: token, as: UTF8.self)) ? APNsRuling(status: 429, reason: "TooManyRequests") : .ok
        default:
            return .ok
        }
    }

    /// Four ASCII bytes as a little-endian word.
    private static func word(_ text: StaticString) -> UInt32 {
        let p = text.utf8Start
        return UInt32(p[0]) | UInt32(p[1]) << 8 | UInt32(p[2]) << 16 | UInt32(p[3]) << 24
    }

    /// A random canonical UUID, for requests that came without an apns-id.
    public static func randomUUID(_ random: SplitMix64) -> String {
        randomUUIDHeader(random).value
    }

    /// The same, written straight into an inline `apns-id` header.
    static func randomUUIDHeader(_ random: SplitMix64) -> HTTP2InlineHeader {
        HTTP2InlineHeader(name: "apns-id", count: 36) { out in writeRandomUUID(random, into: out) }
    }

    /// 36 bytes: 8-4-4-4-12 lower-case hex, version 4, RFC 4122 variant.
    static func writeRandomUUID(_ random: SplitMix64, into out: UnsafeMutableRawBufferPointer) {
        precondition(out.count >= 36)
        let a = random.next()
        var b = random.next()
        b = (b & ~0xF000_0000_0000_0000) | 0x4000_0000_0000_0000  // version 4: "4xxx" in group 3
        let c = (random.next() & 0x3FFF_FFFF_FFFF_FFFF) | 0x8000_0000_0000_0000  // variant 10xx: group 4
        let base = out.baseAddress!
        // 8-4-4-4-12 = a[0..<32] - a[32..<48] - b[48..<64] - c[48..<64] - c[0..<48], high nibble first.
        base.storeBytes(of: hex8(UInt32(truncatingIfNeeded: a >> 32)), toByteOffset: 0, as: UInt64.self)
        base.storeBytes(of: UInt8(ascii: "-"), toByteOffset: 8, as: UInt8.self)
        storeHex4(UInt16(truncatingIfNeeded: a >> 16), at: base + 9)
        base.storeBytes(of: UInt8(ascii: "-"), toByteOffset: 13, as: UInt8.self)
        storeHex4(UInt16(truncatingIfNeeded: b >> 48), at: base + 14)
        base.storeBytes(of: UInt8(ascii: "-"), toByteOffset: 18, as: UInt8.self)
        storeHex4(UInt16(truncatingIfNeeded: c >> 48), at: base + 19)
        base.storeBytes(of: UInt8(ascii: "-"), toByteOffset: 23, as: UInt8.self)
        storeHex4(UInt16(truncatingIfNeeded: c >> 32), at: base + 24)
        base.storeBytes(of: hex8(UInt32(truncatingIfNeeded: c)), toByteOffset: 28, as: UInt64.self)
    }

    /// Eight lower-case hex digits of `value`, most significant first, as the bytes of a
    /// little-endian UInt64 (SWAR: spread the nibbles one per byte, then add '0' or 'a' - 10).
    @inline(__always)
    static func hex8(_ value: UInt32) -> UInt64 {
        var x = UInt64(value.byteSwapped)  // most significant byte first in memory
        x = (x | (x << 16)) & 0x0000_FFFF_0000_FFFF
        x = (x | (x << 8)) & 0x00FF_00FF_00FF_00FF
        // Each byte holds two nibbles now; put the high one first.
        let high = (x >> 4) & 0x000F_000F_000F_000F
        let low = (x & 0x000F_000F_000F_000F) << 8
        x = high | low
        let letters = ((x &+ 0x0606_0606_0606_0606) >> 4) & 0x0101_0101_0101_0101
        return (x &+ 0x3030_3030_3030_3030 &+ letters &* 0x27).littleEndian
    }

    @inline(__always)
    static func storeHex4(_ value: UInt16, at pointer: UnsafeMutableRawPointer) {
        let digits = hex8(UInt32(value)) >> 32  // the last four of eight digits
        pointer.storeBytes(of: UInt32(truncatingIfNeeded: digits).littleEndian, as: UInt32.self)
    }
}
