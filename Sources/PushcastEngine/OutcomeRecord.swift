import PushcastCore
import PushcastProviderKit

/// What happened to one input row: one line of the results file.
public struct OutcomeRecord: Sendable, Equatable, PackedTokenAndID {
    /// 1-based data-row number in the input.
    public var row: Int
    /// The row's identity column (`--id-column`), copied through.
    public var id: String?
    /// The token as sent (APNs tokens normalised), or as read when it could not be used; packed
    /// (`PackedText`: an APNs token is its 32 bytes, no String).
    public var packedToken: PackedText
    public var provider: ProviderID?
    public var outcome: OutcomeKind
    /// The provider's HTTP status, when it answered.
    public var status: Int?
    /// The provider's reason (`Unregistered`, `BadDeviceToken`, …) or pushcast's own
    /// (`InvalidToken`, `MalformedRow`, `PayloadTooLarge`, `Duplicate`, `Timeout`, …).
    public var reason: String?
    /// A human explanation naming the file, line and field, for rows pushcast refused.
    public var error: String?
    /// The provider's id for the notification, in its provider's results column
    /// (`PushProvider.messageIDField`): the apns-id of every APNs request, FCM's message name
    /// (`projects/…/messages/…`) of a delivered FCM message. Packed: an apns-id is its 16 bytes.
    public var packedMessageID: PackedText?
    /// ISO 8601 time at which APNs says the token stopped being valid (from a 410).
    public var unregisteredAt: String?
    /// For duplicates: the row that was sent.
    public var duplicateOf: Int?
    public var attempts: Int
    public var latencyMilliseconds: Double?

    public init(row: Int, id: String?, token: PackedText, provider: ProviderID?, outcome: OutcomeKind,
                status: Int? = nil, reason: String? = nil, error: String? = nil, messageID: PackedText? = nil,
                unregisteredAt: String? = nil, duplicateOf: Int? = nil, attempts: Int = 0,
                latencyMilliseconds: Double? = nil) {
        self.row = row
        self.id = id
        packedToken = token
        self.provider = provider
        self.outcome = outcome
        self.status = status
        self.reason = reason
        self.error = error
        packedMessageID = messageID
        self.unregisteredAt = unregisteredAt
        self.duplicateOf = duplicateOf
        self.attempts = attempts
        self.latencyMilliseconds = latencyMilliseconds
    }

    public init(row: Int, id: String?, token: String, provider: ProviderID?, outcome: OutcomeKind,
                status: Int? = nil, reason: String? = nil, error: String? = nil, messageID: String? = nil,
                unregisteredAt: String? = nil, duplicateOf: Int? = nil, attempts: Int = 0,
                latencyMilliseconds: Double? = nil) {
        self.init(row: row, id: id, token: PackedText(token), provider: provider, outcome: outcome, status: status,
                  reason: reason, error: error, messageID: messageID.map(PackedText.init), unregisteredAt: unregisteredAt,
                  duplicateOf: duplicateOf, attempts: attempts, latencyMilliseconds: latencyMilliseconds)
    }

    private static let idOffset = MemoryLayout<OutcomeRecord>.offset(of: \OutcomeRecord.id)!

    /// Starts loading the storage of the record's id (what its results line reads besides the
    /// record itself), without copying the record or its strings (`Prefetch.stringStorage`).
    @inline(__always)
    static func prefetchStrings(of record: UnsafePointer<OutcomeRecord>) {
        Prefetch.storages(from: UnsafeRawPointer(record), strings: (idOffset, -1, -1))
    }

    /// Holds no buffers: what a record moved out of an array leaves behind.
    public static let placeholder = OutcomeRecord(row: 0, id: nil, token: PackedText.empty, provider: nil, outcome: .invalid)

    /// Rows the owner should delete from their table: dead tokens, and tokens that are not tokens.
    public var belongsInPruneFile: Bool {
        outcome == .pruned || (outcome == .invalid && reason == OutcomeReason.invalidToken)
    }
}

/// pushcast's own reason strings (the provider's are passed through as they come).
public enum OutcomeReason {
    public static let invalidToken = "InvalidToken"
    public static let malformedRow = "MalformedRow"
    public static let missingToken = "MissingToken"
    public static let payloadTooLarge = "PayloadTooLarge"
    public static let duplicate = "Duplicate"
    public static let providerNotConfigured = "ProviderNotConfigured"
    public static let unknownProvider = "UnknownProvider"
    /// A routed provider's row whose server has no lane in this run (read from stdin, which is
    /// not read first to find the servers).
    public static let noRoute = "NoRoute"
    /// The connection's protocol cannot carry the request (HTTP/1.1 refuses a header value with
    /// a line break): never written.
    public static let unsendable = "UnsendableRequest"
    public static let timeout = "Timeout"
    public static let connectionLost = "ConnectionLost"
    public static let streamReset = "StreamReset"
    public static let answerCut = "AnswerCut"
    public static let retryAfterPastDeadline = "RetryAfterPastDeadline"
    public static let retriesExhausted = "RetriesExhausted"
    /// The server refused the stream (RST_STREAM REFUSED_STREAM) every time, up to the row's
    /// resend budget: it never processed the request.
    public static let refusedStream = "RefusedStream"
    /// Every connection the row was sent on went away (GOAWAY) before processing it, up to the
    /// row's resend budget.
    public static let goAwayUnprocessed = "GoAwayUnprocessed"
    /// Every connection the row was queued on died before its request went out, up to the row's
    /// resend budget.
    public static let notSent = "NotSent"
    /// The server answered with a body or header block over the client's limits
    /// (`Limits.responseBodyBytesAccepted`, `Limits.responseHeaderBytesAccepted`): the stream
    /// was reset, and whether the notification went out is unknown.
    public static let responseTooLarge = "ResponseTooLarge"
    /// The request body never went out: the server kept its flow-control window shut until the
    /// row's deadline. The server cannot have acted on it.
    public static let flowControlBlocked = "FlowControlBlocked"
    /// The run was interrupted (a signal) and the request was still in flight when its drain
    /// ran out, or an earlier attempt of it may have gone out: its fate is unknown.
    public static let interrupted = "Interrupted"
    /// Found on resume: the journal says the row may have gone out before the crash, and the
    /// results file has no outcome for it. Sent again only with --retry-unknown.
    public static let interruptedInFlight = "InterruptedInFlight"
    public static let credentialRejected = "CredentialRejected"
    public static let internalError = "InternalError"
}

/// A notification or outcome that keeps its token and message id packed (`PackedText`), read
/// and written as text through `token` and `messageID` off the hot path.
public protocol PackedTokenAndID {
    var packedToken: PackedText { get set }
    var packedMessageID: PackedText? { get set }
}

extension PackedTokenAndID {
    /// The token as text.
    public var token: String {
        get { packedToken.string }
        set { packedToken = PackedText(newValue) }
    }

    /// The message id as text.
    public var messageID: String? {
        get { packedMessageID?.string }
        set { packedMessageID = newValue.map(PackedText.init) }
    }
}
