// The `authorization` value goes out as a raw never-indexed literal (HTTP2CredentialLiterals),
// and so do a request's own long values (`:path`, never-indexed headers such as apns-id): every
// HEADERS block the client session writes is decoded here by an independent nghttp2 inflater,
// which must find the real values, never a placeholder, in the representations RFC 7541 §6.2.2
// and §6.2.3 call "literal header field without indexing" and "never indexed".

import CNGHTTP2
import PushcastCore
@testable import PushcastWire
import XCTest

final class HTTP2CredentialLiteralTests: XCTestCase {
    private struct Decoded {
        var values: [String: String] = [:]
        var flags: [String: UInt8] = [:]
        /// The first byte of the authorization field's value string: its H bit says Huffman.
        var authorizationRaw: Bool?
    }

    /// Splits client output into frames; returns each HEADERS block (after the 24-byte preface).
    private func headerBlocks(_ output: [UInt8], skipPreface: Bool) -> [[UInt8]] {
        var blocks: [[UInt8]] = []
        var offset = skipPreface ? 24 : 0
        while offset + 9 <= output.count {
            let length = Int(output[offset]) << 16 | Int(output[offset + 1]) << 8 | Int(output[offset + 2])
            guard offset + 9 + length <= output.count else { break }
            if output[offset + 3] == 0x1 {
                XCTAssertNotEqual(output[offset + 4] & 0x4, 0, "one HEADERS frame per block (END_HEADERS)")
                blocks.append(Array(output[(offset + 9)..<(offset + 9 + length)]))
            }
            offset += 9 + length
        }
        XCTAssertEqual(offset, output.count, "whole frames")
        return blocks
    }

    private func decode(_ block: [UInt8], _ inflater: OpaquePointer) throws -> Decoded {
        var decoded = Decoded()
        try block.withUnsafeBufferPointer { bytes in
            var consumed = 0
            while consumed < bytes.count {
                var nv = nghttp2_nv()
                var flags: Int32 = 0
                let fieldStart = consumed
                let rv = nghttp2_hd_inflate_hd2(inflater, &nv, &flags, bytes.baseAddress! + consumed, bytes.count - consumed, 1)
                guard rv >= 0 else { throw HTTP2Error(code: Int(rv), "nghttp2_hd_inflate_hd2") }
                consumed += rv
                if flags & Int32(NGHTTP2_HD_INFLATE_EMIT.rawValue) != 0 {
                    let name = String(decoding: UnsafeBufferPointer(start: nv.name, count: nv.namelen), as: UTF8.self)
                    decoded.values[name] = String(decoding: UnsafeBufferPointer(start: nv.value, count: nv.valuelen), as: UTF8.self)
                    decoded.flags[name] = nv.flags
                    if name == "authorization" {
                        // Never indexed, static name 23: 0x1F 0x08, then the value's length byte.
                        XCTAssertEqual(Array(bytes[fieldStart..<fieldStart + 2]), [0x1F, 0x08])
                        decoded.authorizationRaw = bytes[fieldStart + 2] & 0x80 == 0
                    }
                }
                if flags & Int32(NGHTTP2_HD_INFLATE_FINAL.rawValue) != 0 { break }
                if rv == 0 && flags == 0 { throw HTTP2Error("the inflater made no progress") }
            }
            nghttp2_hd_inflate_end_headers(inflater)
        }
        return decoded
    }

    /// Whether `block` holds `value` as a raw string (its length byte, then its bytes).
    private func holdsRaw(_ block: [UInt8], _ value: String) -> Bool {
        let needle = HPACKRaw.string(value)
        guard block.count >= needle.count else { return false }
        return (0...(block.count - needle.count)).contains { Array(block[$0..<($0 + needle.count)]) == needle }
    }

    private func token(_ n: Int) -> String {
        let rng = SplitMix64(seed: UInt64(n) &+ 11)
        return (0..<4).map { _ in String(rng.next(), radix: 16).leftPadded(16) }.joined()
    }

    private func apnsID(_ n: Int) -> String {
        let hex = token(n + 1000)
        return "\(hex.prefix(8))-\(hex.dropFirst(8).prefix(4))-5\(hex.dropFirst(12).prefix(3))-8\(hex.dropFirst(15).prefix(3))-\(hex.dropFirst(18).prefix(12))"
    }

    private func bearer(_ generation: Int) -> String {
        "bearer eyJhbGciOiJFUzI1NiIsImtpZCI6IktFWSJ9.eyJpc3MiOiJURUFNIiwiaWF0Ijo\(generation)fQ." + String(repeating: "Qx-_9", count: 18)
    }

    /// Twelve credentials (more than the slots) over 240 requests, several generations queued
    /// at once: each block carries its own request's credential, raw and never indexed.
    func testEveryBlockCarriesItsCredentialAsARawNeverIndexedLiteral() throws {
        let pair = try HTTP2Pair()
        try pair.pump()
        var inflater: OpaquePointer?
        XCTAssertEqual(nghttp2_hd_inflate_new(&inflater), 0)
        defer { nghttp2_hd_inflate_del(inflater) }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
        defer { buffer.deallocate() }
        var expected: [String] = []
        var request = HTTP2Pair.request("/3/device/")
        var output: [UInt8] = []
        for n in 0..<240 {
            if n % 20 == 0 {
                request.fixedHeaders = HTTP2HeaderTemplate([HTTP2Header("apns-topic", "com.example.app"),
                                                            HTTP2Header("authorization", bearer(n / 20))])
            }
            // Every third request is short: its values stay with nghttp2's encoding.
            let long = n % 3 != 0
            request.pathSuffix = long ? token(n) : String(n)
            // Every other request carries its apns-id packed (`packedHeader`, after `headers`), as
            // the APNs adapter does: the same text must reach the inflater.
            if n % 2 == 0 {
                request.headers = [HTTP2Header("apns-collapse-id", "collapse-\(n)-of-the-campaign")]
                request.packedHeader = HTTP2PackedHeader(name: "apns-id", value: PackedText(long ? apnsID(n) : "id-\(n)"), neverIndexed: true)
                XCTAssertEqual(request.packedHeader.value.isPacked, long)
                XCTAssertEqual(request.packedPathSuffix.isPacked, long)
            } else {
                request.headers = [HTTP2Header("apns-id", long ? apnsID(n) : "id-\(n)", neverIndexed: true),
                                   HTTP2Header("apns-collapse-id", "collapse-\(n)-of-the-campaign")]
                request.packedHeader = .absent
            }
            XCTAssertNotNil(pair.client.submit(request, tag: UInt64(n)))
            expected.append(bearer(n / 20))
            // Drain now and then only, so frames of several credentials wait together.
            if n % 25 == 24 || n == 239 {
                while true {
                    let count = pair.client.produce(into: buffer)
                    if count == 0 { break }
                    output += buffer[0..<count]
                }
            }
        }
        let blocks = headerBlocks(output, skipPreface: false)
        XCTAssertEqual(blocks.count, 240)
        for (n, block) in blocks.enumerated() {
            let decoded = try decode(block, inflater!)
            XCTAssertEqual(decoded.values["authorization"], expected[n], "request \(n)")
            XCTAssertEqual(decoded.authorizationRaw, true, "request \(n): raw, not Huffman")
            XCTAssertEqual(decoded.flags["authorization"].map { $0 & UInt8(NGHTTP2_NV_FLAG_NO_INDEX.rawValue) },
                           UInt8(NGHTTP2_NV_FLAG_NO_INDEX.rawValue))
            let long = n % 3 != 0
            let path = "/3/device/" + (long ? token(n) : String(n))
            XCTAssertEqual(decoded.values[":path"], path, "request \(n)")
            XCTAssertEqual(decoded.values["apns-id"], long ? apnsID(n) : "id-\(n)", "request \(n)")
            XCTAssertEqual(decoded.flags["apns-id"].map { $0 & UInt8(NGHTTP2_NV_FLAG_NO_INDEX.rawValue) },
                           UInt8(NGHTTP2_NV_FLAG_NO_INDEX.rawValue))
            XCTAssertEqual(decoded.values["apns-collapse-id"], "collapse-\(n)-of-the-campaign")
            XCTAssertEqual(decoded.values["apns-topic"], "com.example.app")
            XCTAssertEqual(holdsRaw(block, path), long, "request \(n): a long :path goes raw, a short one as nghttp2 encodes it")
            XCTAssertEqual(holdsRaw(block, long ? apnsID(n) : "x"), long, "request \(n): a long apns-id goes raw")
            XCTAssertFalse(holdsRaw(block, "collapse-\(n)-of-the-campaign"), "an indexed header keeps nghttp2's encoding")
        }
        // Never indexed or not indexed: the peer's table holds apns-topic, :authority and the
        // collapse ids (indexed headers, which keep nghttp2's encoding and stay in step).
        XCTAssertGreaterThan(nghttp2_hd_inflate_get_num_table_entries(inflater) - 61, 2)
    }

    /// A block too large for the rewrite keeps nghttp2's own encoding of the credential, and a
    /// server session reads both kinds.
    func testLargeBlocksKeepNghttp2sEncodingAndBothReachTheServer() throws {
        let pair = try HTTP2Pair()
        try pair.pump()
        let log = HeaderLog(recording: "authorization", on: pair)
        var request = HTTP2Pair.request("/r/")
        request.fixedHeaders = HTTP2HeaderTemplate([HTTP2Header("authorization", bearer(7))])
        request.pathSuffix = "small"
        XCTAssertNotNil(pair.client.submit(request, tag: 1))
        request.pathSuffix = "large"
        request.headers = [HTTP2Header("x-large", String(repeating: "z", count: HTTP2CredentialLiterals.blockBytesMax))]
        XCTAssertNotNil(pair.client.submit(request, tag: 2))
        try pair.pump()
        XCTAssertEqual(log.seen["/r/small"], bearer(7))
        XCTAssertEqual(log.seen["/r/large"], bearer(7))
    }

    /// The server session reads the rewritten blocks; a value that looks like a placeholder
    /// sends its block through nghttp2's own encoding; streams that fail before their HEADERS
    /// go out leave nothing behind for later frames.
    func testLiteralsReachTheServerAndPlaceholderLookalikesAreLeftAlone() throws {
        var limits = Limits()
        limits.streamsPerConnectionMax = 8
        let pair = try HTTP2Pair(clientLimits: limits)
        try pair.pump()
        let log = HeaderLog(recording: "apns-id", on: pair)
        var request = HTTP2Pair.request("/3/device/")
        for n in 0..<200 {
            request.pathSuffix = token(n)
            // A never-indexed template value "~a" (the first literal's placeholder) every tenth
            // request: taken for a placeholder, it would end the connection.
            request.fixedHeaders = n % 10 == 0 ? HTTP2HeaderTemplate([HTTP2Header("x-mark", "~a", neverIndexed: true)]) : nil
            if n % 2 == 0 {
                request.headers = []
                request.packedHeader = HTTP2PackedHeader(name: "apns-id", value: PackedText(apnsID(n)), neverIndexed: true)
            } else {
                request.headers = [HTTP2Header("apns-id", apnsID(n), neverIndexed: true)]
                request.packedHeader = .absent
            }
            XCTAssertNotNil(pair.client.submit(request, tag: UInt64(n)))
            if n % 7 == 6 { try pair.pump() }
        }
        try pair.pump()
        XCTAssertEqual(log.seen.count, 200)
        for n in 0..<200 { XCTAssertEqual(log.seen["/3/device/" + token(n)], apnsID(n), "request \(n)") }
        XCTAssertEqual(pair.clientEvents.compactMap(\.tag).count, 200)
        XCTAssertEqual(pair.client.literalFramesWaiting, 0)
        XCTAssertFalse(pair.client.isClosed)

        // Streams that end before their HEADERS frame goes out leave no literals waiting.
        for n in 0..<5 {
            request.pathSuffix = token(n)
            XCTAssertNotNil(pair.client.submit(request, tag: UInt64(1000 + n)))
        }
        XCTAssertEqual(pair.client.literalFramesWaiting, 5)
        pair.client.connectionLost()
        XCTAssertEqual(pair.client.literalFramesWaiting, 0)
    }

    func testHPACKIntegersRoundTrip() {
        for prefix in [4, 5, 6, 7] {
            for value in [0, 1, 14, 15, 16, 126, 127, 128, 300, 16_383, 16_384, 1 << 20] {
                var out: [UInt8] = []
                HTTP2CredentialLiterals.appendInteger(value, prefixBits: prefix, firstByte: 0, to: &out)
                var at = 0
                let read = out.withUnsafeBufferPointer { HTTP2CredentialLiterals.integer($0.baseAddress!, &at, out.count, prefixBits: prefix) }
                XCTAssertEqual(read, value, "prefix \(prefix)")
                XCTAssertEqual(at, out.count)
            }
        }
    }
}

/// Answers every request of `pair`'s server with 200 and keeps, by path, the value of one header.
final class HeaderLog {
    private(set) var seen: [String: String] = [:]

    init(recording name: String, on pair: HTTP2Pair) {
        pair.onServerEvent = { event, server in
            guard case .request(let request) = event else { return }
            self.seen[request.path] = request.headers.first { $0.name == name }?.value
            server.respond(streamID: request.streamID, status: 200, headers: [], body: [])
        }
    }
}

/// An HPACK raw string literal (RFC 7541 §5.2, H = 0), for finding a value in a block.
enum HPACKRaw {
    static func string(_ value: String) -> [UInt8] {
        var out: [UInt8] = []
        HTTP2CredentialLiterals.appendInteger(value.utf8.count, prefixBits: 7, firstByte: 0, to: &out)
        return out + Array(value.utf8)
    }
}

private extension String {
    func leftPadded(_ width: Int) -> String { String(repeating: "0", count: max(0, width - count)) + self }
}
