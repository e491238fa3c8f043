// Encrypts a rendered payload for one subscription (RFC 8291): a fresh ephemeral P-256 key and a
// fresh salt per message, ECDH with the subscription's p256dh, the key schedule, one AES-128-GCM
// record, written into the caller's buffer. One encryptor per worker thread; it reuses its OpenSSL
// contexts and scratch memory, so a message allocates only its ephemeral key.
// The ephemeral key and salt come from a WebPushKeySource: OpenSSL's generator and RAND_bytes in
// production, fixed values in the known-answer test.

import COpenSSL
import PushcastWire

/// Where the per-message ephemeral key and salt come from.
public protocol WebPushKeySource: AnyObject {
    /// A fresh P-256 key pair, or nil if none can be made.
    func ephemeralKey() -> P256Key?
    /// Fills `salt` (16 bytes) with fresh random bytes; false if it cannot.
    func fillSalt(_ salt: UnsafeMutableRawBufferPointer) -> Bool
}

/// OpenSSL's key generator (one reused context) and its CSPRNG.
public final class OpenSSLWebPushKeys: WebPushKeySource {
    private let context: OpaquePointer?

    public init() { context = EVP_PKEY_CTX_new_from_name(nil, "EC", nil) }

    deinit { EVP_PKEY_CTX_free(context) }

    public func ephemeralKey() -> P256Key? {
        guard let context else { return nil }
        return P256Key.generate(context: context)
    }

    public func fillSalt(_ salt: UnsafeMutableRawBufferPointer) -> Bool {
        guard let base = salt.baseAddress else { return false }
        return RAND_bytes(base.assumingMemoryBound(to: UInt8.self), Int32(salt.count)) == 1
    }
}

/// Why a message could not be encrypted.
public enum WebPushEncryptionError: Error, Sendable, Equatable, CustomStringConvertible {
    /// More than 3,993 bytes of plaintext: the body would exceed 4,096 bytes.
    case plaintextTooLarge(bytes: Int, bytesMax: Int)
    /// The output buffer is smaller than `WebPushContentCoding.bodyBytes`.
    case bufferTooSmall(bytesNeeded: Int)
    /// OpenSSL failed at `step` (key generation, randomness, ECDH, HKDF, AES-GCM).
    case cryptoFailed(step: String)

    public var description: String {
        switch self {
        case .plaintextTooLarge(let bytes, let bytesMax):
            return "the Web Push payload is \(bytes) bytes; at most \(bytesMax) fit in one 4,096-byte encrypted record"
        case .bufferTooSmall(let bytesNeeded): return "the output buffer holds fewer than \(bytesNeeded) bytes"
        case .cryptoFailed(let step): return "Web Push encryption failed: \(step)"
        }
    }
}

/// Encrypts payloads into aes128gcm bodies. Not thread-safe: one per worker.
public final class WebPushEncryptor {
    private let keys: any WebPushKeySource
    private let schedule: WebPushKeySchedule

    public init(keys: any WebPushKeySource = OpenSSLWebPushKeys()) throws(WebPushEncryptionError) {
        guard let schedule = WebPushKeySchedule() else { throw .cryptoFailed(step: "cannot create the HKDF or AES-GCM context") }
        self.keys = keys
        self.schedule = schedule
    }

    /// Writes the body for `plaintext` into `output` and returns its length,
    /// `WebPushContentCoding.bodyBytes(plaintextBytes: plaintext.count)`.
    public func encrypt(_ plaintext: UnsafeRawBufferPointer, for subscription: WebPushSubscription,
                        into output: UnsafeMutableRawBufferPointer) throws(WebPushEncryptionError) -> Int {
        try subscription.authSecret.withUnsafeBytes { auth in
            subscription.p256dh.withUnsafeBytes { point in
                Result { () throws(WebPushEncryptionError) in
                    try encrypt(plaintext, userAgentKey: subscription.userAgentKey, userAgentPublic: point, authSecret: auth, into: output)
                }
            }
        }.get()
    }

    /// The same, for a subscription's parts as bytes: its key (`userAgentKey`, the 65-byte point
    /// `userAgentPublic` made into a key) and its 16-byte authentication secret.
    public func encrypt(_ plaintext: UnsafeRawBufferPointer, userAgentKey: P256Key, userAgentPublic: UnsafeRawBufferPointer,
                        authSecret: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) throws(WebPushEncryptionError) -> Int {
        typealias Coding = WebPushContentCoding
        guard plaintext.count <= Coding.plaintextBytesMax else {
            throw .plaintextTooLarge(bytes: plaintext.count, bytesMax: Coding.plaintextBytesMax)
        }
        let total = Coding.bodyBytes(plaintextBytes: plaintext.count)
        guard output.count >= total else { throw .bufferTooSmall(bytesNeeded: total) }
        defer { schedule.wipe() }
        guard let ephemeral = keys.ephemeralKey() else { throw .cryptoFailed(step: "cannot generate the ephemeral P-256 key") }
        let salt = UnsafeMutableRawBufferPointer(rebasing: output[0..<Coding.saltBytes])
        guard keys.fillSalt(salt) else { throw .cryptoFailed(step: "cannot draw the salt") }
        output.storeBytes(of: UInt32(Coding.recordSize).bigEndian, toByteOffset: 16, as: UInt32.self)
        output[20] = UInt8(P256Key.pointBytes)
        let serverPublic = UnsafeMutableRawBufferPointer(rebasing: output[21..<Coding.headerBytes])
        guard ephemeral.publicPoint(into: serverPublic) else { throw .cryptoFailed(step: "cannot encode the ephemeral public key") }
        guard ephemeral.sharedSecret(with: userAgentKey, into: schedule.secret) else { throw .cryptoFailed(step: "ECDH failed") }
        let derived = schedule.derive(authSecret: authSecret, userAgentPublic: userAgentPublic,
                                      serverPublic: UnsafeRawBufferPointer(serverPublic), salt: UnsafeRawBufferPointer(salt))
        guard derived else { throw .cryptoFailed(step: "HKDF failed") }
        let record = UnsafeMutableRawBufferPointer(rebasing: output[Coding.headerBytes..<total])
        if plaintext.count > 0 { UnsafeMutableRawBufferPointer(rebasing: record[0..<plaintext.count]).copyMemory(from: plaintext) }
        record[plaintext.count] = Coding.paddingDelimiter
        guard schedule.seal(record, count: plaintext.count + 1) else { throw .cryptoFailed(step: "AES-128-GCM failed") }
        return total
    }

    /// `encrypt` into an array the caller keeps between messages (its capacity is reused).
    public func encrypt(_ plaintext: UnsafeRawBufferPointer, for subscription: WebPushSubscription,
                        into output: inout [UInt8]) throws(WebPushEncryptionError) {
        let total = WebPushContentCoding.bodyBytes(plaintextBytes: plaintext.count)
        guard plaintext.count <= WebPushContentCoding.plaintextBytesMax else {
            throw .plaintextTooLarge(bytes: plaintext.count, bytesMax: WebPushContentCoding.plaintextBytesMax)
        }
        if output.count != total {
            output.removeAll(keepingCapacity: true)
            output.append(contentsOf: repeatElement(0, count: total))
        }
        _ = try output.withUnsafeMutableBytes { buffer in
            Result { () throws(WebPushEncryptionError) in try encrypt(plaintext, for: subscription, into: buffer) }
        }.get()
    }
}
