import PushcastCore

/// What the engine knows about one push provider: everything that differs between APNs, FCM
/// and any provider added later, as a value. The reader side asks it which `platform` values
/// route to it and what its tokens look like; a `ProviderRendering` (the campaign's templates)
/// turns rows into request bodies; a `ProviderAdapter` on each worker speaks its protocol and
/// maps its answers onto `ProviderVerdict`s. Nothing in the engine branches on which provider a
/// row is for: it looks the provider up by `id.position` and asks.
///
/// A provider added to pushcast brings one of these, an adapter and a rendering, in a module of
/// its own, and one line in the catalog the command builds (docs/ARCHITECTURE.md, "Adding a
/// provider"). `StubProviderTests` sends a whole campaign to a provider defined only in a test
/// target.
public protocol PushProvider: Sendable {
    var id: ProviderID { get }
    /// The service's name in messages: "APNs", "FCM".
    var displayName: String { get }
    /// The `platform`/`provider` column values that route a row here, lower case (the name in
    /// `id` is always one of them).
    var platformAliases: [String] { get }
    /// The results column holding the provider's id for the notification (the apns-id sent with
    /// it, FCM's message name), `OutcomeRecord.messageID`.
    var messageIDField: String { get }
    /// Writes the token as it is sent (APNs: lower-case hex) into `output`, emptied first, or
    /// says why it is not a token of this provider. Runs once per row on the reader thread: no
    /// allocation once `output` has grown.
    func normalize(token raw: UnsafeRawBufferPointer, into output: inout [UInt8]) -> TokenProblem?
    /// The campaign-wide rate its lane keeps to without `--rate` (a provider-wide quota), or
    /// nil for none.
    var defaultRatePerSecond: Double? { get }
    /// The reasons its answers carry that pushcast knows by name: what each means and what to do.
    var reasons: ReasonTable { get }
    /// True for a provider whose rows go to many servers (Web Push: each push service): each
    /// server gets a lane of its own (connections, credential, rate, breaker).
    var isRouted: Bool { get }
    /// For a routed provider, the length of the prefix of a normalised token that names its
    /// server (a Web Push endpoint's origin, `https://host[:port]`); rows with the same prefix
    /// share a lane. Nil: the token names no server (`normalize` already refused it).
    func routeLength(token: UnsafeRawBufferPointer) -> Int?
    /// Columns besides `token` that hold this provider's tokens, in order (Web Push's
    /// `endpoint`): a row whose `token` is blank takes the first of them that it fills, and a
    /// row so found with no `platform` value is this provider's.
    var tokenColumns: [String] { get }
}

extension PushProvider {
    public var tokenColumns: [String] { [] }
    public var defaultRatePerSecond: Double? { nil }
    public var reasons: ReasonTable { ReasonTable(source: displayName, reference: "", entries: []) }
    public var isRouted: Bool { false }
    public func routeLength(token: UnsafeRawBufferPointer) -> Int? { nil }
}

/// Why a token is not a token, in words.
public struct TokenProblem: Error, Sendable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// How one provider's rows become request bodies in this campaign (its templates and limits).
/// One renderer is made per preparer, on the reader thread, so it may keep scratch state.
public protocol ProviderRendering: Sendable {
    func makeRenderer(campaign: String) -> any NotificationRenderer
}

/// Renders one provider's request bodies on the reader thread.
public protocol NotificationRenderer: AnyObject {
    /// The most bytes a body may have, and what the body is called in the error for a larger one.
    var bodyBytesMax: Int { get }
    var bodyName: String { get }
    /// Renders the body for `token` (normalised, UTF-8) and the row's fields into `buffer`
    /// (emptied first by the caller); returns the body's size, which may exceed `bodyBytesMax`,
    /// or `RowProblem.size` when the row cannot make a body (`rowProblem` says why).
    func render(token: UnsafeRawBufferPointer, into buffer: inout [UInt8], field: (Int) -> UnsafeRawBufferPointer?) -> Int
    /// Why the last `render` returned `RowProblem.size` (a subscription key that is not base64).
    var rowProblem: RowProblem? { get }
    /// The id the request carries and the results record before any answer (APNs: the apns-id
    /// derived from campaign and token), or nil.
    func notificationID(token: UnsafeRawBufferPointer) -> PackedText?
}

extension NotificationRenderer {
    public var rowProblem: RowProblem? { nil }
}

/// A row whose fields cannot make a body: it ends `invalid` with `reason`, and an error naming
/// the field.
public struct RowProblem: Sendable, Equatable {
    /// What `NotificationRenderer.render` returns for such a row.
    public static let size = -1
    public var reason: String
    public var field: String?
    public var message: String
    public init(reason: String, field: String?, message: String) {
        self.reason = reason
        self.field = field
        self.message = message
    }
}

/// One source's reasons (a provider's error table, or pushcast's own): each says what it means
/// and what to do, and where the full table is documented.
public struct ReasonTable: Sendable {
    public struct Entry: Sendable {
        public let reason: String
        /// "APNs", "FCM" or "pushcast".
        public let source: String
        public let meaning: String
        public let action: String
        /// Where the full table is (the report links to it).
        public let reference: String
    }

    public let source: String
    public let reference: String
    public let entries: [Entry]

    public init(source: String, reference: String, entries: [Entry]) {
        self.source = source
        self.reference = reference
        self.entries = entries
    }

    /// `rows`: (reason, what it means, what to do).
    public init(source: String, reference: String, _ rows: [(String, String, String)]) {
        self.init(source: source, reference: reference,
                  entries: rows.map { Entry(reason: $0.0, source: source, meaning: $0.1, action: $0.2, reference: reference) })
    }
}
