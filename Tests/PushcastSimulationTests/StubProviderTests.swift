import PushcastAPNs
import PushcastCore
import PushcastEngine
import PushcastFCM
import PushcastInput
import PushcastJSON
import PushcastProviderKit
import PushcastProviders
import PushcastReactor
import PushcastSystem
import PushcastSimulation
import PushcastTransport
import PushcastWire
import XCTest

// A third push provider, defined only here: its id, its description, its renderer, its adapter
// and its simulated server. Nothing in Sources/ knows it; the test sends a whole campaign of
// APNs and "stub" rows through the real reader, preparer, lanes, workloads and outcome loop,
// against in-memory servers, and checks every row's one outcome and the results columns.

extension ProviderID {
    static let stub = ProviderID("stub", position: 2)
}

/// Tokens are 8 to 40 lower-case letters and digits; `web` and `browser` rows go here.
struct StubPushProvider: PushProvider {
    var id: ProviderID { .stub }
    var displayName: String { "Stub" }
    var platformAliases: [String] { ["web", "browser"] }
    var messageIDField: String { "stub_ref" }
    func normalize(token raw: UnsafeRawBufferPointer, into output: inout [UInt8]) -> TokenProblem? {
        let text = String(decoding: raw, as: UTF8.self).trimmingCharacters(in: .whitespaces).lowercased()
        guard (8...40).contains(text.count), text.allSatisfy({ $0.isLetter || $0.isNumber }), text.allSatisfy(\.isASCII) else {
            return TokenProblem("a stub token is 8 to 40 letters and digits")
        }
        output = Array(text.utf8)
        return nil
    }
}

/// The body is `{"to":"<token>","msg":<rendered template>}`; 256 bytes at most.
struct StubRendering: ProviderRendering {
    let template: PayloadTemplate
    func makeRenderer(campaign: String) -> any NotificationRenderer { Renderer(template) }

    final class Renderer: NotificationRenderer {
        let template: PayloadTemplate
        init(_ template: PayloadTemplate) { self.template = template }
        var bodyBytesMax: Int { 256 }
        var bodyName: String { "stub body" }
        func render(token: UnsafeRawBufferPointer, into buffer: inout [UInt8], field: (Int) -> UnsafeRawBufferPointer?) -> Int {
            buffer.append(contentsOf: #"{"to":""#.utf8)
            buffer.append(contentsOf: token)
            buffer.append(contentsOf: #"","msg":"#.utf8)
            _ = template.render(into: &buffer, value: field)
            buffer.append(UInt8(ascii: "}"))
            return buffer.count
        }
        func notificationID(token: UnsafeRawBufferPointer) -> PackedText? { nil }
    }
}

/// `POST /v1/push/<token>`; 200 with a `stub-ref` header, 410 for a dead token, 429/5xx to retry.
final class StubAdapter: ProviderAdapter {
    var provider: ProviderID { .stub }
    var layout: RequestLayout { RequestLayout(tokenInPath: true, idInHeader: false) }
    var credentialPollNanoseconds: UInt64 { 0 }
    var credentialReady: Bool { true }
    func makeRequest() -> HTTP2Request { HTTP2Request(authority: "push.stub.example", path: "/v1/push/") }
    func authorize(_ request: inout HTTP2Request) -> UInt64? { 0 }
    func classify(_ response: HTTP2Response) -> ProviderAnswer {
        let verdict: ProviderVerdict
        switch response.status {
        case 200: verdict = .delivered(messageID: response.headers.first { $0.name == "stub-ref" }?.value)
        case 410: verdict = .prune(reason: "Gone", unregisteredAt: nil)
        case 429, 500...599: verdict = .retry(reason: "Busy", retryAfterSeconds: nil, throttle: .none)
        default: verdict = .fail(reason: "Refused")
        }
        return ProviderAnswer(status: response.status, verdict: verdict)
    }
    func credentialRejected(generation: UInt64) -> CredentialDecision { .stop("the stub has no credentials") }
}

/// The stub's server side: `POST /v1/push/<token>`, 200 with a `stub-ref`, 410 for a device
/// the server says is gone, 405 / 404 for another method or path; faults as bare statuses.
final class StubResponder: ProviderResponder {
    var provider: ProviderID { .stub }
    var streamsBeforeCredentials: Int? { nil }
    func respond(to request: HTTP2ServerRequest, context: ProviderRequestContext) -> ProviderServerAnswer {
        guard request.method(is: "POST") else { return ProviderServerAnswer(status: 405, kind: .refused) }
        guard request.path.hasPrefix("/v1/push/"), !token(of: request).isEmpty else { return ProviderServerAnswer(status: 404, kind: .refused) }
        if context.device == .unregistered { return ProviderServerAnswer(status: 410, kind: .deviceGone, reason: "Gone") }
        return ProviderServerAnswer(status: 200, kind: .accepted, headers: [HTTP2Header("stub-ref", "ref-\(context.random.next() % 1_000_000)")])
    }
    func answer(_ fault: ProviderServerFault, to request: HTTP2ServerRequest, context: ProviderRequestContext) -> ProviderServerAnswer {
        switch fault {
        case .throttled: return ProviderServerAnswer(status: 429, kind: .busy)
        case .serverError(let status): return ProviderServerAnswer(status: status, kind: .busy)
        }
    }
    func token(of request: HTTP2ServerRequest) -> String {
        request.path.hasPrefix("/v1/push/") ? String(request.path.dropFirst(9)) : ""
    }
    func logMembers(_ request: HTTP2ServerRequest, _ answer: ProviderServerAnswer) -> String { #""status":\#(answer.status)"# }
}

final class StubProviderTests: XCTestCase {
    static let catalog = ProviderCatalog([APNsPushProvider(), FCMPushProvider(), StubPushProvider()])

    /// Rows: APNs, stub (by `web` and `browser`), a bad stub token, a repeated stub token, and an
    /// FCM row (FCM is in the catalog but not configured in this run).
    static func input(rows: Int) -> (csv: String, stubTokens: Set<String>) {
        var csv = "token,platform,name\n"
        var stub = Set<String>()
        for i in 1...rows {
            switch i % 6 {
            case 0: csv += "\(String(format: "%064x", i)),ios,n\(i)\n"
            case 1, 2:
                let token = "stub\(String(i, radix: 36))tok"
                stub.insert(token)
                csv += "\(token),\(i % 2 == 0 ? "web" : "Browser"),n\(i)\n"
            case 3: csv += "bad-token!,web,n\(i)\n"
            case 4: csv += "stub1tok,web,again\n"
            default: csv += "f\(i):APA91b,android,n\(i)\n"
            }
        }
        return (csv, stub)
    }

    func makeRun(_ csv: String, rows: Int, stubFaults: FaultModel) throws -> CampaignRun {
        let reader = try TokenFileReader(source: MemoryByteSource(Array(csv.utf8)), format: .csv, fileName: "stub.csv")
        let layout = try RowLayout(columns: reader.columns, idColumn: nil, defaultProvider: .apns, fileName: "stub.csv")
        let columns = reader.columns
        let renderings: [ProviderID: any ProviderRendering] = [
            .apns: APNsRendering(template: try PayloadTemplate.compile(text: #"{"aps":{"alert":"{{name}}"}}"#, columns: columns), payloadBytesMax: 4096),
            .stub: StubRendering(template: try PayloadTemplate.compile(text: #"{"text":"Hi {{name}}"}"#, columns: columns)),
        ]
        let preparer = RowPreparer(layout: layout, renderings: renderings, campaign: "stub", fileName: "stub.csv", sends: [.apns, .stub],
                                   recordsUnroutable: true, duplicates: .exact(expectedRows: rows), catalog: Self.catalog)
        let context = try TLSContext(role: .client, configuration: TLSConfiguration(), files: SecretFile.read)
        var limits = Limits()
        limits.streamsPerConnectionMax = 8
        // The real HTTP/2 client keeps only the response headers it is told to.
        limits.responseHeadersKept.append("stub-ref")
        func client(_ host: String) -> ClientConfiguration {
            ClientConfiguration(endpoint: Endpoint(host: host, port: 443), address: "127.0.0.1", tls: context, limits: limits,
                                reactor: ReactorConfiguration())
        }
        let policy = SendPolicy(retry: RetryPolicy(attemptsMax: 6), retryUnknown: false)
        let headers = try APNsCampaignHeaders(topic: "com.example.stub", nowEpochSeconds: 1_800_000_000)
        let settings = APNsSendSettings(headers: headers, tokenSource: nil, authority: "api.sim.apple")
        let apns = ProviderLane(provider: .apns, client: client("api.sim.apple"), connections: 1, workers: 1, policy: policy) {
            APNsAdapter(settings: settings)
        }
        let stub = ProviderLane(provider: .stub, client: client("push.stub.example"), connections: 2, workers: 1, policy: policy) {
            StubAdapter()
        }
        let output = CampaignOutput(resultsPath: "(memory)", resultsFormat: .ndjson, prunePath: "(memory)", summaryPath: nil, progress: false)
        return CampaignRun(feeds: [CampaignFeed(reader: reader, preparer: preparer)], lanes: [apns, stub], output: output, machine: .real,
                           totalRows: rows, log: { _ in })
    }

    func testAThirdProviderDefinedInTheTestTargetRunsAWholeCampaign() throws {
        let rows = 600
        let (csv, stubTokens) = Self.input(rows: rows)
        var faults = FaultModel()
        faults.status503 = 0.1
        faults.refuse = 0.05
        faults.deadTokens = 0.1
        let stubServer = SimulatedServer(responder: StubResponder(), model: faults, seed: 7)
        var calm = FaultModel()
        calm.deadTokens = 0
        let apnsServer = SimulatedServer(responder: CampaignSimulator.simulatedAPNs(), model: calm, seed: 8)
        let sink = RecordingSink()
        let (summary, cutShort) = CampaignSimulator.run(try makeRun(csv, rows: rows, stubFaults: faults),
                                                        servers: [.apns: apnsServer, .stub: stubServer], clock: ManualClock(), seed: 1, sink: sink)
        XCTAssertNil(cutShort)

        // Exactly one outcome per row.
        XCTAssertEqual(sink.records.map(\.row).sorted(), Array(1...rows))
        XCTAssertEqual(summary.rows, rows)
        let byRow = Dictionary(uniqueKeysWithValues: sink.records.map { ($0.row, $0) })
        for row in 1...rows {
            let r = byRow[row]!
            switch row % 6 {
            case 0: XCTAssertEqual(r.provider, .apns); XCTAssertEqual(r.outcome, .delivered)
            case 1, 2:
                XCTAssertEqual(r.provider, .stub, "row \(row)")
                XCTAssertTrue([.delivered, .pruned, .duplicate].contains(r.outcome), "row \(row): \(r)")
                if r.outcome == .delivered { XCTAssertEqual(r.messageID?.hasPrefix("ref-"), true, "row \(row)") }
                if r.outcome == .pruned { XCTAssertTrue(stubServer.isDead(r.token)); XCTAssertEqual(r.reason, "Gone") }
            case 3: XCTAssertEqual(r.outcome, .invalid); XCTAssertEqual(r.reason, OutcomeReason.invalidToken)
                XCTAssertEqual(r.error?.contains("a stub token is 8 to 40 letters and digits"), true)
            case 4: XCTAssertEqual(r.outcome, .duplicate)
            default: XCTAssertEqual(r.outcome, .failed); XCTAssertEqual(r.reason, OutcomeReason.providerNotConfigured)
            }
        }
        // The stub server saw each live stub token delivered once, and nothing else.
        XCTAssertEqual(Set(stubServer.deliveries.keys), stubTokens.filter { !stubServer.isDead($0) })
        XCTAssertTrue(stubServer.deliveries.values.allSatisfy { $0 == 1 })
        XCTAssertGreaterThan(stubServer.requests.values.reduce(0, +), stubServer.deliveries.count, "503s and refusals were retried")
        XCTAssertEqual(summary.providers, [.apns, .fcm, .stub])
        XCTAssertEqual(summary.byProvider[.stub]?.rows, sink.records.filter { $0.provider == .stub }.count)
    }

    /// The results files carry the third provider's column, and a resume reads it back.
    func testResultsColumnsFollowTheCatalog() throws {
        let columns = ResultColumns(Self.catalog)
        XCTAssertEqual(columns.csvHeader,
                       "row,id,token,provider,outcome,status,reason,apns_id,fcm_name,stub_ref,unregistered_at,attempts,latency_ms,duplicate_of,error\n")
        let record = OutcomeRecord(row: 3, id: "d3", token: "stubtoken1", provider: .stub, outcome: .delivered, status: 200,
                                   messageID: "ref-42", attempts: 1, latencyMilliseconds: 1.5)
        for format in ResultsFormat.allCases {
            var bytes: [UInt8] = format == .csv ? Array(columns.csvHeader.utf8) : []
            ResultEncoding.appendLine(record, format: format, columns: columns, to: &bytes)
            let text = String(decoding: bytes, as: UTF8.self)
            XCTAssertTrue(text.contains("ref-42"), text)
            if format == .ndjson {
                XCTAssertTrue(text.contains(#""apns_id":null,"stub_ref":"ref-42""#), text)
                XCTAssertFalse(text.contains("fcm_name"), text)
            }
            var read: [OutcomeRecord] = []
            _ = try RecoveredResults.read(bytes, format: format, path: "r", columns: columns) { read.append($0) }
            XCTAssertEqual(read, [record], "\(format)")
        }
        // The standard catalog's results are unchanged by a provider defined outside it.
        XCTAssertEqual(ResultColumns.standard.csvHeader,
                       "row,id,token,provider,outcome,status,reason,apns_id,fcm_name,location,unregistered_at,attempts,latency_ms,duplicate_of,error\n")
    }
}
