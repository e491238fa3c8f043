import PushcastJSON
import XCTest

/// The typed accessors the summary, results and timeline readers use.
final class JSONValueAccessorTests: XCTestCase {
    private func parse(_ text: String) throws -> JSONValue {
        try JSONScanner.parse(Array(text.utf8)).get()
    }

    func testNumbersAsIntsAndDoubles() throws {
        let value = try parse(#"{"a":3,"b":3.0,"c":3.5,"d":-2e2,"e":"3","f":true,"g":12345678901234567,"h":1e300}"#)
        XCTAssertEqual(value["a"]?.intValue, 3)
        XCTAssertEqual(value["b"]?.intValue, 3)
        XCTAssertNil(value["c"]?.intValue)
        XCTAssertEqual(value["c"]?.doubleValue, 3.5)
        XCTAssertEqual(value["d"]?.intValue, -200)
        XCTAssertNil(value["e"]?.intValue, "a string is not a number")
        XCTAssertNil(value["f"]?.intValue, "nor is a boolean")
        XCTAssertEqual(value["f"]?.boolValue, true)
        XCTAssertEqual(value["g"]?.intValue, 12345678901234567)
        XCTAssertNil(value["h"]?.intValue, "too large for an Int")
        XCTAssertEqual(value["a"]?.doubleValue, 3)
    }

    func testIntMembersAndElements() throws {
        let value = try parse(#"{"counts":{"x":1,"y":2,"x":5},"mixed":{"x":1,"y":"2"},"list":[[1,2],[3]]}"#)
        XCTAssertEqual(value["counts"]?.intMembers, ["x": 5, "y": 2], "the last of repeated keys")
        XCTAssertNil(value["mixed"]?.intMembers, "every member must be a whole number")
        XCTAssertNil(value["list"]?.intMembers)
        XCTAssertEqual(value["list"]?.elements?.count, 2)
        XCTAssertEqual(value["list"]?.elements?[0].elements?.compactMap(\.intValue), [1, 2])
        XCTAssertNil(value["counts"]?.elements)
    }
}
