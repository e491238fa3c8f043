// Key material shared by the APNs (ES256) and FCM (RS256) credentials: base64url for JWTs, PEM
// keys read into OpenSSL, and OpenSSL's error reasons (never key bytes).
import COpenSSL

/// Reads one PEM key into an EVP_PKEY that the caller frees: a PKCS#8 (or PKCS#1) private key, or
/// with `publicOnly` a SubjectPublicKeyInfo. Nil when it cannot be read; an encrypted key fails
/// instead of prompting on a terminal. Call `lastOpenSSLReason()` for why.
public func readPEMKey(_ pem: [UInt8], publicOnly: Bool) -> OpaquePointer? {
    pem.withUnsafeBytes { readPEMKey($0, publicOnly: publicOnly) }
}

/// `readPEMKey` over bytes in place (a `SecretBytes` credential file).
public func readPEMKey(_ bytes: UnsafeRawBufferPointer, publicOnly: Bool) -> OpaquePointer? {
    guard let bio = BIO_new_mem_buf(bytes.baseAddress, Int32(bytes.count)) else { return nil }
    defer { BIO_free(bio) }
    let noPassword: @convention(c) (UnsafeMutablePointer<CChar>?, Int32, Int32, UnsafeMutableRawPointer?) -> Int32 = { _, _, _, _ in -1 }
    return publicOnly ? PEM_read_bio_PUBKEY(bio, nil, noPassword, nil) : PEM_read_bio_PrivateKey(bio, nil, noPassword, nil)
}

/// Writes an EVP_PKEY as PEM text: PKCS#8 for the private key, or with `publicOnly` its
/// SubjectPublicKeyInfo. Nil if OpenSSL fails.
public func writePEMKey(_ key: OpaquePointer, publicOnly: Bool) -> [UInt8]? {
    guard let bio = BIO_new(BIO_s_mem()) else { return nil }
    defer { BIO_free(bio) }
    let ok = publicOnly ? PEM_write_bio_PUBKEY(bio, key) : PEM_write_bio_PrivateKey(bio, key, nil, nil, 0, nil, nil)
    guard ok == 1 else { return nil }
    var data: UnsafeMutablePointer<CChar>?
    let length = pushcast_BIO_get_mem_data(bio, &data)
    guard length > 0, let data else { return nil }
    return Array(UnsafeRawBufferPointer(start: data, count: length))
}

/// The reason text of the most recent OpenSSL error, if any (never key material).
public func lastOpenSSLReason() -> String? {
    var last: UInt = 0
    while true {
        let code = ERR_get_error()
        if code == 0 { break }
        last = code
    }
    guard last != 0, let text = ERR_reason_error_string(last) else { return nil }
    return String(cString: text)
}

/// base64url without padding (RFC 7515 §2).
public enum Base64URL {
    private static let alphabet: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    public static func encode(_ bytes: UnsafeRawBufferPointer) -> String {
        let count = bytes.count
        let outputCount = (count / 3) * 4 + [0, 2, 3][count % 3]
        return alphabet.withUnsafeBufferPointer { table in
            String(unsafeUninitializedCapacity: outputCount) { out in
                var input = 0, written = 0
                while input + 3 <= count {
                    let value = UInt32(bytes[input]) << 16 | UInt32(bytes[input + 1]) << 8 | UInt32(bytes[input + 2])
                    out[written] = table[Int(value >> 18)]
                    out[written + 1] = table[Int(value >> 12 & 63)]
                    out[written + 2] = table[Int(value >> 6 & 63)]
                    out[written + 3] = table[Int(value & 63)]
                    input += 3
                    written += 4
                }
                if count - input == 1 {
                    let value = UInt32(bytes[input]) << 16
                    out[written] = table[Int(value >> 18)]
                    out[written + 1] = table[Int(value >> 12 & 63)]
                    written += 2
                } else if count - input == 2 {
                    let value = UInt32(bytes[input]) << 16 | UInt32(bytes[input + 1]) << 8
                    out[written] = table[Int(value >> 18)]
                    out[written + 1] = table[Int(value >> 12 & 63)]
                    out[written + 2] = table[Int(value >> 6 & 63)]
                    written += 3
                }
                return written
            }
        }
    }

    public static func encode(_ bytes: [UInt8]) -> String { bytes.withUnsafeBytes { encode($0) } }

    @inline(__always)
    private static func value(_ byte: UInt8) -> UInt32? {
        switch byte {
        case 0x41...0x5A: return UInt32(byte - 0x41)
        case 0x61...0x7A: return UInt32(byte - 0x61 + 26)
        case 0x30...0x39: return UInt32(byte - 0x30 + 52)
        case UInt8(ascii: "-"): return 62
        case UInt8(ascii: "_"): return 63
        default: return nil
        }
    }

    /// Decodes unpadded base64url; nil on any character outside the alphabet, padding, or an
    /// impossible length.
    public static func decode(_ text: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
        let count = text.count
        guard count % 4 != 1 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(count * 3 / 4)
        var accumulator: UInt32 = 0
        var bits = 0
        for byte in text {
            guard let sextet = value(byte) else { return nil }
            accumulator = accumulator << 6 | sextet
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
            }
        }
        // Leftover bits must be zero (canonical encoding).
        guard accumulator & ((1 << UInt32(bits)) - 1) == 0 else { return nil }
        return out
    }
}

extension Base64URL {
    public static func decode(_ text: ArraySlice<UInt8>) -> [UInt8]? { text.withUnsafeBufferPointer { decode($0) } }
}
