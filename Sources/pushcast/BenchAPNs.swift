import Foundation
import PushcastAPNs
import PushcastCommandLine
import PushcastCore
import PushcastEngine
import PushcastInput
import PushcastJSON
import PushcastMock
import PushcastProviderKit
import PushcastProviders
import PushcastReactor
import PushcastSystem
import PushcastTransport
import PushcastWire

/// `pushcast bench --apns`: the whole send path (row parsing, template, apns-id, JWT, HTTP/2, TLS,
/// outcome classification, results line) over N synthetic tokens, measured like h2load.
enum BenchAPNs {
    /// The endpoint and credentials: given (--endpoint, --apns-key...), or an embedded mock with
    /// a key pair made now.
    static func target(_ parsed: ParsedArguments, directory: String, workers: Int,
                       reactor: ReactorConfiguration) throws -> (MockServer?, Endpoint, String?, APNsTokenSource) {
        var mock: MockServer? = nil
        let endpoint: Endpoint
        var caFile = parsed.value("ca-file")
        let tokenSource: APNsTokenSource
        if let url = parsed.value("endpoint") {
            do { endpoint = try Endpoint(url: url) } catch { throw parsed.error(error.description) }
            guard let key = parsed.value("apns-key"), let keyID = parsed.value("apns-key-id"), let team = parsed.value("apns-team-id") else {
                throw parsed.error("APNs mode against --endpoint needs --apns-key, --apns-key-id and --apns-team-id")
            }
            do { tokenSource = try APNsTokenSource(keyFile: key, keyID: keyID, teamID: team, clock: SystemWallClock(), files: SecretFile.read) } catch {
                throw CommandFailure(error.description)
            }
        } else {
            let (keyID, team) = ("BENCHKEY01", "BENCHTEAM1")
            do {
                let pair = try APNsKeyPair.generate()
                tokenSource = try APNsTokenSource(privateKeyPEM: pair.privateKeyPEM, keyID: keyID, teamID: team, clock: SystemWallClock())
                var configuration = MockServerConfiguration(certificate: .generated(directory: directory))
                configuration.workers = workers
                configuration.reactor = reactor
                configuration.behavior.authentication = .token(try APNsJWTVerifier(publicKeyPEM: pair.publicKeyPEM, keyID: keyID,
                                                                                   teamID: team, clock: SystemWallClock()))
                mock = try MockServer(configuration: configuration)
            } catch {
                throw CommandFailure("\(error)")
            }
            caFile = directory + "/ca.pem"
            try CommonOptions.write(mock!.authorityCertificatePEM!, to: caFile!)
            endpoint = Endpoint(host: "127.0.0.1", port: mock!.port)
        }
        return (mock, endpoint, caFile, tokenSource)
    }

    static func loadReport(_ summary: CampaignSummary, cpuMicroseconds: UInt64, after: ResourceUsage, requests: Int, connections: Int,
                           streams: Int, reactor: ReactorConfiguration, mock mockStatistics: MockStatistics?) -> LoadReport {
        var report = LoadReport()
        report.requests = requests
        report.succeeded = summary.outcomes[.delivered]
        report.statusCounts[200] = report.succeeded
        report.failed = summary.rows - report.succeeded
        report.retried = summary.retries
        report.latencyMicroseconds = summary.latencyMicroseconds
        report.seconds = summary.wallSeconds
        report.cpuMicroseconds = cpuMicroseconds
        report.peakResidentKibibytes = after.peakResidentKibibytes
        report.connections = connections
        report.streams = streams
        report.streamsInFlightMax = mockStatistics?.streamsOpenMax ?? 0
        report.io = reactor.backend ?? .uring
        for (kind, count) in summary.outcomes where kind != .delivered { report.failureCounts[kind.rawValue] = count }
        return report
    }

    static func run(_ parsed: ParsedArguments, requests: Int, connections: Int, streams: Int, workers: Int,
                    reactor: ReactorConfiguration, body: [UInt8]?, timeout: Duration) throws -> ExitStatus {
        let directory = try CommonOptions.makeTemporaryDirectory(prefix: "pushcast-bench-apns")
        defer { FileSystem.removeTree(directory) }
        let topic = parsed.value("apns-topic") ?? "com.example.bench"

        var (mock, endpoint, caFile, tokenSource) = try target(parsed, directory: directory, workers: workers, reactor: reactor)
        defer { mock?.stop() }

        // The same pieces `pushcast send` uses, fed from a generated token stream.
        let reader: TokenFileReader
        let template: PayloadTemplate
        let headers: APNsCampaignHeaders
        let layout: RowLayout
        do {
            reader = try TokenFileReader(source: SyntheticTokenSource(count: requests), format: .csv, fileName: "<synthetic>")
            let text = body.map { String(decoding: $0, as: UTF8.self) } ?? BenchCommand.defaultBody
            template = try PayloadTemplate.compile(text: text, columns: reader.columns)
            headers = try APNsCampaignHeaders(topic: topic, nowEpochSeconds: Int64(Machine.real.wallClockSeconds()))
            layout = try RowLayout(columns: reader.columns, idColumn: nil, defaultProvider: .apns, fileName: "<synthetic>")
        } catch {
            throw CommandFailure("\(error)")
        }
        // Duplicates are planned by a first read of the synthetic rows, as `send` does for a file.
        let renderings: [ProviderID: any ProviderRendering] = [.apns: APNsRendering(template: template, payloadBytesMax: 4096)]
        var keyer = RowPreparer(layout: layout, renderings: renderings, campaign: "bench", fileName: "<synthetic>", sends: [.apns],
                                recordsUnroutable: true, duplicates: .exact(expectedRows: 0), catalog: .standard)
        let duplicatePlan: DuplicatePlan
        do {
            var first = try TokenFileReader(source: SyntheticTokenSource(count: requests), format: .csv, fileName: "<synthetic>")
            duplicatePlan = try DuplicatePlan.build(reader: &first, expectedRows: requests, files: Machine.real.files, directory: Environment.temporaryDirectory) {
                keyer.duplicateHashes($0)
            }
        } catch {
            throw CommandFailure("\(error)")
        }
        let preparer = RowPreparer(layout: layout, renderings: renderings, campaign: "bench", fileName: "<synthetic>", sends: [.apns],
                                   recordsUnroutable: true, duplicates: .planned(duplicatePlan), catalog: .standard)
        let settings = APNsSendSettings(headers: headers, tokenSource: tokenSource, authority: endpoint.authority)
        let address: String
        do { address = try AddressResolution.resolve(host: endpoint.host) } catch { throw CommandFailure(error.description) }
        var client = ClientConfiguration(endpoint: endpoint, address: address, tls: try CommonOptions.clientTLS(caFile: caFile),
                                         limits: Limits(), reactor: reactor)
        client.limits.connectionsMax = connections
        client.limits.streamsPerConnectionMax = streams
        client.limits.responseHeadersKeptOnSuccess = false
        client.limits.requestTimeoutNanoseconds = UInt64(timeout.components.seconds) * 1_000_000_000
        let output = CampaignOutput(resultsPath: directory + "/results.ndjson", resultsFormat: .ndjson,
                                    prunePath: directory + "/prune.csv", summaryPath: nil, progress: false)
        let policy = SendPolicy(retry: RetryPolicy(), retryUnknown: false)
        let lane = ProviderLane(provider: .apns, client: client, connections: connections, workers: workers, policy: policy) { APNsAdapter(settings: settings) }
        let run = CampaignRun(feeds: [CampaignFeed(reader: reader, preparer: preparer)], lanes: [lane], output: output, machine: .real,
                              totalRows: requests, log: { _ in })
        let before = ResourceUsage.current()
        let summary: CampaignSummary
        do { summary = try run.run() } catch { throw CommandFailure(error.description) }
        let after = ResourceUsage.current()
        let mockStatistics = mock?.stop()
        mock = nil

        let report = loadReport(summary, cpuMicroseconds: after.cpuMicroseconds - before.cpuMicroseconds, after: after,
                                requests: requests, connections: connections, streams: streams, reactor: reactor, mock: mockStatistics)
        if mockStatistics != nil {
            // The embedded mock ran in this process: its CPU is not the client's.
            Console.error("pushcast bench: note: the embedded mock shares this process, so CPU per notification includes the server; pass --endpoint for client-only figures")
        }
        Console.out(parsed.flag("json") ? BenchCommand.json(report) : "mode: apns (full send path)\n" + BenchCommand.text(report))
        if let reason = summary.stoppedBecause { throw CommandFailure(reason) }
        return report.failed == 0 ? .success : .someFailed
    }
}
