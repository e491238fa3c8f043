// `pushcast mock --webpush-http1-port 0` serves two Web Push origins on one certificate: the main
// port over HTTP/2, the second over HTTP/1.1 only. `pushcast send` sends demo rows split over
// both, offering h2 and http/1.1 on every connection; every row must end as its endpoint's kind
// says, and the mock's log must show each origin's requests arriving over its own protocol.

import Foundation
import PushcastWebPush
import XCTest

final class WebPushTwoOriginsTests: XCTestCase {
    override func setUpWithError() throws { try BinaryTests.requireBinary() }

    /// The outcome each kind of endpoint must end in (the mock's rules: docs/USAGE.md).
    static let expected = ["ok": "delivered", "gone": "pruned", "nf": "pruned", "big": "failed", "slow": "delivered", "busy": "delivered"]

    func testRowsOverAnHTTP2AndAnHTTP1OnlyOriginOfOneMockEndAsTheirKindsSay() throws {
        let directory = NSTemporaryDirectory() + "pushcast-webpush-origins-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        // Any --webpush-* option implies --webpush.
        let mock = try MockProcess(directory: directory, arguments: ["--webpush-http1-port", "0"],
                                   waitFor: ["PORT", "WEBPUSH_PORT", "WEBPUSH_HTTP1_PORT"])
        defer { _ = mock.stop() }
        let h2Origin = try XCTUnwrap(mock.fields["WEBPUSH_ORIGIN"]), h1Origin = try XCTUnwrap(mock.fields["WEBPUSH_HTTP1_ORIGIN"])
        XCTAssertEqual(h1Origin, "https://127.0.0.1:\(try XCTUnwrap(mock.fields["WEBPUSH_HTTP1_PORT"]))")
        XCTAssertNotEqual(h1Origin, h2Origin)
        let count = 400
        let rows = try XCTUnwrap(WebPushDemoRows.generate(origins: [h2Origin, h1Origin], count: count, seed: 8030))
        try ([WebPushDemoRows.header] + rows).joined(separator: "\n").appending("\n")
            .write(toFile: directory + "/web.csv", atomically: true, encoding: .utf8)
        let vapid = try XCTUnwrap(try VAPIDKey.generate().key.pem(publicOnly: false))
        try vapid.write(toFile: directory + "/vapid.pem", atomically: true, encoding: .utf8)
        try #"{"title":"Hello {{user_id}}","locale":"{{locale}}"}"#.write(toFile: directory + "/payload.json", atomically: true, encoding: .utf8)
        let results = directory + "/results.ndjson"
        let run = try runPushcast(["send", directory + "/web.csv", "--webpush-payload", directory + "/payload.json",
                                   "--vapid-key", directory + "/vapid.pem", "--vapid-subject", "mailto:ops@example.com",
                                   "--ca-file", mock.caFile, "--results", results, "--prune", directory + "/prune.csv", "--quiet"], seconds: 300)
        let statistics = mock.stop()
        let kinds = try Self.kinds(rows)
        XCTAssertEqual(run.status, kinds.values.contains("big") ? 1 : 0, "a 413 row fails the run: \(run.stderr.suffix(3000))")

        var outcomes: [String: String] = [:]
        for line in try String(contentsOfFile: results, encoding: .utf8).split(separator: "\n") {
            let record = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            let endpoint = try XCTUnwrap(record["token"] as? String)
            XCTAssertNil(outcomes.updateValue(record["outcome"] as? String ?? "nil", forKey: endpoint), "\(endpoint) has two results")
        }
        XCTAssertEqual(outcomes.count, count)
        let wrong = kinds.filter { outcomes[$0.key] != Self.expected[$0.value] }.map { "\($0.key): \(outcomes[$0.key] ?? "no result")" }
        XCTAssertEqual(wrong, [], "rows whose outcome is not their kind's")

        // Each origin's requests came over its own protocol, and both carried rows.
        var protocols: [String: [String: Int]] = [:]
        for entry in mock.log where entry["provider"] as? String == "webpush" {
            let endpoint = try XCTUnwrap(entry["endpoint"] as? String)
            let origin = [h2Origin, h1Origin].first { endpoint.hasPrefix($0 + "/") } ?? endpoint
            protocols[origin, default: [:]][entry["http"] as? String ?? "none", default: 0] += 1
        }
        XCTAssertEqual(Set(protocols.keys), [h2Origin, h1Origin])
        XCTAssertEqual(protocols[h2Origin]?.keys.sorted(), ["2"])
        XCTAssertEqual(protocols[h1Origin]?.keys.sorted(), ["1.1"])
        XCTAssertGreaterThan(protocols[h1Origin]?["1.1"] ?? 0, count / 4)
        XCTAssertGreaterThan(protocols[h2Origin]?["2"] ?? 0, count / 4)
        // Both listeners count in the Web Push statistics: every logged request, once.
        let webpush = try XCTUnwrap(statistics["webpush"] as? [String: Any])
        XCTAssertEqual(webpush["requests"] as? Int, protocols.values.flatMap(\.values).reduce(0, +))
        XCTAssertGreaterThanOrEqual(webpush["connections_accepted"] as? Int ?? 0, 2)
    }

    /// Each row's endpoint and its kind (`<origin>/<kind><n>/<id>`).
    static func kinds(_ rows: [String]) throws -> [String: String] {
        var kinds: [String: String] = [:]
        for row in rows {
            let endpoint = String(row.split(separator: ",")[1])
            let path = try XCTUnwrap(endpoint.split(separator: "/", maxSplits: 3).dropFirst(2).first)
            let kind = String(path.prefix { $0.isLetter })
            XCTAssertNotNil(expected[kind], endpoint)
            kinds[endpoint] = kind
        }
        return kinds
    }
}
