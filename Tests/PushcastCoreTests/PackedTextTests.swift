import PushcastCore
import XCTest

/// `PackedText`: a token or apns-id kept as its bytes. Every text must come back exactly as it
/// went in, packed or not, and one text must have one representation (equality is by text).
final class PackedTextTests: XCTestCase {
    private let hexDigits = Array("0123456789abcdef".utf8)

    private func randomHex(_ count: Int, _ random: SplitMix64) -> String {
        String(decoding: (0..<count).map { _ in hexDigits[Int(random.next(below: 16))] }, as: UTF8.self)
    }

    private func randomUUID(_ random: SplitMix64) -> String {
        [8, 4, 4, 4, 12].map { randomHex($0, random) }.joined(separator: "-")
    }

    func testHexTokensAndUUIDsArePackedAndComeBackExactly() {
        let random = SplitMix64(seed: 1)
        for _ in 0..<2000 {
            let token = randomHex(64, random)
            let packed = PackedText(token)
            XCTAssertTrue(packed.isPacked, token)
            XCTAssertEqual(packed.string, token)
            XCTAssertEqual(packed.utf8Count, 64)
            let id = randomUUID(random)
            let packedID = PackedText(id)
            XCTAssertTrue(packedID.isPacked, id)
            XCTAssertEqual(packedID.string, id)
            XCTAssertEqual(packedID.utf8Count, 36)
        }
        // Every digit in every position: all zeros, all f's, and each digit repeated.
        for digit in hexDigits {
            let token = String(repeating: String(UnicodeScalar(digit)), count: 64)
            XCTAssertEqual(PackedText(token).string, token)
            let id = [8, 4, 4, 4, 12].map { String(repeating: String(UnicodeScalar(digit)), count: $0) }.joined(separator: "-")
            XCTAssertEqual(PackedText(id).string, id)
        }
    }

    func testOtherTextsAreKeptAsTheyAre() {
        let base = String(repeating: "a", count: 64)
        var cases = ["", "d0", "0123", String(repeating: "a", count: 63), String(repeating: "a", count: 65),
                     String(repeating: "A", count: 64), "00000000-0000-0000-0000-00000000000",
                     "00000000_0000-0000-0000-000000000000", "0000000-00000-0000-0000-000000000000",
                     "00000000-0000-0000-0000-00000000000G", "projects/p/messages/0:1234",
                     "ünïcödé-" + String(repeating: "a", count: 27)]
        // One byte outside [0-9a-f] at every position of a token: just below and above each range.
        for position in 0..<64 {
            for bad: UInt8 in [0x2F, 0x3A, 0x40, 0x60, 0x67, 0x47, 0x20, 0x00, 0xC3] {
                var bytes = Array(base.utf8)
                bytes[position] = bad
                if let text = String(validatingUTF8: bytes.map { CChar(bitPattern: $0) } + [0]), text.utf8.count == 64 {
                    cases.append(text)
                }
            }
        }
        for text in cases {
            let packed = PackedText(text)
            XCTAssertFalse(packed.isPacked, text)
            XCTAssertEqual(packed.string, text)
            XCTAssertEqual(packed.utf8Count, text.utf8.count)
        }
    }

    func testEqualityAndHashingAreByText() {
        let token = String(repeating: "0a", count: 32)
        let fromString = PackedText(token)
        let fromBytes = Array(token.utf8).withUnsafeBytes { PackedText(utf8: $0) }
        XCTAssertEqual(fromString, fromBytes)
        XCTAssertEqual(fromString.hashValue, fromBytes.hashValue)
        XCTAssertNotEqual(fromString, PackedText(String(repeating: "0b", count: 32)))
        XCTAssertTrue(Array(token.utf8).withUnsafeBytes { fromString.equals(utf8: $0) })
        XCTAssertFalse(Array(token.uppercased().utf8).withUnsafeBytes { fromString.equals(utf8: $0) })
        XCTAssertTrue(Array("x".utf8).withUnsafeBytes { PackedText("x").equals(utf8: $0) })
        XCTAssertTrue(PackedText.empty.isEmpty)
        XCTAssertEqual(PackedText.empty, PackedText(""))
    }

    func testAUUIDFromBytesIsFormattedFirstByteFirst() {
        let packed = PackedText(uuidBytes: 0x0123_4567_89AB_CDEF, 0xFEDC_BA98_7654_3210)
        XCTAssertEqual(packed.string, "01234567-89ab-cdef-fedc-ba9876543210")
        XCTAssertEqual(packed, PackedText("01234567-89ab-cdef-fedc-ba9876543210"))
    }
}
