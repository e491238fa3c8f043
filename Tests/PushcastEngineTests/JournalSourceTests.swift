import XCTest
@testable import PushcastEngine

/// A database campaign's journal records the URL and query its snapshot came from, escaped so
/// the header stays one line of space-separated fields; a resume with another query is refused.
final class JournalSourceTests: XCTestCase {
    func testTheQueryRoundTripsThroughTheHeader() throws {
        let query = "postgres://app@127.0.0.1:5432/push SELECT token, name FROM d WHERE note = 'a=b %x'\n\tORDER BY id"
        let fingerprint = CampaignFingerprint(campaign: "c", input: "0123456789abcdef", templates: "t", providers: "apns,fcm",
                                              resultsFormat: "ndjson", shard: "1/4", source: query)
        let header = fingerprint.headerLine
        XCTAssertEqual(header.filter { $0 == "\n" }.count, 1)
        XCTAssertTrue(header.contains(" source=postgres://app@127.0.0.1:5432/push%20SELECT"), header)
        let parsed = try JournalState.parse(Array((header + "B\n").utf8), path: "j")
        XCTAssertEqual(parsed.fingerprint, fingerprint)
        var other = fingerprint
        other.source = "postgres://app@127.0.0.1:5432/push SELECT 1"
        XCTAssertEqual(other.differences(from: fingerprint), ["the database query (--from/--query)"])
        // A file campaign's header is as before: no source field.
        var file = fingerprint
        file.source = ""
        XCTAssertFalse(file.headerLine.contains("source="))
        XCTAssertEqual(try JournalState.parse(Array(file.headerLine.utf8), path: "j").fingerprint, file)
    }
}
