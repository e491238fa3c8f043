// Deterministic `apns-id` values (§1.3: canonical lower-case UUID, echoed in errors). Deriving the
// id from (campaign, token) makes a re-send of the same campaign traceable, and lets the results
// file, APNs's logs and the mock's log be joined.

import COpenSSL

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
                _ = SHA256(input.baseAddress, inputCount, out.baseAddress!.assumingMemoryBound(to: UInt8.self))
            }
        }
        return withUnsafeMutableBytes(of: &digest) { bytes in
            bytes[6] = (bytes[6] & 0x0F) | 0x50  // version 5
            bytes[8] = (bytes[8] & 0x3F) | 0x80  // RFC 4122 variant
            return formatUUID(UnsafeRawBufferPointer(bytes))
        }
    }

    /// Formats 16 bytes as a lower-case 8-4-4-4-12 UUID.
    static func formatUUID(_ bytes: UnsafeRawBufferPointer) -> String {
        String(unsafeUninitializedCapacity: 36) { output in
            var written = 0
            for index in 0..<16 {
                if index == 4 || index == 6 || index == 8 || index == 10 {
                    output[written] = UInt8(ascii: "-")
                    written += 1
                }
                output[written] = hexDigit(bytes[index] >> 4)
                output[written + 1] = hexDigit(bytes[index] & 0x0F)
                written += 2
            }
            return written
        }
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
