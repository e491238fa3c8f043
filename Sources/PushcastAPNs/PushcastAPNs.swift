// PushcastAPNs: everything pushcast knows about Apple's HTTP/2 provider API, as value types with no
// I/O (docs/DESIGN.md §2.1): device-token normalisation, per-campaign headers and topic rules, the
// payload template compiled once and rendered per row by splicing escaped bytes, deterministic
// apns-id values, the ES256 provider token (signing for the client, verification for the mock),
// the reason table that turns a response into a verdict, and the retry backoff arithmetic.
// Facts come from docs/PROTOCOL.md §1 (section numbers are quoted as §1.x).
//
// Hot-path pieces (token, template, apns-id, headers) work on bytes and allocate only their
// output; JWT signing happens once per 50 minutes and is shared by every worker.

/// The lower-case hex digit for a nibble (0...15).
@inline(__always)
func hexDigit(_ nibble: UInt8) -> UInt8 {
    nibble < 10 ? 0x30 &+ nibble : 0x61 &+ (nibble &- 10)
}
