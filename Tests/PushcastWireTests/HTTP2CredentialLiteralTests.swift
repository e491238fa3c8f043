// The `authorization` value goes out as a raw never-indexed literal (HTTP2CredentialLiterals):
// every HEADERS block the client session writes is decoded here by an independent nghttp2
// inflater, which must find the real credential, never the placeholder, in the representation
// RFC 7541 §6.2.3 calls "literal header field never indexed".

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
            request.pathSuffix = String(n)
            request.headers = [HTTP2Header("apns-id", "id-\(n)", neverIndexed: true)]
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
            XCTAssertEqual(decoded.values[":path"], "/3/device/\(n)")
            XCTAssertEqual(decoded.values["apns-id"], "id-\(n)")
            XCTAssertEqual(decoded.values["apns-topic"], "com.example.app")
        }
        // Never indexed: the peer's table holds apns-topic and :authority only.
        XCTAssertEqual(nghttp2_hd_inflate_get_num_table_entries(inflater) - 61, 2)
    }

    /// A block too large for the rewrite keeps nghttp2's own encoding of the credential, and a
    /// server session reads both kinds.
    func testLargeBlocksKeepNghttp2sEncodingAndBothReachTheServer() throws {
        let pair = try HTTP2Pair()
        try pair.pump()
        var seen: [String: String] = [:]
        pair.onServerEvent = { event, server in
            guard case .request(let request) = event else { return }
            seen[request.path] = request.headers.first { $0.name == "authorization" }?.value
            server.respond(streamID: request.streamID, status: 200, headers: [], body: [])
        }
        var request = HTTP2Pair.request("/r/")
        request.fixedHeaders = HTTP2HeaderTemplate([HTTP2Header("authorization", bearer(7))])
        request.pathSuffix = "small"
        XCTAssertNotNil(pair.client.submit(request, tag: 1))
        request.pathSuffix = "large"
        request.headers = [HTTP2Header("x-large", String(repeating: "z", count: HTTP2CredentialLiterals.blockBytesMax))]
        XCTAssertNotNil(pair.client.submit(request, tag: 2))
        try pair.pump()
        XCTAssertEqual(seen["/r/small"], bearer(7))
        XCTAssertEqual(seen["/r/large"], bearer(7))
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
