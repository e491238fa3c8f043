// The user agent's side of RFC 8291: decrypts an aes128gcm body with the subscription's private
// key and auth secret. The mock push service uses it to check what the client sent, and the tests
// use it to check what was encrypted. Every check a receiver must make is made: idlen 65 and a keyid on the
// curve, a record no larger than rs, the GCM tag, and the padding delimiter 0x02 (RFC 8291 §4:
// "values other than 0x02 MUST cause the message to be discarded").

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
    private let privateKey: P256Key
    private let publicPoint: [UInt8]
    private let authSecret: [UInt8]
    private let schedule: WebPushKeySchedule

    /// - Parameters:
    ///   - privateKey: the subscription's key pair (the user agent's).
    ///   - authSecret: its 16-byte authentication secret.
    public init(privateKey: P256Key, authSecret: [UInt8]) throws(WebPushDecryptionError) {
        guard privateKey.hasPrivateKey, let point = privateKey.publicPoint(), authSecret.count == WebPushSubscription.authSecretBytes,
              let schedule = WebPushKeySchedule() else { throw .cryptoFailed(step: "unusable key, auth secret or context") }
        self.privateKey = privateKey
        self.publicPoint = point
        self.authSecret = authSecret
        self.schedule = schedule
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
        guard let serverKey = P256Key.publicKey(point: serverPublic) else { throw .keyNotOnCurve }
        defer { schedule.wipe() }
        guard privateKey.sharedSecret(with: serverKey, into: schedule.secret) else { throw .cryptoFailed(step: "ECDH failed") }
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
