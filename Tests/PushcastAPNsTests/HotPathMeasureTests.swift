import PushcastAPNs
import PushcastCore
import XCTest

/// A by-hand measurement of the per-row APNs work (token normalisation, template render, apns-id,
/// headers). It prints µs/row and asserts only that the work was done; timing varies by machine
/// and build (run `swift test -c release --filter HotPathMeasureTests` for release numbers).
final class HotPathMeasureTests: XCTestCase {
    func testPerRowCost() throws {
        let rows = 100_000
        let columns = ["token", "first_name", "city"]
        let template = try PayloadTemplate.compile(
            text: #"{"aps":{"alert":{"title":"Hello {{first_name}}","body":"Deals in {{city}} today"},"sound":"default"},"campaign":"spring"}"#,
            columns: columns)
        let headers = try APNsCampaignHeaders(topic: "com.example.app", nowEpochSeconds: 1_800_000_000)
        let names = ["Ann", "Zoë", "محمد", "李小龙", "Дмитрий \"Дима\""].map { Array($0.utf8) }
        let cities = ["Oslo", "القاهرة", "北京"].map { Array($0.utf8) }
        var tokens: [[UInt8]] = []
        let random = SplitMix64(seed: 1)
        for _ in 0..<1024 {
            var text = ""
            for _ in 0..<4 { text += String(random.next(), radix: 16, uppercase: true).leftPadded(16) }
            tokens.append(Array(text.utf8))
        }
        let ids = APNsIDGenerator(campaign: "spring")
        var buffer: [UInt8] = []
        buffer.reserveCapacity(4096)
        var bytes = 0, headerCount = 0
        let start = DispatchTime.now().uptimeNanoseconds
        for row in 0..<rows {
            let token = try tokens[row & 1023].withUnsafeBytes { try APNsDeviceToken.normalize($0) }
            let name = names[row % names.count], city = cities[row % cities.count]
            bytes += name.withUnsafeBytes { nameBytes in
                city.withUnsafeBytes { cityBytes in
                    template.render(into: &buffer) { $0 == 1 ? nameBytes : $0 == 2 ? cityBytes : nil }
                }
            }
            let id = ids.derive(token: token.hex)
            headerCount += headers.headers(authorization: "bearer x", apnsID: id).count
        }
        let elapsed = DispatchTime.now().uptimeNanoseconds - start
        print("PushcastAPNs hot path: \(String(format: "%.3f", Double(elapsed) / 1000 / Double(rows))) µs/row over \(rows) rows (normalize + render + apns-id + headers)")
        // The same work piece by piece, to see where the time goes.
        var sink = 0
        let hexTokens = try tokens.map { try $0.withUnsafeBytes { try APNsDeviceToken.normalize($0).hex } }
        let pieces: [(String, () throws -> Void)] = [
            ("normalize", { for row in 0..<rows { sink &+= try tokens[row & 1023].withUnsafeBytes { try APNsDeviceToken.normalize($0) }.hex.utf8.count } }),
            ("render", {
                for row in 0..<rows {
                    let name = names[row % names.count], city = cities[row % cities.count]
                    sink &+= name.withUnsafeBytes { n in city.withUnsafeBytes { c in template.render(into: &buffer) { $0 == 1 ? n : $0 == 2 ? c : nil } } }
                }
            }),
            ("apns-id", { for row in 0..<rows { sink &+= APNsID.derive(campaign: "spring", token: hexTokens[row & 1023]).utf8.count } }),
            ("apns-id (per-worker generator)", {
                let generator = APNsIDGenerator(campaign: "spring")
                for row in 0..<rows { sink &+= generator.derive(token: hexTokens[row & 1023]).utf8.count }
            }),
            ("headers", { for _ in 0..<rows { sink &+= headers.headers(authorization: "bearer x", apnsID: "id").count } }),
        ]
        for (name, work) in pieces {
            let begin = DispatchTime.now().uptimeNanoseconds
            try work()
            let nanoseconds = DispatchTime.now().uptimeNanoseconds - begin
            print("  \(name): \(String(format: "%.3f", Double(nanoseconds) / 1000 / Double(rows))) µs/row")
        }
        XCTAssertGreaterThan(sink, 0)
        XCTAssertEqual(headerCount, rows * 5)
        XCTAssertGreaterThan(bytes, rows * 100)
    }
}

private extension String {
    func leftPadded(_ width: Int) -> String { String(repeating: "0", count: max(0, width - count)) + self }
}
