import Foundation
import PushcastCommandLine
import PushcastMock
import PushcastReactor
import PushcastTransport
import PushcastWire

/// `pushcast demo`: real TLS + HTTP/2 traffic against the embedded mock, with realistic faults.
/// (The APNs campaign demo replaces the load with a token file once the APNs provider lands.)
enum DemoCommand {
    static let spec = CommandSpec(
        name: "pushcast demo",
        summary: "Start the embedded mock on loopback and drive real TLS/HTTP/2 traffic through the transport.",
        options: [
            .value("requests", short: "n", metavar: "N", help: "requests to send", defaultDescription: "100000"),
            .value("connections", short: "c", metavar: "N", help: "connections", defaultDescription: "4"),
            .value("streams", short: "m", metavar: "N", help: "streams per connection", defaultDescription: "100"),
            .value("latency-ms", metavar: "MS", help: "mock answer latency", defaultDescription: "20"),
            .value("goaway-after", metavar: "N", help: "mock sends GOAWAY after N requests per connection",
                   defaultDescription: "50000"),
            CommonOptions.io,
        ])

    static func run(_ parsed: ParsedArguments) throws -> ExitStatus {
        let requests = try parsed.int("requests", default: 100_000, range: 1...100_000_000)
        let connections = try parsed.int("connections", default: 4, range: 1...1024)
        let streams = try parsed.int("streams", default: 100, range: 1...10_000)
        let reactor = try CommonOptions.reactorConfiguration(parsed)
        let directory = try CommonOptions.makeTemporaryDirectory(prefix: "pushcast-demo")

        var configuration = MockServerConfiguration(certificate: .generated(directory: directory))
        configuration.workers = max(1, ResourceUsage.processorCount / 2)
        configuration.reactor = reactor
        configuration.behavior.latencyNanoseconds = UInt64(try parsed.int("latency-ms", default: 20, range: 0...10_000)) * 1_000_000
        configuration.behavior.goAwayAfter = try parsed.int("goaway-after", default: 50_000, range: 1...Int.max)
        let mock: MockServer
        do { mock = try MockServer(configuration: configuration) } catch { throw CommandFailure(error.description) }
        let caFile = directory + "/ca.pem"
        FileManager.default.createFile(atPath: caFile, contents: Data(mock.authorityCertificatePEM!.utf8))
        Console.error("pushcast demo: mock listening on 127.0.0.1:\(mock.port) (latency \(configuration.behavior.latencyNanoseconds / 1_000_000) ms, GOAWAY every \(configuration.behavior.goAwayAfter!) requests per connection, io=\(mock.backendKind.rawValue))")
        Console.error("pushcast demo: sending \(requests) requests over \(connections) connections x \(streams) streams ...")

        let endpoint = Endpoint(host: "127.0.0.1", port: mock.port)
        let client = ClientConfiguration(endpoint: endpoint, address: "127.0.0.1", tls: try CommonOptions.clientTLS(caFile: caFile),
                                         limits: .init(), reactor: reactor)
        let request = HTTP2Request(authority: endpoint.authority, path: BenchCommand.defaultPath,
                                   headers: [HTTP2Header("content-type", "application/json")],
                                   body: Array(BenchCommand.defaultBody.utf8))
        let load = LoadConfiguration(client: client, requests: requests, connections: connections, streams: streams,
                                     workers: max(1, ResourceUsage.processorCount / 2), request: request)
        let report: LoadReport
        do { report = try LoadGenerator.run(load) } catch {
            mock.stop()
            throw CommandFailure(error.description)
        }
        let statistics = mock.stop()
        Console.out(BenchCommand.text(report))
        Console.out("mock: \(statistics.requests) requests answered, \(statistics.connectionsAccepted) connections accepted, \(statistics.goAwaysSent) GOAWAYs sent, at most \(statistics.streamsOpenMax) streams open on one connection")
        let lost = report.requests - report.succeeded - report.failed
        guard lost == 0 else { throw CommandFailure("\(lost) requests have no outcome") }
        return report.failed == 0 ? .success : .someFailed
    }
}
