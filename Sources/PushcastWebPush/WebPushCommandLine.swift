import PushcastCommandLine
import PushcastCore
import PushcastJSON
import PushcastProviderKit
import PushcastWire

/// Web Push's option group of `pushcast send` and `check`: the VAPID key and subject, the
/// payload template, the message headers, the subscription columns and each push service's
/// lane width.
public struct WebPushCommandLine: ProviderCommandLine {
    public init() {}
    public var id: ProviderID { .webpush }
    public var credentialHint: String { "--vapid-key with --vapid-subject and --webpush-payload" }

    public func fingerprintLines(_ parsed: ParsedArguments) -> [String] {
        ["webpush-ttl", "webpush-urgency", "webpush-topic"].map { "\($0)=\(parsed.value($0) ?? "")" }
    }

    public var options: [OptionSpec] {
        [
            .value("webpush-payload", metavar: "FILE", help: "Web Push payload template (any text, usually JSON; same placeholders; at most 3993 bytes rendered)"),
            .value("vapid-key", metavar: "FILE", help: "Web Push: the VAPID private key, a PEM file or the raw base64url key of the web-push tools"),
            .value("vapid-key-env", metavar: "VAR", help: "Web Push: the VAPID private key from this environment variable instead of a file"),
            .value("vapid-subject", metavar: "URI", help: "Web Push: the VAPID subject, mailto:you@example.com or an https:// URL"),
            .value("webpush-ttl", metavar: "SECONDS", help: "how long a push service keeps an undelivered message (TTL)",
                   defaultDescription: "\(WebPushMessageHeaders.ttlSecondsMax) (28 days)"),
            .value("webpush-urgency", metavar: "LEVEL", help: "Urgency: very-low, low, normal or high"),
            .value("webpush-topic", metavar: "WORD", help: "Topic: a newer message with the same topic replaces an undelivered one (32 base64url characters at most)"),
            .value("webpush-p256dh-column", metavar: "NAME", help: "the column holding each subscription's p256dh key",
                   defaultDescription: "p256dh, public_key or keys.p256dh"),
            .value("webpush-auth-column", metavar: "NAME", help: "the column holding each subscription's auth secret",
                   defaultDescription: "auth, auth_token or keys.auth"),
            .value("webpush-connections", metavar: "N", help: "connections to each push service", defaultDescription: "2"),
            .value("webpush-streams", metavar: "N", help: "cap on concurrent streams per push-service connection", defaultDescription: "100"),
        ]
    }

    /// Web Push is asked for by `--vapid-key` or `--vapid-key-env`; the key and subject are
    /// checked now.
    public func configure(_ parsed: ParsedArguments, context: ProviderContext) throws -> (any ProviderSetup)? {
        let file = parsed.value("vapid-key"), variable = parsed.value("vapid-key-env")
        guard file != nil || variable != nil else {
            if parsed.value("webpush-payload") != nil { throw parsed.error("--webpush-payload needs a VAPID key: --vapid-key FILE or --vapid-key-env VAR") }
            return nil
        }
        guard file == nil || variable == nil else { throw parsed.error("--vapid-key and --vapid-key-env: give one") }
        guard let subject = parsed.value("vapid-subject") else { throw parsed.error("--vapid-key needs --vapid-subject mailto:you@example.com or https://…") }
        let key: VAPIDKey
        do {
            if let file {
                key = try VAPIDKey.load(file: file, files: context.files)
            } else {
                guard var text = context.environment(variable!), !text.isEmpty else { throw VAPIDKeyError("$\(variable!) is not set") }
                key = try text.withUTF8 { bytes in
                    Result { () throws(VAPIDKeyError) in try VAPIDKey.read(UnsafeRawBufferPointer(bytes), source: "$\(variable!)") }
                }.get()
            }
        } catch {
            throw ProviderSetupError("\(error)")
        }
        let signer: VAPIDSigner
        let headers: WebPushMessageHeaders
        do {
            signer = try VAPIDSigner(key: key, subject: subject, clock: context.wallClock)
        } catch {
            throw parsed.error("--vapid-subject: \(error.description)")
        }
        do {
            let ttl = try parsed.int("webpush-ttl", default: WebPushMessageHeaders.ttlSecondsMax, range: 0...WebPushMessageHeaders.ttlSecondsMax)
            headers = try WebPushMessageHeaders(ttlSeconds: ttl, urgency: try parsed.value("webpush-urgency").map { text throws(WebPushHeaderError) in
                try WebPushMessageHeaders.urgency(text)
            }, topic: parsed.value("webpush-topic"))
        } catch let error as WebPushHeaderError {
            throw parsed.error(error.description)
        }
        return WebPushSetup(parsed: parsed, context: context, signer: signer, headers: headers)
    }
}

/// Web Push configured for one campaign: the VAPID signer every lane shares, and the headers.
final class WebPushSetup: ProviderSetup {
    private let parsed: ParsedArguments
    private let context: ProviderContext
    let signer: VAPIDSigner
    let headers: WebPushMessageHeaders

    init(parsed: ParsedArguments, context: ProviderContext, signer: VAPIDSigner, headers: WebPushMessageHeaders) {
        self.parsed = parsed
        self.context = context
        self.signer = signer
        self.headers = headers
    }

    var id: ProviderID { .webpush }
    var bodyName: String { "payload" }
    var template: TemplateOption {
        TemplateOption(option: "webpush-payload", what: "Web Push payload template",
                       missing: "--webpush-payload FILE is required with a VAPID key (the Web Push payload template)")
    }

    func rendering(template text: String, path: String, columns: [String]) throws -> any ProviderRendering {
        let template: PayloadTemplate
        do { template = try PayloadTemplate.compile(text: text, columns: columns) } catch { throw ProviderSetupError("\(path): \(error.description)") }
        let found = WebPushColumns(columns: columns, p256dhColumn: parsed.value("webpush-p256dh-column"), authColumn: parsed.value("webpush-auth-column"))
        for option in ["webpush-p256dh-column", "webpush-auth-column"] {
            if let name = parsed.value(option), !columns.contains(where: { $0.lowercased() == name.lowercased() }) {
                throw parsed.error("--\(option) \(name): no such column (columns: \(columns.joined(separator: ", ")))")
            }
        }
        return WebPushRendering(template: template, columns: found)
    }

    /// The VAPID key signs a token (for a test audience); its public key is the `k` browsers
    /// subscribed with.
    func credentialLines() throws -> [String] {
        guard signer.authorization(origin: "https://push.example") != nil else { throw ProviderSetupError("the VAPID key cannot sign") }
        return ["Web Push VAPID key: k=\(signer.key.publicKeyText), subject \(signer.subject); a test token signed",
                "Web Push headers: " + headers.fields.map { "\($0.name): \($0.value)" }.joined(separator: ", ")]
    }

    func firstRequestLine(sample: (redactedToken: String, messageID: String?)?) -> String? {
        guard let sample else { return nil }
        return "first Web Push request: POST \(sample.redactedToken) (aes128gcm, VAPID)"
    }

    /// The key is made into an OpenSSL key as the worker would: a point off the curve is
    /// refused (RFC 8291 §7). (The payload's size was checked when it was rendered: at most
    /// 3,993 bytes, which encrypt to one 4096-byte record.)
    func sendProblem(body: [UInt8]) -> RowProblem? {
        guard body.count >= WebPushRendering.keyBytes,
              body.withUnsafeBytes({ P256Key.publicKey(point: UnsafeRawBufferPointer(rebasing: $0[0..<P256Key.pointBytes])) }) != nil else {
            return WebPushAdapter.offCurve
        }
        return nil
    }

    /// The payload, and the size of the body it encrypts to; never the keys.
    func bodyText(_ body: [UInt8]) -> String {
        let payload = body.dropFirst(WebPushRendering.keyBytes)
        return String(decoding: payload, as: UTF8.self) + " (\(WebPushContentCoding.bodyBytes(plaintextBytes: payload.count)) bytes encrypted, aes128gcm)"
    }

    func connection() throws -> ProviderConnection {
        throw ProviderSetupError("Web Push connects to each push service: a lane per origin")
    }

    /// `route`: the origin, `https://host[:port]`.
    func connection(route: String) throws -> ProviderConnection {
        let endpoint: Endpoint
        do { endpoint = try Endpoint(url: route) } catch { throw ProviderSetupError("\(route): \(error.description)") }
        let tls: TLSContext
        // HTTP/2 where the push service offers it, HTTP/1.1 (keep-alive, one request at a time per
        // connection) where it offers only that (Apple documents both).
        var configuration = context.trust
        configuration.alpnProtocols = ["h2", TLSContext.http1]
        do { tls = try TLSContext(role: .client, configuration: configuration, files: context.files) } catch {
            throw ProviderSetupError(error.description)
        }
        return ProviderConnection(endpoint: endpoint, tls: tls, connections: try parsed.int("webpush-connections", default: 2, range: 1...64),
                                  streams: try parsed.int("webpush-streams", default: 100, range: 1...100_000),
                                  responseHeaders: ["location", "retry-after", "content-type"], responseHeadersOnSuccess: true)
    }

    func start(onFatal: @escaping @Sendable (String) -> Void) throws -> any AdapterFactory {
        try adapters(route: "https://push.invalid")
    }

    func adapters(route: String) throws -> any AdapterFactory {
        let endpoint: Endpoint
        do { endpoint = try Endpoint(url: route) } catch { throw ProviderSetupError("\(route): \(error.description)") }
        return WebPushAdapterFactory(settings: WebPushSendSettings(authority: endpoint.authority,
                                                                   credential: WebPushLaneCredential(origin: route, signer: signer), headers: headers))
    }

    func finish() -> String? { "webpush: \(signer.signatureCount) VAPID tokens signed" }
}
