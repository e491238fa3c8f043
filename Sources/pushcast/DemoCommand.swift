import Foundation
import PushcastAPNs
import PushcastCommandLine
import PushcastMock
import PushcastSystem
import PushcastWebPush

/// `pushcast demo`: a real mixed iOS, Android and web campaign against the embedded mock. It makes
/// a throw-away CA, APNs key pair and VAPID key, starts the mock on loopback with APNs, FCM (a
/// generated service account and its OAuth2 token endpoint) and Web Push (four push services'
/// names on one listener, reached with --connect-to), with realistic faults (latency, GOAWAY,
/// provider-token, bearer and VAPID checks), and sends data/demo/tokens.csv through `pushcast
/// send`'s own code path: iOS rows to APNs, Android rows to FCM, web rows by Web Push.
enum DemoCommand {
    static let spec = CommandSpec(
        name: "pushcast demo",
        summary: "Send the demo campaign (data/demo/tokens.csv: iOS, Android and web) to the embedded mock APNs, FCM and Web Push services and show what happened.",
        options: [
            .value("tokens", metavar: "FILE", help: "token file to send; made (100,000 iOS, Android and web rows) when missing, "
                   + "and the default file also when an older demo left it in another shape", defaultDescription: "data/demo/tokens.csv"),
            .value("payload", metavar: "FILE", help: "APNs payload template", defaultDescription: "data/demo/payload.json"),
            .value("fcm-payload", metavar: "FILE", help: "FCM message template", defaultDescription: "data/demo/fcm-message.json"),
            .value("webpush-payload", metavar: "FILE", help: "Web Push payload template", defaultDescription: "data/demo/webpush.json"),
            .value("rows", metavar: "N", help: "rows to generate when the token file is made", defaultDescription: "100000"),
            .value("write-web-rows", metavar: "FILE", help: "only write --rows web subscriptions to FILE (the four push services, keys the mock "
                   + "derives, every one answered 201) and exit: a Web Push benchmark's input"),
            .value("latency-ms", metavar: "MS", help: "mock answer latency", defaultDescription: "20"),
            .value("goaway-after", metavar: "N", help: "mock sends GOAWAY after N requests per connection", defaultDescription: "10000"),
            .value("connections", metavar: "N", help: "connections to APNs", defaultDescription: "4"),
            .value("fcm-connections", metavar: "N", help: "connections to FCM", defaultDescription: "4"),
            .value("out", metavar: "DIR", help: "where the results and prune files go", defaultDescription: "a new temporary directory"),
            .value("progress-interval", metavar: "TIME", help: "where stderr is not a terminal: a whole progress line every TIME", defaultDescription: "1s"),
            OperatorOptions.logFormat,
            .value("metrics-file", metavar: "FILE", help: "also write the campaign's Prometheus metrics here (as send --metrics-file)"),
            CommonOptions.io,
        ])

    /// data/demo/tokens.csv is the demo's own (gitignored) output: one that an older demo left
    /// behind (another header, or no Android or web rows, see DemoData.isCurrent) is written
    /// again, so that the demo never quietly leaves a provider out. Any other file named with --tokens is the user's and
    /// is only ever written when it is missing.
    static func writeDemoTokens(_ parsed: ParsedArguments, tokens: String, isDefault: Bool) throws {
        let exists = FileSystem.exists(tokens)
        let stale = exists && isDefault && !DemoData.isCurrent(path: tokens)
        if !exists || stale {
            let rows = try parsed.int("rows", default: 100_000, range: 1...10_000_000)
            Console.error("pushcast demo: writing \(rows) demo rows (iOS, Android and web) to \(tokens)"
                + (stale ? " (the file there is an older demo's)" : ""))
            try? FileSystem.createDirectories((tokens as NSString).deletingLastPathComponent)
            guard let text = DemoData.generate(rows: rows, seed: 2026) else {
                throw CommandFailure("cannot derive the demo's web subscription keys (OpenSSL failed)")
            }
            try CommonOptions.write(text, to: tokens)
        }
    }

    static func report(_ statistics: MockStatistics) {
        func statuses(_ counts: [Int: Int]) -> String {
            counts.keys.sorted().map { "\($0): \(counts[$0]!)" }.joined(separator: ", ")
        }
        Console.error("mock APNs: \(statistics.requests) requests (\(statuses(statistics.statusCounts))), \(statistics.connectionsAccepted) connections, "
            + "\(statistics.goAwaysSent) GOAWAYs, at most \(statistics.streamsOpenMax) streams open on one connection")
        let f = statistics.fcm
        Console.error("mock FCM:  \(f.requests) requests (\(statuses(f.statusCounts))), \(f.tokenRequests) token requests (\(f.tokensIssued) tokens issued), "
            + "\(f.connectionsAccepted) connections, \(f.goAwaysSent) GOAWAYs, at most \(f.streamsOpenMax) streams open on one connection")
        let w = statistics.webpush
        Console.error("mock Web Push: \(w.requests) requests (\(statuses(w.statusCounts))), \(w.connectionsAccepted) connections, "
            + "at most \(w.streamsOpenMax) streams open on one connection")
    }

    /// `--write-web-rows FILE`: the web subscriptions only, for a benchmark.
    static func writeWebRows(_ parsed: ParsedArguments, to path: String) throws -> ExitStatus {
        let rows = try parsed.int("rows", default: 100_000, range: 1...10_000_000)
        guard let text = DemoData.generateWeb(origins: DemoData.webOrigins, rows: rows, seed: 2026, kinds: []) else {
            throw CommandFailure("cannot derive the web subscription keys (OpenSSL failed)")
        }
        try CommonOptions.write(text, to: path)
        Console.error("pushcast demo: wrote \(rows) web subscriptions to \(path)")
        return .success
    }

    static func run(_ parsed: ParsedArguments) throws -> ExitStatus {
        if let path = parsed.value("write-web-rows") { return try writeWebRows(parsed, to: path) }
        let defaultTokens = "data/demo/tokens.csv"
        let tokens = parsed.value("tokens") ?? defaultTokens
        let payload = parsed.value("payload") ?? "data/demo/payload.json"
        let fcmPayload = parsed.value("fcm-payload") ?? "data/demo/fcm-message.json"
        try writeDemoTokens(parsed, tokens: tokens, isDefault: tokens == defaultTokens)
        let directory = try CommonOptions.makeTemporaryDirectory(prefix: "pushcast-demo")
        let out = parsed.value("out") ?? directory
        do { try FileSystem.createDirectories(out) } catch {
            throw CommandFailure(error.description)
        }

        // The mock: APNs token auth with a key pair made now; FCM with a service account made now
        // (the mock writes it, with its own token endpoint as token_uri); 20 ms latency and a
        // GOAWAY every 10,000 requests per connection on both.
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
        configuration.fcm = MockFCMConfiguration(credentials: .generated(directory: directory))
        configuration.webpush = MockWebPushConfiguration()
        configuration.certificateHosts += DemoData.webHosts
        let vapidPath = try writeVAPIDKey(directory: directory)
        let mock: MockServer
        do { mock = try MockServer(configuration: configuration) } catch { throw CommandFailure(error.description) }
        let caFile = directory + "/ca.pem"
        try CommonOptions.write(mock.authorityCertificatePEM!, to: caFile)
        guard let fcm = mock.fcm, let web = mock.webpush else {
            mock.stop()
            throw CommandFailure("the mock started without its FCM or Web Push listener")
        }
        let faults = "\(configuration.behavior.latencyNanoseconds / 1_000_000) ms latency, GOAWAY every \(configuration.behavior.goAwayAfter!) requests per connection"
        Console.error("pushcast demo: mock APNs on 127.0.0.1:\(mock.port): provider-token checks, \(faults)")
        Console.error("pushcast demo: mock FCM on 127.0.0.1:\(fcm.port) (project \(fcm.projectID)): OAuth2 token endpoint \(fcm.tokenURI), bearer checks, \(faults)")
        Console.error("pushcast demo: mock Web Push on 127.0.0.1:\(web.port) for \(DemoData.webOrigins.joined(separator: ", ")): VAPID checks, "
            + "every message decrypted, \(faults)")

        var arguments = [
            tokens, "--payload", payload, "--apns-topic", "com.example.shop",
            "--apns-key", keyPath, "--apns-key-id", keyID, "--apns-team-id", teamID,
            "--apns-endpoint", "https://127.0.0.1:\(mock.port)", "--ca-file", caFile,
            "--connections", String(try parsed.int("connections", default: 4, range: 1...256)),
            "--fcm-credentials", fcm.credentialsPath, "--fcm-payload", fcmPayload, "--fcm-endpoint", fcm.endpoint,
            "--fcm-connections", String(try parsed.int("fcm-connections", default: 4, range: 1...256)),
            "--webpush-payload", parsed.value("webpush-payload") ?? "data/demo/webpush.json",
            "--vapid-key", vapidPath, "--vapid-subject", "mailto:demo@example.com",
            "--workers", "1", "--campaign", "demo",
            "--results", out + "/tokens.results.ndjson", "--prune", out + "/tokens.prune.csv",
            "--summary", out + "/summary.json", "--progress", "--force",
        ] + DemoData.webHosts.flatMap { ["--connect-to", "\($0):443:127.0.0.1:\(web.port)"] }
            + OperatorOptions.demoArguments(parsed)
        if let io = parsed.value("io") { arguments += ["--io", io] }
        let status = try send(arguments, mock: mock)
        report(mock.stop())
        Console.error("summary: \(out)/summary.json")
        return status
    }

    /// A fresh VAPID key, written (0600) into `directory`; returns its path.
    static func writeVAPIDKey(directory: String) throws -> String {
        let path = directory + "/vapid.pem"
        do {
            guard let pem = try VAPIDKey.generate().key.pem(publicOnly: false) else { throw CommandFailure("cannot write the demo's VAPID key") }
            try CommonOptions.write(pem, to: path, secret: true)
        } catch let error as VAPIDKeyError {
            throw CommandFailure(error.description)
        }
        return path
    }

    /// `pushcast send` with `arguments`; the mock stops if it throws.
    static func send(_ arguments: [String], mock: MockServer) throws -> ExitStatus {
        switch try SendCommand.spec.parse(arguments) {
        case .arguments(let sendArguments):
            do { return try SendCommand.run(sendArguments, checkOnly: false) } catch {
                mock.stop()
                throw error
            }
        case .help:
            preconditionFailure("the demo never asks for help")
        }
    }
}
