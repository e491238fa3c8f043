// In-memory harness for the HTTP/1.1 client session tests: the session's output is collected as
// the bytes a server would read, the server's answers are fed in pieces, and events are recorded
// as short lines that tests compare.

import Foundation
import PushcastCore
import PushcastWire
import XCTest

/// One HTTP/1.1 client session and what it said.
final class HTTP1Client {
    let clock = ManualClock()
    let session: HTTP1ClientSession
    /// Every byte the session handed out, in order.
    private(set) var written: [UInt8] = []
    private(set) var events: [HTTP2ClientEvent] = []
    /// The errors `receive` threw.
    private(set) var errors: [String] = []
    private let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 16)

    init(limits: Limits = Limits(), http1: HTTP1Limits = HTTP1Limits()) {
        session = HTTP1ClientSession(limits: limits, http1: http1, clock: clock)
    }

    deinit { buffer.deallocate() }

    /// A client with `count` requests (tags 1, 2, ...) written and handed out, at pipeline depth
    /// `depth` (at least `count`).
    static func sending(_ count: Int = 1, depth: Int = 1, limits: Limits = Limits(), http1: HTTP1Limits = HTTP1Limits()) -> HTTP1Client {
        var http1 = http1
        http1.pipelineDepth = max(http1.pipelineDepth, depth, count)
        let client = HTTP1Client(limits: limits, http1: http1)
        for tag in 0..<count { XCTAssertNotNil(client.submit(tag: UInt64(tag + 1))) }
        client.flush()
        return client
    }

    @discardableResult
    func submit(_ request: HTTP2Request = HTTP1Client.request(), tag: UInt64) -> Int32? {
        session.submit(request, tag: tag)
    }

    /// Hands out every pending byte, or at most `limit`; returns how many.
    @discardableResult
    func flush(limit: Int = .max) -> Int {
        var moved = 0
        while moved < limit {
            let room = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<min(buffer.count, limit - moved)])
            let n = session.produce(into: room)
            if n == 0 { break }
            written.append(contentsOf: room[0..<n])
            moved += n
        }
        return moved
    }

    /// Feeds `answer` cut at `splits` (offsets, ascending), then takes the events.
    func feed(_ answer: [UInt8], splits: [Int] = []) {
        var start = 0
        for end in splits + [answer.count] where end > start {
            do {
                try answer.withUnsafeBytes { try session.receive(UnsafeRawBufferPointer(rebasing: $0[start..<end])) }
            } catch {
                errors.append("\(error)")
                break
            }
            start = end
        }
        take()
    }

    func feed(_ answer: String, splits: [Int] = []) { feed(Array(answer.utf8), splits: splits) }

    /// Feeds one byte at a time.
    func feedBytewise(_ answer: [UInt8]) { feed(answer, splits: Array(0..<answer.count)) }

    func take() { session.takeEvents { events.append($0) } }

    /// The events so far as lines (`describe`), and forgets them.
    func lines() -> [String] {
        take()
        defer { events = [] }
        return events.map(describe)
    }

    var writtenText: String { String(decoding: written, as: UTF8.self) }

    static func request(_ path: String = "/push/abc", body: String = "hello", method: String = "POST",
                        headers: [HTTP2Header] = [HTTP2Header("ttl", "60")]) -> HTTP2Request {
        HTTP2Request(authority: "push.example", path: path, headers: headers, body: Array(body.utf8), method: method)
    }
}

/// An event as a line: `response TAG STATUS BODY [truncated] [name=value...]`,
/// `failed TAG FAILURE`, `goAway ID TEXT`, `closed`.
func describe(_ event: HTTP2ClientEvent) -> String {
    switch event {
    case .response(let tag, let response):
        var line = "response \(tag) \(response.status) \(String(decoding: response.body, as: UTF8.self))"
        if response.bodyTruncated { line += " truncated" }
        for header in response.headers { line += " \(header.name)=\(header.value)" }
        return line
    case .failed(let tag, let failure): return "failed \(tag) \(failure)"
    case .goAway(let id, _, let text): return "goAway \(id) \(text)"
    case .settingsChanged(let value): return "settings \(value)"
    case .pingTimedOut: return "pingTimedOut"
    case .closed: return "closed"
    }
}

/// A response with a Content-Length body.
func answer(_ status: Int = 200, _ body: String = "", headers: [String] = []) -> String {
    "HTTP/1.1 \(status) Reason\r\n" + headers.map { $0 + "\r\n" }.joined() + "Content-Length: \(body.utf8.count)\r\n\r\n" + body
}

/// A minimal HTTP/1.1 server for the shared-protocol test: each whole request it reads (a head
/// and its Content-Length body) is answered 200 with the request's target as the body.
struct EchoHTTP1Server {
    private var pending: [UInt8] = []

    mutating func receive(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        pending.append(contentsOf: bytes)
        var out: [UInt8] = []
        while let headEnd = find(Array("\r\n\r\n".utf8), in: pending) {
            let head = String(decoding: pending[..<headEnd], as: UTF8.self)
            let lines = head.split(separator: "\r\n")
            let target = lines[0].split(separator: " ")[1]
            let length = lines.dropFirst().first { $0.lowercased().hasPrefix("content-length:") }
                .map { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces))! } ?? 0
            guard pending.count >= headEnd + 4 + length else { break }
            pending.removeFirst(headEnd + 4 + length)
            out += Array(answer(200, String(target)).utf8)
        }
        return out
    }

    private func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        for i in 0...(haystack.count - needle.count) where Array(haystack[i..<(i + needle.count)]) == needle { return i }
        return nil
    }
}
