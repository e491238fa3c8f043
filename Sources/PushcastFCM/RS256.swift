// RS256 (RSASSA-PKCS1-v1_5 with SHA-256, RFC 7518 §3.3) over OpenSSL 3, for the service-account
// assertion of Google's OAuth2 flow (docs/PROTOCOL.md §2.2). Signing costs about 0.9 ms (docs/DESIGN.md
// §6), so the token source signs once an hour, not per request.
//
// Thread safety: an EVP_PKEY is only read after it is loaded, and every signature or verification
// uses its own EVP_MD_CTX; OpenSSL 3 allows that from several threads at once.
// Errors name the key's file and never contain key bytes.

import COpenSSL
import PushcastCore
import PushcastWire

/// Signs assertions with a service account's private key.
public final class RS256Signer: @unchecked Sendable {
    let key: RSAKey
    /// How messages name the key (the service-account file).
    public let source: String

    public init(account: FCMServiceAccount) throws(FCMCredentialError) {
        key = try RSAKey.load(pem: account.privateKeyPEM, source: account.source, publicOnly: false)
        source = account.source
    }

    /// The RSASSA-PKCS1-v1_5 SHA-256 signature of `data` (as long as the key's modulus).
    public func sign(_ data: [UInt8]) throws(FCMCredentialError) -> [UInt8] {
        guard let signature = data.withUnsafeBytes({ key.sign($0) }) else {
            throw FCMCredentialError("cannot sign with the private key of '\(source)'\(lastOpenSSLReason().map { ": \($0)" } ?? "")")
        }
        return signature
    }

    /// The SubjectPublicKeyInfo PEM of the key's public half (the mock verifies with it).
    public func publicKeyPEM() throws(FCMCredentialError) -> [UInt8] {
        guard let pem = key.pem(publicOnly: true) else { throw FCMCredentialError("cannot write the public key of '\(source)' as PEM") }
        return pem
    }

    /// The key's public half, ready to verify with.
    public func publicKey() throws(FCMCredentialError) -> RS256PublicKey {
        try RS256PublicKey(pem: try publicKeyPEM(), source: source)
    }
}

/// Verifies RS256 signatures (the mock's token endpoint).
public final class RS256PublicKey: @unchecked Sendable {
    let key: RSAKey

    /// `pem` is SubjectPublicKeyInfo (`-----BEGIN PUBLIC KEY-----`).
    public init(pem: [UInt8], source: String) throws(FCMCredentialError) {
        key = try RSAKey.load(pem: pem, source: source, publicOnly: true)
    }

    /// Reads a SubjectPublicKeyInfo PEM file through `files` (start-up only).
    public init(file path: String, files: SecretFileReader) throws(FCMCredentialError) {
        let pem = try CredentialFile.contents(path, what: "RSA public key file", bytesMax: 64 * 1024, files: files)
        key = try pem.withUnsafeBytes { (bytes) throws(FCMCredentialError) in try RSAKey.load(pem: bytes, source: path, publicOnly: true) }
    }

    public func verify(_ data: [UInt8], signature: [UInt8]) -> Bool {
        data.withUnsafeBytes { message in signature.withUnsafeBytes { key.verify(message, signature: $0) } }
    }
}

/// An EVP_PKEY holding an RSA key of at least 2048 bits.
final class RSAKey: @unchecked Sendable {
    static let bitsMin: Int32 = 2048
    let key: OpaquePointer
    let hasPrivateKey: Bool

    private init(key: OpaquePointer, hasPrivateKey: Bool) {
        self.key = key
        self.hasPrivateKey = hasPrivateKey
    }

    deinit { EVP_PKEY_free(key) }

    /// Reads a PEM private key (PKCS#8 as Google writes it, or PKCS#1) or, with `publicOnly`, a
    /// SubjectPublicKeyInfo PEM.
    static func load(pem: [UInt8], source: String, publicOnly: Bool) throws(FCMCredentialError) -> RSAKey {
        try pem.withUnsafeBufferPointer { (bytes) throws(FCMCredentialError) in try load(pem: UnsafeRawBufferPointer(bytes), source: source, publicOnly: publicOnly) }
    }

    static func load(pem: UnsafeRawBufferPointer, source: String, publicOnly: Bool) throws(FCMCredentialError) -> RSAKey {
        ERR_clear_error()
        defer { ERR_clear_error() }
        let what = publicOnly ? "RSA public key" : "private key"
        let whose = publicOnly ? "'\(source)'" : "in '\(source)'"
        guard !pem.isEmpty else { throw FCMCredentialError("the \(what) \(whose) is empty") }
        let loaded = readPEMKey(pem, publicOnly: publicOnly)
        guard let loaded else {
            let marker = publicOnly ? "-----BEGIN PUBLIC KEY-----" : "-----BEGIN PRIVATE KEY-----"
            let detail = lastOpenSSLReason().map { " (OpenSSL: \($0))" } ?? ""
            throw FCMCredentialError("cannot read the \(what) \(whose): expected PEM text starting with \(marker)\(detail)")
        }
        let key = RSAKey(key: loaded, hasPrivateKey: !publicOnly)
        guard EVP_PKEY_get_base_id(loaded) == EVP_PKEY_RSA else {
            throw FCMCredentialError("the \(what) \(whose) is not an RSA key; Google service accounts sign with RS256")
        }
        let bits = EVP_PKEY_get_bits(loaded)
        guard bits >= bitsMin else { throw FCMCredentialError("the \(what) \(whose) has \(bits) bits; RS256 needs at least \(bitsMin)") }
        return key
    }

    static func generate(bits: Int32) throws(FCMCredentialError) -> RSAKey {
        ERR_clear_error()
        defer { ERR_clear_error() }
        guard let context = EVP_PKEY_CTX_new_from_name(nil, "RSA", nil) else { throw FCMCredentialError("cannot create an RSA key context") }
        defer { EVP_PKEY_CTX_free(context) }
        var generated: OpaquePointer?
        guard EVP_PKEY_keygen_init(context) == 1, EVP_PKEY_CTX_set_rsa_keygen_bits(context, bits) == 1,
              EVP_PKEY_generate(context, &generated) == 1, let generated else {
            throw FCMCredentialError("cannot generate a \(bits)-bit RSA key\(lastOpenSSLReason().map { ": \($0)" } ?? "")")
        }
        return RSAKey(key: generated, hasPrivateKey: true)
    }

    /// PEM text: PKCS#8 for the private key (as in Google's files), SubjectPublicKeyInfo for the public one.
    func pem(publicOnly: Bool) -> [UInt8]? { writePEMKey(key, publicOnly: publicOnly) }

    func sign(_ message: UnsafeRawBufferPointer) -> [UInt8]? {
        precondition(hasPrivateKey, "signing needs a private key")
        guard let context = EVP_MD_CTX_new() else { return nil }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestSignInit(context, nil, EVP_sha256(), nil, key) == 1 else { return nil }
        var signature = [UInt8](repeating: 0, count: Int(EVP_PKEY_get_size(key)))
        var length = signature.count
        let base = message.baseAddress?.assumingMemoryBound(to: UInt8.self)
        guard EVP_DigestSign(context, &signature, &length, base, message.count) == 1 else { return nil }
        return Array(signature.prefix(length))
    }

    func verify(_ message: UnsafeRawBufferPointer, signature: UnsafeRawBufferPointer) -> Bool {
        guard signature.count == Int(EVP_PKEY_get_size(key)), let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context); ERR_clear_error() }
        guard EVP_DigestVerifyInit(context, nil, EVP_sha256(), nil, key) == 1 else { return false }
        return EVP_DigestVerify(context, signature.baseAddress?.assumingMemoryBound(to: UInt8.self), signature.count,
                                message.baseAddress?.assumingMemoryBound(to: UInt8.self), message.count) == 1
    }
}

