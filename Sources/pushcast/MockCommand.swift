import Foundation
import PushcastCommandLine
import PushcastAPNs
import PushcastCore
import PushcastSystem
import PushcastMock
import PushcastTransport

/// `pushcast mock`: the mock push server, in the foreground until SIGINT or SIGTERM.
enum MockCommand {
    static let spec = CommandSpec(
        name: "pushcast mock",
        summary: "Run the mock HTTP/2 push server (TLS, h2) that the demo, tests and benchmarks use.",
        options: [
            .value("host", metavar: "ADDR", help: "address to listen on", defaultDescription: "127.0.0.1"),
            .value("port", metavar: "N", help: "port to listen on; 0 picks a free one. The first stdout line is PORT=N",
                   defaultDescription: "0"),
            CommonOptions.workers,
            .value("cert", metavar: "FILE", help: "server certificate chain, PEM (with --key)"),
            .value("key", metavar: "FILE", help: "server private key, PEM (with --cert)"),
            .value("write-ca", metavar: "FILE", help: "write the throw-away CA certificate here, for clients' --ca-file"),
            .value("hosts", metavar: "LIST", help: "comma-separated host names and IP addresses the generated certificate is good for (replaces the default list)",
                   defaultDescription: MockServerConfiguration.defaultCertificateHosts.joined(separator: ",")),
            .value("max-streams", metavar: "N", help: "SETTINGS_MAX_CONCURRENT_STREAMS advertised per connection",
                   defaultDescription: "1000"),
            .value("latency-ms", metavar: "MS", help: "delay every answer by this long", defaultDescription: "0"),
            .value("goaway-after", metavar: "N", help: "send GOAWAY on a connection after N requests on it"),
            .value("streams-after-reject", metavar: "N", help: "after a rejected request, lower the connection's max streams to N until the next accepted one (APNs does this with 1)"),
            .value("error-rate", metavar: "STATUS:P", help: "answer STATUS (429, 500 or 503) to a fraction P of good requests, e.g. 503:0.01"),
            .value("rate-limit", metavar: "N", help: "accept at most N requests per second in all; answer the rest 429"),
            .value("misbehave", metavar: "MODE", help: "play a hostile server on every port (APNs, FCM and its token endpoint), for tests of a client's limits; "
                   + "refuse-all: RST_STREAM(REFUSED_STREAM) to every request; reset-all: RST_STREAM(INTERNAL_ERROR) to every request; "
                   + "goaway-zero: GOAWAY(last-stream-id 0) right after SETTINGS, then close; close-after-handshake: close the connection right after the TLS handshake; "
                   + "silent: take requests and never answer; garbage-after-preface: 64 bytes of 0xFF (not HTTP/2) after SETTINGS, then silence; "
                   + "huge-body: answer 200 with a body that never ends; huge-headers: answer 200 with a 2 MiB header block (HEADERS and CONTINUATION frames); "
                   + "trickle: answer normally, but write each connection's bytes one every 0.5 s from its first request on; "
                   + "window-zero: SETTINGS_INITIAL_WINDOW_SIZE 0 and never a WINDOW_UPDATE, so request bodies cannot be sent; "
                   + "answer-then-refuse: :status 200 HEADERS, then RST_STREAM(REFUSED_STREAM); answer-then-goaway: :status 200 HEADERS, then GOAWAY(last-stream-id 0) and close; "
                   + "close-half-answered: answer half of each read's requests, then close; ping-flood: 2,000 PINGs before each answer. "
                   + "pushcast send stops each with exit 2 and a diagnosis (docs/USAGE.md: the mock server)",
                   defaultDescription: "none"),
            .value("misbehave-after", metavar: "N", help: "with --misbehave: answer the first N requests (both ports together) normally, then turn bad: "
                   + "a per-request mode takes over open connections, the others close them and greet new ones. pushcast send then stops with exit 3 (resumable)"),
            .value("auth", metavar: "token|none", help: "token: verify the ES256 provider token and every APNs header, as APNs does, and FCM bearer tokens; none: answer any POST (for h2load), and FCM sends without a bearer",
                   defaultDescription: "token"),
            .value("client-ca", metavar: "FILE", help: "certificate auth, as APNs: the APNs port requires a client certificate that verifies against the CAs in this PEM file "
                   + "(a failed check fails the TLS handshake). A connection's topic is its certificate's subject UID (apns-topic must match it, or name it with a push type's suffix, "
                   + "else 400 BadTopic; without apns-topic the UID is used); a subject CN starting \"Apple Development IOS Push Services\" is good for sandbox only, "
                   + "\"Apple Production IOS Push Services\" for production only, any other (\"Apple Push Services\") for both, else 403 BadCertificateEnvironment. "
                   + "No provider token is checked; FCM is unaffected"),
            .value("apns-environment", metavar: "production|sandbox", help: "with --client-ca: the APNs host the mock plays, for the certificate's environment check",
                   defaultDescription: "production"),
            .flag("http1-only", help: "serve HTTP/1.1 only, as some push services do: TLS offers ALPN http/1.1 alone, connections are "
                  + "keep-alive, --goaway-after N ends one with Connection: close; the --misbehave modes are HTTP/2's and act on no HTTP/1.1 connection"),
            .flag("client-cert-403", help: "with --client-ca: let a client certificate that does not verify (expired, another CA) complete the handshake and answer its requests 403 BadCertificate"),
            .value("apns-public-key", metavar: "FILE", help: "public key (PEM) that provider tokens must verify against"),
            .value("apns-key-id", metavar: "KID", help: "expected key ID (kid)"),
            .value("apns-team-id", metavar: "TEAM", help: "expected team ID (iss)"),
            .value("write-apns-key", metavar: "DIR", help: "without --apns-public-key: write the generated key pair here (apns-key.p8, apns-key.pub.pem); the second stdout line names them"),
            .flag("fcm", help: "also serve FCM HTTP v1 on a second port: the OAuth2 token endpoint (POST /token) and POST /v1/projects/{project}/messages:send. "
                  + "Tokens starting dead answer 404 UNREGISTERED, bad0 400 INVALID_ARGUMENT, mism 403 SENDER_ID_MISMATCH, "
                  + "5030 503 once, 4290 429 QUOTA_EXCEEDED for that device with retry-after once, 4291 the same naming the project quota (as --rate-limit and --error-rate 429:P do). Any --fcm-* option implies it. A stdout line after the APNs lines names it: "
                  + "FCM_ENDPOINT=https://127.0.0.1:PORT FCM_CREDENTIALS=/path/fcm-service-account.json FCM_TOKEN_URI=https://127.0.0.1:PORT/token"),
            .value("fcm-port", metavar: "N", help: "FCM port; 0 picks a free one", defaultDescription: "0"),
            .value("fcm-max-streams", metavar: "N", help: "SETTINGS_MAX_CONCURRENT_STREAMS on FCM connections", defaultDescription: "100"),
            .value("fcm-service-account", metavar: "FILE", help: "verify OAuth2 assertions against this service account's key (its public half); without it a service account is generated"),
            .value("fcm-project", metavar: "ID", help: "project that sends must name", defaultDescription: "the service account's, or pushcast-demo"),
            .value("write-fcm-credentials", metavar: "DIR", help: "without --fcm-service-account: write the generated service account here as fcm-service-account.json (0600)",
                   defaultDescription: "a new temporary directory"),
            .value("fcm-token-ttl", metavar: "SECONDS", help: "lifetime (expires_in) of issued access tokens; an older bearer gets 401 UNAUTHENTICATED", defaultDescription: "3600"),
            .value("fcm-quota", metavar: "N/min", help: "the FCM project quota: sends over N in any rolling minute are answered 429 "
                   + "naming the project quota (ErrorInfo RATE_LIMIT_EXCEEDED), with a Retry-After of the seconds until there is room"),
            .value("fcm-retry-after", metavar: "SECONDS", help: "retry-after of 429 QUOTA_EXCEEDED answers (tokens starting 4290, --rate-limit, --error-rate 429:P)",
                   defaultDescription: "1"),
.flag("webpush", help: "also serve Web Push (RFC 8030) on a port of its own, for every origin the certificate names: POST <endpoint path> must carry "
                  + "Authorization: vapid t=…, k=… whose aud is the origin it arrived on (https://HOST:PORT), TTL, Content-Encoding: aes128gcm and at most 4096 bytes, "
                  + "and must decrypt with the subscription's keys (derived from the endpoint's path, or --webpush-subscriptions). "
                  + "An endpoint's first path segment starting gone answers 410, nf or 404 404, big 413, slow 429 with Retry-After: 1 once, busy 503 once; "
                  + "others 201 with a Location. Any --webpush-* option implies it. A stdout line names it: WEBPUSH_PORT=PORT WEBPUSH_ORIGIN=https://127.0.0.1:PORT"),
            .value("webpush-port", metavar: "N", help: "Web Push port; 0 picks a free one", defaultDescription: "0"),
            .value("webpush-http1-port", metavar: "N", help: "also serve Web Push on this port over HTTP/1.1 only (TLS offers ALPN http/1.1 alone; 0 picks a free one), "
                   + "as some push services do, with the same certificate, checks, statistics and log, so that https://HOST:N is an HTTP/1.1-only origin "
                   + "while --webpush-port stays HTTP/2. The Web Push stdout line then ends WEBPUSH_HTTP1_PORT=N WEBPUSH_HTTP1_ORIGIN=https://127.0.0.1:N"),
            .value("webpush-seed", metavar: "TEXT", help: "the seed the demo subscriptions' keys are derived from", defaultDescription: "pushcast-demo-webpush"),
            .value("webpush-subscriptions", metavar: "FILE", help: "also decrypt for these subscriptions: JSON lines of endpoint, private_key (base64url scalar) and auth (base64url)"),
            .value("log", metavar: "FILE", help: "write one NDJSON line per request (0600), with ts (wall ms), mono_ms, provider (apns|fcm|webpush), token and status; "
                   + "Web Push lines carry the endpoint and the decrypted payload's SHA-256 (payload_sha256)"),
            .value("duration", metavar: "TIME", help: "stop by itself after this long (e.g. 30s)"),
            CommonOptions.io,
        ])

    /// `--error-rate STATUS:FRACTION`.
    static func errorRate(_ parsed: ParsedArguments) throws -> (Int, Double)? {
        guard let spec = parsed.value("error-rate") else { return nil }
        let parts = spec.split(separator: ":")
        guard parts.count == 2, let status = Int(parts[0]), [429, 500, 503].contains(status),
              let rate = Double(parts[1]), rate >= 0, rate <= 1 else {
            throw parsed.error("--error-rate must be STATUS:FRACTION with STATUS 429, 500 or 503, e.g. 503:0.01")
        }
        return (status, rate)
    }

    /// `--hosts a,b,c`: the generated certificate's names; nil keeps the default list.
    static func certificateHosts(_ parsed: ParsedArguments) throws -> [String]? {
        guard let list = parsed.value("hosts") else { return nil }
        if parsed.contains("cert") { throw parsed.error("--hosts names the generated certificate's hosts; drop it with --cert/--key") }
        let hosts = list.split(separator: ",", omittingEmptySubsequences: false).map { String($0) }
        for host in hosts where host.isEmpty || host.utf8.contains(where: { $0 <= 0x20 || $0 >= 0x7F }) {
            throw parsed.error("--hosts must list host names or IP addresses separated by commas, not '\(list)'")
        }
        return hosts
    }

    static func run(_ parsed: ParsedArguments) throws -> ExitStatus {
        let certificate: MockCertificate
        switch (parsed.value("cert"), parsed.value("key")) {
        case (let cert?, let key?):
            certificate = .files(certificateChain: cert, privateKey: key)
            if parsed.value("write-ca") != nil {
                throw parsed.error("--write-ca needs the generated certificate; drop --cert/--key")
            }
        case (nil, nil):
            certificate = .generated(directory: try CommonOptions.makeTemporaryDirectory(prefix: "pushcast-mock"))
        default:
            throw parsed.error("--cert and --key go together")
        }
        var configuration = MockServerConfiguration(certificate: certificate)
        if let hosts = try certificateHosts(parsed) { configuration.certificateHosts = hosts }
        configuration.host = parsed.value("host") ?? "127.0.0.1"
        configuration.port = UInt16(try parsed.int("port", default: 0, range: 0...65535))
        configuration.workers = try CommonOptions.workers(parsed)
        configuration.limits.streamsPerConnectionMax = try parsed.int("max-streams", default: 1000, range: 1...100_000)
        configuration.reactor = try CommonOptions.reactorConfiguration(parsed)
        try readBehavior(parsed, into: &configuration)
        configuration.logPath = parsed.value("log")
        let checksCredentials = try parsed.choice("auth", from: ["token", "none"]) != "none"
        let keyAnnouncement = try configureAPNsAuthentication(parsed, checksCredentials: checksCredentials, &configuration)
        configuration.fcm = try makeFCMConfiguration(parsed, requiresBearer: checksCredentials)
        configuration.webpush = try makeWebPushConfiguration(parsed)
        let duration = try parsed.duration("duration")

        // Block SIGINT/SIGTERM before any thread starts, so every worker inherits the mask and the
        // main thread alone takes them with sigwait.
        StopSignals.blockForWaiting()

        let server: MockServer
        do { server = try MockServer(configuration: configuration) } catch { throw CommandFailure(error.description) }
        if let path = parsed.value("write-ca"), let pem = server.authorityCertificatePEM {
            do { try FileSystem.write(pem, to: path) } catch {
                server.stop()
                throw CommandFailure("cannot write the CA certificate to \(path)")
            }
        }
        Console.out("PORT=\(server.port)")
        if let keyAnnouncement { Console.out(keyAnnouncement) }
        for line in [server.fcm?.announcement, server.webpush?.announcement].compactMap({ $0 }) { Console.out(line) }
        describe(server, configuration)

        if let duration {
            let nanoseconds = CommonOptions.nanoseconds(duration)
            DispatchQueue.global().async {
                SystemClock.sleep(nanoseconds: nanoseconds)
                CurrentProcess.send(signal: SIGTERM)
            }
        }
        StopSignals.waitForStop()
        let statistics = server.stop()
        Console.out(statistics.json)
        for failure in server.workerFailures { Console.error("pushcast mock: \(failure)") }
        return server.workerFailures.isEmpty ? .success : .stopped
    }

    /// The faults and protocols the options ask for: latency, GOAWAY, stream limits, rate limit,
    /// error rate, HTTP/1.1 only, `--misbehave`.
    static func readBehavior(_ parsed: ParsedArguments, into configuration: inout MockServerConfiguration) throws {
        configuration.behavior.latencyNanoseconds = UInt64(try parsed.int("latency-ms", default: 0, range: 0...600_000)) * 1_000_000
        configuration.behavior.goAwayAfter = try parsed.int("goaway-after", range: 1...Int.max)
        configuration.behavior.streamsAfterReject = try parsed.int("streams-after-reject", range: 1...100_000)
        configuration.behavior.rateLimitPerSecond = try parsed.int("rate-limit", range: 1...100_000_000)
        if let (status, rate) = try errorRate(parsed) {
            configuration.behavior.errorStatus = status
            configuration.behavior.errorRate = rate
        }
        configuration.http1Only = parsed.flag("http1-only")
        configuration.misbehavior = try parsed.choice("misbehave", default: ServerMisbehavior.none)
        configuration.misbehaveAfter = try parsed.int("misbehave-after", range: 0...Int.max)
        if configuration.misbehaveAfter != nil && configuration.misbehavior == .none {
            throw parsed.error("--misbehave-after needs --misbehave MODE")
        }
    }

    /// The stderr lines that say what is listening, and how it behaves.
    static func describe(_ server: MockServer, _ configuration: MockServerConfiguration) {
        Console.error("pushcast mock: listening on \(configuration.host):\(server.port) with \(configuration.workers) worker(s), io=\(server.backendKind.rawValue)")
        if let fcm = server.fcm { Console.error("pushcast mock: FCM (project \(fcm.projectID)) on \(configuration.host):\(fcm.port)") }
        if let webpush = server.webpush {
            Console.error("pushcast mock: Web Push on \(configuration.host):\(webpush.port)"
                + (webpush.http1Port.map { ", HTTP/1.1 only on \(configuration.host):\($0)" } ?? ""))
        }
        if let clientCA = configuration.clientCAFile, case .certificate(let environment) = configuration.behavior.authentication {
            Console.error("pushcast mock: APNs certificate auth (\(environment.rawValue)): client certificates must verify against \(clientCA)")
        }
        if configuration.misbehavior != .none {
            Console.error("pushcast mock: misbehaving on purpose: \(configuration.misbehavior.rawValue)"
                + (configuration.misbehaveAfter.map { " after \($0) good answers" } ?? ""))
        }
    }

    /// How the APNs port authenticates: certificate auth with `--client-ca`, else the provider
    /// token (`--auth token`) or nothing (`--auth none`). Returns the stdout line naming a
    /// generated key pair, if one was made.
    static func configureAPNsAuthentication(_ parsed: ParsedArguments, checksCredentials: Bool,
                                            _ configuration: inout MockServerConfiguration) throws -> String? {
        guard let clientCA = parsed.value("client-ca") else {
            for option in ["apns-environment", "client-cert-403"] where parsed.contains(option) {
                throw parsed.error("--\(option) goes with --client-ca (certificate auth)")
            }
            guard checksCredentials else {
                configuration.behavior.authentication = .none
                return nil
            }
            let (verifier, announcement) = try makeVerifier(parsed)
            configuration.behavior.authentication = .token(verifier)
            return announcement
        }
        guard checksCredentials else { throw parsed.error("--client-ca is certificate auth; drop --auth none") }
        for option in ["apns-public-key", "apns-key-id", "apns-team-id", "write-apns-key"] where parsed.contains(option) {
            throw parsed.error("--\(option) is for provider tokens; with --client-ca the APNs port takes certificates only")
        }
        let environment = try parsed.choice("apns-environment", default: MockAPNsEnvironment.production)
        configuration.behavior.authentication = .certificate(environment)
        configuration.clientCAFile = clientCA
        configuration.admitsUnverifiedClientCertificates = parsed.flag("client-cert-403")
        return nil
    }

    /// The Web Push listener's settings, when `--webpush` or any `--webpush-*` option asks for one.
    static func makeWebPushConfiguration(_ parsed: ParsedArguments) throws -> MockWebPushConfiguration? {
        let options = ["webpush-port", "webpush-http1-port", "webpush-seed", "webpush-subscriptions"]
        guard parsed.flag("webpush") || options.contains(where: { parsed.contains($0) }) else { return nil }
        var webpush = MockWebPushConfiguration()
        webpush.port = UInt16(try parsed.int("webpush-port", default: 0, range: 0...65535))
        webpush.http1Port = try parsed.int("webpush-http1-port", range: 0...65535).map { UInt16($0) }
        // The workers share their port (SO_REUSEPORT): one port for both would split its connections.
        if let http1Port = webpush.http1Port, http1Port != 0, http1Port == webpush.port {
            throw parsed.error("--webpush-http1-port must differ from --webpush-port")
        }
        webpush.seed = parsed.value("webpush-seed")
        webpush.subscriptionsPath = parsed.value("webpush-subscriptions")
        return webpush
    }

    /// The FCM listener's settings, when `--fcm` or any `--fcm-*` option asks for one.
    static func makeFCMConfiguration(_ parsed: ParsedArguments, requiresBearer: Bool) throws -> MockFCMConfiguration? {
        let options = ["fcm-port", "fcm-max-streams", "fcm-service-account", "fcm-project", "write-fcm-credentials", "fcm-token-ttl", "fcm-retry-after",
                       "fcm-quota"]
        guard parsed.flag("fcm") || options.contains(where: { parsed.contains($0) }) else { return nil }
        let credentials: MockFCMCredentials
        if let path = parsed.value("fcm-service-account") {
            if parsed.contains("write-fcm-credentials") {
                throw parsed.error("--write-fcm-credentials writes a generated service account; drop it with --fcm-service-account")
            }
            credentials = .serviceAccount(path: path)
        } else {
            credentials = .generated(directory: try parsed.value("write-fcm-credentials") ?? CommonOptions.makeTemporaryDirectory(prefix: "pushcast-mock-fcm"))
        }
        var fcm = MockFCMConfiguration(credentials: credentials)
        fcm.port = UInt16(try parsed.int("fcm-port", default: 0, range: 0...65535))
        fcm.streamsPerConnectionMax = try parsed.int("fcm-max-streams", default: 100, range: 1...100_000)
        if let project = parsed.value("fcm-project") {
            guard !project.isEmpty, project.utf8.allSatisfy({ $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: ":")
                    || (0x30...0x39).contains($0) || (0x61...0x7A).contains($0) || (0x41...0x5A).contains($0) }) else {
                throw parsed.error("--fcm-project must be a Google project ID: letters, digits, '-', '.' or ':'")
            }
            fcm.projectID = project
        }
        fcm.tokenTTLSeconds = try parsed.int("fcm-token-ttl", default: 3600, range: 1...86_400)
        fcm.retryAfterSeconds = try parsed.int("fcm-retry-after", default: 1, range: 0...86_400)
        if let text = parsed.value("fcm-quota") {
            guard let perSecond = try? RateSpec.perSecond(text, part: text), perSecond * 60 >= 1 else {
                throw parsed.error("--fcm-quota: expected N/min (or N/s, N/h), e.g. 600000/min")
            }
            fcm.quotaPerMinute = Int((perSecond * 60).rounded())
        }
        fcm.requiresBearer = requiresBearer
        return fcm
    }

    /// The verifier for provider tokens: from the given public key, or from a key pair made now
    /// and written out so that a client can sign with it. Returns the stdout line naming the files.
    static func makeVerifier(_ parsed: ParsedArguments) throws -> (APNsJWTVerifier, String?) {
        let clock = SystemWallClock()
        if let publicKey = parsed.value("apns-public-key") {
            guard let keyID = parsed.value("apns-key-id"), let team = parsed.value("apns-team-id") else {
                throw parsed.error("--apns-public-key needs --apns-key-id and --apns-team-id")
            }
            do {
                return (try APNsJWTVerifier(publicKeyFile: publicKey, keyID: keyID, teamID: team, clock: clock, files: SecretFile.read), nil)
            } catch {
                throw CommandFailure(error.description)
            }
        }
        let keyID = parsed.value("apns-key-id") ?? "MOCKKEY001"
        let team = parsed.value("apns-team-id") ?? "MOCKTEAM01"
        let directory = try parsed.value("write-apns-key") ?? CommonOptions.makeTemporaryDirectory(prefix: "pushcast-mock-key")
        do {
            let pair = try APNsKeyPair.generate()
            let privatePath = directory + "/apns-key.p8", publicPath = directory + "/apns-key.pub.pem"
            do {
                try FileSystem.write(pair.privateKeyPEM, to: privatePath, secret: true)
                try FileSystem.write(pair.publicKeyPEM, to: publicPath)
            } catch {
                throw CommandFailure("cannot write the generated key pair into \(directory)")
            }
            let verifier = try APNsJWTVerifier(publicKeyPEM: pair.publicKeyPEM, keyID: keyID, teamID: team, clock: clock)
            return (verifier, "APNS_KEY=\(privatePath) APNS_KEY_ID=\(keyID) APNS_TEAM_ID=\(team)")
        } catch let error as CommandFailure {
            throw error
        } catch {
            throw CommandFailure("\(error)")
        }
    }
}
