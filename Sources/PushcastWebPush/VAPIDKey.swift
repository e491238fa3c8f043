// The application server's VAPID key (RFC 8292 §3.2), as users have it:
// - the web-push tool's `privateKey`: base64url of the raw 32-byte private scalar (the public key
//   is derived from it);
// - a PEM file: PKCS#8 "PRIVATE KEY", or SEC1 "EC PRIVATE KEY" as py_vapid and
//   `openssl ecparam -genkey` write it.
// Files come through the same bounded, wiped SecretFileReader as the APNs key; the raw scalar is
// decoded into wiped memory. Errors name the file and never hold key bytes.

import COpenSSL
import PushcastCore
import PushcastWire

/// A VAPID key or subject that cannot be used. The message names the source, never the key.
public struct VAPIDKeyError: Error, Sendable, Equatable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// A P-256 key pair that signs VAPID tokens.
public final class VAPIDKey: Sendable {
    /// The largest key file read: real ones are a few hundred bytes.
    public static let fileBytesMax = 64 << 10
    /// The longest raw key text accepted (32 bytes take 44 characters with padding).
    static let rawTextBytesMax = 64

    public let key: P256Key
    /// The uncompressed public key (65 bytes), and its base64url text: the `k` parameter of the
    /// Authorization header and the applicationServerKey the site subscribed with.
    public let publicKey: [UInt8]
    public let publicKeyText: String

    public init(key: P256Key) throws(VAPIDKeyError) {
        guard key.hasPrivateKey, let point = key.publicPoint() else { throw VAPIDKeyError("the VAPID key has no usable key pair") }
        self.key = key
        publicKey = point
        publicKeyText = Base64URL.encode(point)
    }

    /// A fresh key pair (the mock and tests).
    public static func generate() throws(VAPIDKeyError) -> VAPIDKey {
        guard let key = P256Key.generate() else { throw VAPIDKeyError("cannot generate a P-256 key") }
        return try VAPIDKey(key: key)
    }

    /// Reads the file at `path` through `files` (start-up only) and names it in every error.
    public static func load(file path: String, files: SecretFileReader) throws(VAPIDKeyError) -> VAPIDKey {
        let bytes: SecretBytes
        do {
            bytes = try files(path, fileBytesMax)
        } catch .tooLarge {
            throw VAPIDKeyError("the VAPID private key '\(path)' is larger than \(SecretFileError.size(fileBytesMax)); it is not a key file")
        } catch {
            throw VAPIDKeyError("cannot \(error.verb) the VAPID private key '\(path)': \(error.reason)")
        }
        return try bytes.withUnsafeBytes { (text) throws(VAPIDKeyError) in try read(text, source: "'\(path)'") }
    }

    /// Reads a key's text: PEM when it starts with "-----BEGIN", else the raw base64url scalar.
    /// Surrounding whitespace (a trailing newline) is ignored. `source` names it in errors.
    public static func read(_ text: UnsafeRawBufferPointer, source: String) throws(VAPIDKeyError) -> VAPIDKey {
        var start = 0
        var end = text.count
        while start < end && isSpace(text[start]) { start += 1 }
        while end > start && isSpace(text[end - 1]) { end -= 1 }
        let trimmed = UnsafeRawBufferPointer(rebasing: text[start..<end])
        guard !trimmed.isEmpty else { throw VAPIDKeyError("the VAPID private key \(source) is empty") }
        if trimmed.starts(with: "-----BEGIN".utf8) { return try readPEM(trimmed, source: source) }
        return try readRaw(trimmed, source: source)
    }

    private static func readPEM(_ pem: UnsafeRawBufferPointer, source: String) throws(VAPIDKeyError) -> VAPIDKey {
        ERR_clear_error()
        defer { ERR_clear_error() }
        guard let loaded = readPEMKey(pem, publicOnly: false) else {
            let detail = lastOpenSSLReason().map { " (OpenSSL: \($0))" } ?? ""
            throw VAPIDKeyError("cannot read the VAPID private key \(source): expected an unencrypted PEM private key "
                                + "(-----BEGIN PRIVATE KEY----- or -----BEGIN EC PRIVATE KEY-----)\(detail)")
        }
        let key = P256Key(adopting: loaded, hasPrivateKey: true)
        switch P256Key.curveProblem(loaded) {
        case nil: return try VAPIDKey(key: key)
        case .notEllipticCurve: throw VAPIDKeyError("the VAPID private key \(source) is not an elliptic-curve key; VAPID needs a P-256 key")
        case .noNamedCurve: throw VAPIDKeyError("the VAPID private key \(source) has no named curve; VAPID needs P-256")
        case .otherCurve(let curve): throw VAPIDKeyError("the VAPID private key \(source) is on curve \(curve); VAPID needs P-256 (prime256v1)")
        }
    }

    private static func readRaw(_ text: UnsafeRawBufferPointer, source: String) throws(VAPIDKeyError) -> VAPIDKey {
        let expected = "expected the base64url private key the web-push tool prints (32 bytes) or a PEM private key"
        guard text.count <= rawTextBytesMax else { throw VAPIDKeyError("the VAPID private key \(source) is not a key: \(expected)") }
        let scalar = SecretBytes(capacity: rawTextBytesMax)
        let room = scalar.spareCapacity(minimum: rawTextBytesMax)
        guard let written = WebPushBase64.decode(text, into: room) else {
            throw VAPIDKeyError("the VAPID private key \(source) is not base64url: \(expected)")
        }
        scalar.didAppend(written)
        guard written == P256Key.scalarBytes else {
            throw VAPIDKeyError("the VAPID private key \(source) decodes to \(written) bytes: \(expected)")
        }
        guard let key = scalar.withUnsafeBytes({ P256Key.privateKey(scalar: $0) }) else {
            throw VAPIDKeyError("the VAPID private key \(source) is not a valid P-256 private key (0, or not below the group order)")
        }
        return try VAPIDKey(key: key)
    }

    @inline(__always) private static func isSpace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D
    }
}
