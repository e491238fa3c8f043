import Foundation
import PushcastCommandLine
import PushcastMock
import PushcastReactor
import PushcastSystem
import PushcastTransport
import PushcastWire

/// `pushcast bench`: an h2load-style load generator on the real send path.
enum BenchCommand {
    static let defaultPath = "/3/device/" + String(repeating: "a1b2c3d4", count: 8)
    static let defaultBody = #"{"aps":{"alert":{"title":"pushcast","body":"benchmark"}}}"#

    static let spec = CommandSpec(
        name: "pushcast bench",
        summary: "Send N POSTs over C connections x M streams and report rate, latency and CPU per request.",
        options: [
            .value("endpoint", metavar: "URL", help: "https://host:port to load; without it an embedded mock is started"),
            .value("path", metavar: "PATH", help: "request path", defaultDescription: defaultPath),
            .value("requests", short: "n", metavar: "N", help: "number of requests", defaultDescription: "100000"),
            .value("connections", short: "c", metavar: "N", help: "connections", defaultDescription: "4"),
            .value("streams", short: "m", metavar: "N", help: "max concurrent streams per connection (the server may allow fewer)",
                   defaultDescription: "100"),
            .value("data", short: "d", metavar: "FILE", help: "request body", defaultDescription: "a small APNs payload"),
            .value("header", short: "H", metavar: "'NAME: VALUE'", help: "extra request header", isRepeatable: true),
            CommonOptions.caFile,
            CommonOptions.io,
            CommonOptions.workers,
            .value("timeout", metavar: "TIME", help: "per-request deadline", defaultDescription: "30s"),
            .flag("json", help: "print the report as one JSON object"),
            .flag("apns", help: "APNs mode: N distinct synthetic tokens through the real send path (JWT, headers, outcomes, results file)"),
            .value("apns-key", metavar: "FILE.p8", help: "APNs mode against --endpoint: the signing key (with --apns-key-id, --apns-team-id)"),
            .value("apns-key-id", metavar: "KID", help: "APNs mode: key ID"),
            .value("apns-team-id", metavar: "TEAM", help: "APNs mode: team ID"),
            .value("apns-topic", metavar: "TOPIC", help: "APNs mode: apns-topic", defaultDescription: "com.example.bench"),
        ])

    static func run(_ parsed: ParsedArguments) throws -> ExitStatus {
        let requests = try parsed.int("requests", default: 100_000, range: 1...1_000_000_000)
        let connections = try parsed.int("connections", default: 4, range: 1...4096)
        let streams = try parsed.int("streams", default: 100, range: 1...100_000)
        let path = parsed.value("path") ?? defaultPath
        guard path.hasPrefix("/") else { throw parsed.error("--path must start with '/'") }
        var body = Array(defaultBody.utf8)
        if let file = parsed.value("data") {
            guard let data = (try? readWholeFile(file)) ?? nil else { throw CommandFailure("cannot read --data file \(file)") }
            body = data
        }
        var headers = [HTTP2Header("content-type", "application/json")]
        for h in parsed.values("header") {
            guard let colon = h.firstIndex(of: ":"), colon != h.startIndex else { throw parsed.error("--header must be 'name: value', got '\(h)'") }
            headers.append(HTTP2Header(h[..<colon].lowercased(), h[h.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
        }
        let reactor = try CommonOptions.reactorConfiguration(parsed)
        let workers = try CommonOptions.workers(parsed)
        let timeout = try parsed.duration("timeout", default: .seconds(30))
        if parsed.flag("apns") || parsed.value("apns-key") != nil {
            return try BenchAPNs.run(parsed, requests: requests, connections: connections, streams: streams, workers: workers,
                                     reactor: reactor, body: parsed.value("data") == nil ? nil : body, timeout: timeout)
        }

        // Without an endpoint, start the embedded mock on loopback and trust its throw-away CA.
        var mock: MockServer? = nil
        var endpoint: Endpoint
        var caFile = parsed.value("ca-file")
        if let url = parsed.value("endpoint") {
            do { endpoint = try Endpoint(url: url) } catch { throw parsed.error(error.description) }
        } else {
            let directory = try CommonOptions.makeTemporaryDirectory(prefix: "pushcast-bench")
            var configuration = MockServerConfiguration(certificate: .generated(directory: directory))
            configuration.workers = workers
            configuration.reactor = reactor
            do { mock = try MockServer(configuration: configuration) } catch { throw CommandFailure(error.description) }
            caFile = directory + "/ca.pem"
            try CommonOptions.write(mock!.authorityCertificatePEM!, to: caFile!)
            endpoint = Endpoint(host: "127.0.0.1", port: mock!.port)
        }
        defer { mock?.stop() }

        let address: String
        do { address = try AddressResolution.resolve(host: endpoint.host) } catch { throw CommandFailure(error.description) }
        var client = ClientConfiguration(endpoint: endpoint, address: address, tls: try CommonOptions.clientTLS(caFile: caFile),
                                         limits: .init(), reactor: reactor)
        client.limits.requestTimeoutNanoseconds = CommonOptions.nanoseconds(timeout)
        // The -H headers travel as the campaign's fixed headers do (one template for every request),
        // so the bench measures the send's transport, `authorization` as a raw literal included.
        var request = HTTP2Request(authority: endpoint.authority, path: path, body: body)
        request.fixedHeaders = headers.isEmpty ? nil : HTTP2HeaderTemplate(headers)
        let load = LoadConfiguration(client: client, requests: requests, connections: connections, streams: streams,
                                     workers: workers, request: request)
        let report: LoadReport
        do { report = try LoadGenerator.run(load) } catch { throw CommandFailure(error.description) }
        Console.out(parsed.flag("json") ? json(report) : text(report))
        return report.failed == 0 ? .success : .someFailed
    }

    static func text(_ r: LoadReport) -> String {
        let l = r.latencyMicroseconds
        let statuses = r.statusCounts.keys.sorted().map { "\(r.statusCounts[$0]!) \($0)" }.joined(separator: ", ")
        var lines = [
            String(format: "finished in %.2fs, %.2f req/s", r.seconds, r.requestsPerSecond),
            "requests: \(r.requests) total, \(r.succeeded) succeeded, \(r.failed) failed, \(r.retried) retried",
            "status codes: \(statuses.isEmpty ? "none" : statuses)",
            "latency (us): min \(l.minimum == .max ? 0 : l.minimum), p50 \(l.value(atQuantile: 0.5)), p99 \(l.value(atQuantile: 0.99)), max \(l.maximum), mean \(Int(l.mean))",
            String(format: "client CPU: %.2f us per request (%.0f ms user+sys)", r.cpuMicrosecondsPerRequest, Double(r.cpuMicroseconds) / 1000),
            "connections: \(r.connections), streams per connection: \(r.streams), most in flight on one connection: \(r.streamsInFlightMax), io: \(r.io.rawValue)",
            "peak RSS: \(r.peakResidentKibibytes / 1024) MiB",
        ]
        if !r.failureCounts.isEmpty {
            lines.append("failures: " + r.failureCounts.keys.sorted().map { "\(r.failureCounts[$0]!) \($0)" }.joined(separator: ", "))
        }
        if r.goAwaysReceived > 0 { lines.append("GOAWAYs received: \(r.goAwaysReceived)") }
        return lines.joined(separator: "\n")
    }

    static func json(_ r: LoadReport) -> String {
        let l = r.latencyMicroseconds
        let statuses = r.statusCounts.keys.sorted().map { "\"\($0)\":\(r.statusCounts[$0]!)" }.joined(separator: ",")
        return "{\"requests\":\(r.requests),\"succeeded\":\(r.succeeded),\"failed\":\(r.failed),\"retried\":\(r.retried),"
            + "\"status\":{\(statuses)},\"seconds\":\(String(format: "%.4f", r.seconds)),"
            + "\"requests_per_second\":\(String(format: "%.2f", r.requestsPerSecond)),"
            + "\"latency_us\":{\"min\":\(l.minimum == .max ? 0 : l.minimum),\"p50\":\(l.value(atQuantile: 0.5)),\"p99\":\(l.value(atQuantile: 0.99)),\"max\":\(l.maximum)},"
            + "\"cpu_us_per_request\":\(String(format: "%.3f", r.cpuMicrosecondsPerRequest)),"
            + "\"connections\":\(r.connections),\"streams\":\(r.streams),\"streams_in_flight_max\":\(r.streamsInFlightMax),"
            + "\"goaways\":\(r.goAwaysReceived),\"io\":\"\(r.io.rawValue)\",\"peak_rss_kib\":\(r.peakResidentKibibytes)}"
    }
}
