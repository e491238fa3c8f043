// The key encodings subscriptions and VAPID keys arrive in. Browsers' PushSubscription.toJSON()
// writes base64url without padding (RFC 4648 §5), and so does the web-push tool. Some server-side
// stores re-encode the keys as standard base64 (RFC 4648 §4, `+` and `/`) or keep the `=` padding;
// the bytes are unambiguous either way, so both alphabets are accepted, with or without padding.
// One value may not mix the two alphabets (that is a damaged value, not an encoding).
// Decoding writes into the caller's buffer: a private key never passes through an Array.

public enum WebPushBase64 {
    @inline(__always)
    private static func sextet(_ byte: UInt8) -> (value: UInt32, alphabet: UInt8)? {
        switch byte {
        case 0x41...0x5A: return (UInt32(byte - 0x41), 0)
        case 0x61...0x7A: return (UInt32(byte - 0x61 + 26), 0)
        case 0x30...0x39: return (UInt32(byte - 0x30 + 52), 0)
        case UInt8(ascii: "-"): return (62, 1)
        case UInt8(ascii: "_"): return (63, 1)
        case UInt8(ascii: "+"): return (62, 2)
        case UInt8(ascii: "/"): return (63, 2)
        default: return nil
        }
    }

    /// Decodes `text` into `out` and returns the number of bytes written; nil for a character
    /// outside the alphabets, mixed alphabets, bad padding, an impossible length, non-zero
    /// leftover bits, or more bytes than `out` holds.
    public static func decode(_ text: UnsafeRawBufferPointer, into out: UnsafeMutableRawBufferPointer) -> Int? {
        var count = text.count
        var padding = 0
        while count > 0 && text[count - 1] == UInt8(ascii: "=") && padding < 3 {
            count -= 1
            padding += 1
        }
        if padding > 0 && (padding > 2 || text.count % 4 != 0) { return nil }
        guard count % 4 != 1 else { return nil }
        var accumulator: UInt32 = 0
        var bits = 0
        var written = 0
        var alphabets: UInt8 = 0
        for index in 0..<count {
            guard let (value, alphabet) = sextet(text[index]) else { return nil }
            alphabets |= alphabet
            accumulator = accumulator << 6 | value
            bits += 6
            if bits >= 8 {
                bits -= 8
                guard written < out.count else { return nil }
                out[written] = UInt8(truncatingIfNeeded: accumulator >> UInt32(bits))
                written += 1
            }
        }
        guard alphabets != 3, accumulator & ((1 << UInt32(bits)) - 1) == 0 else { return nil }
        return written
    }
}
