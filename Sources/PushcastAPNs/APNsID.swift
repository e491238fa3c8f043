// Deterministic `apns-id` values (§1.3: canonical lower-case UUID, echoed in errors). Deriving the
// id from (campaign, token) makes a re-send of the same campaign traceable, and lets the results
// file, APNs's logs and the mock's log be joined.

import COpenSSL
import PushcastCore

public enum APNsID {
    /// The UUID for one (campaign, token) pair: the first 16 bytes of
    /// SHA-256(campaign ‖ 0x00 ‖ token), with the version nibble set to 5 and the RFC 4122 variant
    /// bits (10xx). Strictly, RFC 9562 reserves version 5 for SHA-1 and calls other hashes
    /// version 8; pushcast uses 5 because some UUID validators still accept only versions 1...5,
    /// and APNs documents nothing beyond "canonical UUID". Lower-case, 8-4-4-4-12.
    public static func derive(campaign: String, token: String) -> String {
        var campaign = campaign
        var token = token
        return campaign.withUTF8 { campaignBytes in
            token.withUTF8 { tokenBytes in
                derive(campaign: UnsafeRawBufferPointer(campaignBytes), token: UnsafeRawBufferPointer(tokenBytes))
            }
        }
    }

    /// The same over bytes.
    public static func derive(campaign: UnsafeRawBufferPointer, token: UnsafeRawBufferPointer) -> String {
        let inputCount = campaign.count + 1 + token.count
        var digest = (UInt64(0), UInt64(0), UInt64(0), UInt64(0))
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: inputCount) { input in
            if campaign.count > 0 { UnsafeMutableRawBufferPointer(input).copyMemory(from: campaign) }
            input[campaign.count] = 0
            if token.count > 0 {
                UnsafeMutableRawBufferPointer(rebasing: UnsafeMutableRawBufferPointer(input)[(campaign.count + 1)...]).copyMemory(from: token)
            }
            withUnsafeMutableBytes(of: &digest) { out in
                var size: UInt32 = 0
                // EVP_Digest with a pre-fetched EVP_MD: the one-shot SHA256() looks the algorithm up
                // in the provider store on every call (two rwlocks, about 1 µs).
                let ok = EVP_Digest(input.baseAddress, inputCount, out.baseAddress!.assumingMemoryBound(to: UInt8.self), &size, sha256Digest, nil)
                precondition(ok == 1 && size == 32, "SHA-256 failed")
            }
        }
        return uuid(fromDigest: digest).string
    }

    /// The UUID of a digest's first 16 bytes, with the version nibble (byte 6) set to 5 and the
    /// RFC 4122 variant bits (byte 8) to 10; packed (`PackedText`: the 16 bytes, no String).
    static func uuid(fromDigest digest: (UInt64, UInt64, UInt64, UInt64)) -> PackedText {
        // The digest's first byte is the UUID's first: big-endian words.
        let high = (UInt64(bigEndian: digest.0) & ~0xF000) | 0x5000
        let low = (UInt64(bigEndian: digest.1) & ~(0xC0 << 56)) | (0x80 << 56)
        return PackedText(uuidBytes: high, low)
    }

    /// Whether `text` is a canonical lower-case UUID (8-4-4-4-12 hex), as APNs requires.
    public static func isCanonical(_ text: String) -> Bool {
        let utf8 = text.utf8
        guard utf8.count == 36 else { return false }
        for (index, byte) in utf8.enumerated() {
            if index == 8 || index == 13 || index == 18 || index == 23 {
                if byte != UInt8(ascii: "-") { return false }
            } else if !((0x30...0x39).contains(byte) || (0x61...0x66).contains(byte)) {
                return false
            }
        }
        return true
    }
}

/// SHA-256, fetched from the default provider once. EVP_MD objects are immutable and safe to share.
nonisolated(unsafe) let sha256Digest: OpaquePointer = {
    guard let digest = EVP_MD_fetch(nil, "SHA256", nil) else { fatalError("OpenSSL has no SHA256 in its default provider") }
    return digest
}()

/// `APNsID.derive` for one campaign, for one worker: keeps one digest context and the
/// `campaign ‖ 0x00` bytes, so each id costs a re-initialisation (no algorithm lookup, no
/// allocation) and one or two SHA-256 blocks. Not thread-safe; give each worker its own.
public final class APNsIDGenerator {
    public let campaign: String
    /// SHA-256 over the campaign and its 0 separator, computed once; each row copies it.
    private let primed: UnsafeMutablePointer<pushcast_sha256_state>

    public init(campaign: String) {
        self.campaign = campaign
        primed = .allocate(capacity: 1)
        primed.initialize(to: pushcast_sha256_state())
        let prefix = Array(campaign.utf8) + [0]
        prefix.withUnsafeBytes { pushcast_sha256_prime(primed, $0.baseAddress, $0.count) }
    }

    deinit { primed.deallocate() }

    /// The same value as `APNsID.derive(campaign:token:)`.
    public func derive(token: UnsafeRawBufferPointer) -> String {
        derivePacked(token: token).string
    }

    public func derive(token: String) -> String {
        var token = token
        return token.withUTF8 { derive(token: UnsafeRawBufferPointer($0)) }
    }

    /// The same id, packed (`PackedText`: its 16 bytes, no String).
    public func derivePacked(token: UnsafeRawBufferPointer) -> PackedText {
        var digest = (UInt64(0), UInt64(0), UInt64(0), UInt64(0))
        withUnsafeMutableBytes(of: &digest) { out in
            pushcast_sha256_finish(primed, token.baseAddress, token.count, out.baseAddress!.assumingMemoryBound(to: UInt8.self))
        }
        return APNsID.uuid(fromDigest: digest)
    }
}
