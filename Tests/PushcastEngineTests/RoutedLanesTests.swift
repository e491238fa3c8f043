import PushcastAPNs
import PushcastCore
@testable import PushcastEngine
import PushcastInput
import PushcastJSON
import PushcastProviderKit
import PushcastReactor
import PushcastSystem
import PushcastTransport
import PushcastWire
import XCTest

// A routed provider, defined only here: its tokens are URLs and the origin of each names the
// server its row goes to. The tests check how the first read finds the servers, how feeds split
// the rows between them (each row read and recorded by exactly one feed), and how the board
// finds a notification's lane.

extension ProviderID {
    static let routed = ProviderID("routed", position: 2)
}

struct RoutedPushProvider: PushProvider {
    var id: ProviderID { .routed }
    var displayName: String { "Routed" }
    var platformAliases: [String] { ["web"] }
    var messageIDField: String { "location" }
    var isRouted: Bool { true }

    func normalize(token raw: UnsafeRawBufferPointer, into output: inout [UInt8]) -> TokenProblem? {
        output = Array(raw)
        guard routeLength(token: raw) != nil else { return TokenProblem("not an https URL with a path") }
        return nil
    }

    /// `https://host[:port]`, up to the first `/` after the scheme.
    func routeLength(token: UnsafeRawBufferPointer) -> Int? {
        let scheme = Array("https://".utf8)
        guard token.count > scheme.count, token.prefix(scheme.count).elementsEqual(scheme) else { return nil }
        guard let slash = token[scheme.count...].firstIndex(of: UInt8(ascii: "/")), slash > scheme.count else { return nil }
        return slash
    }
}

struct PlainRendering: ProviderRendering {
    func makeRenderer(campaign: String) -> any NotificationRenderer { Renderer() }
    final class Renderer: NotificationRenderer {
        var bodyBytesMax: Int { 4096 }
        var bodyName: String { "body" }
        func render(token: UnsafeRawBufferPointer, into buffer: inout [UInt8], field: (Int) -> UnsafeRawBufferPointer?) -> Int {
            buffer.append(contentsOf: "{}".utf8)
            return buffer.count
        }
        func notificationID(token: UnsafeRawBufferPointer) -> PackedText? { nil }
    }
}

final class RoutedLanesTests: XCTestCase {
    static let catalog = ProviderCatalog([APNsPushProvider(), RoutedPushProvider()])

    /// `servers` origins, the first the busiest (every third row goes to it),
    /// plus a bad token and an APNs row now and then.
    static func csv(rows: Int, servers: Int) -> String {
        var text = "token,platform\n"
        for i in 1...rows {
            switch i % 10 {
            case 9: text += "ftp://nowhere,web\n"
            case 8: text += "\(String(format: "%064x", i)),ios\n"
            default:
                let server = i % 3 == 0 ? 0 : 1 + (i / 3) % (servers - 1)
                text += "https://s\(server).push.example/sub/\(i),web\n"
            }
        }
        return text
    }

    func reader(_ csv: String) throws -> TokenFileReader {
        try TokenFileReader(source: MemoryByteSource(Array(csv.utf8)), format: .csv, fileName: "routed.csv")
    }

    func plan(_ csv: String) throws -> CampaignPlan {
        let reader = try reader(csv)
        let layout = try RowLayout(columns: reader.columns, idColumn: nil, defaultProvider: .apns, fileName: "routed.csv")
        let renderings: [ProviderID: any ProviderRendering] = [.apns: PlainRendering(), .routed: PlainRendering()]
        var plan = CampaignPlan(inputPath: "routed.csv", fileName: "routed.csv", format: .csv, reader: reader, layout: layout,
                                renderings: renderings, catalog: Self.catalog, campaign: "c")
        plan.reopen = { try self.reader(csv) }
        // The first read, as `send` makes it: every valid routed row's server counted.
        var keyer = plan.preparer(sends: [.apns, .routed], recordsUnroutable: true)
        keyer.collectRoutes(max: CampaignPlan.routesMax)
        let first = try self.reader(csv)
        while let record = try first.next() {
            if case .row(let view) = record { _ = keyer.planKey(view) }
        }
        XCTAssertEqual(keyer.routesRefused, 0)
        plan.routes = keyer.routesFound
        return plan
    }

    func testRouteTableFindsRoutesByTheirBytesAndGroupsTheBusiestAlone() {
        var table = RouteTable(routesMax: 3)
        for (route, rows) in [("https://a", 5), ("https://b", 9), ("https://c", 1)] {
            for _ in 0..<rows { XCTAssertTrue(Array(route.utf8).withUnsafeBytes { table.add($0) }) }
        }
        XCTAssertFalse(Array("https://d".utf8).withUnsafeBytes { table.add($0) }, "a fourth route is past routesMax")
        XCTAssertEqual(table.routes, ["https://a", "https://b", "https://c"])
        XCTAssertEqual(table.rows, [5, 9, 1])
        XCTAssertEqual(Array("https://b".utf8).withUnsafeBytes { table.index(of: $0) }, 1)
        XCTAssertNil(Array("https://bb".utf8).withUnsafeBytes { table.index(of: $0) })
        XCTAssertEqual(table.groups(max: 2), [["https://b"], ["https://a", "https://c"]])
        XCTAssertEqual(table.groups(max: 8), [["https://b"], ["https://a"], ["https://c"]])
    }

    /// Twelve servers: the seven busiest get a feed each and the other five share one; every
    /// row is taken by exactly one feed, and a bad routed token is recorded once.
    func testFeedsSplitARoutedProvidersRowsSoThatEachRowIsTakenOnce() throws {
        let rows = 2_000
        let csv = Self.csv(rows: rows, servers: 12)
        let plan = try plan(csv)
        XCTAssertEqual(plan.routes[.routed]?.count, 12)
        var feeds = try plan.feeds(providers: [.apns, .routed])
        XCTAssertEqual(feeds.count, 1 + CampaignPlan.routeFeedsMax)
        XCTAssertEqual(feeds.map(\.journalKey).first, "apns")
        XCTAssertEqual(feeds[1].journalKey, "routed@https://s0.push.example", "the busiest server's feed")
        XCTAssertEqual(feeds.last?.preparer.routeFilter?.count, 5)
        XCTAssertEqual(Set(feeds.map(\.journalKey)).count, feeds.count, "journal keys are distinct")

        var taken: [Int: Int] = [:]
        for f in feeds.indices {
            while let record = try feeds[f].reader.next() {
                switch feeds[f].preparer.prepare(record) {
                case .send(let n):
                    taken[n.row, default: 0] += 1
                    if n.provider == .routed {
                        let origin = String(n.packedToken.string.split(separator: "/", maxSplits: 3).prefix(2).joined(separator: "//"))
                        let filter = try XCTUnwrap(feeds[f].preparer.routeFilter)
                        XCTAssertNotNil(Array(origin.utf8).withUnsafeBytes { filter.index(of: $0) }, "row \(n.row) in the feed of its server")
                    }
                case .finished(let outcome): taken[outcome.row, default: 0] += 1
                case .skipped: break
                }
            }
        }
        XCTAssertEqual(taken.keys.sorted(), Array(1...rows))
        XCTAssertTrue(taken.values.allSatisfy { $0 == 1 }, "some row was taken twice")
    }

    func testTheBoardFindsANotificationsLaneByItsRoute() throws {
        let length: @Sendable (UnsafeRawBufferPointer) -> Int? = { RoutedPushProvider().routeLength(token: $0) }
        func lane(_ route: String?) -> ProviderLane {
            var lane = ProviderLane(provider: route == nil ? .apns : .routed, client: try! Self.client(), connections: 1, workers: 1) { _ in
                fatalError("no worker runs here")
            }
            lane.route = route.map { LaneRoute(prefix: $0, length: length) }
            return lane
        }
        let lanes = [lane(nil), lane("https://a.example"), lane("https://b.example:8443")]
        let board = LaneBoard(lanes: lanes)
        func feeder(_ token: String, _ provider: ProviderID) -> LaneFeeder? {
            board.feeder(for: PreparedNotification(row: 1, id: nil, token: token, messageID: nil, payload: [], provider: provider))
        }
        XCTAssertTrue(feeder(String(repeating: "a", count: 64), .apns) === board.wirings[0].feeder)
        XCTAssertTrue(feeder("https://a.example/x", .routed) === board.wirings[1].feeder)
        XCTAssertTrue(feeder("https://b.example:8443/y/z", .routed) === board.wirings[2].feeder)
        XCTAssertNil(feeder("https://c.example/x", .routed), "no lane for that server")
        XCTAssertNil(feeder("https://b.example/y", .routed), "the port is part of the route")
        XCTAssertEqual(lanes.map(\.key), ["apns", "routed@https://a.example", "routed@https://b.example:8443"])
    }

    static func client() throws -> ClientConfiguration {
        ClientConfiguration(endpoint: Endpoint(host: "push.example", port: 443), address: "127.0.0.1",
                            tls: try TLSContext(role: .client, configuration: TLSConfiguration(), files: SecretFile.read),
                            limits: Limits(), reactor: ReactorConfiguration())
    }
}
