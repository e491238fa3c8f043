import Foundation
import PushcastCommandLine
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
}
