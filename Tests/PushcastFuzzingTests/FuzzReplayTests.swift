// Replays every committed fuzz input (Tests/Fuzz/Corpus/<target>/ and Tests/Fuzz/Regressions/<target>/)
// through the same bodies the libFuzzer binaries run (docs/FUZZING.md). A broken invariant traps,
// so a regression input that crashes again fails the run.

import Foundation
@testable import PushcastFuzzing
import PushcastWire
import XCTest

final class FuzzReplayTests: XCTestCase {
    static let fuzzDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fuzz")

    /// The files in `Tests/Fuzz/<kind>/<target>/`, sorted; none when the folder is absent.
    static func inputs(_ kind: String, _ target: FuzzTarget) throws -> [URL] {
        let folder = fuzzDirectory.appendingPathComponent(kind).appendingPathComponent(target.rawValue)
        guard FileManager.default.fileExists(atPath: folder.path) else { return [] }
        return try FileManager.default.contentsOfDirectory(at: folder, includingPropertiesForKeys: nil)
            .filter { !$0.lastPathComponent.hasPrefix(".") }
            .sorted { $0.lastPathComponent < $1.lastPathComponent }
    }

    func replay(_ target: FuzzTarget) throws {
        let corpus = try Self.inputs("Corpus", target)
        // Every target ships a seeded corpus; an empty one means the files went missing.
        XCTAssertGreaterThanOrEqual(corpus.count, 3, "Tests/Fuzz/Corpus/\(target.rawValue) has \(corpus.count) inputs")
        for file in corpus + (try Self.inputs("Regressions", target)) {
            target.run(Array(try Data(contentsOf: file)))
        }
    }

    func testCSV() throws { try replay(.csv) }
    func testNDJSON() throws { try replay(.ndjson) }
    func testJSONScanner() throws { try replay(.jsonScanner) }
    func testTemplate() throws { try replay(.template) }
    func testAPNsResponse() throws { try replay(.apnsResponse) }
    func testFCMResponse() throws { try replay(.fcmResponse) }
    func testOAuthResponse() throws { try replay(.oauthResponse) }
    func testHTTP2Client() throws { try replay(.http2Client) }
    func testHTTP1Client() throws { try replay(.http1Client) }
    func testDecompress() throws { try replay(.decompress) }
    func testWebPushSubscription() throws { try replay(.webpushSubscription) }

    /// The targets and their folders stay in step: a folder for a target that no longer exists
    /// would be silently skipped.
    func testEveryFolderNamesATarget() throws {
        let names = Set(FuzzTarget.allCases.map(\.rawValue))
        for kind in ["Corpus", "Regressions"] {
            let folder = Self.fuzzDirectory.appendingPathComponent(kind)
            guard FileManager.default.fileExists(atPath: folder.path) else { continue }
            for entry in try FileManager.default.contentsOfDirectory(atPath: folder.path) where !entry.hasPrefix(".") {
                XCTAssertTrue(names.contains(entry), "Tests/Fuzz/\(kind)/\(entry) names no fuzz target")
            }
        }
    }
}

/// The HTTP/2 harness really opens streams and hands the input to them: answers on stream ids
/// 1, 3 and 5 come back as the responses of requests 1, 2 and 3.
final class FuzzHTTP2HarnessTests: XCTestCase {
    /// An HTTP/2 frame (RFC 9113 §4.1).
    func frame(_ type: UInt8, _ flags: UInt8, _ stream: UInt8, _ payload: [UInt8]) -> [UInt8] {
        [0, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF), type, flags, 0, 0, 0, stream] + payload
    }

    func events(_ serverBytes: [UInt8]) -> [HTTP2ClientEvent] {
        var events: [HTTP2ClientEvent] = []
        FuzzHTTP2.run([0x07] + serverBytes) { events.append($0) }
        return events
    }

    func testAnswersReachTheRequests() {
        let body = Array(#"{"reason":"BadDeviceToken"}"#.utf8)
        // HEADERS (END_STREAM | END_HEADERS) with :status 200 (HPACK static index 8), and 400 (12).
        let input = frame(1, 5, 1, [0x88]) + frame(1, 4, 3, [0x8C]) + frame(0, 1, 3, body) + frame(1, 5, 5, [0x88])
        var answers: [UInt64: HTTP2Response] = [:]
        for case .response(let tag, let response) in events(input) { answers[tag] = response }
        XCTAssertEqual(answers.keys.sorted(), [1, 2, 3])
        XCTAssertEqual(answers[1]?.status, 200)
        XCTAssertEqual(answers[2]?.status, 400)
        XCTAssertEqual(answers[2]?.body, body)
        XCTAssertEqual(answers[3]?.status, 200)
    }

    func testGoAwayFailsTheStreamsAboveIt() {
        // GOAWAY(last stream 1, NO_ERROR), then the answer to stream 1.
        let input = frame(7, 0, 0, [0, 0, 0, 1, 0, 0, 0, 0]) + frame(1, 5, 1, [0x88])
        let events = events(input)
        var responded: [UInt64] = [], failed: [UInt64] = []
        for event in events {
            switch event {
            case .response(let tag, _): responded.append(tag)
            case .failed(let tag, _): failed.append(tag)
            default: break
            }
        }
        XCTAssertEqual(responded, [1])
        XCTAssertEqual(failed.sorted(), [2, 3])
        XCTAssertTrue(events.contains { if case .goAway(lastStreamID: 1, _, _) = $0 { return true } else { return false } })
    }
}

/// The HTTP/1.1 harness really writes its requests and hands the input to them, one at a time
/// or pipelined.
final class FuzzHTTP1HarnessTests: XCTestCase {
    func answer(_ status: Int, _ extra: String = "") -> [UInt8] {
        Array("HTTP/1.1 \(status) Reason\r\n\(extra)Content-Length: 2\r\n\r\nok".utf8)
    }

    func outcomes(_ flags: UInt8, _ serverBytes: [UInt8]) -> [String] {
        var lines: [String] = []
        FuzzHTTP1.run([flags] + serverBytes) { event in
            switch event {
            case .response(let tag, let response): lines.append("\(tag) \(response.status)")
            case .failed(let tag, let failure): lines.append("\(tag) \(failure)")
            default: break
            }
        }
        return lines
    }

    func testAnswersReachTheRequestsOneAtATime() {
        // Pieces of one byte: each request is written once the answer before it is read.
        XCTAssertEqual(outcomes(0x00, answer(200) + answer(404) + answer(201)), ["1 200", "2 404", "3 201"])
        // Whole: the second answer comes before its request, and ends the connection.
        XCTAssertEqual(outcomes(0x07, answer(200) + answer(404)), ["1 200"])
    }

    func testPipelinedAnswersReachTheRequestsAndCloseLeavesTheRestUnprocessed() {
        XCTAssertEqual(outcomes(0x17, answer(200) + answer(404) + answer(201)), ["1 200", "2 404", "3 201"])
        XCTAssertEqual(outcomes(0x13, answer(200, "Connection: close\r\n") + answer(404)),
                       ["1 200", "2 goAwayUnprocessed", "3 goAwayUnprocessed"])
    }
}
