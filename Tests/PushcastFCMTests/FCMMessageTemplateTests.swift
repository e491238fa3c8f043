import Foundation
import PushcastFCM
import PushcastJSON
import XCTest

final class FCMMessageTemplateTests: XCTestCase {
    let columns = ["token", "name", "city", "count"]
    let token = "fA3:APA91b-x_Y"

    private func compile(_ text: String, validateOnly: Bool = false, columns: [String]? = nil) throws -> FCMMessageTemplate {
        try FCMMessageTemplate.compile(text: text, columns: columns ?? self.columns, validateOnly: validateOnly, source: "campaign.json")
    }

    private func render(_ template: FCMMessageTemplate, token: String? = nil, _ values: [String?] = []) -> String {
        String(decoding: template.render(token: token ?? self.token, values: values), as: UTF8.self)
    }

    /// Renders through the byte API and returns (body, returned message byte count).
    private func renderBytes(_ template: FCMMessageTemplate, token: String, _ values: [String?], into buffer: inout [UInt8]) -> Int {
        let tokenBytes = Array(token.utf8)
        let valueBytes = values.map { $0.map { Array($0.utf8) } }
        return tokenBytes.withUnsafeBytes { tokenPointer in
            // Keep every value's storage alive for the whole render.
            var pointers: [UnsafeRawBufferPointer?] = []
            var storage: [UnsafeMutableRawBufferPointer] = []
            defer { storage.forEach { $0.deallocate() } }
            for value in valueBytes {
                guard let value else { pointers.append(nil); continue }
                let copy = UnsafeMutableRawBufferPointer.allocate(byteCount: value.count, alignment: 1)
                copy.copyBytes(from: value)
                storage.append(copy)
                pointers.append(UnsafeRawBufferPointer(copy))
            }
            return template.render(token: tokenPointer, into: &buffer) { $0 < pointers.count ? pointers[$0] : nil }
        }
    }

    private func json(_ body: String) throws -> [String: Any] {
        XCTAssertTrue(Array(body.utf8).withUnsafeBytes { JSONValidation.isObject($0) }, body)
        return try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any])
    }

    private func message(_ body: String) throws -> [String: Any] {
        try XCTUnwrap(try json(body)["message"] as? [String: Any])
    }

    private func assertRule(_ text: String, validateOnly: Bool = false, path: String, _ problem: FCMTemplateProblem,
                            file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertThrowsError(try compile(text, validateOnly: validateOnly), file: file, line: line) { error in
            XCTAssertEqual(error as? FCMTemplateError, .invalidMessage(source: "campaign.json", path: path, problem: problem),
                           text, file: file, line: line)
        }
    }

    // MARK: - Rendering

    func testBareMessageRendersTheWholeBodyWithTheTokenFirst() throws {
        let template = try compile(#"{"notification":{"title":"Hi {{name}}"},"data":{"city":"{{city}}"}}"#)
        let body = render(template, [nil, "Ann", "Oslo"])
        XCTAssertEqual(body, #"{"message":{"token":"fA3:APA91b-x_Y","notification":{"title":"Hi Ann"},"data":{"city":"Oslo"}}}"#)
        let message = try message(body)
        XCTAssertEqual(message["token"] as? String, token)
        XCTAssertEqual((message["data"] as? [String: String])?["city"], "Oslo")
    }

    func testWrapperFormRendersTheSameMessageKeepingItsBytes() throws {
        let template = try compile("""
        {
          "message": {
            "notification": { "title": "Hi {{name}}" },
            "android": { "priority": "high", "ttl": "3600s" }
          }
        }
        """)
        let body = render(template, [nil, "Ann"])
        XCTAssertTrue(body.hasPrefix(#"{"message":{"token":"fA3:APA91b-x_Y","#), body)
        XCTAssertTrue(body.contains(#""android": { "priority": "high", "ttl": "3600s" }"#), body)
        XCTAssertTrue(body.hasSuffix("}}"))
        let message = try message(body)
        XCTAssertEqual(message["token"] as? String, token)
        XCTAssertEqual((message["notification"] as? [String: String])?["title"], "Hi Ann")
    }

    func testEmptyMessageStillCarriesTheToken() throws {
        for text in ["{}", " { \n } ", #"{"message":{}}"#, #"{"message": { } }"#] {
            XCTAssertEqual(render(try compile(text)), #"{"message":{"token":"fA3:APA91b-x_Y"}}"#, text)
        }
    }

    func testValidateOnlyComesFirstWhenSetAndIsAbsentOtherwise() throws {
        let text = #"{"notification":{"body":"{{name}}"}}"#
        let on = render(try compile(text, validateOnly: true), [nil, "x"])
        XCTAssertEqual(on, #"{"validate_only":true,"message":{"token":"fA3:APA91b-x_Y","notification":{"body":"x"}}}"#)
        XCTAssertEqual(try json(on)["validate_only"] as? Bool, true)
        let off = render(try compile(text, validateOnly: false), [nil, "x"])
        XCTAssertEqual(off, #"{"message":{"token":"fA3:APA91b-x_Y","notification":{"body":"x"}}}"#)
        XCTAssertNil(try json(off)["validate_only"])
        XCTAssertTrue(try compile(text, validateOnly: true).validateOnly)
    }

    func testWrapperValidateOnlyMayOnlyRestateTheRunsSetting() throws {
        let agreeOn = try compile(#"{"validate_only": true, "message": {"data": {"a": "b"}}}"#, validateOnly: true)
        XCTAssertEqual(render(agreeOn), #"{"validate_only":true,"message":{"token":"fA3:APA91b-x_Y","data": {"a": "b"}}}"#)
        let agreeOff = try compile(#"{"message": {"data": {"a": "b"}}, "validate_only": false}"#, validateOnly: false)
        XCTAssertEqual(render(agreeOff), #"{"message":{"token":"fA3:APA91b-x_Y","data": {"a": "b"}}}"#)
        assertRule(#"{"validate_only": true, "message": {}}"#, validateOnly: false, path: "$.validate_only",
                   .validateOnlyConflict(template: true, run: false))
        assertRule(#"{"validate_only": false, "message": {}}"#, validateOnly: true, path: "$.validate_only",
                   .validateOnlyConflict(template: false, run: true))
        assertRule(#"{"validate_only": "true", "message": {}}"#, validateOnly: true, path: "$.validate_only", .validateOnlyNotBoolean)
        assertRule(#"{"validate_only": 1, "message": {}}"#, path: "$.validate_only", .validateOnlyNotBoolean)
        assertRule(#"{"notification": {}, "validate_only": true}"#, validateOnly: true, path: "$.validate_only", .validateOnlyInsideMessage)
        assertRule(#"{"message": {"validate_only": false}}"#, path: "$.message.validate_only", .validateOnlyInsideMessage)
    }

    func testWrapperHoldsOnlyMessageAndValidateOnlyOnce() {
        assertRule(#"{"message": {}, "notification": {"title": "x"}}"#, path: "$.notification", .unexpectedWrapperMember)
        assertRule(#"{"message": {}, "message": {}}"#, path: "$.message", .duplicateWrapperMember)
        assertRule(#"{"message": {}, "validate_only": false, "validate_only": false}"#, path: "$.validate_only", .duplicateWrapperMember)
        assertRule(#"{"message": "hello"}"#, path: "$.message", .notAnObject)
        assertRule(#"{"message": [{}]}"#, path: "$.message", .notAnObject)
    }

    func testTheTemplateMustNotSetATarget() {
        for key in ["token", "topic", "condition", "fid"] {
            assertRule(#"{"notification":{},"\#(key)":"x"}"#, path: "$.\(key)", .targetInTemplate)
            assertRule(#"{"message":{"\#(key)":"{{token}}"}}"#, path: "$.message.\(key)", .targetInTemplate)
        }
        // Nested members of the same name are someone else's business (APNs headers, webpush).
        XCTAssertNoThrow(try compile(#"{"apns":{"payload":{"aps":{"topic":"x"}}},"webpush":{"headers":{"token":"y"}}}"#))
    }

    func testDataMustBeAnObjectOfStrings() {
        assertRule(#"{"data":"x"}"#, path: "$.data", .notAnObject)
        assertRule(#"{"data":["a"]}"#, path: "$.data", .notAnObject)
        assertRule(#"{"message":{"data":null}}"#, path: "$.message.data", .notAnObject)
        assertRule(#"{"data":{"a":"1","count":12}}"#, path: "$.data.count", .dataValueNotString)
        assertRule(#"{"data":{"flag":true}}"#, path: "$.data.flag", .dataValueNotString)
        assertRule(#"{"data":{"none":null}}"#, path: "$.data.none", .dataValueNotString)
        assertRule(#"{"data":{"nested":{"a":"b"}}}"#, path: "$.data.nested", .dataValueNotString)
        assertRule(#"{"data":{"list":["{{name}}"]}}"#, path: "$.data.list", .dataValueNotString)
        assertRule(#"{"android":{"data":{"n":1}}}"#, path: "$.android.data.n", .dataValueNotString)
        assertRule(#"{"message":{"android":{"data":"x"}}}"#, path: "$.message.android.data", .notAnObject)
        XCTAssertNoThrow(try compile(#"{"data":{"count":"{{count}}","empty":"","n":"12"}}"#))
    }

    func testReservedDataKeysAreRefused() {
        assertRule(#"{"data":{"from":"x"}}"#, path: "$.data.from", .reservedDataKey)
        assertRule(#"{"data":{"message_type":"x"}}"#, path: "$.data.message_type", .reservedDataKey)
        assertRule(#"{"data":{"google.c.a.e":"1"}}"#, path: #"$.data["google.c.a.e"]"#, .reservedDataKey)
        assertRule(#"{"data":{"gcm.notification.title":"x"}}"#, path: #"$.data["gcm.notification.title"]"#, .reservedDataKey)
        assertRule(#"{"data":{"gcm.x":"x"}}"#, path: #"$.data["gcm.x"]"#, .reservedDataKey)
        // An escaped key is the key it spells.
        assertRule(#"{"data":{"\u0066rom":"x"}}"#, path: "$.data.from", .reservedDataKey)
        assertRule(#"{"message":{"android":{"data":{"from":"x"}}}}"#, path: "$.message.android.data.from", .reservedDataKey)
        XCTAssertNoThrow(try compile(#"{"data":{"fromage":"x","googlex":"y","gcm":"z","my.google.key":"w","From":"v"}}"#))
    }

    func testEveryDataMemberIsCheckedHoweverManyThereAre() {
        let members = (0..<300).map { #""k\#($0)":"v""# }.joined(separator: ",")
        assertRule(#"{"data":{\#(members),"from":"x"}}"#, path: "$.data.from", .reservedDataKey)
    }

    func testPathsQuoteKeysThatAreNotIdentifiers() {
        assertRule(#"{"data":{"a b":1}}"#, path: #"$.data["a b"]"#, .dataValueNotString)
        assertRule(#"{"data":{"q\"uote":1}}"#, path: #"$.data["q\"uote"]"#, .dataValueNotString)
    }

    func testErrorsNameTheFileAndThePath() {
        XCTAssertThrowsError(try compile(#"{"data":{"from":"x"}}"#)) { error in
            let text = String(describing: error)
            XCTAssertTrue(text.hasPrefix("campaign.json: "), text)
            XCTAssertTrue(text.contains("$.data.from"), text)
            XCTAssertTrue(text.contains("reserved data key"), text)
        }
        XCTAssertThrowsError(try compile(#"{"data":{"a":"{{nope}}"}}"#)) { error in
            let text = String(describing: error)
            XCTAssertTrue(text.hasPrefix("campaign.json: "), text)
            XCTAssertTrue(text.contains("{{nope}}"), text)
        }
    }

    func testTemplateErrorsComeFromPayloadTemplateWithOffsetsIntoTheFile() {
        func assertInvalid(_ text: String, _ expected: PayloadTemplateError, file: StaticString = #filePath, line: UInt = #line) {
            XCTAssertThrowsError(try compile(text), file: file, line: line) {
                XCTAssertEqual($0 as? FCMTemplateError, .invalidTemplate(source: "campaign.json", expected), file: file, line: line)
            }
        }
        assertInvalid(#"["notification"]"#, .notAnObject)
        assertInvalid(#""text""#, .notAnObject)
        assertInvalid(#"{"message":{"data":{"a":"{{nope}}"}}}"#, .unknownPlaceholder(name: "nope", offset: 25, available: columns))
        assertInvalid(#"{"data":{"{{name}}":"x"}}"#, .placeholderInKey(offset: 10))
        assertInvalid(#"{"data":{"a":"x"}"#, .invalidJSON(offset: 17, message: "unterminated object"))
        assertInvalid("", .invalidJSON(offset: 0, message: "unexpected end of input, expected a value"))
    }

    func testValuesAreEscaped() throws {
        let template = try compile(#"{"notification":{"body":"{{name}}"},"data":{"c":"<{{city}}>"}}"#)
        let values = [
            "say \"hi\" \\ back\\slash",
            "line\nbreak\r\ttab\u{08}\u{0C}\u{01}\u{1F}",
            "مرحبا بالعالم",
            "你好，世界",
            "שלום \u{200F}עולם\u{202E}",
            "emoji 🎉 and \u{2028} separator",
        ]
        for value in values {
            let body = render(template, [nil, value, value])
            let message = try message(body)
            XCTAssertEqual((message["notification"] as? [String: String])?["body"], value)
            XCTAssertEqual((message["data"] as? [String: String])?["c"], "<" + value + ">")
        }
        XCTAssertTrue(render(template, [nil, "a\"b"]).contains(#""body":"a\"b""#))
    }

    func testTheTokenIsEscapedToo() throws {
        let template = try compile("{}")
        let odd = "quote\"back\\slash\ncontrol"
        XCTAssertEqual(try message(render(template, token: odd))["token"] as? String, odd)
    }

    func testReturnedCountIsTheMessageObjectsBytes() throws {
        for validateOnly in [false, true] {
            let template = try compile(#"{"message":{"notification":{"title":"{{name}}"}}}"#, validateOnly: validateOnly)
            var buffer: [UInt8] = []
            let empty = renderBytes(template, token: token, [], into: &buffer)
            let envelope = validateOnly ? #"{"validate_only":true,"message":"#.utf8.count + 1 : #"{"message":"#.utf8.count + 1
            XCTAssertEqual(empty, buffer.count - envelope)
            XCTAssertEqual(empty, #"{"token":"fA3:APA91b-x_Y","notification":{"title":""}}"#.utf8.count)
            XCTAssertEqual(template.messageLiteralByteCount, empty - token.utf8.count)
            // Multi-byte text counts in UTF-8 bytes: Arabic 2 a letter, Chinese 3, emoji 4.
            for (text, bytes) in [("مرحبا", 10), ("你好世界", 12), ("🎉", 4), ("a\"b", 4), ("\n", 2)] {
                buffer.removeAll(keepingCapacity: true)
                let count = renderBytes(template, token: token, [nil, text], into: &buffer)
                XCTAssertEqual(count, empty + bytes, text)
                XCTAssertEqual(count, buffer.count - envelope)
            }
        }
    }

    func testMessageBytesMaxIsFCMs4096() {
        XCTAssertEqual(FCMMessageTemplate.messageBytesMax, 4096)
    }

    func testRenderAppendsToWhatTheBufferHolds() throws {
        let template = try compile(#"{"data":{"n":"{{name}}"}}"#)
        var fresh: [UInt8] = []
        let freshCount = renderBytes(template, token: token, [nil, "Ann"], into: &fresh)
        var buffer = Array("HEAD".utf8)
        let count = renderBytes(template, token: token, [nil, "Ann"], into: &buffer)
        XCTAssertEqual(count, freshCount)
        XCTAssertEqual(buffer, Array("HEAD".utf8) + fresh)
        // A reused, emptied buffer renders the same bytes again.
        fresh.removeAll(keepingCapacity: true)
        XCTAssertEqual(renderBytes(template, token: token, [nil, "Ann"], into: &fresh), freshCount)
        XCTAssertEqual(buffer, Array("HEAD".utf8) + fresh)
    }

    func testPlaceholderColumnsAreInputColumnsInTemplateOrder() throws {
        let template = try compile(#"{"notification":{"title":"{{city}}","body":"{{name}} {{name}}"},"data":{"c":"{{count}}"}}"#)
        XCTAssertEqual(template.placeholderColumns, [2, 1, 1, 3])
        XCTAssertEqual(try compile("{}").placeholderColumns, [])
    }

    func testAnInputColumnNamedLikeTheInternalTokenColumnIsStillThatColumn() throws {
        let columns = ["pushcast.token", "pushcast.token_", "name"]
        let template = try compile(#"{"data":{"a":"{{pushcast.token}}","b":"{{pushcast.token_}}"}}"#, columns: columns)
        XCTAssertEqual(template.placeholderColumns, [0, 1])
        let message = try message(render(template, ["column0", "column1"]))
        XCTAssertEqual(message["token"] as? String, token)
        XCTAssertEqual(message["data"] as? [String: String], ["a": "column0", "b": "column1"])
    }

    func testDeepTemplatesWithinTheScannersLimitCompile() throws {
        let depth = 40
        let nested = String(repeating: #"{"x":"#, count: depth) + #""{{name}}""# + String(repeating: "}", count: depth)
        let template = try compile(#"{"apns":{"payload":"# + nested + "}}")
        XCTAssertNoThrow(try json(render(template, [nil, "deep"])))
    }
}
