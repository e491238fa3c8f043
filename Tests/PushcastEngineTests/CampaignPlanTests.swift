import PushcastCore
import PushcastEngine
import PushcastInput
import PushcastJSON
import PushcastAPNs
import PushcastProviders
import PushcastWire
import PushcastTransport
import PushcastReactor
import PushcastSystem
import XCTest

final class CampaignPlanTests: XCTestCase {
    private func plan(_ csv: String, reopen: Bool) throws -> CampaignPlan {
        let bytes = Array(csv.utf8)
        let open = { try TokenFileReader(source: MemoryByteSource(bytes), format: .csv, fileName: "p.csv") }
        let reader = try open()
        let layout = try RowLayout(columns: reader.columns, idColumn: nil, defaultProvider: .apns, fileName: "p.csv")
        let template = try PayloadTemplate.compile(text: #"{"aps":{"alert":"hi"}}"#, columns: reader.columns)
        var plan = CampaignPlan(inputPath: "p.csv", fileName: "p.csv", format: .csv, reader: reader, layout: layout,
                                renderings: [.apns: APNsRendering(template: template, payloadBytesMax: 4096)], catalog: .standard, campaign: "c")
        if reopen { plan.reopen = open }
        return plan
    }

    private func lane(_ provider: ProviderID) throws -> ProviderLane {
        let context = try TLSContext(role: .client, configuration: TLSConfiguration(), files: SecretFile.read)
        let client = ClientConfiguration(endpoint: Endpoint(host: "localhost", port: 443), address: "127.0.0.1", tls: context,
                                         limits: Limits(), reactor: ReactorConfiguration())
        return ProviderLane(provider: provider, client: client, connections: 1, workers: 1) { _ in preconditionFailure("never run") }
    }

    func testValidateRefusesNoLanesUnconfiguredAndDoubledLanes() throws {
        let plan = try plan("token,platform\n\(String(repeating: "a", count: 64)),ios\n", reopen: false)
        XCTAssertThrowsError(try plan.validate(lanes: [])) { XCTAssertTrue("\($0)".contains("no configured provider can get rows from p.csv")) }
        XCTAssertThrowsError(try plan.validate(lanes: [try lane(.fcm)])) { XCTAssertTrue("\($0)".contains("fcm, which has no template")) }
        XCTAssertThrowsError(try plan.validate(lanes: [try lane(.apns), try lane(.apns)])) { XCTAssertTrue("\($0)".contains("two lanes")) }
        XCTAssertNoThrow(try plan.validate(lanes: [try lane(.apns)]))
        XCTAssertEqual(plan.activeProviders, [.apns])
    }

    func testShardRatesSplitGivenRatesAndDefaultQuotas() throws {
        var plan = try plan("token\nx\n", reopen: false)
        XCTAssertEqual(plan.shardRates([:]), [.fcm: 10_000], "FCM's project quota is the default; APNs has none")
        XCTAssertEqual(plan.shardRates([.apns: 800]), [.apns: 800, .fcm: 10_000])
        plan.shard = ShardSpec(index: 1, count: 4)
        XCTAssertEqual(plan.shardRates([.apns: 800, .fcm: 4000]), [.apns: 200, .fcm: 1000])
        XCTAssertEqual(plan.shardRates([:]), [.fcm: 2500])
    }

    func testAFileFeedsEachProviderThroughItsOwnReader() throws {
        var plan = try plan("token,platform\nx,ios\n", reopen: true)
        plan.renderings[.fcm] = plan.renderings[.apns]
        let feeds = try plan.feeds(providers: [.apns, .fcm])
        XCTAssertEqual(feeds.count, 2)
        XCTAssertEqual(feeds.map(\.preparer.sends), [[.apns], [.fcm]])
        XCTAssertEqual(feeds.map(\.preparer.recordsUnroutable), [true, false])
        XCTAssertFalse((feeds[0].reader as! TokenFileReader) === (feeds[1].reader as! TokenFileReader), "a reader of its own")
        let once = try self.plan("token,platform\nx,ios\n", reopen: false).feeds(providers: [.apns, .fcm])
        XCTAssertEqual(once.count, 1, "read once (stdin): one feed for all")
        XCTAssertEqual(once[0].preparer.sends, [.apns, .fcm])
    }
}
