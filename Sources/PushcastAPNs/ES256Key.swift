// ES256 (ECDSA P-256 with SHA-256, RFC 7518 §3.4) over OpenSSL 3, for the provider token (§1.8).
// OpenSSL signs in DER (SEQUENCE of two INTEGERs); JWS wants the raw 64-byte R‖S, so signing
// converts DER → R‖S (d2i_ECDSA_SIG, BN_bn2binpad) and verification converts back (docs/DESIGN.md §6).
// Error messages name the key's source (a file name) and never include key bytes.

import COpenSSL
import PushcastCore
import PushcastWire

/// A key or credential that cannot be used. The message names the source, never the key material.
public struct APNsCredentialError: Error, Sendable, Equatable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// An EVP_PKEY holding a P-256 key. Only read after construction; OpenSSL 3 allows concurrent
/// signing and verification with one key from several threads as long as nobody modifies it.
final class ES256Key: @unchecked Sendable {
    let key: OpaquePointer
    let hasPrivateKey: Bool

    private init(key: OpaquePointer, hasPrivateKey: Bool) {
        self.key = key
        self.hasPrivateKey = hasPrivateKey
    }

    deinit { EVP_PKEY_free(key) }

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
        let key = ES256Key(key: loaded, hasPrivateKey: !publicOnly)
        guard EVP_PKEY_get_base_id(loaded) == EVP_PKEY_EC else {
            throw APNsCredentialError("the APNs \(what) \(source) is not an elliptic-curve key; APNs token auth needs a P-256 (ES256) key")
        }
        var name = [CChar](repeating: 0, count: 64)
        var length = 0
        guard EVP_PKEY_get_group_name(loaded, &name, name.count, &length) == 1 else {
            throw APNsCredentialError("the APNs \(what) \(source) has no named curve; APNs token auth needs P-256")
        }
        let curve = String(decoding: name.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard curve == "prime256v1" || curve == "P-256" else {
            throw APNsCredentialError("the APNs \(what) \(source) is on curve \(curve); APNs token auth needs P-256 (prime256v1)")
        }
        return key
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

    /// Signs `message` and returns the raw 64-byte R‖S signature, or nil if OpenSSL fails.
    func sign(_ message: UnsafeRawBufferPointer) -> [UInt8]? {
        precondition(hasPrivateKey, "signing needs a private key")
        guard let context = EVP_MD_CTX_new() else { return nil }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestSignInit(context, nil, EVP_sha256(), nil, key) == 1 else { return nil }
        var der = [UInt8](repeating: 0, count: 80)  // a P-256 DER signature is at most 72 bytes
        var derLength = der.count
        let base = message.baseAddress?.assumingMemoryBound(to: UInt8.self)
        guard EVP_DigestSign(context, &der, &derLength, base, message.count) == 1 else { return nil }
        return Self.rawSignature(fromDER: der, count: derLength)
    }

    /// Verifies a raw 64-byte R‖S signature over `message`.
    func verify(_ message: UnsafeRawBufferPointer, rawSignature: UnsafeRawBufferPointer) -> Bool {
        guard rawSignature.count == 64, var der = Self.derSignature(fromRaw: rawSignature) else { return false }
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context); ERR_clear_error() }
        guard EVP_DigestVerifyInit(context, nil, EVP_sha256(), nil, key) == 1 else { return false }
        let base = message.baseAddress?.assumingMemoryBound(to: UInt8.self)
        return EVP_DigestVerify(context, &der, der.count, base, message.count) == 1
    }

    /// DER ECDSA-Sig-Value → 32-byte big-endian R ‖ 32-byte big-endian S.
    static func rawSignature(fromDER der: [UInt8], count: Int) -> [UInt8]? {
        der.withUnsafeBufferPointer { buffer -> [UInt8]? in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            guard let signature = d2i_ECDSA_SIG(nil, &cursor, count) else { return nil }
            defer { ECDSA_SIG_free(signature) }
            var r: OpaquePointer?
            var s: OpaquePointer?
            ECDSA_SIG_get0(signature, &r, &s)
            guard let r, let s else { return nil }
            var raw = [UInt8](repeating: 0, count: 64)
            let ok = raw.withUnsafeMutableBufferPointer { out in
                BN_bn2binpad(r, out.baseAddress, 32) == 32 && BN_bn2binpad(s, out.baseAddress! + 32, 32) == 32
            }
            return ok ? raw : nil
        }
    }

    /// Raw R‖S → DER ECDSA-Sig-Value.
    static func derSignature(fromRaw raw: UnsafeRawBufferPointer) -> [UInt8]? {
        guard raw.count == 64, let signature = ECDSA_SIG_new() else { return nil }
        defer { ECDSA_SIG_free(signature) }
        let bytes = raw.bindMemory(to: UInt8.self)
        guard let r = BN_bin2bn(bytes.baseAddress, 32, nil) else { return nil }
        guard let s = BN_bin2bn(bytes.baseAddress! + 32, 32, nil) else { BN_free(r); return nil }
        guard ECDSA_SIG_set0(signature, r, s) == 1 else { BN_free(r); BN_free(s); return nil }
        let length = i2d_ECDSA_SIG(signature, nil)
        guard length > 0 else { return nil }
        var der = [UInt8](repeating: 0, count: Int(length))
        let written = der.withUnsafeMutableBufferPointer { out -> Int32 in
            var cursor: UnsafeMutablePointer<UInt8>? = out.baseAddress
            return i2d_ECDSA_SIG(signature, &cursor)
        }
        return written == length ? der : nil
    }

    /// Writes a key as PEM: PKCS#8 for the private key, SubjectPublicKeyInfo for the public one.
    func pem(publicOnly: Bool) -> String? {
        guard let bio = BIO_new(BIO_s_mem()) else { return nil }
        defer { BIO_free(bio) }
        let ok = publicOnly ? PEM_write_bio_PUBKEY(bio, key) : PEM_write_bio_PrivateKey(bio, key, nil, nil, 0, nil, nil)
        guard ok == 1 else { return nil }
        var data: UnsafeMutablePointer<CChar>?
        let length = pushcast_BIO_get_mem_data(bio, &data)
        guard length > 0, let data else { return nil }
        return String(decoding: UnsafeRawBufferPointer(start: data, count: length), as: UTF8.self)
    }

    /// A fresh P-256 key pair.
    static func generate() throws(APNsCredentialError) -> ES256Key {
        ERR_clear_error()
        defer { ERR_clear_error() }
        guard let context = EVP_PKEY_CTX_new_from_name(nil, "EC", nil) else { throw APNsCredentialError("cannot create an EC key context") }
        defer { EVP_PKEY_CTX_free(context) }
        var generated: OpaquePointer?
        guard EVP_PKEY_keygen_init(context) == 1,
              EVP_PKEY_CTX_set_group_name(context, "P-256") == 1,
              EVP_PKEY_generate(context, &generated) == 1, let generated else {
            throw APNsCredentialError("cannot generate a P-256 key\(lastOpenSSLReason().map { ": \($0)" } ?? "")")
        }
        return ES256Key(key: generated, hasPrivateKey: true)
    }
}

