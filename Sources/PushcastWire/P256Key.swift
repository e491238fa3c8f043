// A P-256 key over OpenSSL 3, shared by the providers that sign or agree with one: ES256 (ECDSA
// P-256 with SHA-256, RFC 7518 §3.4) for APNs provider tokens and Web Push VAPID tokens, and ECDH
// for Web Push message encryption (RFC 8291). OpenSSL signs in DER (SEQUENCE of two INTEGERs); JWS
// wants the raw 64-byte R‖S, so signing converts DER → R‖S (d2i_ECDSA_SIG, BN_bn2binpad) and
// verification converts back. Nothing here holds or reports key bytes in errors.

import COpenSSL

/// An EVP_PKEY holding a P-256 key. Only read after construction; OpenSSL 3 allows concurrent
/// signing, verification and derivation with one key from several threads as long as nobody
/// modifies it.
public final class P256Key: @unchecked Sendable {
    public let key: OpaquePointer
    public let hasPrivateKey: Bool

    /// Takes ownership of `key` (freed with the object).
    public init(adopting key: OpaquePointer, hasPrivateKey: Bool) {
        self.key = key
        self.hasPrivateKey = hasPrivateKey
    }

    deinit { EVP_PKEY_free(key) }

    /// The length of an uncompressed point (0x04 ‖ X ‖ Y) and of a private scalar.
    public static let pointBytes = 65
    public static let scalarBytes = 32

    /// Why a key read from a file is not a P-256 key.
    public enum CurveProblem: Sendable, Equatable {
        case notEllipticCurve
        case noNamedCurve
        case otherCurve(String)
    }

    /// Nil when `key` is an elliptic-curve key on P-256.
    public static func curveProblem(_ key: OpaquePointer) -> CurveProblem? {
        guard EVP_PKEY_get_base_id(key) == EVP_PKEY_EC else { return .notEllipticCurve }
        var name = [CChar](repeating: 0, count: 64)
        var length = 0
        guard EVP_PKEY_get_group_name(key, &name, name.count, &length) == 1 else { return .noNamedCurve }
        let curve = String(decoding: name.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return curve == "prime256v1" || curve == "P-256" ? nil : .otherCurve(curve)
    }

    /// A fresh P-256 key pair, or nil if OpenSSL fails (`lastOpenSSLReason()` says why). Web Push's
    /// per-message ephemeral keys do not come from here: see `OpenSSLWebPushKeys`.
    public static func generate() -> P256Key? {
        guard let context = EVP_PKEY_CTX_new_from_name(nil, "EC", nil) else { return nil }
        defer { EVP_PKEY_CTX_free(context) }
        var generated: OpaquePointer?
        guard EVP_PKEY_keygen_init(context) == 1,
              EVP_PKEY_CTX_set_group_name(context, "P-256") == 1,
              EVP_PKEY_generate(context, &generated) == 1, let generated else { return nil }
        return P256Key(adopting: generated, hasPrivateKey: true)
    }

    /// A public key from a 65-byte uncompressed point; nil unless it is a point on the curve.
    public static func publicKey(point: UnsafeRawBufferPointer) -> P256Key? {
        defer { ERR_clear_error() }
        guard point.count == pointBytes, let base = point.baseAddress,
              let key = pushcast_p256_public_key(base.assumingMemoryBound(to: UInt8.self), point.count) else { return nil }
        return P256Key(adopting: key, hasPrivateKey: false)
    }

    /// A key pair from a 32-byte big-endian private scalar (OpenSSL computes the public point);
    /// nil for a wrong length, 0, or a scalar not below the group order.
    public static func privateKey(scalar: UnsafeRawBufferPointer) -> P256Key? {
        defer { ERR_clear_error() }
        guard scalar.count == scalarBytes, let base = scalar.baseAddress,
              let key = pushcast_p256_private_key(base.assumingMemoryBound(to: UInt8.self)) else { return nil }
        return P256Key(adopting: key, hasPrivateKey: true)
    }

    /// Writes the uncompressed public point (65 bytes) into `out`; false if OpenSSL fails.
    public func publicPoint(into out: UnsafeMutableRawBufferPointer) -> Bool {
        guard out.count >= Self.pointBytes, let base = out.baseAddress else { return false }
        var length = 0
        let ok = EVP_PKEY_get_octet_string_param(key, "encoded-pub-key", base.assumingMemoryBound(to: UInt8.self), Self.pointBytes, &length) == 1
        return ok && length == Self.pointBytes
    }

    /// The uncompressed public point (65 bytes), or nil if OpenSSL fails.
    public func publicPoint() -> [UInt8]? {
        var point = [UInt8](repeating: 0, count: Self.pointBytes)
        return point.withUnsafeMutableBytes { publicPoint(into: $0) } ? point : nil
    }

    /// ECDH (SEC 1 §3.3.1): the 32-byte X coordinate of our private key times `peer`'s point,
    /// written into `out`. False if OpenSSL fails. The peer is not validated again
    /// (EVP_PKEY_derive_set_peer_ex with 0): every public key made here was checked when it was
    /// read (`publicKey(point:)`), and the full check would cost a second scalar multiplication.
    public func sharedSecret(with peer: P256Key, into out: UnsafeMutableRawBufferPointer) -> Bool {
        precondition(hasPrivateKey, "key agreement needs a private key")
        guard out.count >= 32, let base = out.baseAddress, let context = EVP_PKEY_CTX_new_from_pkey(nil, key, nil) else { return false }
        defer { EVP_PKEY_CTX_free(context); ERR_clear_error() }
        var length = 32
        guard EVP_PKEY_derive_init(context) == 1, EVP_PKEY_derive_set_peer_ex(context, peer.key, 0) == 1,
              EVP_PKEY_derive(context, base.assumingMemoryBound(to: UInt8.self), &length) == 1 else { return false }
        return length == 32
    }

    /// Signs `message` (ES256) and returns the raw 64-byte R‖S signature, or nil if OpenSSL fails.
    public func sign(_ message: UnsafeRawBufferPointer) -> [UInt8]? {
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

    /// Verifies a raw 64-byte R‖S ES256 signature over `message`.
    public func verify(_ message: UnsafeRawBufferPointer, rawSignature: UnsafeRawBufferPointer) -> Bool {
        guard rawSignature.count == 64, var der = Self.derSignature(fromRaw: rawSignature) else { return false }
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context); ERR_clear_error() }
        guard EVP_DigestVerifyInit(context, nil, EVP_sha256(), nil, key) == 1 else { return false }
        let base = message.baseAddress?.assumingMemoryBound(to: UInt8.self)
        return EVP_DigestVerify(context, &der, der.count, base, message.count) == 1
    }

    /// DER ECDSA-Sig-Value → 32-byte big-endian R ‖ 32-byte big-endian S.
    public static func rawSignature(fromDER der: [UInt8], count: Int) -> [UInt8]? {
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
    public static func derSignature(fromRaw raw: UnsafeRawBufferPointer) -> [UInt8]? {
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

    /// Writes the key as PEM: PKCS#8 for the private key, SubjectPublicKeyInfo for the public one.
    public func pem(publicOnly: Bool) -> String? {
        writePEMKey(key, publicOnly: publicOnly).map { String(decoding: $0, as: UTF8.self) }
    }
}
