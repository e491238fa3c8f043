import PushcastCore
import PushcastEngine
import PushcastSimulation
import PushcastTransport
import PushcastWire
import XCTest

/// The whole-campaign simulator over a sweep of seeds (`make simulate SEEDS=…` runs far more),
/// and proof that its invariants catch a broken engine.
final class SimulationTests: XCTestCase {
    /// Seeds the test sweep runs; PUSHCAST_SIM_SEEDS overrides it.
    static var seeds: ClosedRange<UInt64> {
        let count = ProcessInfo.processInfo.environment["PUSHCAST_SIM_SEEDS"].flatMap { UInt64($0) } ?? 40
        return 1...max(1, count)
    }

    /// The reports of seeds 1 to 40, run once for the two tests that sweep them.
    static let firstForty: [UInt64: SimulationReport] = Dictionary(uniqueKeysWithValues: (UInt64(1)...40).map {
        ($0, CampaignSimulator.run(SimulationScenario(seed: $0)))
    })

    static func report(seed: UInt64) -> SimulationReport {
        firstForty[seed] ?? CampaignSimulator.run(SimulationScenario(seed: seed))
    }

    func testSeedSweepKeepsEveryInvariant() {
        var failing: [String] = []
        var requests = 0
        for seed in Self.seeds {
            let report = Self.report(seed: seed)
            requests += report.requests
            if !report.violations.isEmpty { failing.append(report.description) }
        }
        XCTAssertEqual(failing, [], "replay one with: pushcast simulate --seed N --verbose")
        XCTAssertGreaterThan(requests, Int(Self.seeds.count) * 10, "the sweep sent next to nothing")
    }

    /// One seed twice: the same report, the same virtual time and the same results lines (their
    /// time fields aside), through the real client, TLS and HTTP/2 over the simulated network.
    func testASeedReplaysExactly() {
        var scenario = SimulationScenario(seed: 12)
        scenario.keepsResults = true
        let first = CampaignSimulator.run(scenario)
        let second = CampaignSimulator.run(scenario)
        XCTAssertEqual(first.description, second.description)
        XCTAssertEqual(first.virtualSeconds, second.virtualSeconds)
        XCTAssertEqual(first.results.count, scenario.rows.count)
        XCTAssertEqual(first.results, second.results)
        XCTAssertTrue(first.results.contains { $0.contains(#""outcome":"delivered""#) }, "\(first.results.prefix(2))")
        XCTAssertNotEqual(first.description, CampaignSimulator.run(SimulationScenario(seed: 13)).description)
    }

    /// The sweep includes storms: resets, drops, GOAWAYs, outages, 429 and 503 all happen.
    func testTheSweepCoversEveryFaultAndOutcome() {
        var outcomes = Set<OutcomeKind>()
        var stormy = 0
        for seed in UInt64(1)...40 {
            let scenario = SimulationScenario(seed: seed)
            if scenario.faults[.apns]!.refuse > 0 { stormy += 1 }
            outcomes.formUnion(Self.report(seed: seed).outcomes.keys)
        }
        XCTAssertEqual(outcomes, [.delivered, .pruned, .failed, .invalid, .duplicate, .unknown])
        XCTAssertGreaterThan(stormy, 10)
    }

    /// An injected bug: the engine takes some delivered notifications for refused streams, and
    /// so sends them again. The simulator must say so, naming the token.
    func testABugThatResendsADeliveredRowIsCaught() {
        var caught: [String] = []
        for seed in UInt64(1)...10 {
            let report = CampaignSimulator.run(SimulationScenario(seed: seed)) { ResendsDelivered($0) }
            caught += report.violations.filter { $0.contains("reached the device 2 times") }
        }
        XCTAssertGreaterThan(caught.count, 0)
        print("injected resend caught \(caught.count) times, e.g.: \(caught.first ?? "")")
    }

    /// An injected bug: a workload that drops some answers on the floor (no outcome, no retry).
    func testABugThatLosesAnOutcomeIsCaught() {
        var found: [String] = []
        for seed in UInt64(1)...5 {
            found += CampaignSimulator.run(SimulationScenario(seed: seed)) { LosesAnswers($0) }.violations
        }
        XCTAssertTrue(found.contains { $0.contains("outcomes out") || $0.contains("did not end") }, "\(found.prefix(3))")
    }
}

/// A workload that forwards everything to the real one, so that a test can bend one call.
class ForwardingWorkload: CampaignWorkload {
    let inner: any CampaignWorkload
    var answers = 0
    init(_ inner: any CampaignWorkload) { self.inner = inner }
    func nextRequest() -> (request: HTTP2Request, tag: UInt64)? { inner.nextRequest() }
    func submitNext(_ submit: (UnsafePointer<HTTP2Request>, UInt64) -> Void) -> Bool { inner.submitNext(submit) }
    func received(tag: UInt64, response: HTTP2Response) { inner.received(tag: tag, response: response) }
    func failed(tag: UInt64, failure: HTTP2StreamFailure) { inner.failed(tag: tag, failure: failure) }
    var isExhausted: Bool { inner.isExhausted }
    var nextReadyNanoseconds: UInt64? { inner.nextReadyNanoseconds }
    func turnEnded() { inner.turnEnded() }
    var shouldAbandon: Bool { inner.shouldAbandon }
    func flush() { inner.flush() }
}

/// Every 50th 200 is taken for REFUSED_STREAM: the row goes out again.
final class ResendsDelivered: ForwardingWorkload {
    override func received(tag: UInt64, response: HTTP2Response) {
        answers += 1
        if response.status == 200 && answers % 50 == 0 { inner.failed(tag: tag, failure: .refusedStream) } else { inner.received(tag: tag, response: response) }
    }
}

/// Every 100th answer vanishes.
final class LosesAnswers: ForwardingWorkload {
    override func received(tag: UInt64, response: HTTP2Response) {
        answers += 1
        if answers % 100 != 0 { inner.received(tag: tag, response: response) }
    }
}

/// Crashes of the pushcast process mid-campaign, each resumed from the files it left.
final class SimulatedCrashTests: XCTestCase {
    func testCrashesAreResumedAndEveryInvariantHolds() {
        var crashes = 0, failing: [String] = []
        for seed in UInt64(1)...60 {
            let scenario = SimulationScenario(seed: seed)
            guard !scenario.crashes.isEmpty else { continue }
            let report = CampaignSimulator.run(scenario)
            crashes += report.crashes
            if !report.violations.isEmpty { failing.append(report.description) }
        }
        XCTAssertEqual(failing, [])
        XCTAssertGreaterThan(crashes, 10, "the crash seeds crashed next to never")
    }

    /// An injected bug: the resume sends again the rows that may have gone out before the crash.
    func testAResumeThatResendsRowsInFlightIsCaught() {
        var caught: [String] = []
        for seed in UInt64(1)...60 {
            var scenario = SimulationScenario(seed: seed)
            guard !scenario.crashes.isEmpty else { continue }
            scenario.resumeRetriesUnknown = true
            caught += CampaignSimulator.run(scenario).violations.filter { $0.contains("reached the device 2 times") }
        }
        XCTAssertGreaterThan(caught.count, 0)
        print("resume resending rows in flight caught \(caught.count) times, e.g.: \(caught.first ?? "")")
    }
}

/// The throttle rule, in the simulator: FCM at 100/s, whose simulated 429s are one device's
/// quota (QUOTA_EXCEEDED, nothing naming the project; Retry-After 1 s).
final class SimulatedThrottleTests: XCTestCase {
    private func scenario(device429Share: Double) -> SimulationScenario {
        var scenario = SimulationScenario(seed: 77)
        scenario.rows = SimulatedRow.make(count: 1_000, random: SplitMix64(seed: 77)).filter { $0.kind == .fcm }
        var calm = FaultModel()
        calm.deadTokens = 0
        var fcm = calm
        fcm.status429 = device429Share
        scenario.faults = [.apns: calm, .fcm: fcm]
        scenario.fcmRatePerSecond = 100
        scenario.crashes = []
        scenario.rowDeadlineNanoseconds = nil
        scenario.retry = RetryPolicy(delayBaseNanoseconds: 50_000_000, delayMaxNanoseconds: 5_000_000_000, attemptsMax: 5)
        return scenario
    }

    /// 2 % of devices at their quota: the lane keeps its pace (rows ÷ rate, plus the last
    /// throttled rows' Retry-After); every row delivered.
    func testAFewDevicesAtTheirQuotaNeverSlowTheProvider() {
        let calm = scenario(device429Share: 0.02)
        let report = CampaignSimulator.run(calm)
        XCTAssertEqual(report.violations, [])
        let rows = Double(calm.rows.count)
        XCTAssertEqual(report.outcomes[.delivered], calm.rows.count, "\(report)")
        XCTAssertLessThan(report.virtualSeconds, rows / 100 * 1.05 + 1.5, "\(report)")
    }
}

/// Bugs planted in the real `ClientWorker` (`ClientConfiguration.mutation`): the default sweep
/// must catch each one, and the test says which seed and which invariant did.
final class ClientWorkerMutationTests: XCTestCase {
    func testTheDefaultSweepCatchesEveryPlantedBug() {
        for mutation in ClientWorkerMutation.allCases {
            let caught = firstCatch(seeds: SimulationTests.seeds) { scenario in
                scenario.mutation = mutation
                return true
            }
            XCTAssertNotNil(caught, "\(mutation.rawValue) went unnoticed by seeds \(SimulationTests.seeds)")
            print("mutation \(mutation.rawValue) caught by \(caught ?? "nothing")")
        }
    }
}

/// `mock --misbehave`'s hostile answers in the simulator: a body that never ends, a 128 KiB
/// header block, a PING burst before the answer. The server processed each of those streams, so
/// the device got the push; the client gives up on the oversized answers within its limits,
/// records them unknown, and never sends them again (the invariants check it).
final class SimulatedHostileAnswerTests: XCTestCase {
    func testOversizedAnswersAreUnknownAndNeverResent() {
        var scenario = SimulationScenario(seed: 31)
        scenario.rows = SimulatedRow.make(count: 400, random: SplitMix64(seed: 31))
        var hostile = FaultModel()
        hostile.deadTokens = 0.05
        hostile.hugeBody = 0.05
        hostile.hugeHeaders = 0.05
        hostile.pingFlood = 0.02
        scenario.faults = [.apns: hostile, .fcm: hostile]
        scenario.crashes = []
        let report = CampaignSimulator.run(scenario)
        XCTAssertEqual(report.violations, [], "\(report)")
        XCTAssertGreaterThan(report.outcomes[.unknown] ?? 0, 0, "\(report)")
        XCTAssertGreaterThan(report.outcomes[.delivered] ?? 0, 0, "\(report)")
        XCTAssertGreaterThan(report.outcomes[.pruned] ?? 0, 0, "\(report)")

        var calm = scenario
        var quiet = FaultModel()
        quiet.deadTokens = 0.05
        calm.faults = [.apns: quiet, .fcm: quiet]
        let calmReport = CampaignSimulator.run(calm)
        XCTAssertEqual(calmReport.violations, [])
        // The seed's network loses a few streams either way; the oversized answers add their own.
        XCTAssertGreaterThan(report.outcomes[.unknown] ?? 0, (calmReport.outcomes[.unknown] ?? 0) + 10, "\(report)\n\(calmReport)")
    }
}

/// The first violation a sweep of `seeds` finds, named by its seed; `bend` plants the bug in
/// each seed's scenario, or says to skip the seed (false).
func firstCatch(seeds: ClosedRange<UInt64>, _ bend: (inout SimulationScenario) -> Bool) -> String? {
    for seed in seeds {
        var scenario = SimulationScenario(seed: seed)
        guard bend(&scenario) else { continue }
        if let violation = CampaignSimulator.run(scenario).violations.first { return "seed \(seed): \(violation)" }
    }
    return nil
}
