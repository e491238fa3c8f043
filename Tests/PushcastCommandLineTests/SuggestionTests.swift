import XCTest
@testable import PushcastCommandLine

final class SuggestionTests: XCTestCase {
    func testEditDistance() {
        XCTAssertEqual(Suggestion.editDistance("", ""), 0)
        XCTAssertEqual(Suggestion.editDistance("", "abc"), 3)
        XCTAssertEqual(Suggestion.editDistance("abc", ""), 3)
        XCTAssertEqual(Suggestion.editDistance("conections", "connections"), 1)
        XCTAssertEqual(Suggestion.editDistance("stremas", "streams"), 1)
        XCTAssertEqual(Suggestion.editDistance("kitten", "sitting"), 3)
        XCTAssertEqual(Suggestion.editDistance("ca", "abc"), 3)
    }

    func testNearestPicksTheClosestAndTiesGoFirst() {
        let names = ["connections", "concurrency", "streams"]
        XCTAssertEqual(Suggestion.nearest(to: "connectoins", among: names), "connections")
        XCTAssertEqual(Suggestion.nearest(to: "ab", among: ["ac", "ad"]), "ac")
    }

    func testNearestRefusesDistantNames() {
        XCTAssertNil(Suggestion.nearest(to: "json", among: ["requests", "streams"]))
        // Short names allow only one edit.
        XCTAssertNil(Suggestion.nearest(to: "io", among: ["ui"]))
        XCTAssertNil(Suggestion.nearest(to: "xy", among: ["io"]))
    }

    func testUniquePrefixIsSuggested() {
        XCTAssertEqual(Suggestion.nearest(to: "req", among: ["requests", "streams"]), "requests")
        XCTAssertNil(Suggestion.nearest(to: "con", among: ["connections", "concurrency"]))
        XCTAssertNil(Suggestion.nearest(to: "r", among: ["requests"]))
    }
}
