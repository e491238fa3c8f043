import PushcastAPNs
import PushcastCore
@testable import PushcastEngine
import PushcastInput
import PushcastJSON
import XCTest

/// An NDJSON row's columns are its own keys: routing, the token and placeholders read each row,
/// not the first line. Before, an Android row on line 2 went to the APNs lane, became
/// invalid/InvalidToken, and its valid token was written to the prune file.
final class NDJSONRowColumnsTests: XCTestCase {
    static let apnsToken = String(repeating: "ab", count: 32)
    static let fcmToken = "fGz1xQ:APA91b" + String(repeating: "Qx9_-", count: 28)

    static let lines = [
        #"{"token": "\#(apnsToken)"}"#,
        #"{"token": "\#(fcmToken)", "platform": "android", "name": "Ann"}"#,
        #"{"token": "\#(String(repeating: "cd", count: 32))", "platform": "bogus"}"#,
        #"{"Token": "\#(String(repeating: "ef", count: 32))", "name": "Bo"}"#,
        #"{"token": "\#(String(repeating: "12", count: 32))", "platform": null, "name": null}"#,
    ]

    private func reader(_ lines: [String], chunk: Int = 7) throws -> TokenFileReader {
        try TokenFileReader(source: MemoryByteSource(Array((lines.joined(separator: "\n") + "\n").utf8), chunkSize: chunk),
                            format: .ndjson, fileName: "t.ndjson")
    }

    /// Prepares every row of `reader` with an APNs-only preparer whose template says hi to
    /// `{{name}}`; returns what became of each row.
    private func prepareAll(_ reader: TokenFileReader, layout: RowLayout) throws -> [Int: PreparedRow] {
        let template = try PayloadTemplate.compile(text: #"{"aps":{"alert":"hi {{name}}"}}"#, columns: reader.columns)
        var preparer = RowPreparer(layout: layout, template: template, payloadBytesMax: 4096, campaign: "c", fileName: "t.ndjson",
                                   configuredProviders: [.apns], duplicates: .exact(expectedRows: 8))
        var fates: [Int: PreparedRow] = [:]
        while let record = try reader.next() {
            preparer.follow(reader)
            guard case .row(let view) = record else { XCTFail("malformed: \(record)"); continue }
            fates[view.row] = preparer.prepare(record)
        }
        return fates
    }

    private func check(_ fates: [Int: PreparedRow], file: StaticString = #filePath, line: UInt = #line) {
        guard case .send(let first)? = fates[1] else { return XCTFail("row 1: \(String(describing: fates[1]))", file: file, line: line) }
        XCTAssertEqual(String(decoding: first.payload, as: UTF8.self), #"{"aps":{"alert":"hi "}}"#, file: file, line: line)
        guard case .finished(let android)? = fates[2] else { return XCTFail("row 2: \(String(describing: fates[2]))", file: file, line: line) }
        XCTAssertEqual(android.provider, .fcm, file: file, line: line)
        XCTAssertEqual(android.reason, OutcomeReason.providerNotConfigured, file: file, line: line)
        XCTAssertFalse(android.belongsInPruneFile, "a valid FCM token must never reach the prune file", file: file, line: line)
        guard case .finished(let bogus)? = fates[3] else { return XCTFail("row 3", file: file, line: line) }
        XCTAssertEqual(bogus.reason, OutcomeReason.unknownProvider, file: file, line: line)
        guard case .send(let capital)? = fates[4] else { return XCTFail("row 4: \(String(describing: fates[4]))", file: file, line: line) }
        XCTAssertEqual(capital.token, String(repeating: "ef", count: 32), file: file, line: line)
        XCTAssertEqual(String(decoding: capital.payload, as: UTF8.self), #"{"aps":{"alert":"hi Bo"}}"#, file: file, line: line)
        guard case .send(let nulls)? = fates[5] else { return XCTFail("row 5", file: file, line: line) }
        XCTAssertEqual(nulls.provider, .apns, "a null platform is an empty cell: the default provider", file: file, line: line)
    }

    /// Stdin: read once, columns grow as keys appear; the template's keys are declared up front.
    func testReadOnceEachRowRoutesByItsOwnKeys() throws {
        let reader = try reader(Self.lines)
        reader.declareColumns(PayloadTemplate.placeholderNames(in: #"{"aps":{"alert":"hi {{name}}"}}"#))
        let layout = RowLayout(growing: reader.columns, idColumn: nil, defaultProvider: .apns)
        XCTAssertNil(layout.providerColumn, "line 1 has no platform")
        check(try prepareAll(reader, layout: layout))
    }

    /// A file: a first read learns every key; the reader that sends declares them all.
    func testFileReadTwiceHasEveryKeyFromRowOne() throws {
        let first = try reader(Self.lines)
        while try first.next() != nil {}
        XCTAssertEqual(first.columns, ["token", "platform", "name", "Token"])
        let second = try reader(Self.lines, chunk: 1)
        second.declareColumns(first.columns)
        XCTAssertEqual(second.columns, first.columns)
        let layout = try RowLayout(columns: second.columns, idColumn: nil, defaultProvider: .apns, fileName: "t.ndjson")
        XCTAssertEqual(layout.providerColumn, 1)
        check(try prepareAll(second, layout: layout))
    }

    func testAMalformedFirstLineDoesNotRefuseTheFile() throws {
        let reader = try reader(["{not json"] + Self.lines)
        let layout = RowLayout(growing: reader.columns, idColumn: nil, defaultProvider: .apns)
        XCTAssertTrue(layout.tokenColumns.isEmpty)
        guard case .malformed? = try reader.next() else { return XCTFail("line 1 is malformed") }
        var preparer = RowPreparer(layout: layout, template: try PayloadTemplate.compile(text: "{}", columns: []), payloadBytesMax: 4096,
                                   campaign: "c", fileName: "t.ndjson", configuredProviders: [.apns], duplicates: .exact(expectedRows: 8))
        guard let record = try reader.next() else { return XCTFail("no row 2") }
        preparer.follow(reader)
        guard case .send(let n) = preparer.prepare(record) else { return XCTFail("row 2 must be sent") }
        XCTAssertEqual(n.row, 2)
    }

    func testPlaceholderNamesAreFoundInOrderOnce() {
        XCTAssertEqual(PayloadTemplate.placeholderNames(in: #"{"a":"{{x}} {{y}}","b":{"c":"{{x}}{{}}{{z"}}"#), ["x", "y"])
    }
}
