import Foundation
import XCTest
import PushcastCore
import PushcastSystem
@testable import PushcastEngine

/// The report page in memory: what a server says is text, never markup; unknown reasons are
/// capped; every outcome has its element.
final class ReportPageTests: XCTestCase {
    func testHostileReasonsAreEscapedAndCapped() {
        var report = CampaignReport()
        let hostile = "<script>alert(\"x\")</script>&"
        report.record(OutcomeRecord(row: 1, id: nil, token: "ab", provider: .apns, outcome: .failed, status: 400, reason: hostile, attempts: 1,
                                    latencyMilliseconds: 12))
        for row in 2...(CampaignReport.unknownReasonsMax + 50) {
            report.record(OutcomeRecord(row: row, id: nil, token: "ab", provider: .fcm, outcome: .failed, status: 400, reason: "R\(row)", attempts: 1,
                                        latencyMilliseconds: 20))
        }
        XCTAssertEqual(report.counted.reasons.count, CampaignReport.unknownReasonsMax + 1, "unknown reasons are capped")
        XCTAssertEqual(report.counted.reasons[CampaignReport.otherReasons], 50)
        let page = ReportPage.render(report, title: "t <b>", generatedAt: 1_800_000_000)
        XCTAssertFalse(page.contains("<script"), "a reason became markup")
        XCTAssertTrue(page.contains("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;"))
        XCTAssertTrue(page.contains("<title>t &lt;b&gt;</title>"))
        for kind in OutcomeKind.allCases {
            XCTAssertTrue(page.contains("data-provider=\"apns\" data-outcome=\"\(kind.rawValue)\""), kind.rawValue)
        }
        XCTAssertTrue(page.contains("data-chart=\"rate\" data-empty=\"true\""), "no timeline: said so")
    }

    /// The page's times and file names read as Foundation wrote them.
    func testTimesAndFileNamesAsFoundationWritesThem() {
        for seconds in [0, 1_800_000_000.7, -1.5, 951_782_400, 4_102_444_799.999, 1_234_567_890.5] {
            XCTAssertEqual(ReportPage.isoTime(seconds), ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: seconds)), "\(seconds)")
        }
        for path in ["results.ndjson", "/a/b/results.csv", "dir/", "/", "", "a//b", "//x//", "./r"] {
            XCTAssertEqual(ReportPage.lastPathComponent(path), (path as NSString).lastPathComponent, path)
        }
    }

    func testTimelineStepsAddUpAcrossRunsAndShards() {
        let directory = NSTemporaryDirectory()
        let first = directory + "timeline-\(UInt64.random(in: 0...UInt64.max)).a", second = first + "b"
        // A run, then its resume (elapsed starts again, counts go on from the earlier run's rows).
        try? """
        {"wall":100.0,"elapsed":0.000,"rows":{},"retries":{}}
        {"wall":101.0,"elapsed":1.0,"rows":{"apns":10},"retries":{"apns":1}}
        {"wall":102.0,"elapsed":2.0,"rows":{"apns":25},"retries":{"apns":1}}
        {"wall":200.0,"elapsed":0.000,"rows":{"apns":25},"retries":{}}
        {"wall":201.0,"elapsed":1.0,"rows":{"apns":40},"retries":{"apns":2}}

        """.write(toFile: first, atomically: true, encoding: .utf8)
        try? """
        {"wall":100.5,"elapsed":0.000,"rows":{},"retries":{}}
        {"wall":101.5,"elapsed":1.0,"rows":{"fcm":7},"retries":{}}

        """.write(toFile: second, atomically: true, encoding: .utf8)
        var timeline = CampaignTimeline()
        timeline.add(path: first, files: SystemFiles())
        timeline.add(path: second, files: SystemFiles())
        timeline.add(path: first + ".missing", files: SystemFiles())
        XCTAssertEqual(timeline.files, 2)
        let (start, width, series) = timeline.rates()
        XCTAssertEqual(start, 101)
        XCTAssertEqual(series[.apns]!.reduce(0) { $0 + $1 * width }, 40, accuracy: 1e-9)
        XCTAssertEqual(series[.fcm]!.reduce(0) { $0 + $1 * width }, 7, accuracy: 1e-9)
        XCTAssertEqual(timeline.rates(retries: true).series[.apns]!.reduce(0) { $0 + $1 * width }, 3, accuracy: 1e-9)
    }
}
