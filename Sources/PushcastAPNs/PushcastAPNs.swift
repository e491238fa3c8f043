// PushcastAPNs: everything pushcast knows about Apple's HTTP/2 provider API, as value types with no
// I/O (docs/DESIGN.md §2.1): device-token normalisation, per-campaign headers and topic rules,
// deterministic apns-id values, the ES256 provider token (signing for the client, verification for
// the mock), and the reason table that turns a response into a verdict. The payload template and
// the JSON reader live in PushcastJSON, the retry backoff arithmetic in PushcastCore.
// Facts come from docs/PROTOCOL.md §1 (section numbers are quoted as §1.x).
//
// Hot-path pieces (token, template, apns-id, headers) work on bytes and allocate only their
// output; JWT signing happens once per 50 minutes and is shared by every worker.

