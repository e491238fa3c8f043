import Foundation
import PushcastJSON
import XCTest

// Moved from PushcastFCMTests (GoogleJSONTests) with the reader and writer they test.
final class JSONTreeAndWriterTests: XCTestCase {
    func parse(_ text: String) -> JSONValue? {
        try? JSONScanner.parse(Array(text.utf8)).get()
    }

    func testValues() throws {
        let value = try XCTUnwrap(parse(#" {"a": [1, -2.5e3, true, false, null], "b": {"c": "d\"\\\/\n\u00e9\ud83d\ude00"}, "a": 7} "#))
        XCTAssertEqual(value["a"], .number("7"), "the last duplicate key wins")
        XCTAssertEqual(value.members?.first?.value, .array([.number("1"), .number("-2.5e3"), .bool(true), .bool(false), .null]))
        XCTAssertEqual(value["b"]?["c"]?.stringValue, "d\"\\/\n\u{e9}\u{1F600}")
        XCTAssertEqual(value["a"]?.int64Value, 7)
        XCTAssertNil(value["missing"])
        XCTAssertNil(JSONValue.number("1.5").int64Value)
    }

    func testRejectsMalformedInput() {
        let bad = ["", "{", "{\"a\"}", "{\"a\":1,}", "[1,]", "01", "-", "1.", "1e", "\"\u{01}\"", "\"\\x\"", "\"\\ud800\"",
                   "{\"a\":1} x", "tru", "\"abc", "{'a':1}"]
        for text in bad { XCTAssertNil(parse(text), text) }
        XCTAssertNil(try? JSONScanner.parse([0x22, 0xC3, 0x28, 0x22]).get(), "invalid UTF-8")
        let deep = String(repeating: "[", count: 40) + String(repeating: "]", count: 40)
        guard case .failure(let error) = JSONScanner.parse(Array(deep.utf8)) else { return XCTFail("deep nesting accepted") }
        XCTAssertTrue(error.message.contains("nesting"), error.message)
        XCTAssertNotNil(parse(String(repeating: "[", count: 30) + String(repeating: "]", count: 30)))
    }

    func testWriterRoundTrips() throws {
        let text = "quote \" backslash \\ newline \n tab \t bell \u{07} é 😀"
        let quoted = JSONWriter.quoted(text)
        XCTAssertEqual(quoted, #""quote \" backslash \\ newline \n tab \t bell \u0007 é 😀""#)
        XCTAssertEqual(parse(quoted)?.stringValue, text)
        let foundation = try JSONSerialization.jsonObject(with: Data(quoted.utf8), options: .fragmentsAllowed) as? String
        XCTAssertEqual(foundation, text)
    }

    func testSanitizedRedactsTokensAndBoundsLength() {
        let jwt = "eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJ4QHkuY29tIiwic2NvcGUiOiJ4In0.c2lnbmF0dXJlLWJ5dGVzLWhlcmU"
        XCTAssertEqual(UntrustedText.sanitized("bad assertion \(jwt) here"), "bad assertion [redacted] here")
        XCTAssertEqual(UntrustedText.sanitized("line\nbreak\u{1B}[31m é"), "line?break?[31m ??")
        XCTAssertEqual(UntrustedText.sanitized("Invalid JWT Signature."), "Invalid JWT Signature.")
        let long = String(repeating: "word ", count: 100)
        XCTAssertEqual(UntrustedText.sanitized(long, limit: 20), String(long.prefix(20)) + "...")
    }
}
