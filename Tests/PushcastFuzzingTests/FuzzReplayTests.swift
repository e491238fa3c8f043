// Replays every committed fuzz input (Tests/Fuzz/Corpus/<target>/ and Tests/Fuzz/Regressions/<target>/)
// through the same bodies the libFuzzer binaries run (docs/FUZZING.md). A broken invariant traps,
// so a regression input that crashes again fails the run.

import Foundation
import PushcastFuzzing
import XCTest

final class FuzzReplayTests: XCTestCase {
    static let fuzzDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fuzz")

    /// The files in `Tests/Fuzz/<kind>/<target>/`, sorted; none when the folder is absent.
    static func inputs(_ kind: String, _ target: FuzzTarget) throws -> [URL] {
        let folder = fuzzDirectory.appendingPathComponent(kind).appendingPathComponent(target.rawValue)
        guard FileManager.default.fileExists(atPath: folder.path) else { return [] }
        return try FileManager.default.contentsOfDirectory(at: folder, includingPropertiesForKeys: nil)
            .filter { !$0.lastPathComponent.hasPrefix(".") }
            .sorted { $0.lastPathComponent < $1.lastPathComponent }
    }

    func replay(_ target: FuzzTarget) throws {
        let corpus = try Self.inputs("Corpus", target)
        // Every target ships a seeded corpus; an empty one means the files went missing.
        XCTAssertGreaterThanOrEqual(corpus.count, 3, "Tests/Fuzz/Corpus/\(target.rawValue) has \(corpus.count) inputs")
        for file in corpus + (try Self.inputs("Regressions", target)) {
            target.run(Array(try Data(contentsOf: file)))
        }
    }

    func testCSV() throws { try replay(.csv) }
    func testNDJSON() throws { try replay(.ndjson) }
    func testJSONScanner() throws { try replay(.jsonScanner) }
    func testTemplate() throws { try replay(.template) }
    func testAPNsResponse() throws { try replay(.apnsResponse) }
    func testFCMResponse() throws { try replay(.fcmResponse) }
    func testOAuthResponse() throws { try replay(.oauthResponse) }
    func testHTTP2Client() throws { try replay(.http2Client) }

    /// The targets and their folders stay in step: a folder for a target that no longer exists
    /// would be silently skipped.
    func testEveryFolderNamesATarget() throws {
        let names = Set(FuzzTarget.allCases.map(\.rawValue))
        for kind in ["Corpus", "Regressions"] {
            let folder = Self.fuzzDirectory.appendingPathComponent(kind)
            guard FileManager.default.fileExists(atPath: folder.path) else { continue }
            for entry in try FileManager.default.contentsOfDirectory(atPath: folder.path) where !entry.hasPrefix(".") {
                XCTAssertTrue(names.contains(entry), "Tests/Fuzz/\(kind)/\(entry) names no fuzz target")
            }
        }
    }
}
