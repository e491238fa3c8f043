import XCTest
import PushcastCore
@testable import PushcastEngine

/// The metrics text in memory: labels from the fixed reason set, escaping, histogram buckets,
/// the rate between renderings, and the last-success time.
final class CampaignMetricsTests: XCTestCase {
    func testReasonLabelsComeFromTheFixedSet() {
        XCTAssertEqual(ReasonCatalog.standard.label("Unregistered"), "Unregistered")
        XCTAssertEqual(ReasonCatalog.standard.label("UNREGISTERED"), "UNREGISTERED")
        XCTAssertEqual(ReasonCatalog.standard.label(OutcomeReason.timeout), "Timeout")
        XCTAssertEqual(ReasonCatalog.standard.label("Status503"), "Status5xx")
        XCTAssertEqual(ReasonCatalog.standard.label("Status4290"), "other")
        XCTAssertEqual(ReasonCatalog.standard.label("0123456789abcdef0123456789abcdef"), "other")
        XCTAssertEqual(ReasonCatalog.standard.label("Unregistered\""), "other")
        XCTAssertNotNil(ReasonCatalog.standard.entry("BadDeviceToken")?.action)
        // A server's detail after a known reason (Web Push's errno) keeps the reason's label and entry.
        XCTAssertEqual(ReasonCatalog.standard.label("Gone (errno 106)"), "Gone")
        XCTAssertEqual(ReasonCatalog.standard.entry("BadVAPID (BadJwtToken)")?.source, "Web Push")
        XCTAssertEqual(ReasonCatalog.standard.label("Hostile (errno 1)"), "other")
        XCTAssertEqual(ReasonCatalog.standard.label("Gone (errno 106"), "other")
    }

    private func progress(_ summary: CampaignSummary, elapsed: Double, final: Bool = false) -> CampaignProgress {
        CampaignProgress(summary: summary, lanes: [.init(provider: .apns, inFlight: 7, retries: 3)], totalRows: 10,
                         elapsedNanoseconds: UInt64(elapsed * 1e9), isFinal: final, isDraining: false)
    }

    func testRenderingCountsLabelsAndRate() {
        var summary = CampaignSummary()
        for (row, reason) in ["Unregistered", "Hostile1", "Hostile2"].enumerated() {
            summary.record(OutcomeRecord(row: row + 1, id: nil, token: "ab\(row)", provider: .apns, outcome: .pruned, status: 410,
                                         reason: reason, attempts: 1, latencyMilliseconds: 30))
        }
        summary.record(OutcomeRecord(row: 4, id: nil, token: "zz", provider: nil, outcome: .invalid, reason: OutcomeReason.malformedRow))
        var metrics = CampaignMetrics(campaign: "spring \"sale\"\\n", shard: nil, lastSuccessEpochSeconds: 1_700_000_000)
        let first = metrics.render(progress(summary, elapsed: 2), nowEpochSeconds: 1_800_000_000)
        let base = #"campaign="spring \"sale\"\\n",shard="0/1""#
        XCTAssertTrue(first.contains("pushcast_rows_total{\(base),provider=\"apns\",outcome=\"pruned\"} 3\n"), first)
        XCTAssertTrue(first.contains("pushcast_rows_total{\(base),provider=\"none\",outcome=\"invalid\"} 1\n"), first)
        XCTAssertTrue(first.contains("pushcast_reason_rows_total{\(base),provider=\"apns\",reason=\"other\"} 2\n"), first)
        XCTAssertTrue(first.contains("pushcast_reason_rows_total{\(base),provider=\"apns\",reason=\"Unregistered\"} 1\n"), first)
        XCTAssertFalse(first.contains("Hostile"))
        XCTAssertTrue(first.contains("pushcast_in_flight{\(base),provider=\"apns\"} 7\n"), first)
        XCTAssertTrue(first.contains("pushcast_rows_per_second{\(base),provider=\"apns\"} 1.5\n"), first)
        XCTAssertTrue(first.contains("pushcast_latency_seconds_bucket{\(base),provider=\"apns\",le=\"0.025\"} 0\n"), first)
        XCTAssertTrue(first.contains("pushcast_latency_seconds_bucket{\(base),provider=\"apns\",le=\"0.05\"} 3\n"), first)
        XCTAssertTrue(first.contains("pushcast_latency_seconds_bucket{\(base),provider=\"apns\",le=\"+Inf\"} 3\n"), first)
        XCTAssertTrue(first.contains("pushcast_campaign_running{\(base)} 1\n"), first)
        XCTAssertTrue(first.contains("pushcast_campaign_last_success_timestamp_seconds{\(base)} 1700000000\n"), first)
        XCTAssertTrue(first.contains("pushcast_campaign_start_timestamp_seconds{\(base)} 1799999998\n"), first)
        // Two seconds later, no new rows: the rate is 0; the final rendering sets the success time.
        let last = metrics.render(progress(summary, elapsed: 4, final: true), nowEpochSeconds: 1_800_000_002)
        XCTAssertTrue(last.contains("pushcast_rows_per_second{\(base),provider=\"apns\"} 0\n"), last)
        XCTAssertTrue(last.contains("pushcast_campaign_running{\(base)} 0\n"), last)
        XCTAssertTrue(last.contains("pushcast_campaign_last_success_timestamp_seconds{\(base)} 1800000002\n"), last)
        XCTAssertEqual(CampaignMetrics.lastSuccess(inExposition: last), 1_800_000_002)
    }
}
