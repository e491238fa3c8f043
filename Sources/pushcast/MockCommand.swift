import Foundation
import PushcastCommandLine
import PushcastAPNs
import PushcastReactor
import PushcastMock

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
            .value("max-streams", metavar: "N", help: "SETTINGS_MAX_CONCURRENT_STREAMS advertised per connection",
                   defaultDescription: "1000"),
            .value("latency-ms", metavar: "MS", help: "delay every answer by this long", defaultDescription: "0"),
            .value("goaway-after", metavar: "N", help: "send GOAWAY on a connection after N requests on it"),
            .value("streams-after-reject", metavar: "N", help: "after a rejected request, lower the connection's max streams to N until the next accepted one (APNs does this with 1)"),
            .value("error-rate", metavar: "STATUS:P", help: "answer STATUS (429, 500 or 503) to a fraction P of good requests, e.g. 503:0.01"),
            .value("rate-limit", metavar: "N", help: "accept at most N requests per second in all; answer the rest 429"),
            .value("auth", metavar: "token|none", help: "token: verify the ES256 provider token and every APNs header, as APNs does; none: answer any POST (for h2load)",
                   defaultDescription: "token"),
            .value("apns-public-key", metavar: "FILE", help: "public key (PEM) that provider tokens must verify against"),
            .value("apns-key-id", metavar: "KID", help: "expected key ID (kid)"),
            .value("apns-team-id", metavar: "TEAM", help: "expected team ID (iss)"),
            .value("write-apns-key", metavar: "DIR", help: "without --apns-public-key: write the generated key pair here (apns-key.p8, apns-key.pub.pem); the second stdout line names them"),
            .value("log", metavar: "FILE", help: "write one NDJSON line per request (0600)"),
            .value("duration", metavar: "TIME", help: "stop by itself after this long (e.g. 30s)"),
            CommonOptions.io,
        ])

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
        configuration.host = parsed.value("host") ?? "127.0.0.1"
        configuration.port = UInt16(try parsed.int("port", default: 0, range: 0...65535))
        configuration.workers = try CommonOptions.workers(parsed)
        configuration.limits.streamsPerConnectionMax = try parsed.int("max-streams", default: 1000, range: 1...100_000)
        configuration.behavior.latencyNanoseconds = UInt64(try parsed.int("latency-ms", default: 0, range: 0...600_000)) * 1_000_000
        configuration.behavior.goAwayAfter = try parsed.int("goaway-after", range: 1...Int.max)
        configuration.reactor = try CommonOptions.reactorConfiguration(parsed)
        configuration.behavior.streamsAfterReject = try parsed.int("streams-after-reject", range: 1...100_000)
        configuration.behavior.rateLimitPerSecond = try parsed.int("rate-limit", range: 1...100_000_000)
        if let spec = parsed.value("error-rate") {
            let parts = spec.split(separator: ":")
            guard parts.count == 2, let status = Int(parts[0]), [429, 500, 503].contains(status),
                  let rate = Double(parts[1]), rate >= 0, rate <= 1 else {
                throw parsed.error("--error-rate must be STATUS:FRACTION with STATUS 429, 500 or 503, e.g. 503:0.01")
            }
            configuration.behavior.errorStatus = status
            configuration.behavior.errorRate = rate
        }
        configuration.logPath = parsed.value("log")
        var keyAnnouncement: String? = nil
        switch try parsed.choice("auth", from: ["token", "none"]) ?? "token" {
        case "none":
            configuration.behavior.authentication = .none
        default:
            let (verifier, announcement) = try makeVerifier(parsed)
            configuration.behavior.authentication = .token(verifier)
            keyAnnouncement = announcement
        }
        let duration = try parsed.duration("duration")

        // Block SIGINT/SIGTERM before any thread starts, so every worker inherits the mask and the
        // main thread alone takes them with sigwait.
        var signals = sigset_t()
        sigemptyset(&signals)
        sigaddset(&signals, SIGINT)
        sigaddset(&signals, SIGTERM)
        pthread_sigmask(SIG_BLOCK, &signals, nil)

        let server: MockServer
        do { server = try MockServer(configuration: configuration) } catch { throw CommandFailure(error.description) }
        if let path = parsed.value("write-ca"), let pem = server.authorityCertificatePEM {
            guard FileManager.default.createFile(atPath: path, contents: Data(pem.utf8)) else {
                server.stop()
                throw CommandFailure("cannot write the CA certificate to \(path)")
            }
        }
        Console.out("PORT=\(server.port)")
        if let keyAnnouncement { Console.out(keyAnnouncement) }
        Console.error("pushcast mock: listening on \(configuration.host):\(server.port) with \(configuration.workers) worker(s), io=\(server.backendKind.rawValue)")

        if let duration {
            let components = duration.components
            let deadline = DispatchTime.now() + .nanoseconds(Int(components.seconds) * 1_000_000_000 + Int(components.attoseconds / 1_000_000_000))
            DispatchQueue.global().asyncAfter(deadline: deadline) { kill(getpid(), SIGTERM) }
        }
        var received: Int32 = 0
        sigwait(&signals, &received)
        let statistics = server.stop()
        Console.out(statistics.json)
        for failure in server.workerFailures { Console.error("pushcast mock: \(failure)") }
        return server.workerFailures.isEmpty ? .success : .stopped
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
                return (try APNsJWTVerifier(publicKeyFile: publicKey, keyID: keyID, teamID: team, clock: clock), nil)
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
            guard FileManager.default.createFile(atPath: privatePath, contents: Data(pair.privateKeyPEM.utf8), attributes: [.posixPermissions: 0o600]),
                  FileManager.default.createFile(atPath: publicPath, contents: Data(pair.publicKeyPEM.utf8)) else {
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
