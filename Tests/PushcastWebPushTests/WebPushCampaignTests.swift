import PushcastAPNs
import PushcastCore
import PushcastEngine
import PushcastInput
import PushcastJSON
import PushcastProviderKit
import PushcastProviders
import PushcastReactor
import PushcastSimulation
import PushcastSystem
import PushcastTransport
import PushcastWire
import XCTest
@testable import PushcastWebPush

/// A push service for the simulator: it decrypts every body with the subscription's private
/// key and keeps what it read, by `:path`. The three origins of the test share it (one server
/// per provider in the simulator); their paths name the origin's port, so none collide. The
/// simulator runs on one thread.
final class SimulatedPushService: ProviderResponder, @unchecked Sendable {
    var provider: ProviderID { .webpush }
    var streamsBeforeCredentials: Int? { nil }
    let subscriptions: [String: WebPushDecryptor]
    private(set) var plaintexts: [String: [UInt8]] = [:]
    private(set) var undecryptable = 0

    init(subscriptions: [String: WebPushDecryptor]) { self.subscriptions = subscriptions }

    func respond(to request: HTTP2ServerRequest, context: ProviderRequestContext) -> ProviderServerAnswer {
        let path = request.path
        guard let decryptor = subscriptions[path], let plaintext = try? decryptor.decrypt(request.body) else {
            undecryptable += 1
            return ProviderServerAnswer(status: 400, kind: .refused, reason: "DecryptionFailed")
        }
        plaintexts[path] = plaintext
        if context.device == .unregistered {
            return ProviderServerAnswer(status: 410, kind: .deviceGone, body: Array(#"{"errno":106}"#.utf8), reason: "Gone")
        }
        return ProviderServerAnswer(status: 201, kind: .accepted,
                                    headers: [HTTP2Header("location", "https://push.sim/m/\(context.random.next() % 1_000_000)")])
    }
    func answer(_ fault: ProviderServerFault, to request: HTTP2ServerRequest, context: ProviderRequestContext) -> ProviderServerAnswer {
        switch fault {
        case .throttled: return ProviderServerAnswer(status: 429, kind: .busy)
        case .serverError(let status): return ProviderServerAnswer(status: status, kind: .busy)
        }
    }
    func token(of request: HTTP2ServerRequest) -> String { request.path }
    func logMembers(_ request: HTTP2ServerRequest, _ answer: ProviderServerAnswer) -> String { #""status":\#(answer.status)"# }
}

/// A push service that refuses every VAPID token as Apple does.
final class RefusingPushService: ProviderResponder {
    var provider: ProviderID { .webpush }
    var streamsBeforeCredentials: Int? { nil }
    func respond(to request: HTTP2ServerRequest, context: ProviderRequestContext) -> ProviderServerAnswer {
        ProviderServerAnswer(status: 403, kind: .credentialsRefused, body: Array(#"{"reason":"BadJwtToken"}"#.utf8), reason: "BadJwtToken")
    }
    func answer(_ fault: ProviderServerFault, to request: HTTP2ServerRequest, context: ProviderRequestContext) -> ProviderServerAnswer {
        respond(to: request, context: context)
    }
    func token(of request: HTTP2ServerRequest) -> String { request.path }
    func logMembers(_ request: HTTP2ServerRequest, _ answer: ProviderServerAnswer) -> String { #""status":\#(answer.status)"# }
}

/// A campaign of APNs and Web Push rows over three push services, through the real reader,
/// preparer, lanes (one per origin), workloads and outcome loop, on the simulator's virtual
/// network: every row has one outcome, and every delivered body decrypts to its payload.
final class WebPushCampaignTests: XCTestCase {
    static let ports = [1001, 1002, 1003]

    struct Input {
        var csv = "token,platform,endpoint,p256dh,auth,name\n"
        var decryptors: [String: WebPushDecryptor] = [:]
        /// What each row is: "apns", "web", "badKey", "offCurve", "http".
        var kinds: [Int: String] = [:]
    }

    static func input(rows: Int) throws -> Input {
        var input = Input()
        for row in 1...rows {
            let port = ports[row % 3]
            let path = "/p/\(port)/\(row)"
            let (subscription, key, auth) = try freshSubscription(endpoint: "https://push.sim:\(port)\(path)")
            var p256dh = Base64URL.encode(subscription.p256dh)
            var kind = "web"
            var endpoint = "https://Push.Sim:\(port)\(path)"
            switch row % 10 {
            case 0:
                input.csv += "\(String(format: "%064x", row)),ios,,,,n\(row)\n"
                input.kinds[row] = "apns"
                continue
            case 3: p256dh = "***"; kind = "badKey"
            case 7:
                var point = subscription.p256dh
                point[64] ^= 1
                p256dh = Base64URL.encode(point)
                kind = "offCurve"
            case 9: endpoint = "http://push.sim:\(port)\(path)"; kind = "http"
            default: break
            }
            input.decryptors[path] = try WebPushDecryptor(privateKey: key, authSecret: auth)
            // A web row names its platform, or leaves it out and is routed by its endpoint.
            input.csv += ",\(row % 2 == 0 ? "web" : ""),\(endpoint),\(p256dh),\(Base64URL.encode(auth)),n\(row)\n"
            input.kinds[row] = kind
        }
        return input
    }

    func makeRun(_ csv: String, rows: Int, signer: VAPIDSigner, ports: [Int] = WebPushCampaignTests.ports) throws -> CampaignRun {
        let catalog = ProviderCatalog.standard
        let reader = try TokenFileReader(source: MemoryByteSource(Array(csv.utf8)), format: .csv, fileName: "mixed.csv")
        let layout = try RowLayout(columns: reader.columns, idColumn: nil, defaultProvider: .apns, fileName: "mixed.csv", catalog: catalog)
        let columns = reader.columns
        let renderings: [ProviderID: any ProviderRendering] = [
            .apns: APNsRendering(template: try PayloadTemplate.compile(text: #"{"aps":{"alert":"{{name}}"}}"#, columns: columns), payloadBytesMax: 4096),
            .webpush: WebPushRendering(template: try PayloadTemplate.compile(text: #"{"title":"Hi {{name}}"}"#, columns: columns),
                                       columns: WebPushColumns(columns: columns)),
        ]
        let preparer = RowPreparer(layout: layout, renderings: renderings, campaign: "web", fileName: "mixed.csv", sends: [.apns, .webpush],
                                   recordsUnroutable: true, duplicates: .exact(expectedRows: rows), catalog: catalog)
        let context = try TLSContext(role: .client, configuration: TLSConfiguration(), files: SecretFile.read)
        var limits = Limits()
        limits.streamsPerConnectionMax = 8
        limits.responseHeadersKept.append("location")
        func client(_ host: String, port: Int) -> ClientConfiguration {
            ClientConfiguration(endpoint: Endpoint(host: host, port: UInt16(port)), address: "127.0.0.1", tls: context, limits: limits,
                                reactor: ReactorConfiguration())
        }
        let policy = SendPolicy(retry: RetryPolicy(attemptsMax: 6), retryUnknown: false)
        let headers = try APNsCampaignHeaders(topic: "com.example.web", nowEpochSeconds: 1_800_000_000)
        let settings = APNsSendSettings(headers: headers, tokenSource: nil, authority: "api.sim.apple")
        var lanes = [ProviderLane(provider: .apns, client: client("api.sim.apple", port: 443), connections: 1, workers: 1, policy: policy) {
            APNsAdapter(settings: settings)
        }]
        let messageHeaders = try WebPushMessageHeaders(ttlSeconds: 60)
        for port in ports {
            let origin = "https://push.sim:\(port)"
            let web = WebPushSendSettings(authority: "push.sim:\(port)", credential: WebPushLaneCredential(origin: origin, signer: signer),
                                          headers: messageHeaders)
            var lane = ProviderLane(provider: .webpush, client: client("push.sim", port: port), connections: 1, workers: 1, policy: policy,
                                    factory: WebPushAdapterFactory(settings: web))
            lane.route = LaneRoute(prefix: origin) { WebPushPushProvider().routeLength(token: $0) }
            lanes.append(lane)
        }
        let output = CampaignOutput(resultsPath: "(memory)", resultsFormat: .ndjson, prunePath: "(memory)", summaryPath: nil, progress: false)
        return CampaignRun(feeds: [CampaignFeed(reader: reader, preparer: preparer)], lanes: lanes, output: output, machine: .real,
                           totalRows: rows, log: { _ in })
    }

    func testMixedAPNsAndWebRowsOverThreePushServices() throws {
        let rows = 120
        let input = try Self.input(rows: rows)
        var faults = FaultModel()
        faults.status503 = 0.1
        faults.refuse = 0.05
        faults.deadTokens = 0.1
        let service = SimulatedPushService(subscriptions: input.decryptors)
        let webServer = SimulatedServer(responder: service, model: faults, seed: 11)
        var calm = FaultModel()
        calm.deadTokens = 0
        let apnsServer = SimulatedServer(responder: CampaignSimulator.simulatedAPNs(), model: calm, seed: 12)
        let signer = try VAPIDSigner(key: try VAPIDKey.generate(), subject: "mailto:push@example.com", clock: ManualClock())
        let sink = RecordingSink()
        let (summary, cutShort) = CampaignSimulator.run(try makeRun(input.csv, rows: rows, signer: signer),
                                                        servers: [.apns: apnsServer, .webpush: webServer], clock: ManualClock(), seed: 3, sink: sink)
        XCTAssertNil(cutShort)
        XCTAssertEqual(sink.records.map(\.row).sorted(), Array(1...rows), "one outcome per row")
        XCTAssertEqual(summary.rows, rows)
        var delivered = 0
        for record in sink.records {
            let kind = input.kinds[record.row]!
            switch kind {
            case "apns":
                XCTAssertEqual(record.provider, .apns)
                XCTAssertEqual(record.outcome, .delivered)
            case "web":
                XCTAssertEqual(record.provider, .webpush, "row \(record.row)")
                let path = String(record.token.drop(while: { $0 != "/" }).dropFirst(2).drop(while: { $0 != "/" }))
                XCTAssertTrue(record.token.hasPrefix("https://push.sim:"), record.token)
                if record.outcome == .delivered {
                    delivered += 1
                    XCTAssertEqual(record.messageID?.hasPrefix("https://push.sim/m/"), true, "row \(record.row)")
                    XCTAssertEqual(service.plaintexts[path], Array(#"{"title":"Hi n\#(record.row)"}"#.utf8), "row \(record.row)")
                } else {
                    XCTAssertEqual(record.outcome, .pruned, "row \(record.row): \(record)")
                    XCTAssertTrue(webServer.isDead(path))
                    XCTAssertEqual(record.reason, "Gone (errno 106)")
                }
            case "badKey":
                XCTAssertEqual(record.outcome, .invalid)
                XCTAssertEqual(record.reason, "InvalidSubscription")
                XCTAssertEqual(record.error?.contains("p256dh"), true, record.error ?? "")
            case "offCurve":
                XCTAssertEqual(record.outcome, .invalid, "row \(record.row)")
                XCTAssertEqual(record.reason, "InvalidSubscription")
                XCTAssertEqual(record.error, "field 'p256dh': not a point on the P-256 curve", "row \(record.row)")
            default:
                XCTAssertEqual(record.outcome, .invalid)
                XCTAssertEqual(record.reason, "InvalidToken")
            }
        }
        XCTAssertGreaterThan(delivered, 40)
        XCTAssertEqual(service.undecryptable, 0, "every body that reached the service decrypted")
        XCTAssertEqual(Set(sink.records.filter { $0.outcome == .delivered && $0.provider == .webpush }.map { String($0.token.prefix(21)) }).count, 3,
                       "all three push services delivered")
        XCTAssertEqual(signer.signatureCount, 3, "one VAPID token per origin")
    }

    /// A push service that refuses the VAPID token, and a fresh one after it, stops its own lane:
    /// the APNs lane delivers every row, the refused rows are `failed` `BadVAPID`, and the rows
    /// never sent have no outcome (a resume sends them).
    func testAPushServiceRefusingTheVAPIDTokenStopsOnlyItsLane() throws {
        let rows = 60
        let input = try Self.input(rows: rows)
        var calm = FaultModel()
        calm.deadTokens = 0
        let webServer = SimulatedServer(responder: RefusingPushService(), model: calm, seed: 21)
        let apnsServer = SimulatedServer(responder: CampaignSimulator.simulatedAPNs(), model: calm, seed: 22)
        let signer = try VAPIDSigner(key: try VAPIDKey.generate(), subject: "mailto:push@example.com", clock: ManualClock())
        let sink = RecordingSink()
        let run = try makeRun(input.csv.replacingOccurrences(of: ":1002/", with: ":1001/").replacingOccurrences(of: ":1003/", with: ":1001/"),
                              rows: rows, signer: signer, ports: [1001])
        let (summary, cutShort) = CampaignSimulator.run(run, servers: [.apns: apnsServer, .webpush: webServer], clock: ManualClock(), seed: 4, sink: sink)
        XCTAssertNil(cutShort, "the run ended by itself")
        let stopped = summary.stoppedBecause ?? "not stopped"
        XCTAssertTrue(stopped.hasPrefix("https://push.sim:1001 refused the VAPID token twice"), stopped)
        XCTAssertTrue(stopped.hasSuffix("; the other lanes carried on"), stopped)
        let byRow = Dictionary(uniqueKeysWithValues: sink.records.map { ($0.row, $0) })
        for (row, kind) in input.kinds where kind == "apns" {
            XCTAssertEqual(byRow[row]?.outcome, .delivered, "row \(row)")
        }
        let refused = sink.records.filter { $0.provider == .webpush && $0.outcome == .failed }
        XCTAssertFalse(refused.isEmpty)
        XCTAssertTrue(refused.allSatisfy { $0.reason == "BadVAPID (BadJwtToken)" }, "\(refused.map(\.reason))")
        let sentWeb = input.kinds.filter { $0.value == "web" || $0.value == "offCurve" }.count
        XCTAssertLessThan(sink.records.filter { $0.provider == .webpush && $0.outcome != .invalid }.count, sentWeb, "some rows were never sent")
        XCTAssertEqual(signer.signatureCount, 2, "one token, then one fresh one")
    }
}
