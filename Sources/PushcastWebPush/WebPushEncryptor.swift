// Encrypts a rendered payload for one subscription (RFC 8291): a fresh ephemeral P-256 key and a
// fresh salt per message, ECDH with the subscription's p256dh, the key schedule, one AES-128-GCM
// record, written into the caller's buffer. One encryptor per worker thread; it reuses its OpenSSL
// contexts and scratch memory.
// The ephemeral key, the key agreement and the salt come from a WebPushKeySource: OpenSSL's
// generator, ECDH and RAND_bytes in production (one reused agreement context, no key import per
// message), a fixed key and salt in the known-answer test.

import COpenSSL
import PushcastWire

/// The result of one key agreement.
public enum WebPushAgreement: Sendable, Equatable {
    case agreed
    /// The subscription's p256dh is not a point on P-256.
    case notOnCurve
    /// OpenSSL failed.
    case failed
}

/// Where the per-message ephemeral key, its agreement with the subscription's key, and the salt
/// come from.
public protocol WebPushKeySource: AnyObject {
    /// Makes a fresh ephemeral P-256 key pair, writes its uncompressed public point (65 bytes)
    /// to `serverPublic` and the ECDH secret with `userAgentPublic` (65 bytes) to `secret` (32).
    func agree(userAgentPublic: UnsafeRawBufferPointer, serverPublic: UnsafeMutableRawBufferPointer,
               secret: UnsafeMutableRawBufferPointer) -> WebPushAgreement
    /// Fills `salt` (16 bytes) with fresh random bytes; false if it cannot.
    func fillSalt(_ salt: UnsafeMutableRawBufferPointer) -> Bool
}

extension WebPushKeySource {
    /// The agreement done with a given ephemeral key (a source that holds one, as a test's).
    public func agree(ephemeral: P256Key, userAgentPublic: UnsafeRawBufferPointer, serverPublic: UnsafeMutableRawBufferPointer,
                      secret: UnsafeMutableRawBufferPointer) -> WebPushAgreement {
        guard let peer = P256Key.publicKey(point: userAgentPublic) else { return .notOnCurve }
        return ephemeral.publicPoint(into: serverPublic) && ephemeral.sharedSecret(with: peer, into: secret) ? .agreed : .failed
    }
}

/// OpenSSL's key generation and ECDH (one reused agreement context) and its CSPRNG.
public final class OpenSSLWebPushKeys: WebPushKeySource {
    private let agreement: OpaquePointer?

    public init() { agreement = pushcast_p256_agreement_new() }

    deinit { pushcast_p256_agreement_free(agreement) }

    public func agree(userAgentPublic: UnsafeRawBufferPointer, serverPublic: UnsafeMutableRawBufferPointer,
                      secret: UnsafeMutableRawBufferPointer) -> WebPushAgreement {
        guard let agreement, userAgentPublic.count == P256Key.pointBytes, serverPublic.count >= P256Key.pointBytes, secret.count >= 32,
              let theirs = userAgentPublic.baseAddress, let ours = serverPublic.baseAddress, let shared = secret.baseAddress else { return .failed }
        switch pushcast_p256_agree(agreement, theirs.assumingMemoryBound(to: UInt8.self), ours.assumingMemoryBound(to: UInt8.self),
                                   shared.assumingMemoryBound(to: UInt8.self)) {
        case 1: return .agreed
        case 0: return .notOnCurve
        default: return .failed
        }
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
    /// The subscription's p256dh is not a point on P-256.
    case notOnCurve

    public var description: String {
        switch self {
        case .plaintextTooLarge(let bytes, let bytesMax):
            return "the Web Push payload is \(bytes) bytes; at most \(bytesMax) fit in one 4,096-byte encrypted record"
        case .bufferTooSmall(let bytesNeeded): return "the output buffer holds fewer than \(bytesNeeded) bytes"
        case .cryptoFailed(let step): return "Web Push encryption failed: \(step)"
        case .notOnCurve: return "the subscription's p256dh is not a point on P-256"
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
                    try encrypt(plaintext, userAgentPublic: point, authSecret: auth, into: output)
                }
            }
        }.get()
    }

    /// The same, for a subscription's parts as bytes: its key (`userAgentPublic`, the 65-byte
    /// uncompressed point, checked on the curve here) and its 16-byte authentication secret.
    public func encrypt(_ plaintext: UnsafeRawBufferPointer, userAgentPublic: UnsafeRawBufferPointer,
                        authSecret: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) throws(WebPushEncryptionError) -> Int {
        typealias Coding = WebPushContentCoding
        guard plaintext.count <= Coding.plaintextBytesMax else {
            throw .plaintextTooLarge(bytes: plaintext.count, bytesMax: Coding.plaintextBytesMax)
        }
        let total = Coding.bodyBytes(plaintextBytes: plaintext.count)
        guard output.count >= total else { throw .bufferTooSmall(bytesNeeded: total) }
        defer { schedule.wipe() }
        let salt = UnsafeMutableRawBufferPointer(rebasing: output[0..<Coding.saltBytes])
        guard keys.fillSalt(salt) else { throw .cryptoFailed(step: "cannot draw the salt") }
        output.storeBytes(of: UInt32(Coding.recordSize).bigEndian, toByteOffset: 16, as: UInt32.self)
        output[20] = UInt8(P256Key.pointBytes)
        let serverPublic = UnsafeMutableRawBufferPointer(rebasing: output[21..<Coding.headerBytes])
        switch keys.agree(userAgentPublic: userAgentPublic, serverPublic: serverPublic, secret: schedule.secret) {
        case .agreed: break
        case .notOnCurve: throw .notOnCurve
        case .failed: throw .cryptoFailed(step: "ephemeral key generation or ECDH failed")
        }
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
