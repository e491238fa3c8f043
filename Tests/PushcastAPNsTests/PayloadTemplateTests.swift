import PushcastAPNs
import PushcastJSON
import XCTest

final class PayloadTemplateTests: XCTestCase {
    let columns = ["token", "first_name", "city", "code"]

    private func render(_ template: String, _ values: [String?]) throws -> String {
        let compiled = try PayloadTemplate.compile(text: template, columns: columns)
        return String(decoding: compiled.render(values: values), as: UTF8.self)
    }

    /// The rendered text must be valid JSON that decodes back to the original value.
    private func decodedAlert(_ json: String) throws -> String {
        let object = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any]
        let aps = try XCTUnwrap(object?["aps"] as? [String: Any])
        return try XCTUnwrap(aps["alert"] as? String)
    }

    func testSplicesValuesBetweenLiteralBytes() throws {
        let out = try render(#"{"aps":{"alert":"Hi {{first_name}} from {{ city }}!"}}"#, [nil, "Ann", "Oslo", nil])
        XCTAssertEqual(out, #"{"aps":{"alert":"Hi Ann from Oslo!"}}"#)
    }

    func testQuotesBackslashesAndControlCharactersAreEscaped() throws {
        let value = "say \"hi\" \\ path\nline\r\ttab\u{08}\u{0C}\u{01}\u{1F}\u{7F}"
        let out = try render(#"{"aps":{"alert":"{{first_name}}"}}"#, [nil, value])
        XCTAssertEqual(out, #"{"aps":{"alert":"say \"hi\" \\ path\nline\r\ttab\b\f\u0001\u001f"# + "\u{7F}" + #""}}"#)
        XCTAssertEqual(try decodedAlert(out), value)
    }

    func testRightToLeftAndMultibyteTextPassThroughWithExactByteCounts() throws {
        let compiled = try PayloadTemplate.compile(text: #"{"aps":{"alert":"{{first_name}}"}}"#, columns: columns)
        let empty = compiled.render(values: []).count
        XCTAssertEqual(empty, compiled.literalByteCount)
        for (text, bytes) in [("مرحبا", 10), ("你好世界", 12), ("Привет", 12), ("שלום \u{200F}עולם", 20)] {
            let out = compiled.render(values: [nil, text])
            XCTAssertEqual(out.count, empty + bytes, text)
            XCTAssertEqual(text.utf8.count, bytes)
            XCTAssertEqual(try decodedAlert(String(decoding: out, as: UTF8.self)), text)
        }
    }

    func testLineSeparatorsAreEscapedAndBadUTF8IsReplaced() throws {
        let compiled = try PayloadTemplate.compile(text: #"{"a":"{{code}}"}"#, columns: columns)
        let out = compiled.render(values: [nil, nil, nil, "x\u{2028}y\u{2029}z"])
        XCTAssertEqual(String(decoding: out, as: UTF8.self), #"{"a":"x\u2028y\u2029z"}"#)
        var buffer: [UInt8] = []
        let bad: [UInt8] = [0x61, 0xFF, 0x62, 0xC3]
        let count = bad.withUnsafeBytes { bytes in compiled.render(into: &buffer) { $0 == 3 ? bytes : nil } }
        XCTAssertEqual(count, buffer.count)
        XCTAssertEqual(buffer, Array(#"{"a":"a"#.utf8) + [0xEF, 0xBF, 0xBD, 0x62, 0xEF, 0xBF, 0xBD] + Array(#""}"#.utf8))
    }

    func testNestedStructurePreservedByteForByte() throws {
        let template = """
        {
          "aps" : { "alert" : { "title" : "Sale", "body" : "{{first_name}}, 20% off" }, "badge" : 1, "sound" : "default",
                    "mutable-content": 1 },
          "meta": [1, -2.5e3, true, false, null, {"deep": ["x", {"y": "\\u00e9 {{city}}"}]}],
          "escaped": "tab\\tquote\\"{{code}}"
        }
        """
        let out = try render(template, [nil, "Zoë", "Köln", "Q\""])
        let expected = template.replacingOccurrences(of: "{{first_name}}", with: "Zoë")
            .replacingOccurrences(of: "{{city}}", with: "Köln")
            .replacingOccurrences(of: "{{code}}", with: #"Q\""#)
        XCTAssertEqual(out, expected)
        XCTAssertNoThrow(try JSONSerialization.jsonObject(with: Data(out.utf8)))
    }

    func testManyPlaceholdersInOneStringAndMissingValuesAreEmpty() throws {
        let out = try render(#"{"s":"{{token}}{{first_name}}-{{city}}-{{code}}{{first_name}}"}"#, ["t", "N", nil])
        XCTAssertEqual(out, #"{"s":"tN--N"}"#)
        let compiled = try PayloadTemplate.compile(text: #"{"s":"{{token}}{{first_name}}-{{city}}-{{code}}{{first_name}}"}"#, columns: columns)
        XCTAssertEqual(compiled.placeholderColumns, [0, 1, 2, 3, 1])
    }

    func testReusedBufferIsReplacedNotAppended() throws {
        let compiled = try PayloadTemplate.compile(text: #"{"a":"{{city}}"}"#, columns: columns)
        var buffer: [UInt8] = []
        let long = Array("a long city name".utf8), short = Array("x".utf8)
        _ = long.withUnsafeBytes { bytes in compiled.render(into: &buffer) { _ in bytes } }
        let count = short.withUnsafeBytes { bytes in compiled.render(into: &buffer) { _ in bytes } }
        XCTAssertEqual(String(decoding: buffer, as: UTF8.self), #"{"a":"x"}"#)
        XCTAssertEqual(count, 9)
    }

    func testCompileErrors() {
        XCTAssertEqual(compileError(#"{"a": "b",}"#), .invalidJSON(offset: 10, message: "expected a string key"))
        XCTAssertEqual(compileError(#"{"a": tru}"#), .invalidJSON(offset: 6, message: "invalid literal, expected 'true'"))
        XCTAssertEqual(compileError(#"{"a": 01}"#), .invalidJSON(offset: 7, message: "expected ',' or '}' in an object"))
        XCTAssertEqual(compileError("{\"a\": \"x\ny\"}"), .invalidJSON(offset: 8, message: "control character 0xa must be escaped inside a string"))
        XCTAssertEqual(compileError(#"{"a": "\x"}"#), .invalidJSON(offset: 8, message: "invalid escape '\\x'"))
        XCTAssertEqual(compileError(#"{"a": 1} x"#), .invalidJSON(offset: 9, message: "unexpected data after the JSON value"))
        XCTAssertEqual(compileError(#"{"a": "b"#), .invalidJSON(offset: 6, message: "unterminated string"))
        XCTAssertEqual(compileError(#"["{{city}}"]"#), .notAnObject)
        XCTAssertEqual(compileError(#"{"a":"{{ nope }}"}"#), .unknownPlaceholder(name: "nope", offset: 6, available: columns))
        XCTAssertEqual(compileError(#"{"a":"{{city"}"#), .unterminatedPlaceholder(offset: 6))
        XCTAssertEqual(compileError(#"{"a":"{{}}"}"#), .invalidPlaceholder(offset: 6))
        XCTAssertEqual(compileError(#"{"{{city}}":"x"}"#), .placeholderInKey(offset: 2))
        XCTAssertEqual(compileError(String(repeating: "[", count: 100)), .invalidJSON(offset: 64, message: "nesting deeper than 64 levels"))
        let nested = "{\"a\":" + String(repeating: "[", count: 100) + String(repeating: "]", count: 100) + "}"
        XCTAssertEqual(compileError(nested), .invalidJSON(offset: 68, message: "nesting deeper than 64 levels"))
        let message = PayloadTemplateError.unknownPlaceholder(name: "nope", offset: 6, available: columns).description
        XCTAssertTrue(message.contains("{{nope}}") && message.contains("token, first_name, city, code"), message)
    }

    func testSingleBracesAndInvalidUTF8InTemplate() {
        XCTAssertNoThrow(try PayloadTemplate.compile(text: #"{"a":"{x} } {"}"#, columns: columns))
        let bytes: [UInt8] = Array(#"{"a":""#.utf8) + [0xC0, 0x80] + Array(#""}"#.utf8)
        XCTAssertThrowsError(try PayloadTemplate.compile(text: String(decoding: bytes, as: UTF8.self) + "\u{0}", columns: []))
    }

    func testPayloadLimitCountsBytes() throws {
        let compiled = try PayloadTemplate.compile(text: #"{"aps":{"alert":"{{first_name}}"}}"#, columns: columns)
        let overhead = compiled.literalByteCount
        let arabicFits = String(repeating: "م", count: (4096 - overhead) / 2)  // 2 bytes each
        let arabicOver = arabicFits + "م"
        XCTAssertFalse(APNsPushType.alert.isPayloadTooLarge(byteCount: compiled.render(values: [nil, arabicFits]).count))
        XCTAssertTrue(APNsPushType.alert.isPayloadTooLarge(byteCount: compiled.render(values: [nil, arabicOver]).count))
        XCTAssertFalse(APNsPushType.voip.isPayloadTooLarge(byteCount: compiled.render(values: [nil, arabicOver]).count))
        XCTAssertEqual(APNsPushType.voip.payloadBytesMax, 5120)
        XCTAssertEqual(APNsPushType.alert.payloadBytesMax, 4096)
        XCTAssertEqual(APNsPushType.background.payloadBytesMax, 4096)
    }

    private func compileError(_ text: String) -> PayloadTemplateError? {
        do {
            _ = try PayloadTemplate.compile(text: text, columns: columns)
            return nil
        } catch {
            return error
        }
    }
}
