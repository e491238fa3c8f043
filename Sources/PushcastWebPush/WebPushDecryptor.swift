// The user agent's side of RFC 8291: decrypts an aes128gcm body with the subscription's private
// key and auth secret. The mock push service uses it to check what the client sent, and the tests
// use it to check what was encrypted. Every check a receiver must make is made: idlen 65 and a keyid on the
// curve, a record no larger than rs, the GCM tag, and the padding delimiter 0x02 (RFC 8291 §4:
// "values other than 0x02 MUST cause the message to be discarded").

import COpenSSL
import PushcastWire

/// Why a body could not be decrypted.
public enum WebPushDecryptionError: Error, Sendable, Equatable, CustomStringConvertible {
    case truncated(bytes: Int)
    case recordSizeTooSmall(Int)
    case keyIDLength(Int)
    case keyNotOnCurve
    case recordLargerThanRecordSize(record: Int, recordSize: Int)
    case authenticationFailed
    case badPadding
    case cryptoFailed(step: String)

    public var description: String {
        switch self {
        case .truncated(let bytes): return "the body is \(bytes) bytes, shorter than a header and an empty record (103)"
        case .recordSizeTooSmall(let size): return "the header's record size \(size) is below 18"
        case .keyIDLength(let length): return "the header's keyid is \(length) bytes; Web Push requires the 65-byte public key"
        case .keyNotOnCurve: return "the header's keyid is not a point on the P-256 curve"
        case .recordLargerThanRecordSize(let record, let size): return "the record is \(record) bytes, more than the header's record size \(size)"
        case .authenticationFailed: return "the AES-GCM tag does not match (wrong keys, or the body was altered)"
        case .badPadding: return "the record does not end with the padding delimiter 0x02"
        case .cryptoFailed(let step): return "Web Push decryption failed: \(step)"
        }
    }
}

/// Decrypts bodies sent to one subscription. Not thread-safe: one per thread.
public final class WebPushDecryptor {
    /// The subscription's private key: an OpenSSL key, or its 32-byte scalar (the mock's keys,
    /// agreed through `pushcast_p256_agree_as_user_agent`, without making a key per message).
    private enum Secret {
        case key(P256Key)
        case scalar([UInt8])
    }
    private let privateKey: Secret
    private var publicPoint: [UInt8]
    private let authSecret: [UInt8]
    private let schedule: WebPushKeySchedule

    /// - Parameters:
    ///   - privateKey: the subscription's key pair (the user agent's).
    ///   - authSecret: its 16-byte authentication secret.
    public init(privateKey: P256Key, authSecret: [UInt8]) throws(WebPushDecryptionError) {
        guard privateKey.hasPrivateKey, let point = privateKey.publicPoint(), authSecret.count == WebPushSubscription.authSecretBytes,
              let schedule = WebPushKeySchedule() else { throw .cryptoFailed(step: "unusable key, auth secret or context") }
        self.privateKey = .key(privateKey)
        self.publicPoint = point
        self.authSecret = authSecret
        self.schedule = schedule
    }

    /// The same, for a private key given as its 32-byte big-endian scalar.
    public init(scalar: [UInt8], authSecret: [UInt8]) throws(WebPushDecryptionError) {
        guard scalar.count == 32, authSecret.count == WebPushSubscription.authSecretBytes,
              let schedule = WebPushKeySchedule() else { throw .cryptoFailed(step: "unusable key, auth secret or context") }
        privateKey = .scalar(scalar)
        publicPoint = []
        self.authSecret = authSecret
        self.schedule = schedule
    }

    /// The ECDH secret with the message's keyid, into the schedule (and, for a scalar, the
    /// subscription's public point).
    private func agree(serverPublic: UnsafeRawBufferPointer) throws(WebPushDecryptionError) {
        switch privateKey {
        case .key(let key):
            guard let serverKey = P256Key.publicKey(point: serverPublic) else { throw .keyNotOnCurve }
            guard key.sharedSecret(with: serverKey, into: schedule.secret) else { throw .cryptoFailed(step: "ECDH failed") }
        case .scalar(let scalar):
            publicPoint = [UInt8](repeating: 0, count: P256Key.pointBytes)
            let result = scalar.withUnsafeBytes { k in
                publicPoint.withUnsafeMutableBytes { ours in
                    pushcast_p256_agree_as_user_agent(k.baseAddress!.assumingMemoryBound(to: UInt8.self),
                                                      serverPublic.baseAddress!.assumingMemoryBound(to: UInt8.self),
                                                      ours.baseAddress!.assumingMemoryBound(to: UInt8.self),
                                                      schedule.secret.baseAddress!.assumingMemoryBound(to: UInt8.self))
                }
            }
            switch result {
            case 1: return
            case 0: throw .keyNotOnCurve
            case -2: throw .cryptoFailed(step: "the private scalar is not a P-256 private key")
            default: throw .cryptoFailed(step: "ECDH failed")
            }
        }
    }

    /// The plaintext of `body`, its padding removed.
    public func decrypt(_ body: UnsafeRawBufferPointer) throws(WebPushDecryptionError) -> [UInt8] {
        typealias Coding = WebPushContentCoding
        guard body.count >= Coding.headerBytes + 1 + Coding.tagBytes else { throw .truncated(bytes: body.count) }
        let recordSize = Int(body.loadUnaligned(fromByteOffset: 16, as: UInt32.self).bigEndian)
        guard recordSize >= 18 else { throw .recordSizeTooSmall(recordSize) }
        guard body[20] == P256Key.pointBytes else { throw .keyIDLength(Int(body[20])) }
        let salt = UnsafeRawBufferPointer(rebasing: body[0..<Coding.saltBytes])
        let serverPublic = UnsafeRawBufferPointer(rebasing: body[21..<Coding.headerBytes])
        let recordBytes = body.count - Coding.headerBytes
        guard recordBytes <= recordSize else { throw .recordLargerThanRecordSize(record: recordBytes, recordSize: recordSize) }
        defer { schedule.wipe() }
        try agree(serverPublic: serverPublic)
        let derived = authSecret.withUnsafeBytes { auth in
            publicPoint.withUnsafeBytes { schedule.derive(authSecret: auth, userAgentPublic: $0, serverPublic: serverPublic, salt: salt) }
        }
        guard derived else { throw .cryptoFailed(step: "HKDF failed") }
        var record = Array(UnsafeRawBufferPointer(rebasing: body[Coding.headerBytes...]))
        let sealed = recordBytes - Coding.tagBytes
        guard record.withUnsafeMutableBytes({ schedule.open($0, count: sealed) }) else { throw .authenticationFailed }
        var end = sealed
        while end > 0 && record[end - 1] == 0 { end -= 1 }
        guard end > 0, record[end - 1] == Coding.paddingDelimiter else { throw .badPadding }
        record.removeSubrange((end - 1)...)
        return record
    }

    /// `decrypt` over an array.
    public func decrypt(_ body: [UInt8]) throws(WebPushDecryptionError) -> [UInt8] {
        try body.withUnsafeBytes { bytes in Result { () throws(WebPushDecryptionError) in try decrypt(bytes) } }.get()
    }
}
