import Foundation
import PushcastAPNs
import PushcastCommandLine
import PushcastMock
import PushcastReactor

/// `pushcast demo`: a real campaign against the embedded mock. It makes a throw-away CA and APNs
/// key pair, starts the mock on loopback with realistic faults (latency, GOAWAY, provider-token
/// checks), and sends data/demo/tokens.csv through `pushcast send`'s own code path.
enum DemoCommand {
    static let spec = CommandSpec(
        name: "pushcast demo",
        summary: "Send the demo campaign (data/demo/tokens.csv) to the embedded mock APNs and show what happened.",
        options: [
            .value("tokens", metavar: "FILE", help: "token file to send; made (100,000 rows) when missing", defaultDescription: "data/demo/tokens.csv"),
            .value("payload", metavar: "FILE", help: "payload template", defaultDescription: "data/demo/payload.json"),
            .value("rows", metavar: "N", help: "rows to generate when the token file is missing", defaultDescription: "100000"),
            .value("latency-ms", metavar: "MS", help: "mock answer latency", defaultDescription: "20"),
            .value("goaway-after", metavar: "N", help: "mock sends GOAWAY after N requests per connection", defaultDescription: "10000"),
            .value("connections", metavar: "N", help: "connections", defaultDescription: "4"),
            .value("out", metavar: "DIR", help: "where the results and prune files go", defaultDescription: "a new temporary directory"),
            CommonOptions.io,
        ])

    static func run(_ parsed: ParsedArguments) throws -> ExitStatus {
        let tokens = parsed.value("tokens") ?? "data/demo/tokens.csv"
        let payload = parsed.value("payload") ?? "data/demo/payload.json"
        if !FileManager.default.fileExists(atPath: tokens) {
            let rows = try parsed.int("rows", default: 100_000, range: 1...10_000_000)
            Console.error("pushcast demo: writing \(rows) demo rows to \(tokens)")
            try? FileManager.default.createDirectory(atPath: (tokens as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try CommonOptions.write(DemoData.generate(rows: rows, seed: 2026), to: tokens)
        }
        let directory = try CommonOptions.makeTemporaryDirectory(prefix: "pushcast-demo")
        let out = parsed.value("out") ?? directory

        // The mock: token auth with a key pair made now, 20 ms latency, GOAWAY every 50,000.
        let pair: APNsKeyPair
        do { pair = try APNsKeyPair.generate() } catch { throw CommandFailure(error.description) }
        let keyPath = directory + "/apns-key.p8"
        try CommonOptions.write(pair.privateKeyPEM, to: keyPath, secret: true)
        let (keyID, teamID) = ("DEMOKEY001", "DEMOTEAM01")
        var configuration = MockServerConfiguration(certificate: .generated(directory: directory))
        configuration.workers = max(1, ResourceUsage.processorCount / 2)
        configuration.reactor = try CommonOptions.reactorConfiguration(parsed)
        configuration.behavior.latencyNanoseconds = UInt64(try parsed.int("latency-ms", default: 20, range: 0...10_000)) * 1_000_000
        configuration.behavior.goAwayAfter = try parsed.int("goaway-after", default: 10_000, range: 1...Int.max)
        do {
            configuration.behavior.authentication = .token(try APNsJWTVerifier(publicKeyPEM: pair.publicKeyPEM, keyID: keyID, teamID: teamID,
                                                                               clock: SystemWallClock()))
        } catch {
            throw CommandFailure(error.description)
        }
        let mock: MockServer
        do { mock = try MockServer(configuration: configuration) } catch { throw CommandFailure(error.description) }
        let caFile = directory + "/ca.pem"
        try CommonOptions.write(mock.authorityCertificatePEM!, to: caFile)
        Console.error("pushcast demo: mock APNs on 127.0.0.1:\(mock.port): provider-token checks, \(configuration.behavior.latencyNanoseconds / 1_000_000) ms latency, GOAWAY every \(configuration.behavior.goAwayAfter!) requests per connection")

        var arguments = [
            tokens, "--payload", payload, "--apns-topic", "com.example.shop",
            "--apns-key", keyPath, "--apns-key-id", keyID, "--apns-team-id", teamID,
            "--apns-endpoint", "https://127.0.0.1:\(mock.port)", "--ca-file", caFile,
            "--connections", String(try parsed.int("connections", default: 4, range: 1...256)),
            "--workers", "1", "--campaign", "demo",
            "--results", out + "/tokens.results.ndjson", "--prune", out + "/tokens.prune.csv",
            "--summary", out + "/summary.json", "--progress",
        ]
        if let io = parsed.value("io") { arguments += ["--io", io] }
        let status: ExitStatus
        switch try SendCommand.spec.parse(arguments) {
        case .arguments(let sendArguments):
            do { status = try SendCommand.run(sendArguments, checkOnly: false) } catch {
                mock.stop()
                throw error
            }
        case .help:
            preconditionFailure("the demo never asks for help")
        }
        let statistics = mock.stop()
        let statuses = statistics.statusCounts.keys.sorted().map { "\($0): \(statistics.statusCounts[$0]!)" }.joined(separator: ", ")
        Console.error("mock: \(statistics.requests) requests (\(statuses)), \(statistics.connectionsAccepted) connections, \(statistics.goAwaysSent) GOAWAYs, at most \(statistics.streamsOpenMax) streams open on one connection")
        Console.error("summary: \(out)/summary.json")
        return status
    }
}
