import PushcastAPNs
import PushcastCore
import PushcastEngine
import PushcastFCM
import PushcastInput
import PushcastTransport
import PushcastWire

/// One seed's campaign: its input, its lanes' shapes and its servers' faults, all drawn from the
/// seed, so that `pushcast simulate --seed N` replays a finding exactly.
public struct SimulationScenario {
    public let seed: UInt64
    public var rows: [SimulatedRow]
    public var faults: [ProviderID: FaultModel]
    public var connections: [ProviderID: Int]
    public var workers: [ProviderID: Int]
    public var streamsPerConnection: Int
    public var retry: RetryPolicy
    public var resendsMax: Int
    public var requestTimeoutNanoseconds: UInt64
    /// The row deadline (`--request-timeout`), when this seed sets one.
    public var rowDeadlineNanoseconds: UInt64?
    /// The pushcast process dies (or the machine loses power) this long after each start
    /// (virtual time), and is restarted with `--resume`; empty for most seeds.
    public var crashes: [SimulatedCrash]
    /// Disk faults (EIO, a full disk) planted in the simulated storage; none for most seeds.
    public var storageFaults = StorageFaults()
    /// `--fsync`: never only for seeds without a power loss (the design lets a power loss undo
    /// unsynced reservations then).
    public var syncPolicy = SyncPolicy.batch
    /// A bug planted in the resume (a test shows the sweep catches it); nil: none.
    public var resumeMutation: ResumeMutation? = nil
    /// Resume as `--retry-unknown` does, sending again the rows that may have gone out (a test
    /// sets it to show that the invariants catch the double sends this allows).
    public var resumeRetriesUnknown = false
    /// One provider's server stops answering for hours (every connection reset, every connect
    /// refused): the breaker must stop the lane, and a resume once the server is back finishes
    /// the campaign. Nil for most seeds.
    public var serverDeath: ServerDeath?
    /// The network between pushcast and the servers.
    public var network: NetworkModel
    /// Keep the results lines in the report (`SimulationReport.results`), for a test that
    /// compares two runs of one seed.
    public var keepsResults = false
    /// A bug planted in the client worker (a test shows the sweep catches it); nil: none.
    public var mutation: ClientWorkerMutation? = nil
    /// FCM's `--rate` (its limiter, which throttles and pauses on provider-wide 429s); nil: none.
    public var fcmRatePerSecond: Double? = nil

    public init(seed: UInt64) {
        self.seed = seed
        let random = SplitMix64(seed: seed)
        rows = SimulatedRow.make(count: 20 + Int(random.next(below: 1500)), random: random)
        faults = [.apns: .random(random), .fcm: .random(random)]
        connections = [.apns: 1 + Int(random.next(below: 4)), .fcm: 1 + Int(random.next(below: 3))]
        workers = [.apns: 1 + Int(random.next(below: 2)), .fcm: 1]
        streamsPerConnection = [1, 4, 32, 100, 1000][Int(random.next(below: 5))]
        retry = RetryPolicy(delayBaseNanoseconds: 50_000_000, delayMaxNanoseconds: 5_000_000_000, attemptsMax: 1 + Int(random.next(below: 5)))
        resendsMax = Int(random.next(below: 12))
        requestTimeoutNanoseconds = 1_000_000_000 + random.next(below: 10_000_000_000)
        rowDeadlineNanoseconds = random.next(below: 3) == 0 ? 5_000_000_000 + random.next(below: 60_000_000_000) : nil
        network = .random(SplitMix64(seed: seed ^ 0x4E45_5457_4F52_4B00))
        serverDeath = ServerDeath.random(SplitMix64(seed: seed ^ 0x4445_4154_4800_0000))
        let times = (0..<Int(random.next(below: 4) == 0 ? 1 + random.next(below: 3) : 0)).map { _ in random.next(below: 3_000_000_000) }
        // The storage's draws come from a stream of their own, so that every other draw of a
        // seed stays what it was.
        let disk = SplitMix64(seed: seed ^ 0x5354_4F52_4147_4500)
        crashes = times.map { SimulatedCrash(atNanoseconds: $0, powerLoss: disk.next(below: 2) == 0) }
        let policies: [SyncPolicy] = crashes.contains(where: \.powerLoss) ? [.batch, .always] : [.batch, .always, .never]
        syncPolicy = policies[Int(disk.next(below: UInt64(policies.count)))]
        storageFaults = .random(disk)
    }

    /// Whether the runs keep a journal and results files (on `SimulatedStorage`): seeds that
    /// stop and resume, or plant disk faults. The others record outcomes in memory.
    public var durable: Bool { !crashes.isEmpty || serverDeath != nil || !storageFaults.isEmpty }

    /// The input file: a CSV with a header row.
    public var csv: [UInt8] {
        var text = "token,platform,name\n"
        for row in rows { text += "\(row.token),\(row.platform),\(row.name)\n" }
        return Array(text.utf8)
    }
}

/// A stop of the pushcast process in mid-campaign.
public struct SimulatedCrash: Sendable, CustomStringConvertible {
    /// How long after the run's start (virtual time).
    public var atNanoseconds: UInt64
    /// The machine loses power, instead of only the process dying: every unsynced byte is lost
    /// (a torn prefix of a file's unsynced tail may survive) and the boot id changes.
    public var powerLoss: Bool

    public init(atNanoseconds: UInt64, powerLoss: Bool) {
        self.atNanoseconds = atNanoseconds
        self.powerLoss = powerLoss
    }

    public var description: String { "\(atNanoseconds / 1_000_000) ms" + (powerLoss ? " (power loss)" : "") }
}

extension StorageFaults {
    /// One seed in eight: an EIO on a write, on a sync, or a disk that fills.
    static func random(_ random: SplitMix64) -> StorageFaults {
        var faults = StorageFaults()
        guard random.next(below: 8) == 0 else { return faults }
        switch random.next(below: 3) {
        case 0: faults.failingWrite = 1 + Int(random.next(below: 400))
        case 1: faults.failingSync = 1 + Int(random.next(below: 40))
        default:
            faults.diskFullAfterWrites = 1 + Int(random.next(below: 300))
            faults.slackBytes = Int(random.next(below: 4096))
        }
        return faults
    }
}

/// Bugs a test plants in the resume, to show the crash sweep catches them.
public enum ResumeMutation: String, CaseIterable, Sendable {
    /// The resume forgets the dispatch marks: every row marked `D` (handed to a connection) is
    /// taken for unsent, and sent again.
    case forgetsDispatchMarks
    /// The resume distrusts every run: every reserved row without a line is written off as
    /// unknown, sent or not.
    case distrustsDispatchMarks
}

/// A server that goes down for longer than any run may last.
public struct ServerDeath: Sendable {
    public var provider: ProviderID
    public var atNanoseconds: UInt64
    public var lastsNanoseconds: UInt64 = 6 * 3600 * 1_000_000_000
    /// Instead of refusing connections, the server closes each one right after its TLS handshake.
    public var closesAfterHandshake = false

    /// One seed in 25.
    static func random(_ random: SplitMix64) -> ServerDeath? {
        guard random.next(below: 25) == 0 else { return nil }
        var death = ServerDeath(provider: random.next(below: 2) == 0 ? .apns : .fcm, atNanoseconds: 300_000_000 + random.next(below: 2_000_000_000))
        death.closesAfterHandshake = random.next(below: 2) == 0
        return death
    }
}

/// One input row and what the simulation expects of it.
public struct SimulatedRow: Sendable {
    public enum Kind: Sendable { case apns, fcm, badToken, unknownPlatform, duplicate }
    public var token: String
    public var platform: String
    public var name: String
    public var kind: Kind

    public static func make(count: Int, random: SplitMix64) -> [SimulatedRow] {
        var rows: [SimulatedRow] = []
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        for i in 0..<count {
            let roll = random.next(below: 100)
            if roll < 3 {
                rows.append(SimulatedRow(token: "not-a-token-\(i)", platform: "ios", name: "n\(i)", kind: .badToken))
            } else if roll < 4 {
                let hex = (0..<4).map { _ in String(random.next() | (1 << 63), radix: 16) }.joined()
                rows.append(SimulatedRow(token: hex, platform: "bogus", name: "n\(i)", kind: .unknownPlatform))
            } else if roll < 6, let earlier = rows.last(where: { $0.kind == .apns || $0.kind == .fcm }) {
                rows.append(SimulatedRow(token: earlier.token, platform: earlier.platform, name: "n\(i)", kind: .duplicate))
            } else if roll < 60 {
                let hex = (0..<4).map { _ in String(random.next() | (1 << 63), radix: 16) }.joined()
                rows.append(SimulatedRow(token: hex, platform: "ios", name: "n\(i)", kind: .apns))
            } else {
                let tail = String((0..<120).map { _ in alphabet[Int(random.next(below: UInt64(alphabet.count)))] })
                rows.append(SimulatedRow(token: "f\(i):APA91b\(tail)", platform: "android", name: "n\(i)", kind: .fcm))
            }
        }
        return rows
    }
}

/// An outcome sink that keeps every record in memory, for the invariants.
public final class RecordingSink: OutcomeSink {
    public private(set) var records: [OutcomeRecord] = []
    public init() {}
    public var name: String { "the simulation's records" }
    public func record(_ record: inout OutcomeRecord) { records.append(record) }
    public func flush(final: Bool) throws(CampaignError) {}
    public func reserve(rows: Int, rowsLeft: Int?) -> Bool { true }
    public func sync(durable: Bool) throws(CampaignError) {}
    public func close() throws(CampaignError) {}
}
