import PushcastCommandLine
import PushcastCore
import PushcastJSON
import PushcastProviderKit
import PushcastWire

/// APNs's option group of `pushcast send` and `check`: the payload template, the headers, token
/// or certificate authentication, the environment, and the lane's width.
public struct APNsCommandLine: ProviderCommandLine {
    public init() {}
    public var id: ProviderID { .apns }
    public var credentialHint: String { "--apns-key/--apns-key-id/--apns-team-id or --apns-cert, with --payload" }

    public func fingerprintLines(_ parsed: ParsedArguments) -> [String] {
        ["apns-topic", "push-type", "priority", "expiration", "collapse-id"].map { "\($0)=\(parsed.value($0) ?? "")" }
    }

    public var options: [OptionSpec] {
        [
            .value("payload", metavar: "FILE", help: "APNs payload template (JSON; string values may hold {{column}} placeholders)"),
            .value("apns-topic", metavar: "BUNDLE_ID", help: "apns-topic (the push type's suffix is added when missing)"),
            .value("push-type", metavar: "TYPE", help: "alert, background, voip, complication, fileprovider, mdm, liveactivity, location, pushtotalk, widgets, controls",
                   defaultDescription: "alert"),
            .value("priority", metavar: "10|5|1", help: "apns-priority (background forces 5)", defaultDescription: "10"),
            .value("expiration", metavar: "SECONDS|EPOCH", help: "seconds from now, or an absolute epoch; 0 means deliver once"),
            .value("collapse-id", metavar: "ID", help: "apns-collapse-id (at most 64 bytes)"),
            .value("apns-key", metavar: "FILE.p8", help: "token auth: the .p8 signing key (with --apns-key-id and --apns-team-id)"),
            .value("apns-key-id", metavar: "KID", help: "token auth: the 10-character key ID"),
            .value("apns-team-id", metavar: "TEAM", help: "token auth: the 10-character team ID"),
            .value("apns-cert", metavar: "FILE", help: "certificate auth: .p12 or .pem (certificate and key)"),
            .value("apns-cert-password-env", metavar: "VAR", help: "environment variable holding the certificate's passphrase"),
            .value("apns-environment", metavar: "production|sandbox", help: "api.push.apple.com or api.sandbox.push.apple.com", defaultDescription: "production"),
            .value("apns-endpoint", metavar: "URL", help: "https://host:port overriding the environment's host (mocks)"),
            .value("connections", metavar: "N", help: "connections to APNs", defaultDescription: "4"),
            .value("streams", metavar: "N", help: "cap on concurrent streams per APNs connection (the server's SETTINGS may lower it)", defaultDescription: "1000"),
        ]
    }

    /// APNs is asked for by its credentials or by `--payload`. Token auth's key is loaded now.
    public func configure(_ parsed: ParsedArguments, context: ProviderContext) throws -> (any ProviderSetup)? {
        let tokenSource = try Self.tokenSource(parsed, context: context)
        let hasCertificate = parsed.value("apns-cert") != nil
        if tokenSource != nil && hasCertificate { throw parsed.error("choose token auth (--apns-key) or certificate auth (--apns-cert), not both") }
        guard tokenSource != nil || hasCertificate || parsed.value("payload") != nil else { return nil }
        return APNsSetup(parsed: parsed, context: context, tokenSource: tokenSource)
    }

    static func tokenSource(_ parsed: ParsedArguments, context: ProviderContext) throws -> APNsTokenSource? {
        let key = parsed.value("apns-key"), keyID = parsed.value("apns-key-id"), team = parsed.value("apns-team-id")
        if key == nil && keyID == nil && team == nil { return nil }
        guard let key, let keyID, let team else {
            throw parsed.error("token auth needs --apns-key, --apns-key-id and --apns-team-id together")
        }
        do {
            return try APNsTokenSource(keyFile: key, keyID: keyID, teamID: team, clock: context.wallClock, files: context.files)
        } catch {
            throw ProviderSetupError(error.description)
        }
    }
}

/// APNs configured for one campaign. The headers and the endpoint are read when the template is
/// compiled, after the input's header: the order in which a command line's mistakes are reported.
final class APNsSetup: ProviderSetup {
    private let parsed: ParsedArguments
    private let context: ProviderContext
    private let tokenSource: APNsTokenSource?
    private var settings: APNsSendSettings?
    private var endpoint: Endpoint?

    init(parsed: ParsedArguments, context: ProviderContext, tokenSource: APNsTokenSource?) {
        self.parsed = parsed
        self.context = context
        self.tokenSource = tokenSource
    }

    var id: ProviderID { .apns }
    var bodyName: String { "payload" }
    var template: TemplateOption {
        TemplateOption(option: "payload", what: "payload template", missing: "--payload FILE is required (the APNs payload template)")
    }

    func rendering(template text: String, path: String, columns: [String]) throws -> any ProviderRendering {
        let template: PayloadTemplate
        do { template = try PayloadTemplate.compile(text: text, columns: columns) } catch { throw ProviderSetupError("\(path): \(error.description)") }
        let headers = try makeHeaders()
        let endpoint = try makeEndpoint()
        self.endpoint = endpoint
        settings = APNsSendSettings(headers: headers, tokenSource: tokenSource, authority: endpoint.authority)
        return APNsRendering(template: template, payloadBytesMax: headers.pushType.payloadBytesMax)
    }

    func requireSendable() throws {
        if tokenSource == nil && parsed.value("apns-cert") == nil {
            throw parsed.error("APNs credentials are required with --payload: --apns-key/--apns-key-id/--apns-team-id, or --apns-cert")
        }
    }

    func credentialLines() throws -> [String] {
        var lines: [String] = []
        if let source = tokenSource {
            _ = source.current()
            lines.append("APNs provider token: signed with key \(source.keyID), team \(source.teamID)")
        }
        if let certificate = parsed.value("apns-cert"), let settings {
            // Loading it proves the file and its passphrase; nothing connects.
            _ = try tlsContext(trust: TLSConfiguration(), topic: settings.headers.topic)
            lines.append("APNs client certificate: \(certificate) loaded (topic \(settings.headers.topic))")
        }
        return lines
    }

    func firstRequestLine(sample: (redactedToken: String, messageID: String?)?) -> String? {
        guard let settings, let sample else { return nil }
        return "first APNs request: POST /3/device/\(sample.redactedToken) apns-id \(sample.messageID ?? ""), headers: "
            + settings.headers.fixedHeaders.map { "\($0.name): \($0.value)" }.joined(separator: ", ")
    }

    func connection() throws -> ProviderConnection {
        guard let settings, let endpoint else { throw ProviderSetupError("APNs: the payload template was not compiled") }
        return ProviderConnection(endpoint: endpoint, tls: try tlsContext(trust: context.trust, topic: settings.headers.topic),
                                  connections: try parsed.int("connections", default: 4, range: 1...1024),
                                  streams: try parsed.int("streams", default: 1000, range: 1...100_000),
                                  responseHeaders: ["apns-id", "apns-unique-id", "retry-after", "content-type"])
    }

    func start(onFatal: @escaping @Sendable (String) -> Void) throws -> any AdapterFactory {
        guard let settings else { throw ProviderSetupError("APNs: the payload template was not compiled") }
        return APNsAdapterFactory(settings: settings)
    }

    private func makeHeaders() throws -> APNsCampaignHeaders {
        guard let topic = parsed.value("apns-topic") else { throw parsed.error("--apns-topic is required (the app's bundle ID)") }
        var pushType = APNsPushType.alert
        if let name = parsed.value("push-type") {
            guard let named = APNsPushType(rawValue: name) else {
                throw parsed.error("--push-type: unknown push type '\(name)' (expected one of \(APNsPushType.allCases.map(\.rawValue).joined(separator: ", ")))")
            }
            pushType = named
        }
        guard let priority = APNsPriority(rawValue: try parsed.int("priority", default: 10)) else { throw parsed.error("--priority must be 10, 5 or 1") }
        let headers: APNsCampaignHeaders
        do {
            let expiration = try parsed.value("expiration").map { text throws(APNsHeaderError) in try APNsExpiration.parse(text) } ?? .unspecified
            headers = try APNsCampaignHeaders(topic: topic, pushType: pushType, priority: priority, expiration: expiration,
                                              collapseID: parsed.value("collapse-id"), nowEpochSeconds: context.wallClock.secondsSinceEpoch())
        } catch {
            throw parsed.error(error.description)
        }
        for note in headers.notes { context.notice("pushcast: note: \(note)") }
        return headers
    }

    private func makeEndpoint() throws -> Endpoint {
        if let url = parsed.value("apns-endpoint") {
            do { return try Endpoint(url: url) } catch { throw parsed.error("--apns-endpoint: \(error.description)") }
        }
        switch try parsed.choice("apns-environment", from: ["production", "sandbox", "development"]) ?? "production" {
        case "production": return Endpoint(host: "api.push.apple.com", port: 443)
        default: return Endpoint(host: "api.sandbox.push.apple.com", port: 443)
        }
    }

    /// The client's TLS context: `trust`, plus with `--apns-cert` the certificate and key
    /// (.p12/.pfx, or PEM holding both) opened with the passphrase from `--apns-cert-password-env`.
    /// Messages name the variable, never its value; a certificate that APNs is bound to refuse
    /// (expired, for another topic) is warned about before connecting.
    private func tlsContext(trust: TLSConfiguration, topic: String) throws -> TLSContext {
        var configuration = trust
        let variable = parsed.value("apns-cert-password-env")
        if let certificate = parsed.value("apns-cert") {
            var passphrase: String? = nil
            if let variable {
                guard let value = context.environment(variable) else {
                    throw ProviderSetupError("--apns-cert-password-env: the environment variable \(variable) is not set")
                }
                passphrase = value
            }
            configuration.clientCertificate = .file(certificate, passphrase: passphrase)
        }
        let tls: TLSContext
        do { tls = try TLSContext(role: .client, configuration: configuration, files: context.files) } catch {
            // A key or bundle the passphrase did not open (TLSCredentials says so): say where it came from.
            var text = error.description
            if configuration.clientCertificate != nil && text.contains("passphrase") {
                text += variable.map { "; the passphrase was read from $\($0) (--apns-cert-password-env)" }
                    ?? "; give it in an environment variable named with --apns-cert-password-env VAR"
            }
            throw ProviderSetupError(text)
        }
        if let own = tls.ownCertificate {
            // APNs refuses the first in the handshake, and answers the second BadTopic unless the
            // certificate lists the topic among others.
            if let problem = own.verificationError { context.notice("pushcast: warning: --apns-cert: \(problem)") }
            if let uid = own.subjectUID, topic != uid && !topic.hasPrefix(uid + ".") {
                context.notice("pushcast: warning: --apns-topic \(topic) is not the certificate's topic (subject UID \(uid))")
            }
        }
        return tls
    }
}

/// Each worker's APNs adapter, over the campaign's shared settings.
public struct APNsAdapterFactory: AdapterFactory {
    public let settings: APNsSendSettings
    public init(settings: APNsSendSettings) { self.settings = settings }
    public func makeAdapter() -> APNsAdapter { APNsAdapter(settings: settings) }
}
