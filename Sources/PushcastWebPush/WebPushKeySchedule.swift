// The aes128gcm content coding as Web Push uses it (RFC 8188 §2, RFC 8291 §3.4 and §4): one
// record, its header salt(16) ‖ rs(4, big-endian) ‖ idlen(1) ‖ keyid(65: the application
// server's ephemeral public key), then AES-128-GCM over the plaintext and the padding delimiter
// 0x02. The keys:
//   IKM   = HKDF(salt: auth_secret, ikm: ecdh_secret, info: "WebPush: info\0" ‖ ua_public ‖ as_public, 32)
//   CEK   = HKDF(salt: salt, ikm: IKM, info: "Content-Encoding: aes128gcm\0", 16)
//   NONCE = HKDF(salt: salt, ikm: IKM, info: "Content-Encoding: nonce\0", 12)
// (the nonce is not XORed with a sequence number: the only record is number 0).
// HKDF-SHA-256 and AES-128-GCM are OpenSSL's; the contexts are made once per encryptor and reused.

import COpenSSL
import PushcastCore
import PushcastWire

/// The sizes of the Web Push body.
public enum WebPushContentCoding {
    public static let saltBytes = 16
    public static let headerBytes = 86
    public static let tagBytes = 16
    /// The record size written in the header: the push service's 4,096-byte payload limit (RFC 8030 §7.2).
    public static let recordSize = 4096
    /// 4,096 − 86 (header) − 1 (padding delimiter) − 16 (tag) (RFC 8291 §4).
    public static let plaintextBytesMax = 3993
    static let paddingDelimiter: UInt8 = 0x02

    /// The body's length for `plaintextBytes` bytes of message.
    public static func bodyBytes(plaintextBytes: Int) -> Int { headerBytes + plaintextBytes + 1 + tagBytes }
}

/// OpenSSL contexts and scratch memory for one thread's Web Push key schedule and AEAD. The
/// scratch (ECDH secret, IKM, CEK, nonce) is wiped after every message.
final class WebPushKeySchedule {
    private static let keyInfoLabel = Array("WebPush: info\0".utf8)
    private static let cekInfo = Array("Content-Encoding: aes128gcm\0".utf8)
    private static let nonceInfo = Array("Content-Encoding: nonce\0".utf8)

    // Scratch layout.
    static let secretRange = 0..<32
    private static let keyInfoRange = 32..<(32 + 14 + 65 + 65)
    private static let ikmRange = 176..<208
    private static let cekRange = 208..<224
    private static let nonceRange = 224..<236
    private static let scratchBytes = 240

    private let kdf: OpaquePointer
    private let cipherContext: OpaquePointer
    private let cipher: OpaquePointer
    let scratch: UnsafeMutableRawBufferPointer

    init?() {
        guard let kdf = pushcast_hkdf_sha256_new() else { return nil }
        guard let cipherContext = EVP_CIPHER_CTX_new() else { EVP_KDF_CTX_free(kdf); return nil }
        guard let cipher = EVP_CIPHER_fetch(nil, "AES-128-GCM", nil) else {
            EVP_KDF_CTX_free(kdf)
            EVP_CIPHER_CTX_free(cipherContext)
            return nil
        }
        self.kdf = kdf
        self.cipherContext = cipherContext
        self.cipher = cipher
        scratch = .allocate(byteCount: Self.scratchBytes, alignment: 16)
        scratch.initializeMemory(as: UInt8.self, repeating: 0)
    }

    deinit {
        SecretBytes.wipe(scratch)
        scratch.deallocate()
        EVP_KDF_CTX_free(kdf)
        EVP_CIPHER_CTX_free(cipherContext)
        EVP_CIPHER_free(cipher)
    }

    /// Where `P256Key.sharedSecret` writes the ECDH secret.
    var secret: UnsafeMutableRawBufferPointer { UnsafeMutableRawBufferPointer(rebasing: scratch[Self.secretRange]) }

    func wipe() { SecretBytes.wipe(scratch) }

    /// Derives CEK and NONCE from the ECDH secret already in `secret`.
    func derive(authSecret: UnsafeRawBufferPointer, userAgentPublic: UnsafeRawBufferPointer,
                serverPublic: UnsafeRawBufferPointer, salt: UnsafeRawBufferPointer) -> Bool {
        guard userAgentPublic.count == 65, serverPublic.count == 65, salt.count == WebPushContentCoding.saltBytes else { return false }
        let info = slice(Self.keyInfoRange)
        Self.keyInfoLabel.withUnsafeBytes { info.copyMemory(from: $0) }
        UnsafeMutableRawBufferPointer(rebasing: info[14..<79]).copyMemory(from: userAgentPublic)
        UnsafeMutableRawBufferPointer(rebasing: info[79..<144]).copyMemory(from: serverPublic)
        guard hkdf(salt: authSecret, ikm: UnsafeRawBufferPointer(secret), info: UnsafeRawBufferPointer(info), out: slice(Self.ikmRange)) else { return false }
        let ikm = UnsafeRawBufferPointer(slice(Self.ikmRange))
        let cek = Self.cekInfo.withUnsafeBytes { hkdf(salt: salt, ikm: ikm, info: $0, out: slice(Self.cekRange)) }
        let nonce = Self.nonceInfo.withUnsafeBytes { hkdf(salt: salt, ikm: ikm, info: $0, out: slice(Self.nonceRange)) }
        return cek && nonce
    }

    /// AES-128-GCM with the derived CEK and NONCE over `buffer[0..<count]` in place, the 16-byte
    /// tag written right after it.
    func seal(_ buffer: UnsafeMutableRawBufferPointer, count: Int) -> Bool {
        guard buffer.count >= count + WebPushContentCoding.tagBytes, let base = buffer.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return false }
        var written: Int32 = 0
        var final: Int32 = 0
        guard EVP_EncryptInit_ex2(cipherContext, cipher, key, nonce, nil) == 1,
              EVP_EncryptUpdate(cipherContext, base, &written, base, Int32(count)) == 1,
              EVP_EncryptFinal_ex(cipherContext, base + Int(written), &final) == 1,
              Int(written + final) == count else { return false }
        return EVP_CIPHER_CTX_ctrl(cipherContext, EVP_CTRL_AEAD_GET_TAG, Int32(WebPushContentCoding.tagBytes), base + count) == 1
    }

    /// Decrypts `buffer[0..<count]` in place and checks the tag that follows it. False when the
    /// tag does not match.
    func open(_ buffer: UnsafeMutableRawBufferPointer, count: Int) -> Bool {
        guard buffer.count >= count + WebPushContentCoding.tagBytes, let base = buffer.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return false }
        var written: Int32 = 0
        var final: Int32 = 0
        guard EVP_DecryptInit_ex2(cipherContext, cipher, key, nonce, nil) == 1,
              EVP_DecryptUpdate(cipherContext, base, &written, base, Int32(count)) == 1,
              EVP_CIPHER_CTX_ctrl(cipherContext, EVP_CTRL_AEAD_SET_TAG, Int32(WebPushContentCoding.tagBytes), base + count) == 1 else { return false }
        defer { ERR_clear_error() }
        return EVP_DecryptFinal_ex(cipherContext, base + Int(written), &final) == 1 && Int(written + final) == count
    }

    private var key: UnsafePointer<UInt8> { UnsafePointer(slice(Self.cekRange).baseAddress!.assumingMemoryBound(to: UInt8.self)) }
    private var nonce: UnsafePointer<UInt8> { UnsafePointer(slice(Self.nonceRange).baseAddress!.assumingMemoryBound(to: UInt8.self)) }

    private func slice(_ range: Range<Int>) -> UnsafeMutableRawBufferPointer { UnsafeMutableRawBufferPointer(rebasing: scratch[range]) }

    private func hkdf(salt: UnsafeRawBufferPointer, ikm: UnsafeRawBufferPointer, info: UnsafeRawBufferPointer, out: UnsafeMutableRawBufferPointer) -> Bool {
        pushcast_hkdf_sha256(kdf, salt.baseAddress?.assumingMemoryBound(to: UInt8.self), salt.count,
                             ikm.baseAddress?.assumingMemoryBound(to: UInt8.self), ikm.count,
                             info.baseAddress?.assumingMemoryBound(to: UInt8.self), info.count,
                             out.baseAddress?.assumingMemoryBound(to: UInt8.self), out.count) == 1
    }
}
