import PushcastCommandLine
import PushcastSimulation

/// `pushcast simulate`: whole campaigns in memory against simulated APNs and FCM servers that
/// misbehave, one per seed, each checked against the invariants (docs/ARCHITECTURE.md,
/// "The simulator"). A failing seed replays exactly with `--seed N`.
enum SimulateCommand {
    static let spec = CommandSpec(
        name: "pushcast simulate",
        summary: "Run simulated campaigns over many seeds (no sockets, virtual time) and check every invariant.",
        options: [
            .value("seeds", metavar: "N", help: "how many seeds to run", defaultDescription: "1000"),
            .value("first", metavar: "SEED", help: "the first seed", defaultDescription: "1"),
            .value("seed", metavar: "SEED", help: "run this one seed (and print its scenario)"),
            .flag("verbose", help: "print every seed's report, not only the failing ones"),
        ])

    static func run(_ parsed: ParsedArguments) throws -> ExitStatus {
        let verbose = parsed.flag("verbose")
        let seeds: ClosedRange<UInt64>
        if let seed = try parsed.int("seed", range: 0...Int.max) {
            seeds = UInt64(seed)...UInt64(seed)
        } else {
            let first = UInt64(try parsed.int("first", default: 1, range: 0...Int.max))
            let count = UInt64(try parsed.int("seeds", default: 1000, range: 1...10_000_000))
            seeds = first...(first + count - 1)
        }
        var failed = 0, rows = 0, requests = 0
        for seed in seeds {
            let scenario = SimulationScenario(seed: seed)
            let report = CampaignSimulator.run(scenario)
            rows += report.rows
            requests += report.requests
            if seeds.count == 1 { Console.out("faults: \(report.faults)") }
            if !report.violations.isEmpty {
                failed += 1
                Console.out("FAIL " + report.description)
            } else if verbose || seeds.count == 1 {
                Console.out(report.description)
            }
        }
        Console.out("\(seeds.count) seeds, \(failed) failing; \(rows) rows, \(requests) requests simulated")
        return failed == 0 ? .success : .someFailed
    }
}
