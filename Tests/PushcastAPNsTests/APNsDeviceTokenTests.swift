import PushcastAPNs
import XCTest

final class APNsDeviceTokenTests: XCTestCase {
    let hex64 = String(repeating: "0123456789abcdef", count: 4)

    func testPlainLowerCaseTokenIsKept() throws {
        XCTAssertEqual(try APNsDeviceToken.normalize(hex64).hex, hex64)
    }

    func testOldDescriptionFormatIsStrippedAndLowerCased() throws {
        let raw = "<" + stride(from: 0, to: 64, by: 8).map { offset -> String in
            let start = hex64.index(hex64.startIndex, offsetBy: offset)
            return hex64[start..<hex64.index(start, offsetBy: 8)].uppercased()
        }.joined(separator: " ") + ">"
        XCTAssertTrue(raw.hasPrefix("<01234567 89ABCDEF"))
        let token = try APNsDeviceToken.normalize(raw)
        XCTAssertEqual(token.hex, hex64)
        XCTAssertEqual(token.requestPath, "/3/device/" + hex64)
    }

    func testBytesOverloadMatchesStringOverload() throws {
        let raw = Array(("  " + hex64.uppercased() + " ").utf8)
        let token = try raw.withUnsafeBytes { bytes in try APNsDeviceToken.normalize(bytes) }
        XCTAssertEqual(token.hex, hex64)
    }

    func testProblems() {
        XCTAssertEqual(problem("12345g" + hex64), .notHex(position: 6))
        XCTAssertEqual(problem("<" + hex64 + "\r"), .notHex(position: 66))
        XCTAssertEqual(problem(hex64 + "a"), .oddLength(digits: 65))
        XCTAssertEqual(problem("0123456789ab"), .tooShort(digits: 12))
        XCTAssertEqual(problem(String(repeating: "ab", count: 101)), .tooLong(digits: 202))
        XCTAssertEqual(problem(""), .empty)
        XCTAssertEqual(problem(" < > "), .empty)
        XCTAssertEqual(problem("é" + hex64), .notHex(position: 1))
    }

    /// Every byte value at several positions, against a plain per-character reference, so the
    /// eight-bytes-at-a-time fast path cannot disagree with the rule.
    func testEveryByteValueMatchesTheReference() {
        let base = Array("0123456789ABCDEFabcdef0123456789abcdefABCDEF0123456789aBcDeF0123".utf8)
        XCTAssertEqual(base.count, 64)
        for position in [0, 7, 8, 31, 56, 63] {
            for value in 0...255 {
                var raw = base
                raw[position] = UInt8(value)
                let result: Result<APNsDeviceToken, APNsTokenProblem> = raw.withUnsafeBytes { bytes in
                    Result { () throws(APNsTokenProblem) in try APNsDeviceToken.normalize(bytes) }
                }
                let scalar = Character(UnicodeScalar(UInt8(value)))
                if scalar.isHexDigit && scalar.isASCII {
                    XCTAssertEqual(try? result.get().hex, String(decoding: raw, as: UTF8.self).lowercased(), "byte \(value) at \(position)")
                } else if value == 0x20 || value == 0x3C || value == 0x3E {
                    XCTAssertEqual(result.failureValue, .oddLength(digits: 63), "byte \(value) at \(position)")
                } else {
                    XCTAssertEqual(result.failureValue, .notHex(position: position + 1), "byte \(value) at \(position)")
                }
            }
        }
    }

    func testBoundsAreInclusive() {
        XCTAssertNoThrow(try APNsDeviceToken.normalize(String(repeating: "a", count: 64)))
        XCTAssertNoThrow(try APNsDeviceToken.normalize(String(repeating: "a", count: 200)))
        XCTAssertEqual(problem(String(repeating: "a", count: 62)), .tooShort(digits: 62))
    }

    func testProblemDescriptionsReadWell() {
        XCTAssertEqual(APNsTokenProblem.notHex(position: 5).description, "not hex at position 5")
        XCTAssertEqual(APNsTokenProblem.tooShort(digits: 12).description, "too short (12 digits)")
        XCTAssertEqual(APNsTokenProblem.oddLength(digits: 65).description, "odd length (65 digits)")
        XCTAssertEqual(APNsTokenProblem.tooLong(digits: 202).description, "too long (202 digits)")
    }

    private func problem(_ raw: String) -> APNsTokenProblem? {
        do {
            _ = try APNsDeviceToken.normalize(raw)
            return nil
        } catch {
            return error
        }
    }
}

private extension Result {
    var failureValue: Failure? {
        if case .failure(let failure) = self { return failure }
        return nil
    }

    /// The buffer variant (the reader side's, no allocation) gives the same bytes and the same
    /// errors as the String one, and leaves nothing of an earlier token behind.
    func testNormalizeIntoABufferMatchesTheStringVersion() {
        let hex = String(repeating: "aB3f", count: 16)
        let spaced = "<" + String(hex.prefix(32)) + " " + String(hex.suffix(32)) + ">"
        let inputs: [String] = [hex, spaced, hex.lowercased(), " " + hex + " ", "", "xyz", String(hex.dropLast()),
                                String(repeating: "a", count: 62), String(repeating: "0", count: 202), String(repeating: "Ff", count: 100)]
        var buffer = Array(repeating: UInt8(ascii: "z"), count: 300)
        for input in inputs {
            var copy = input
            copy.withUTF8 { bytes in
                let raw = UnsafeRawBufferPointer(bytes)
                var expected: String? = nil, expectedError: APNsTokenProblem? = nil
                do { expected = try APNsDeviceToken.normalize(raw).hex } catch { expectedError = error as? APNsTokenProblem }
                do {
                    try APNsDeviceToken.normalize(raw, into: &buffer)
                    XCTAssertEqual(String(decoding: buffer, as: UTF8.self), expected, input)
                } catch {
                    XCTAssertEqual(error as? APNsTokenProblem, expectedError, input)
                }
            }
        }
    }
}
