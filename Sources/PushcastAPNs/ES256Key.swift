// ES256 keys for the provider token (§1.8): the APNs `.p8` key and, for the mock, its public key.
// The key itself (signing, verification, the DER ↔ R‖S conversion) is PushcastWire's `P256Key`,
// which Web Push's VAPID shares; this file reads APNs's files and words APNs's errors.
// Error messages name the key's source (a file name) and never include key bytes.

import COpenSSL
import PushcastCore
import PushcastWire

/// A key or credential that cannot be used. The message names the source, never the key material.
public struct APNsCredentialError: Error, Sendable, Equatable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

typealias ES256Key = P256Key

extension P256Key {
    /// Reads a PKCS#8 PEM private key (an APNs `.p8` file) or, with `publicOnly`, a SubjectPublicKeyInfo PEM.
    static func load(pem: [UInt8], source: String, publicOnly: Bool) throws(APNsCredentialError) -> ES256Key {
        try pem.withUnsafeBufferPointer { (bytes) throws(APNsCredentialError) in try load(pem: UnsafeRawBufferPointer(bytes), source: source, publicOnly: publicOnly) }
    }

    static func load(pem: UnsafeRawBufferPointer, source: String, publicOnly: Bool) throws(APNsCredentialError) -> ES256Key {
        ERR_clear_error()
        defer { ERR_clear_error() }
        let what = publicOnly ? "public key" : "private key"
        let marker = publicOnly ? "-----BEGIN PUBLIC KEY-----" : "-----BEGIN PRIVATE KEY-----"
        guard pem.count > 0 else { throw APNsCredentialError("the APNs \(what) \(source) is empty") }
        let loaded = readPEMKey(pem, publicOnly: publicOnly)
        guard let loaded else {
            let detail = lastOpenSSLReason().map { " (OpenSSL: \($0))" } ?? ""
            throw APNsCredentialError("cannot read the APNs \(what) \(source): expected PEM text starting with \(marker)\(detail)")
        }
        let key = ES256Key(adopting: loaded, hasPrivateKey: !publicOnly)
        switch P256Key.curveProblem(loaded) {
        case nil:
            return key
        case .notEllipticCurve:
            throw APNsCredentialError("the APNs \(what) \(source) is not an elliptic-curve key; APNs token auth needs a P-256 (ES256) key")
        case .noNamedCurve:
            throw APNsCredentialError("the APNs \(what) \(source) has no named curve; APNs token auth needs P-256")
        case .otherCurve(let curve):
            throw APNsCredentialError("the APNs \(what) \(source) is on curve \(curve); APNs token auth needs P-256 (prime256v1)")
        }
    }

    /// The largest key file read: real ones are a few hundred bytes.
    static let fileBytesMax = 1 << 20

    /// Reads the PEM file at `path` through `files` (start-up only) and names it in every error.
    static func load(file path: String, what: String, publicOnly: Bool, files: SecretFileReader) throws(APNsCredentialError) -> ES256Key {
        let bytes: SecretBytes
        do {
            bytes = try files(path, fileBytesMax)
        } catch .tooLarge {
            throw APNsCredentialError("the APNs \(what) '\(path)' is larger than 1 MiB; it is not a key file")
        } catch {
            throw APNsCredentialError("cannot \(error.verb) the APNs \(what) '\(path)': \(error.reason)")
        }
        return try bytes.withUnsafeBytes { (pem) throws(APNsCredentialError) in try load(pem: pem, source: "'\(path)'", publicOnly: publicOnly) }
    }

    /// A fresh P-256 key pair.
    static func generateForAPNs() throws(APNsCredentialError) -> ES256Key {
        ERR_clear_error()
        defer { ERR_clear_error() }
        guard let key = P256Key.generate() else {
            throw APNsCredentialError("cannot generate a P-256 key\(lastOpenSSLReason().map { ": \($0)" } ?? "")")
        }
        return key
    }
}
