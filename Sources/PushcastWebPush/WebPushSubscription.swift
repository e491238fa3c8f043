// A browser's push subscription (PushSubscription.toJSON()):
//   {"endpoint": "https://push.example.net/…", "expirationTime": null,
//    "keys": {"p256dh": base64url(65-byte uncompressed P-256 point), "auth": base64url(16 bytes)}}
// The endpoint is the token: the message is POSTed to it. Its origin (scheme://host[:port]) is
// the VAPID audience and what the engine routes connections by. The p256dh key must be a point on
// the curve (RFC 8291 §7: "MUST verify"), which OpenSSL checks. Errors say which field is wrong
// and why; they never repeat a key or the endpoint (a capability URL).

import PushcastJSON
import PushcastWire

/// Why a subscription cannot be used.
public enum WebPushSubscriptionError: Error, Sendable, Equatable, CustomStringConvertible {
    case tooLarge(bytesMax: Int)
    case notJSON(String)
    case notAnObject
    /// A required member is absent ("endpoint", "keys", "keys.p256dh", "keys.auth").
    case missing(String)
    /// A member has the wrong JSON type (its name and the type it must have).
    case wrongType(String, expected: String)
    case endpoint(WebPushEndpointProblem)
    case p256dhNotBase64
    case p256dhLength(Int)
    case p256dhNotUncompressed
    case p256dhNotOnCurve
    case authNotBase64
    case authLength(Int)

    public var description: String {
        switch self {
        case .tooLarge(let bytesMax): return "the subscription is larger than \(bytesMax) bytes"
        case .notJSON(let message): return "the subscription is not JSON: \(message)"
        case .notAnObject: return "the subscription is not a JSON object"
        case .missing(let name): return "the subscription has no \(name)"
        case .wrongType(let name, let expected): return "the subscription's \(name) is not \(expected)"
        case .endpoint(let problem): return "the subscription's endpoint \(problem.description)"
        case .p256dhNotBase64: return "keys.p256dh is not base64url"
        case .p256dhLength(let count):
            return "keys.p256dh decodes to \(count) bytes; a P-256 public key is 65 (0x04, X, Y)"
        case .p256dhNotUncompressed: return "keys.p256dh is not an uncompressed point (its first byte is not 0x04)"
        case .p256dhNotOnCurve: return "keys.p256dh is not a point on the P-256 curve"
        case .authNotBase64: return "keys.auth is not base64url"
        case .authLength(let count): return "keys.auth decodes to \(count) bytes; the authentication secret is 16"
        }
    }
}

/// What is wrong with an endpoint URL.
public enum WebPushEndpointProblem: Error, Sendable, Equatable, CustomStringConvertible {
    case tooLong(bytesMax: Int)
    case notHTTPS
    case badCharacter
    case noHost
    case userInfo
    case badHost
    case badPort

    public var description: String {
        switch self {
        case .tooLong(let bytesMax): return "is longer than \(bytesMax) bytes"
        case .notHTTPS: return "is not an https:// URL"
        case .badCharacter: return "has a space, a control character or a non-ASCII byte"
        case .noHost: return "has no host"
        case .userInfo: return "has a user name or password before the host"
        case .badHost: return "has a host that is not a DNS name or an IP address"
        case .badPort: return "has a port that is not a number from 1 to 65535"
        }
    }
}

/// A validated subscription.
public struct WebPushSubscription: Sendable {
    /// The largest subscription JSON read, and the longest endpoint (real ones are under 1 KiB).
    public static let jsonBytesMax = 8 << 10
    public static let endpointBytesMax = 2048
    public static let authSecretBytes = 16
    /// The longest base64 text of a key accepted (65 bytes take 88 characters with padding).
    static let keyTextBytesMax = 128

    public let endpoint: String
    /// "https://host" or "https://host:port": the host lower-cased, port 443 dropped.
    public let origin: String
    /// The user agent's public key (65 bytes, uncompressed) and the same key as OpenSSL's.
    public let p256dh: [UInt8]
    public let userAgentKey: P256Key
    public let authSecret: [UInt8]

    /// Validates the three strings a subscription is made of.
    public init(endpoint: String, p256dh: String, auth: String) throws(WebPushSubscriptionError) {
        switch WebPushOrigin.parse(endpoint: endpoint) {
        case .success(let origin): self.origin = origin
        case .failure(let problem): throw .endpoint(problem)
        }
        self.endpoint = endpoint
        let point = try Self.decodeKey(p256dh, bytes: P256Key.pointBytes, notBase64: .p256dhNotBase64, length: WebPushSubscriptionError.p256dhLength)
        guard point[0] == 0x04 else { throw .p256dhNotUncompressed }
        guard let key = point.withUnsafeBytes({ P256Key.publicKey(point: $0) }) else { throw .p256dhNotOnCurve }
        self.p256dh = point
        self.userAgentKey = key
        self.authSecret = try Self.decodeKey(auth, bytes: Self.authSecretBytes, notBase64: .authNotBase64, length: WebPushSubscriptionError.authLength)
    }

    /// Reads PushSubscription.toJSON() output. `expirationTime` may be null, a number or absent;
    /// other members are ignored.
    public init(json: UnsafeRawBufferPointer) throws(WebPushSubscriptionError) {
        guard json.count <= Self.jsonBytesMax else { throw .tooLarge(bytesMax: Self.jsonBytesMax) }
        let root: JSONValue
        switch JSONScanner.parse(json.bindMemory(to: UInt8.self)) {
        case .success(let value): root = value
        case .failure(let error): throw .notJSON("\(error.message) at byte \(error.offset)")
        }
        guard case .object = root else { throw .notAnObject }
        let endpoint = try Self.string(root, "endpoint", name: "endpoint")
        guard let keys = root["keys"] else { throw .missing("keys") }
        guard case .object = keys else { throw .wrongType("keys", expected: "an object") }
        let p256dh = try Self.string(keys, "p256dh", name: "keys.p256dh")
        let auth = try Self.string(keys, "auth", name: "keys.auth")
        switch root["expirationTime"] {
        case nil, .null?, .number?: break
        default: throw .wrongType("expirationTime", expected: "null or a number")
        }
        try self.init(endpoint: endpoint, p256dh: p256dh, auth: auth)
    }

    /// `init(json:)` over JSON text.
    public static func parse(json: String) throws(WebPushSubscriptionError) -> WebPushSubscription {
        try Array(json.utf8).withUnsafeBytes { bytes in Result { () throws(WebPushSubscriptionError) in try WebPushSubscription(json: bytes) } }.get()
    }

    private static func string(_ object: JSONValue, _ key: String, name: String) throws(WebPushSubscriptionError) -> String {
        guard let value = object[key] else { throw .missing(name) }
        guard case .string(let text) = value else { throw .wrongType(name, expected: "a string") }
        return text
    }

    private static func decodeKey(_ text: String, bytes: Int, notBase64: WebPushSubscriptionError,
                                  length: (Int) -> WebPushSubscriptionError) throws(WebPushSubscriptionError) -> [UInt8] {
        var text = text
        guard text.utf8.count <= keyTextBytesMax else { throw notBase64 }
        var out = [UInt8](repeating: 0, count: keyTextBytesMax)
        let written = text.withUTF8 { source in out.withUnsafeMutableBytes { WebPushBase64.decode(UnsafeRawBufferPointer(source), into: $0) } }
        guard let written else { throw notBase64 }
        guard written == bytes else { throw length(written) }
        return Array(out.prefix(written))
    }
}

/// The origin of an https URL (RFC 6454 §4): "https://" + the host lower-cased + ":port" unless
/// the port is 443. Only what a push endpoint can be: https, no user info, a DNS name, IPv4 or
/// bracketed IPv6 host, printable ASCII throughout.
public enum WebPushOrigin {
    public static func parse(endpoint: String) -> Result<String, WebPushEndpointProblem> {
        var text = endpoint
        var origin: [UInt8] = []
        let parsed = text.withUTF8 { Self.origin(of: UnsafeRawBufferPointer($0), into: &origin) }
        return parsed.map { _ in String(decoding: origin, as: UTF8.self) }
    }

    /// Writes the origin of the endpoint URL in `bytes` into `output` (emptied first; no
    /// allocation once it has grown) and returns where the URL's authority ends (its path, query
    /// or fragment starts there).
    public static func origin(of bytes: UnsafeRawBufferPointer, into output: inout [UInt8]) -> Result<Int, WebPushEndpointProblem> {
        guard bytes.count <= WebPushSubscription.endpointBytesMax else { return .failure(.tooLong(bytesMax: WebPushSubscription.endpointBytesMax)) }
        guard bytes.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { return .failure(.badCharacter) }
        let scheme = 8
        guard bytes.count >= scheme, zip(bytes.prefix(scheme), "https://".utf8).allSatisfy({ lower($0) == $1 }) else {
            return .failure(.notHTTPS)
        }
        let end = bytes[scheme...].firstIndex(where: { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") }) ?? bytes.count
        guard end > scheme else { return .failure(.noHost) }
        let authority = scheme..<end
        guard !bytes[authority].contains(UInt8(ascii: "@")) else { return .failure(.userInfo) }
        let hostEnd: Int
        switch self.hostEnd(bytes, authority) {
        case .success(let found): hostEnd = found
        case .failure(let problem): return .failure(problem)
        }
        output.removeAll(keepingCapacity: true)
        output.append(contentsOf: "https://".utf8)
        for byte in bytes[scheme..<hostEnd] { output.append(lower(byte)) }
        if hostEnd < end {
            let digits = bytes[(hostEnd + 1)..<end]
            guard !digits.isEmpty, digits.count <= 5, digits.allSatisfy(JSONScanner.isDigit) else { return .failure(.badPort) }
            let port = digits.reduce(0) { $0 * 10 + Int($1 - 0x30) }
            guard (1...65535).contains(port) else { return .failure(.badPort) }
            if port != 443 {
                output.append(UInt8(ascii: ":"))
                output.append(contentsOf: digits.drop { $0 == 0x30 })
            }
        }
        return .success(end)
    }

    /// Where the host ends in `authority` (a `:` or the authority's end).
    private static func hostEnd(_ bytes: UnsafeRawBufferPointer, _ authority: Range<Int>) -> Result<Int, WebPushEndpointProblem> {
        if bytes[authority.lowerBound] == UInt8(ascii: "[") {
            guard let close = bytes[authority].firstIndex(of: UInt8(ascii: "]")), close > authority.lowerBound + 1,
                  bytes[(authority.lowerBound + 1)..<close].allSatisfy({ JSONScanner.hexValue($0) != nil || $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: ".") }) else {
                return .failure(.badHost)
            }
            let hostEnd = close + 1
            guard hostEnd == authority.upperBound || bytes[hostEnd] == UInt8(ascii: ":") else { return .failure(.badHost) }
            return .success(hostEnd)
        }
        let hostEnd = bytes[authority].firstIndex(of: UInt8(ascii: ":")) ?? authority.upperBound
        let host = bytes[authority.lowerBound..<hostEnd]
        guard !host.isEmpty else { return .failure(.noHost) }
        guard host.allSatisfy({ isHostByte($0) }), host.first != UInt8(ascii: "."), host.first != UInt8(ascii: "-") else { return .failure(.badHost) }
        return .success(hostEnd)
    }

    @inline(__always) private static func lower(_ byte: UInt8) -> UInt8 {
        byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte
    }

    @inline(__always) private static func isHostByte(_ byte: UInt8) -> Bool {
        (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
            || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".")
    }
}
