import PushcastFCM
import XCTest

final class FCMTokenTests: XCTestCase {
    private func normalize(_ raw: String) throws(FCMTokenError) -> String { try FCMToken.normalize(raw) }

    private func bytesNormalize(_ raw: [UInt8]) -> Result<String, FCMTokenError> {
        raw.withUnsafeBytes { bytes in Result { () throws(FCMTokenError) in try FCMToken.normalize(bytes) } }
    }

    /// A realistic registration token: mixed case, digits, ':' '-' '_', 163 characters.
    let realistic = "dQw4w9WgXcQ:APA91bHun4MxP5egoKMwt2KZFBaFUH-1RYqx_Fn-wZ7Aq7aQfR2ObLX2kJbxX9oZ_TfbjQzV0wPa"
        + "Ic7dYwZkG0-ryAhK_nNfXwP6dq6dS8tS4QJ2BfJ8mbQa3yDk7Pq0n1U9cA2ZkLm5Xw"

    func testRealisticTokenIsReturnedByteForByte() throws {
        XCTAssertEqual(try normalize(realistic), realistic)
        XCTAssertEqual(try bytesNormalize(Array(realistic.utf8)).get(), realistic)
    }

    func testCaseIsNeverChanged() throws {
        // The APNs normaliser lower-cases hex; an FCM token is opaque and case-sensitive.
        XCTAssertEqual(try normalize("ABCDEF0123abcdef"), "ABCDEF0123abcdef")
        XCTAssertEqual(try normalize("<ABC>"), "<ABC>")
    }

    func testSurroundingASCIIWhitespaceIsTrimmed() throws {
        XCTAssertEqual(try normalize("  \t" + realistic + " \r\n"), realistic)
        XCTAssertEqual(try normalize("\u{0B}\u{0C}abc\u{0C}"), "abc")
    }

    func testEmptyOrOnlyWhitespaceIsRejected() {
        for raw in ["", " ", "\t\r\n", "   \u{0B} "] {
            XCTAssertThrowsError(try normalize(raw), raw.debugDescription) { XCTAssertEqual($0 as? FCMTokenError, .empty) }
        }
    }

    func testLengthLimitIs4096BytesAfterTrimming() throws {
        let longest = String(repeating: "a", count: FCMToken.bytesMax)
        XCTAssertEqual(try normalize("  " + longest + "  "), longest)
        XCTAssertThrowsError(try normalize(longest + "b")) { XCTAssertEqual($0 as? FCMTokenError, .tooLong(bytes: 4097)) }
    }

    func testWhitespaceAndControlCharactersInsideAreRejectedWithTheirPosition() {
        let cases: [(String, Int)] = [("ab cd", 3), ("ab\tcd", 3), ("ab\ncd", 3), (" ab\rcd", 4), ("a\u{0}b", 2), ("a\u{7F}b", 2), ("a\u{1B}b", 2)]
        for (raw, position) in cases {
            XCTAssertThrowsError(try normalize(raw), raw.debugDescription) {
                XCTAssertEqual($0 as? FCMTokenError, .whitespaceOrControl(position: position))
            }
        }
    }

    func testQuoteAndBackslashAreRejected() {
        XCTAssertThrowsError(try normalize("ab\"cd")) { XCTAssertEqual($0 as? FCMTokenError, .quoteOrBackslash(position: 3)) }
        XCTAssertThrowsError(try normalize("abc\\")) { XCTAssertEqual($0 as? FCMTokenError, .quoteOrBackslash(position: 4)) }
    }

    func testNonASCIIIsRejected() {
        XCTAssertThrowsError(try normalize("tokén")) { XCTAssertEqual($0 as? FCMTokenError, .nonASCII(position: 4)) }
        XCTAssertThrowsError(try normalize("\u{200F}abc")) { XCTAssertEqual($0 as? FCMTokenError, .nonASCII(position: 1)) }
        // Raw bytes that are not UTF-8 at all.
        XCTAssertEqual(bytesNormalize([0x61, 0xFF, 0x62]), .failure(.nonASCII(position: 2)))
    }

    func testDescriptionsSayWhatIsWrong() {
        XCTAssertEqual(FCMTokenError.empty.description, "empty FCM token")
        XCTAssertTrue(FCMTokenError.tooLong(bytes: 5000).description.contains("5000 bytes, at most 4096"))
        XCTAssertTrue(FCMTokenError.whitespaceOrControl(position: 7).description.contains("position 7"))
        XCTAssertTrue(FCMTokenError.quoteOrBackslash(position: 2).description.contains("quote or backslash"))
        XCTAssertTrue(FCMTokenError.nonASCII(position: 9).description.contains("non-ASCII"))
    }

    /// The buffer variant (the reader side's, no allocation) gives the same bytes and the same
    /// errors as the String one, and leaves nothing of an earlier token behind.
    func testNormalizeIntoABufferMatchesTheStringVersion() {
        let inputs: [String] = ["  fAbC:APA91b-x_y  ", "\tabc\r\n", "", "   ", "a b", "a\"b", "caf\u{e9}", String(repeating: "k", count: 4097)]
        var buffer = Array(repeating: UInt8(ascii: "z"), count: 300)
        for input in inputs {
            var copy = input
            copy.withUTF8 { bytes in
                let raw = UnsafeRawBufferPointer(bytes)
                var expected: String? = nil, expectedError: FCMTokenError? = nil
                do { expected = try FCMToken.normalize(raw) } catch { expectedError = error as? FCMTokenError }
                do {
                    try FCMToken.normalize(raw, into: &buffer)
                    XCTAssertEqual(String(decoding: buffer, as: UTF8.self), expected, input)
                } catch {
                    XCTAssertEqual(error as? FCMTokenError, expectedError, input)
                }
            }
        }
    }
}
