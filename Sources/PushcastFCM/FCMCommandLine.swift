import PushcastCommandLine
import PushcastCore
import PushcastProviderKit
import PushcastWire

/// FCM's option group of `pushcast send` and `check`: the message template, the service
/// account, the endpoints, and the lane's width.
public struct FCMCommandLine: ProviderCommandLine {
    public init() {}
    public var id: ProviderID { .fcm }
    public var credentialHint: String { "--fcm-credentials with --fcm-payload" }

    public func fingerprintLines(_ parsed: ParsedArguments) -> [String] { ["fcm-validate-only=\(parsed.flag("fcm-validate-only"))"] }

    public var options: [OptionSpec] {
        [
            .value("fcm-payload", metavar: "FILE", help: "FCM message template (the `message` object: notification, data, android, apns, webpush, fcm_options; same placeholders)"),
            .value("fcm-credentials", metavar: "FILE", help: "FCM: a service-account JSON (project_id, client_email, private_key, token_uri)",
                   defaultDescription: "$GOOGLE_APPLICATION_CREDENTIALS when --fcm-payload is given"),
            .value("fcm-endpoint", metavar: "URL", help: "https://host:port overriding fcm.googleapis.com (mocks)"),
            .value("fcm-token-uri", metavar: "URL", help: "OAuth2 token endpoint overriding the service account's token_uri (mocks)"),
            .flag("fcm-validate-only", help: "FCM validates every message without delivering it (validate_only)"),
            .value("fcm-connections", metavar: "N", help: "connections to FCM", defaultDescription: "4"),
            .value("fcm-streams", metavar: "N", help: "cap on concurrent streams per FCM connection (the server's SETTINGS may lower it)", defaultDescription: "100"),
        ]
    }

    /// FCM is asked for by `--fcm-credentials`, or by `--fcm-payload` with
    /// $GOOGLE_APPLICATION_CREDENTIALS (an APNs-only run ignores that variable). The service
    /// account and its key are loaded now.
    public func configure(_ parsed: ParsedArguments, context: ProviderContext) throws -> (any ProviderSetup)? {
        var path = parsed.value("fcm-credentials")
        if path == nil, parsed.value("fcm-payload") != nil {
            path = context.environment("GOOGLE_APPLICATION_CREDENTIALS")
            if path == nil || path!.isEmpty {
                throw parsed.error("--fcm-payload needs a service account: --fcm-credentials FILE or $GOOGLE_APPLICATION_CREDENTIALS")
            }
        }
        guard let path else { return nil }
        let account: FCMServiceAccount
        let signer: RS256Signer
        do {
            account = try FCMServiceAccount.load(path: path, files: context.files)
            signer = try RS256Signer(account: account)
        } catch {
            throw ProviderSetupError(error.description)
        }
        var endpoint = Endpoint(host: FCMProvider.host, port: 443)
        if let url = parsed.value("fcm-endpoint") {
            do { endpoint = try Endpoint(url: url) } catch { throw parsed.error("--fcm-endpoint: \(error.description)") }
        }
        let tokenURI = parsed.value("fcm-token-uri") ?? account.tokenURI
        do { _ = try Endpoint.split(url: tokenURI) } catch {
            throw ProviderSetupError(parsed.value("fcm-token-uri") != nil ? "--fcm-token-uri: \(error.description)" : "\(path): token_uri: \(error.description)")
        }
        return FCMSetup(parsed: parsed, context: context, account: account, signer: signer, endpoint: endpoint, tokenURI: tokenURI)
    }
}

/// FCM configured for one campaign: the service account (read, its key loaded) and the endpoints.
final class FCMSetup: ProviderSetup {
    private let parsed: ParsedArguments
    private let context: ProviderContext
    private let account: FCMServiceAccount
    private let signer: RS256Signer
    private let endpoint: Endpoint
    private let tokenURI: String
    private var tokens: FCMAccessTokens?

    init(parsed: ParsedArguments, context: ProviderContext, account: FCMServiceAccount, signer: RS256Signer, endpoint: Endpoint,
         tokenURI: String) {
        self.parsed = parsed
        self.context = context
        self.account = account
        self.signer = signer
        self.endpoint = endpoint
        self.tokenURI = tokenURI
    }

    var id: ProviderID { .fcm }
    var bodyName: String { "message" }
    var template: TemplateOption {
        TemplateOption(option: "fcm-payload", what: "FCM message template",
                       missing: "--fcm-payload FILE is required with FCM credentials (the FCM message template)")
    }

    func rendering(template text: String, path: String, columns: [String]) throws -> any ProviderRendering {
        do {
            return FCMRendering(template: try FCMMessageTemplate.compile(text: text, columns: columns, validateOnly: parsed.flag("fcm-validate-only"),
                                                                        source: path))
        } catch {
            throw ProviderSetupError(error.description)
        }
    }

    /// Signing an assertion proves the key; nothing is sent.
    func credentialLines() throws -> [String] {
        do {
            _ = try OAuthAssertion.make(account: account, signer: signer, issuedAt: context.wallClock.secondsSinceEpoch())
        } catch {
            throw ProviderSetupError(error.description)
        }
        return ["FCM service account: \(account.clientEmail), project \(account.projectID), token endpoint \(tokenURI)"]
    }

    func firstRequestLine(sample: (redactedToken: String, messageID: String?)?) -> String? {
        "first FCM request: POST https://\(endpoint.authority)\(FCMProvider.sendPath(project: account.projectID))"
    }

    func connection() throws -> ProviderConnection {
        ProviderConnection(endpoint: endpoint, tls: try trustOnly(),
                           connections: try parsed.int("fcm-connections", default: 4, range: 1...1024),
                           streams: try parsed.int("fcm-streams", default: 100, range: 1...100_000),
                           responseHeaders: ["retry-after", "content-type"])
    }

    /// The access tokens every worker shares: the first one is fetched here, before anything is
    /// sent, so a refused service account stops the run now.
    func start(onFatal: @escaping @Sendable (String) -> Void) throws -> any AdapterFactory {
        let (tokenEndpoint, tokenPath) = try Endpoint.split(url: tokenURI)
        let tls = try trustOnly()
        let (account, signer, context) = (account, signer, context)
        let tokens = FCMAccessTokens(clock: context.monotonicClock, threads: context.threads) {
            FCMTokenFetcher.fetch(account: account, signer: signer, endpoint: tokenEndpoint.description, authority: tokenEndpoint.authority,
                                  path: tokenPath, nowEpochSeconds: { context.wallClock.secondsSinceEpoch() }) {
                context.sendOne(tokenEndpoint, tls, $0)
            }
        }
        do { try tokens.start(onFatal: onFatal) } catch { throw ProviderSetupError(error.description) }
        self.tokens = tokens
        return FCMAdapterFactory(settings: FCMSendSettings(authority: endpoint.authority, project: account.projectID, tokens: tokens))
    }

    /// Stops the refresher thread once; the line counts the token requests.
    func finish() -> String? {
        guard let tokens else { return nil }
        tokens.close()
        self.tokens = nil
        return "fcm: \(tokens.fetchCount) access-token requests"
    }

    private func trustOnly() throws -> TLSContext {
        do { return try TLSContext(role: .client, configuration: context.trust, files: context.files) } catch {
            throw ProviderSetupError(error.description)
        }
    }
}

/// Each worker's FCM adapter, over the shared access tokens.
public struct FCMAdapterFactory: AdapterFactory {
    public let settings: FCMSendSettings
    public init(settings: FCMSendSettings) { self.settings = settings }
    public func makeAdapter() -> FCMAdapter { FCMAdapter(settings: settings) }
}
