import PushcastAPNs
import PushcastCore
import PushcastSystem
@testable import PushcastEngine
import PushcastFCM
import PushcastInput
import PushcastJSON
import PushcastProviderKit
import XCTest

/// `--shard`: the shard function on fixed vectors, every row in exactly one shard, `--shard auto`
/// from the environment, and the merge's bookkeeping.
final class ShardTests: XCTestCase {
    // MARK: - The hash

    /// XXH64 against the reference implementation (Python's `xxhash` package, which wraps it):
    /// short inputs, a seed, and lengths that take the 32-byte lanes, 8- and 4-byte steps and
    /// single bytes.
    func testXXH64MatchesTheReferenceImplementation() {
        func xxh(_ bytes: [UInt8], seed: UInt64 = 0) -> UInt64 { bytes.withUnsafeBytes { XXH64.hash($0, seed: seed) } }
        XCTAssertEqual(xxh([]), 0xef46_db37_51d8_e999)
        XCTAssertEqual(xxh(Array("a".utf8)), 0xd24e_c4f1_a98c_6e5b)
        XCTAssertEqual(xxh(Array("abc".utf8)), 0x44bc_2cf5_ad77_0999)
        XCTAssertEqual(xxh(Array("abc".utf8), seed: 0x9E37_79B9_7F4A_7C15), 0x2ed0_f59d_6b43_ac8b)
        XCTAssertEqual(xxh((0..<100).map { UInt8($0) }), 0x6ac1_e580_3216_6597)
        XCTAssertEqual(xxh((0..<37).map { UInt8($0) }, seed: 7), 0x69e0_c889_396a_faf7)
    }

    /// Fixed vectors of the documented function (XXH64 of the normalised token, seeded with
    /// XXH64 of the provider's name), computed independently with Python's `xxhash`: they must
    /// never change, or shards of one campaign sent by two versions would disagree.
    func testShardHashFixedVectors() {
        let vectors: [(String, String, UInt64, Int, Int)] = [
            ("apns", String(repeating: "0", count: 64), 0x366a_dba8_8bbf_9e36, 0, 54),
            ("apns", String(repeating: "a1b2c3d4", count: 8), 0x4a87_eb30_7358_53c6, 1, 6),
            ("fcm", "fAbC:APA91b-xyz", 0x1f5d_8f8b_9d86_d38f, 1, 15),
            ("fcm", "", 0x1c0b_0bac_e6a5_ce10, 2, 16),
        ]
        let layout = RowLayout(growing: ["token"], idColumn: nil, defaultProvider: .apns)
        let preparer = RowPreparer(layout: layout, renderings: [:], campaign: "c", fileName: "v.csv", sends: [.apns, .fcm],
                                   recordsUnroutable: true, duplicates: .exact(expectedRows: 0), configured: [.apns, .fcm])
        for (provider, token, hash, mod3, mod64) in vectors {
            XCTAssertEqual(ShardSpec.keyHash(provider: provider, token: token), hash, "\(provider) \(token)")
            XCTAssertEqual(preparer.shardHash(ProviderCatalog.standard.provider(named: provider)!, token), hash)
            XCTAssertTrue(ShardSpec(index: mod3, count: 3).owns(keyHash: hash))
            XCTAssertTrue(ShardSpec(index: mod64, count: 64).owns(keyHash: hash))
        }
        XCTAssertTrue(ShardSpec(index: 2, count: 3).owns(row: 5))
        XCTAssertEqual(ShardSpec(index: 4, count: 8).expand("out/r-{shard}.ndjson.{shard}"), "out/r-4.ndjson.4")
    }

    // MARK: - Every row in exactly one shard

    /// A mixed APNs/FCM file with repeated tokens (also across case and spacing), malformed rows,
    /// unknown platforms, missing and invalid tokens.
    private func mixedInput(rows: Int) -> [UInt8] {
        let random = SplitMix64(seed: 7)
        var lines = ["device_id,token,platform"]
        var earlier: [(String, String)] = []
        for i in 1...rows {
            let ios = i % 3 != 0
            var token = ios ? String(format: "%016llx%016llx%016llx%016llx", random.next(), random.next(), random.next(), random.next())
                : "f\(random.next()):APA91b\(random.next())"
            var platform = ios ? "ios" : "android"
            switch i % 17 {
            case 2 where !earlier.isEmpty: (token, platform) = earlier[Int(random.next(below: UInt64(earlier.count)))]
            case 3 where !earlier.isEmpty && ios: token = "<" + (earlier.first { $0.1 == "ios" }?.0.uppercased() ?? token) + ">"
            case 5: token = "zz"
            case 7: platform = "blackberry"
            case 11: token = ""
            case 13:
                lines.append("d\(i),\(token),\(platform),extra")
                continue
            default: earlier.append((token, platform))
            }
            lines.append("d\(i),\(token),\(platform)")
        }
        return Array((lines.joined(separator: "\n") + "\n").utf8)
    }

    private enum Fate: Equatable { case send, finished(OutcomeKind, duplicateOf: Int?) }

    /// Each row's fate in one shard (rows of other shards are absent), through the planned
    /// duplicate detection as a file is read by `send`.
    private func fates(_ bytes: [UInt8], shard: ShardSpec) throws -> [Int: Fate] {
        let reader = try TokenFileReader(source: MemoryByteSource(bytes, chunkSize: 997), format: .csv, fileName: "m.csv")
        let columns = reader.columns
        let renderings: [ProviderID: any ProviderRendering] = [
            .apns: APNsRendering(template: try PayloadTemplate.compile(text: #"{"aps":{"alert":"{{device_id}}"}}"#, columns: columns), payloadBytesMax: 4096),
            .fcm: FCMRendering(template: try FCMMessageTemplate.compile(text: #"{"data":{"d":"{{device_id}}"}}"#, columns: columns, validateOnly: false, source: "t")),
        ]
        let layout = try RowLayout(columns: columns, idColumn: nil, defaultProvider: .apns, fileName: "m.csv")
        var keyer = RowPreparer(layout: layout, renderings: [:], campaign: "c", fileName: "m.csv", sends: [.apns, .fcm],
                                recordsUnroutable: true, duplicates: .exact(expectedRows: 0), configured: [.apns, .fcm])
        keyer.shard = shard
        var first = try TokenFileReader(source: MemoryByteSource(bytes, chunkSize: 4096), format: .csv, fileName: "m.csv")
        // As `send` reads a file: the first read marks the shard's rows, the second skips the others by the map.
        let map = try ShardRowMap(files: SystemFiles(), directory: NSTemporaryDirectory())
        let plan = try DuplicatePlan.build(reader: &first, expectedRows: 100_000, files: SystemFiles(), directory: NSTemporaryDirectory(),
                                           malformed: { try map.mark(row: $0, owned: shard.owns(row: $0)) }) { view in
            let key = keyer.planKey(view)
            try map.mark(row: view.row, owned: key.owned)
            return key.hashes
        }
        try map.finish()
        var preparer = RowPreparer(layout: layout, renderings: renderings, campaign: "c", fileName: "m.csv", sends: [.apns, .fcm],
                                   recordsUnroutable: true, duplicates: .planned(plan))
        preparer.shard = shard
        preparer.shardRows = map.cursor()
        var out: [Int: Fate] = [:]
        while let record = try reader.next() {
            switch preparer.prepare(record) {
            case .send(let n): XCTAssertNil(out[n.row]); out[n.row] = .send
            case .finished(let o): XCTAssertNil(out[o.row]); out[o.row] = .finished(o.outcome, duplicateOf: o.duplicateOf)
            case .skipped: break
            }
        }
        return out
    }

    func testEveryRowInExactlyOneShardWithTheUnshardedFate() throws {
        let rows = 3_000
        let bytes = mixedInput(rows: rows)
        let whole = try fates(bytes, shard: .whole)
        XCTAssertEqual(Set(whole.keys), Set(1...rows))
        let duplicates = whole.values.filter { if case .finished(.duplicate, _) = $0 { return true } else { return false } }.count
        XCTAssertGreaterThan(duplicates, 150)
        XCTAssertGreaterThan(whole.values.filter { $0 == .finished(.invalid, duplicateOf: nil) }.count, 600)
        for count in [1, 2, 3, 7, 64] {
            var union: [Int: Fate] = [:]
            var sizes: [Int] = []
            for index in 0..<count {
                let part = try fates(bytes, shard: ShardSpec(index: index, count: count))
                sizes.append(part.count)
                for (row, fate) in part {
                    XCTAssertNil(union[row], "row \(row) in two of \(count) shards")
                    union[row] = fate
                }
            }
            // Exactly once, with the same fate: duplicates name the campaign-wide first row.
            XCTAssertEqual(union, whole, "N=\(count)")
            if count > 1 { XCTAssertGreaterThan(sizes.min()!, rows / count / 2, "N=\(count): \(sizes)") }
        }
    }

    /// The input fingerprint, 8 bytes at a time, must equal the byte-at-a-time definition (journals
    /// of earlier versions hold it), however the stream is cut.
    func testContentHashWordsEqualBytes() {
        let random = SplitMix64(seed: 3)
        let bytes = (0..<10_000).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15, tail: UInt64 = 0, tailCount = 0
        func mix(_ w: UInt64) { state = (state ^ w) &* 0xBF58_476D_1CE4_E5B9; state ^= state >> 31 }
        for byte in bytes { tail = tail << 8 | UInt64(byte); tailCount += 1; if tailCount == 8 { mix(tail); tail = 0; tailCount = 0 } }
        mix(tail ^ UInt64(tailCount) << 56)
        mix(UInt64(bytes.count))
        let expected = String(repeating: "0", count: 16 - String(state, radix: 16).count) + String(state, radix: 16)
        for cut in [1, 3, 7, 8, 13, 4096] {
            var hash = ContentHash()
            var start = 0
            while start < bytes.count {
                let end = min(bytes.count, start + cut + Int(random.next(below: 5)))
                bytes[start..<end].withUnsafeBytes { hash.add($0) }
                start = end
            }
            XCTAssertEqual(hash.hex, expected, "chunks of ~\(cut)")
        }
    }

    // MARK: - --shard and --shard auto

    func testParsesExplicitShards() throws {
        XCTAssertEqual(try ShardSpec.parse("0/8", environment: [:]), ShardSpec(index: 0, count: 8))
        XCTAssertEqual(try ShardSpec.parse("7/8", environment: [:]), ShardSpec(index: 7, count: 8))
        XCTAssertEqual(try ShardSpec.parse("0/1", environment: [:]), .whole)
        for bad in ["4/4", "8/4", "-1/4", "a/4", "1/0", "1/", "/4", "3", "1/2/3", "", "auto/0", "1/70000"] {
            XCTAssertThrowsError(try ShardSpec.parse(bad, environment: [:]), bad)
        }
        XCTAssertThrowsError(try ShardSpec.parse("4/4", environment: [:])) { error in
            XCTAssertTrue("\(error)".contains("below the count"), "\(error)")
        }
    }

    func testAutoReadsKubernetesAndSlurm() throws {
        XCTAssertEqual(try ShardSpec.parse("auto/4", environment: ["JOB_COMPLETION_INDEX": "3"]), ShardSpec(index: 3, count: 4))
        let slurm = ["SLURM_ARRAY_TASK_ID": "12", "SLURM_ARRAY_TASK_MIN": "10", "SLURM_ARRAY_TASK_COUNT": "5"]
        XCTAssertEqual(try ShardSpec.parse("auto", environment: slurm), ShardSpec(index: 2, count: 5))
        XCTAssertEqual(try ShardSpec.parse("auto/5", environment: slurm), ShardSpec(index: 2, count: 5))
        // Both engines' variables, agreeing.
        XCTAssertEqual(try ShardSpec.parse("auto", environment: slurm.merging(["JOB_COMPLETION_INDEX": "2"]) { $1 }), ShardSpec(index: 2, count: 5))
        XCTAssertEqual(try ShardSpec.parse("auto", environment: slurm.merging(["SLURM_ARRAY_TASK_STEP": "1"]) { $1 }), ShardSpec(index: 2, count: 5))
    }

    func testAutoRefusesWhatIsMissingOrContradictory() {
        let cases: [([String: String], String, String)] = [
            ([:], "auto/4", "JOB_COMPLETION_INDEX"),
            (["JOB_COMPLETION_INDEX": "1"], "auto", "auto/N"),
            (["JOB_COMPLETION_INDEX": "4"], "auto/4", "JOB_COMPLETION_INDEX=4"),
            (["JOB_COMPLETION_INDEX": "x1"], "auto/4", "JOB_COMPLETION_INDEX=x1"),
            (["JOB_COMPLETION_INDEX": "-1"], "auto/4", "JOB_COMPLETION_INDEX"),
            (["SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_COUNT": "4"], "auto", "SLURM_ARRAY_TASK_MIN"),
            (["SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_MIN": "0"], "auto", "SLURM_ARRAY_TASK_COUNT"),
            (["SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_COUNT": "3"], "auto", "not below"),
            (["SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_COUNT": "8"], "auto/4", "disagrees"),
            (["SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_MIN": "2", "SLURM_ARRAY_TASK_COUNT": "8"], "auto", "below SLURM_ARRAY_TASK_MIN"),
            (["SLURM_ARRAY_TASK_ID": "2", "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_COUNT": "8", "SLURM_ARRAY_TASK_STEP": "2"], "auto", "STEP"),
            (["SLURM_ARRAY_TASK_ID": "2", "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_COUNT": "8", "JOB_COMPLETION_INDEX": "1"], "auto", "disagree"),
            (["SLURM_ARRAY_TASK_ID": "two", "SLURM_ARRAY_TASK_MIN": "0"], "auto/4", "SLURM_ARRAY_TASK_ID=two"),
        ]
        for (env, text, needle) in cases {
            XCTAssertThrowsError(try ShardSpec.parse(text, environment: env), "\(text) \(env)") { error in
                XCTAssertTrue("\(error)".contains(needle), "\(text) \(env): \(error)")
            }
        }
    }

    // MARK: - Merge bookkeeping

    func testLedgerNamesMissingDoubledAndForeignRows() {
        var ledger = MergeLedger(inputRows: 10)
        for (row, shard) in [(1, 0), (2, 1), (2, 2), (3, 0), (6, 1), (7, 1), (7, 0), (12, 2)] { _ = ledger.take(row: row, shard: shard) }
        ledger.finish()
        XCTAssertEqual(ledger.written, 5)
        XCTAssertEqual(ledger.missing.rows, 2 + 3)
        XCTAssertEqual(ledger.missing.ranges.map(\.description), ["rows 4-5", "rows 8-10"])
        XCTAssertEqual(ledger.doubled.rows, 2)
        XCTAssertEqual(ledger.doubled.ranges.map(\.shards), [[1, 2], [0, 1]])
        XCTAssertEqual(ledger.beyond.rows, 1)
        XCTAssertFalse(ledger.isExact)
        XCTAssertEqual(ledger.report().count, 3)
        var exact = MergeLedger(inputRows: 3)
        for row in 1...3 { XCTAssertTrue(exact.take(row: row, shard: row % 2)) }
        exact.finish()
        XCTAssertTrue(exact.isExact)
    }

    func testResultLineRows() {
        func row(_ text: String, _ format: ResultsFormat) -> Int? { Array(text.utf8).withUnsafeBytes { resultLineRow($0, format: format) } }
        XCTAssertEqual(row("{\"row\":1234,\"id\":null}\n", .ndjson), 1234)
        XCTAssertEqual(row("77,d1,tok\n", .csv), 77)
        XCTAssertNil(row("row,id,token\n", .csv))
        XCTAssertNil(row("{\"id\":1}\n", .ndjson))
        XCTAssertNil(row("{\"row\":0,}\n", .ndjson))
    }

    func testClaimsOfAnotherCampaignOrInputAreNamed() {
        func claim(_ campaign: String, _ input: String, _ shard: String) -> ShardClaim {
            ShardClaim(campaign: campaign, input: input, shard: shard, resultsFormat: "ndjson", source: "j\(shard)")
        }
        XCTAssertEqual(ShardClaim.mismatches([claim("c", "i", "0/2"), claim("c", "i", "1/2")], input: "i", format: .ndjson), [])
        let other = ShardClaim.mismatches([claim("c", "i", "0/2"), claim("d", "i", "1/2")], input: "i", format: .ndjson)
        XCTAssertTrue(other.first?.contains("different campaigns") == true, "\(other)")
        XCTAssertTrue(ShardClaim.mismatches([claim("c", "i", "0/2"), claim("c", "x", "1/2")], input: "i", format: .ndjson)[0].contains("shard 1"))
        XCTAssertEqual(ShardClaim.mismatches([claim("c", "i", "0/3"), claim("c", "i", "1/3")], input: "i", format: .ndjson).count, 2)
    }

    func testSummaryRoundTripsAndMergesHistograms() throws {
        var a = CampaignSummary(), b = CampaignSummary()
        for i in 0..<1000 {
            var r = OutcomeRecord(row: i + 1, id: nil, token: "t", provider: i % 2 == 0 ? .apns : .fcm, outcome: .delivered, status: 200)
            r.latencyMilliseconds = Double(i % 100) + 1
            if i < 500 { a.record(r) } else { r.latencyMilliseconds = 500; b.record(r) }
        }
        a.identity = CampaignIdentity(shard: ShardSpec(index: 0, count: 2), campaign: "c", input: "i", inputRows: 1000)
        a.throttles[.fcm] = (device: 7, provider: 2)
        b.throttles[.fcm] = (device: 3, provider: 0)
        b.throttles[.apns] = (device: 1, provider: 0)
        let parsed = try XCTUnwrap(CampaignSummary.parse(Array(a.json.utf8)))
        XCTAssertTrue(parsed.throttles[.fcm]! == (7, 2))
        XCTAssertEqual(parsed.rows, 500)
        XCTAssertEqual(parsed.identity, a.identity)
        XCTAssertEqual(parsed.latencyMicroseconds, a.latencyMicroseconds)
        XCTAssertEqual(parsed.byProvider[.fcm]?.latencyMicroseconds, a.byProvider[.fcm]?.latencyMicroseconds)
        var merged = parsed
        merged.merge(try XCTUnwrap(CampaignSummary.parse(Array(b.json.utf8))))
        var whole = a
        whole.merge(b)
        XCTAssertEqual(merged.rows, 1000)
        XCTAssertTrue(merged.throttles[.fcm]! == (10, 2) && merged.throttles[.apns]! == (1, 0), "\(merged.throttles)")
        XCTAssertEqual(merged.outcomes[.delivered], 1000)
        // p99 comes from the merged histogram (half the rows at 500 ms), not from averaged percentiles.
        XCTAssertEqual(merged.latencyMicroseconds.value(atQuantile: 0.99), whole.latencyMicroseconds.value(atQuantile: 0.99))
        XCTAssertGreaterThan(merged.latencyMicroseconds.value(atQuantile: 0.75), 400_000)
    }
}
