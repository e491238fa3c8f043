import PushcastAPNs
import PushcastCore
@testable import PushcastEngine
import PushcastInput
import PushcastJSON
import PushcastProviderKit
import PushcastProviders
import XCTest

/// A provider's own token columns (Web Push's `endpoint`, `subscription`): a mixed export leaves
/// `token` empty on the rows whose token is elsewhere, and each row finds its own.
final class ProviderTokenColumnsTests: XCTestCase {
    let webpush = ProviderCatalog.standard.provider(named: "webpush")!

    func testEachRowTakesTheFirstTokenColumnItFills() throws {
        let csv = "token,platform,Endpoint,subscription\nabc,ios,,\n,,https://a.example/x,\n,web,,\"{\"\"endpoint\"\":\"\"https://b.example/y\"\"}\"\n , ,,\n"
        let reader = try TokenFileReader(source: MemoryByteSource(Array(csv.utf8)), format: .csv, fileName: "m.csv")
        let layout = try RowLayout(columns: reader.columns, idColumn: nil, defaultProvider: .apns, fileName: "m.csv", catalog: .standard)
        XCTAssertEqual(layout.tokenColumns, [0, 2, 3])
        XCTAssertEqual(layout.tokenColumnOwners, [nil, webpush, webpush])
        var found: [(Int, ProviderID?)] = []
        while let record = try reader.next() {
            guard case .row(let view) = record, let index = layout.tokenCandidate(in: view) else { return XCTFail("no token column") }
            found.append((layout.tokenColumns[index], layout.tokenColumnOwners[index]))
        }
        XCTAssertEqual(found.map(\.0), [0, 2, 3, 0], "an all-blank row keeps `token`, and is MissingToken")
        XCTAssertEqual(found.map(\.1), [nil, webpush, webpush, nil])
        // Without the catalog only `token` is a candidate, as before.
        let plain = try RowLayout(columns: reader.columns, idColumn: nil, defaultProvider: .apns, fileName: "m.csv")
        XCTAssertEqual(plain.tokenColumns, [0])
        XCTAssertThrowsError(try RowLayout(columns: ["name"], idColumn: nil, defaultProvider: .apns, fileName: "m.csv", catalog: .standard)) {
            XCTAssertEqual("\($0)", "m.csv: no 'token' or 'endpoint' or 'subscription' column (columns: name)")
        }
    }

    func testAnEndpointColumnMakesWebPushActiveWithoutAPlatformColumn() throws {
        let csv = "endpoint,name\nhttps://a.example/x,Ann\n"
        let reader = try TokenFileReader(source: MemoryByteSource(Array(csv.utf8)), format: .csv, fileName: "m.csv")
        let layout = try RowLayout(columns: reader.columns, idColumn: nil, defaultProvider: .apns, fileName: "m.csv", catalog: .standard)
        let template = try PayloadTemplate.compile(text: #"{"aps":{"alert":"hi"}}"#, columns: reader.columns)
        let rendering = APNsRendering(template: template, payloadBytesMax: 4096)
        let both = CampaignPlan(inputPath: "m.csv", fileName: "m.csv", format: .csv, reader: reader, layout: layout,
                                renderings: [.apns: rendering, webpush: rendering], catalog: .standard, campaign: "c")
        XCTAssertEqual(both.activeProviders, [.apns, webpush])
        let apnsOnly = CampaignPlan(inputPath: "m.csv", fileName: "m.csv", format: .csv, reader: reader, layout: layout,
                                    renderings: [.apns: rendering], catalog: .standard, campaign: "c")
        XCTAssertEqual(apnsOnly.activeProviders, [.apns])
    }
}
