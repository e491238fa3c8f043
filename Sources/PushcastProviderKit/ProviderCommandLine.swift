import PushcastCommandLine
import PushcastCore
import PushcastWire

/// A provider's part of `pushcast send` and `pushcast check`: its option group, and what it makes
/// of those options. The command parses the whole command line once; each provider reads its own
/// group from it (`configure`), and the command wires the result into a lane without knowing
/// which provider it is.
public protocol ProviderCommandLine: Sendable {
    var id: ProviderID { get }
    /// Its options, in the order `pushcast help` and the manual page list them.
    var options: [OptionSpec] { get }
    /// The options a row of this provider needs, for the error about rows without credentials.
    var credentialHint: String { get }
    /// The options that change every body, as `name=value` lines, whether or not this provider
    /// is configured: they go into the campaign's fingerprint, so a resume with other values is
    /// refused.
    func fingerprintLines(_ parsed: ParsedArguments) -> [String]
    /// Reads its option group. Credentials are loaded here: a key that cannot be read stops the
    /// run before the input is. Nil when the options do not ask for this provider.
    func configure(_ parsed: ParsedArguments, context: ProviderContext) throws -> (any ProviderSetup)?
}

/// What a provider's setup gets from the command: the files, clocks and network it may use.
public struct ProviderContext: @unchecked Sendable {
    /// Reads a key or certificate file (the command's secret-file reader).
    public var files: SecretFileReader
    public var environment: @Sendable (String) -> String?
    public var wallClock: WallClock
    public var monotonicClock: MonotonicClock
    /// Where a credential refresher gets its thread.
    public var threads: any ThreadSource
    /// The trust every connection uses (--ca-file); a provider may add a client certificate.
    public var trust: TLSConfiguration
    /// Prints a note or a warning for the user, as given ("pushcast: note: …").
    public var notice: @Sendable (String) -> Void
    /// Sends one request on a fresh connection to `endpoint` and waits for its answer (an OAuth2
    /// token exchange: once an hour, never behind a campaign's streams).
    public var sendOne: @Sendable (Endpoint, TLSContext, HTTP2Request) -> Result<HTTP2Response, any Error>

    public init(files: @escaping SecretFileReader, environment: @escaping @Sendable (String) -> String?, wallClock: WallClock,
                monotonicClock: MonotonicClock, threads: any ThreadSource, trust: TLSConfiguration, notice: @escaping @Sendable (String) -> Void,
                sendOne: @escaping @Sendable (Endpoint, TLSContext, HTTP2Request) -> Result<HTTP2Response, any Error>) {
        self.files = files
        self.environment = environment
        self.wallClock = wallClock
        self.monotonicClock = monotonicClock
        self.threads = threads
        self.trust = trust
        self.notice = notice
        self.sendOne = sendOne
    }
}

/// A failure in a provider's setup (a key that does not load, a bad endpoint): the run stops
/// with this message, exit 2.
public struct ProviderSetupError: Error, Sendable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// The template option a provider's bodies come from.
public struct TemplateOption: Sendable {
    /// The option's name (`payload`).
    public var option: String
    /// What its file holds, in messages ("payload template").
    public var what: String
    /// The error when it is missing.
    public var missing: String
    public init(option: String, what: String, missing: String) {
        self.option = option
        self.what = what
        self.missing = missing
    }
}

/// Where a provider's lane connects, and how wide.
public struct ProviderConnection: Sendable {
    public var endpoint: Endpoint
    public var tls: TLSContext
    public var connections: Int
    /// The cap on concurrent streams per connection (the server's SETTINGS may lower it).
    public var streams: Int
    /// The response headers its adapter reads (lower case): the HTTP/2 client keeps only these.
    public var responseHeaders: [String]
    /// Whether a 2xx answer's headers are kept too (Web Push's Location names the message);
    /// off, a success costs no header array.
    public var responseHeadersOnSuccess: Bool
    public init(endpoint: Endpoint, tls: TLSContext, connections: Int, streams: Int, responseHeaders: [String],
                responseHeadersOnSuccess: Bool = false) {
        self.responseHeadersOnSuccess = responseHeadersOnSuccess
        self.endpoint = endpoint
        self.tls = tls
        self.connections = connections
        self.streams = streams
        self.responseHeaders = responseHeaders
    }
}

/// One provider configured for a campaign from its option group.
public protocol ProviderSetup: AnyObject {
    var id: ProviderID { get }
    var template: TemplateOption { get }
    /// What the request body is called in `check`'s output ("payload", "message").
    var bodyName: String { get }
    /// Compiles the template against the input's columns.
    func rendering(template text: String, path: String, columns: [String]) throws -> any ProviderRendering
    /// Throws when something that sending needs (not `check`) is missing.
    func requireSendable() throws
    /// `check`: lines that prove the credentials (by signing or loading them, never printing a
    /// secret); nothing connects.
    func credentialLines() throws -> [String]
    /// `check`: the first request, for the first notification to send (its token redacted),
    /// when there is one.
    func firstRequestLine(sample: (redactedToken: String, messageID: String?)?) -> String?
    /// Where the lane connects.
    func connection() throws -> ProviderConnection
    /// A routed provider's (`PushProvider.isRouted`): where the lane for `route` (a token prefix
    /// naming one server) connects.
    func connection(route: String) throws -> ProviderConnection
    /// Starts what the adapters share (FCM's access tokens: the first is fetched now, so a
    /// refused credential stops the run before anything is sent); `onFatal` stops the run later.
    func start(onFatal: @escaping @Sendable (String) -> Void) throws -> any AdapterFactory
    /// A routed provider's: the adapters of the lane for `route`, after `start`.
    func adapters(route: String) throws -> any AdapterFactory
    /// `check`: what sending a rendered body would find wrong with it beyond what rendering
    /// checks (Web Push: a key that is not on the curve, found only when the worker seals it).
    func sendProblem(body: [UInt8]) -> RowProblem?
    /// `check`: a rendered body as text for the user (Web Push: its payload, not its keys).
    func bodyText(_ body: [UInt8]) -> String
    /// After the run: stops what `start` started; a line for the user, or nil.
    func finish() -> String?
}

extension ProviderSetup {
    public func connection(route: String) throws -> ProviderConnection { try connection() }
    public func adapters(route: String) throws -> any AdapterFactory {
        throw ProviderSetupError("\(id.rawValue) sends to one server: it has no lane per route")
    }
    public func requireSendable() throws {}
    public func sendProblem(body: [UInt8]) -> RowProblem? { nil }
    public func bodyText(_ body: [UInt8]) -> String { String(decoding: body, as: UTF8.self) }
    public func finish() -> String? { nil }
}

/// Makes each worker's adapter. Its associated type keeps the send loop specialised for the
/// provider's adapter.
public protocol AdapterFactory: Sendable {
    associatedtype Adapter: ProviderAdapter
    func makeAdapter() -> Adapter
}
