// A Google service-account key file (the JSON the Firebase console downloads), read at start-up
// for the OAuth2 flow of FCM HTTP v1 (docs/PROTOCOL.md §2.2). The private key stays inside this
// module: it is never part of a description, a mirror or an error message, and errors name the
// file and the field instead.

import COpenSSL
import PushcastCore
import PushcastJSON

/// A service-account file or key that cannot be used. The message names the file and the field,
/// never key material.
public struct FCMCredentialError: Error, Sendable, Equatable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// The fields of a Google service-account key file that the OAuth2 flow needs.
public struct FCMServiceAccount: Sendable {
    public let projectID: String
    public let clientEmail: String
    public let privateKeyID: String
    public let tokenURI: String
    /// How messages name the file (its path as given).
    public let source: String
    /// PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`). Internal: only `RS256Signer` reads it.
    let privateKeyPEM: [UInt8]

    /// The file's size limit: real ones are about 2.3 KiB.
    public static let fileBytesMax = 64 * 1024

    /// Reads the file at `path` through `files` (start-up only: `SecretFile.read` of
    /// PushcastReactor, whose buffer is wiped) and parses it.
    public static func load(path: String, files: SecretFileReader) throws(FCMCredentialError) -> FCMServiceAccount {
        let bytes = try CredentialFile.contents(path, what: "FCM service-account file", bytesMax: fileBytesMax, files: files)
        return try bytes.withUnsafeBytes { (json) throws(FCMCredentialError) in
            try FCMServiceAccount(json: json.assumingMemoryBound(to: UInt8.self), source: path)
        }
    }

    public init(json: [UInt8], source: String) throws(FCMCredentialError) {
        self = try json.withUnsafeBufferPointer { (bytes) throws(FCMCredentialError) in try FCMServiceAccount(json: bytes, source: source) }
    }

    /// Parses Google's format: `type` ("service_account"), `project_id`, `private_key_id`,
    /// `private_key`, `client_email`, `token_uri`; other members are ignored.
    public init(json: UnsafeBufferPointer<UInt8>, source: String) throws(FCMCredentialError) {
        let file = "the FCM service-account file '\(source)'"
        guard json.count <= Self.fileBytesMax else { throw FCMCredentialError("\(file) is larger than 64 KiB; it is not a service-account key") }
        let root: JSONValue
        switch JSONScanner.parse(json) {
        case .success(let value): root = value
        case .failure(let error): throw FCMCredentialError("\(file) is not valid JSON (byte \(error.offset): \(error.message))")
        }
        guard case .object = root else { throw FCMCredentialError("\(file) is not a JSON object") }

        func field(_ name: String) throws(FCMCredentialError) -> String {
            guard let value = root[name] else { throw FCMCredentialError("\(file) has no \"\(name)\" field") }
            guard let text = value.stringValue, !text.isEmpty else { throw FCMCredentialError("\(file) has an empty or non-string \"\(name)\" field") }
            return text
        }
        let type = try field("type")
        guard type == "service_account" else {
            throw FCMCredentialError("\(file) has \"type\": \"\(UntrustedText.sanitized(type, limit: 40))\"; FCM needs a service-account key (\"type\": \"service_account\")")
        }
        projectID = try field("project_id")
        guard projectID.utf8.allSatisfy({ Self.isProjectIDByte($0) }) else {
            throw FCMCredentialError("\(file) has a \"project_id\" that is not letters, digits, '-', '.' or ':'")
        }
        privateKeyID = try field("private_key_id")
        clientEmail = try field("client_email")
        guard clientEmail.utf8.contains(UInt8(ascii: "@")) else { throw FCMCredentialError("\(file) has a \"client_email\" that is not an email address") }
        tokenURI = try field("token_uri")
        guard tokenURI.hasPrefix("https://") else {
            throw FCMCredentialError("\(file) has a \"token_uri\" that is not an https:// URL; the signed assertion must not travel in clear text")
        }
        let key = try field("private_key")
        guard key.contains("-----BEGIN") && key.contains("PRIVATE KEY-----") else {
            throw FCMCredentialError("\(file) has a \"private_key\" field that is not a PEM private key (expected text starting with -----BEGIN PRIVATE KEY-----)")
        }
        privateKeyPEM = Array(key.utf8)
        self.source = source
    }

    /// Google project IDs are lower-case letters, digits and hyphens; domain-scoped ones add
    /// `example.com:`. Anything else would change the meaning of the send path.
    static func isProjectIDByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
             UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: ":"):
            return true
        default:
            return false
        }
    }
}

/// Printing an account never shows its key (`print`, string interpolation, `dump`, debuggers).
extension FCMServiceAccount: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public var description: String {
        "FCMServiceAccount(project: \(projectID), client: \(clientEmail), key ID: \(privateKeyID), token URI: \(tokenURI), file: \(source))"
    }
    public var debugDescription: String { description }
    public var customMirror: Mirror {
        Mirror(self, children: ["projectID": projectID, "clientEmail": clientEmail, "privateKeyID": privateKeyID,
                                "tokenURI": tokenURI, "source": source, "privateKey": "(redacted)"])
    }
}

/// Throw-away service accounts for the mock, the demo and the tests. Real ones come from the
/// Firebase console.
public enum FCMServiceAccountGenerator {
    /// A fresh 2048-bit RSA key pair written as a Google-format service-account JSON, and the
    /// SubjectPublicKeyInfo PEM of its public half (what the mock verifies assertions with).
    public static func generate(projectID: String, clientEmail: String, tokenURI: String) throws(FCMCredentialError) -> (serviceAccountJSON: [UInt8], publicKeyPEM: [UInt8]) {
        let key = try RSAKey.generate(bits: 2048)
        guard let privateKeyPEM = key.pem(publicOnly: false), let publicKeyPEM = key.pem(publicOnly: true) else {
            throw FCMCredentialError("cannot write the generated RSA key pair as PEM")
        }
        let keyID = try hexRandom(byteCount: 20)
        let clientID = try hexRandom(byteCount: 8)
        let members: [(String, String)] = [
            ("type", "service_account"),
            ("project_id", projectID),
            ("private_key_id", keyID),
            ("private_key", String(decoding: privateKeyPEM, as: UTF8.self)),
            ("client_email", clientEmail),
            ("client_id", clientID),
            ("auth_uri", "https://accounts.google.com/o/oauth2/auth"),
            ("token_uri", tokenURI),
            ("auth_provider_x509_cert_url", "https://www.googleapis.com/oauth2/v1/certs"),
            ("universe_domain", "googleapis.com"),
        ]
        var json: [UInt8] = Array("{\n".utf8)
        for (index, member) in members.enumerated() {
            json += Array("  ".utf8)
            JSONWriter.appendString(member.0, to: &json)
            json += Array(": ".utf8)
            JSONWriter.appendString(member.1, to: &json)
            json += Array((index + 1 < members.count ? ",\n" : "\n").utf8)
        }
        json += Array("}\n".utf8)
        return (json, publicKeyPEM)
    }

    private static func hexRandom(byteCount: Int) throws(FCMCredentialError) -> String {
        var bytes = [UInt8](repeating: 0, count: byteCount)
        guard RAND_bytes(&bytes, Int32(byteCount)) == 1 else { throw FCMCredentialError("the random number generator failed") }
        let digits = Array("0123456789abcdef".utf8)
        return String(decoding: bytes.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 15)]] }, as: UTF8.self)
    }
}

/// Small credential files read whole at start-up, through the caller's reader.
enum CredentialFile {
    static func contents(_ path: String, what: String, bytesMax: Int, files: SecretFileReader) throws(FCMCredentialError) -> SecretBytes {
        do {
            return try files(path, bytesMax)
        } catch .tooLarge {
            throw FCMCredentialError("the \(what) '\(path)' is larger than \(bytesMax / 1024) KiB")
        } catch {
            throw FCMCredentialError("cannot \(error.verb) the \(what) '\(path)': \(error.reason)")
        }
    }
}
