import PushcastCore
import PushcastProviderKit

/// Every reason a results line can carry that pushcast knows by name: each provider's table
/// (`PushProvider.reasons`) and pushcast's own. Each says what it means and what to do. Two
/// uses: a label for a metric, where a reason outside this fixed set becomes `other` (a hostile
/// server cannot grow the label set), and the campaign report's table of failure reasons.
public struct ReasonCatalog: Sendable {
    public typealias Entry = ReasonTable.Entry

    /// The label for reasons outside the catalog.
    public static let other = "other"

    private let byReason: [String: Entry]

    /// The catalog's providers' reasons, in catalog order, then pushcast's own (a later table's
    /// entry wins a name both use).
    public init(_ catalog: ProviderCatalog) {
        var table: [String: Entry] = [:]
        for entry in catalog.providers.flatMap(\.reasons.entries) + Self.own.entries { table[entry.reason] = entry }
        byReason = table
    }

    /// The metric label for `reason`: the reason itself when the catalog has it, `Status4xx` or
    /// `Status5xx` for an answer without a reason (`Status503`), else `other`.
    public func label(_ reason: String) -> String {
        if byReason[reason] != nil { return reason }
        if let base = Self.base(reason), byReason[base] != nil { return base }
        let utf8 = Array(reason.utf8)
        if utf8.count == 9, reason.hasPrefix("Status"), utf8[6...].allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) {
            return "Status\(Character(UnicodeScalar(utf8[6])))xx"
        }
        return Self.other
    }

    /// What the catalog says about a reason (nil for reasons it does not know).
    public func entry(_ reason: String) -> Entry? { byReason[reason] ?? Self.base(reason).flatMap { byReason[$0] } }

    /// A reason with the server's detail after it in parentheses (Web Push's `Gone (errno 106)`)
    /// is known by the reason before it.
    static func base(_ reason: String) -> String? {
        let bytes = Array(reason.utf8)
        guard bytes.last == UInt8(ascii: ")"), let open = bytes.indices.dropLast().first(where: { bytes[$0] == 0x20 && bytes[$0 + 1] == UInt8(ascii: "(") })
        else { return nil }
        return String(decoding: bytes[..<open], as: UTF8.self)
    }

    /// pushcast's own reasons (docs/USAGE.md, "Output files").
    static let own = ReasonTable(source: "pushcast", reference: "docs/USAGE.md, Output files", [
        (OutcomeReason.invalidToken, "the token is not a token (bad hex, bad length, bad characters)", "pruned: fix or delete the row"),
        (OutcomeReason.malformedRow, "the row could not be read (bad quoting, wrong field count, bad JSON)", "fix the export; the error column names the line and field"),
        (OutcomeReason.missingToken, "the row has no token", "fix the export"),
        (OutcomeReason.payloadTooLarge, "the rendered payload is over the provider's limit", "shorten the template or the row's values"),
        (OutcomeReason.duplicate, "the same token appears on an earlier row", "none: sent once; clean the export"),
        (OutcomeReason.providerNotConfigured, "the row's provider has no credentials in this run", "give that provider's options and resend"),
        (OutcomeReason.unknownProvider, "the platform column names no known provider", "fix the export's platform column"),
        (OutcomeReason.unsendable, "the connection's protocol cannot carry the request (a line break in a header, a space in the path)", "never sent: fix the value in the export or template"),
        (OutcomeReason.noRoute, "no lane goes to the row's server (a routed provider's rows read from stdin)", "never sent: send from a file"),
        (OutcomeReason.timeout, "no answer within --request-timeout", "fate unknown; resend with --retry-unknown if duplicates are acceptable"),
        (OutcomeReason.connectionLost, "the connection died after the request was sent", "fate unknown; resend with --retry-unknown if duplicates are acceptable"),
        (OutcomeReason.streamReset, "the server reset the stream after the request was sent", "fate unknown; check the server"),
        (OutcomeReason.answerCut, "the server answered (:status), then reset the stream or went away", "processed, fate unknown: never resent; check the proxy in front of the provider"),
        (OutcomeReason.retryAfterPastDeadline, "the server's Retry-After ends after the row's --request-timeout", "resend the failed rows later, or give a longer --request-timeout"),
        (OutcomeReason.retriesExhausted, "every attempt got a retryable answer (429, 5xx)", "resend the failed rows later"),
        (OutcomeReason.refusedStream, "the server refused the stream every time", "never processed: resend later"),
        (OutcomeReason.goAwayUnprocessed, "every connection went away before processing it", "never processed: resend later"),
        (OutcomeReason.notSent, "every connection died before the request went out", "never processed: resend later"),
        (OutcomeReason.responseTooLarge, "the answer was over pushcast's size limits", "fate unknown; check the server"),
        (OutcomeReason.flowControlBlocked, "the server never let the request body out", "never processed: resend later"),
        (OutcomeReason.interrupted, "the run was stopped while the request was in flight", "fate unknown; send --resume records it"),
        (OutcomeReason.interruptedInFlight, "an interrupted run may have sent it", "not sent again; --retry-unknown sends it"),
        (OutcomeReason.credentialRejected, "the provider rejected the credentials", "configuration: fix the key or service account"),
        (OutcomeReason.internalError, "pushcast failed on this row", "a bug: report it with pushcast --version"),
    ])
}
