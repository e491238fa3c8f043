// Tests for the client's hot-path machinery: the pooled nghttp2 allocator, the stream-id table
// (and its fallback when two live streams share an entry), the growing header-block builder, the
// per-slot request-body storage, and the move-out event buffer.

import CNGHTTP2
import PushcastCore
@testable import PushcastWire
import XCTest

final class HTTP2HotPathTests: XCTestCase {
    // MARK: Memory pool

    func testPoolKeepsContentsAcrossReallocAndZeroesCalloc() throws {
        let mem = HTTP2MemoryPool.make(streamsMax: 4)
        defer { HTTP2MemoryPool.destroy(mem) }
        let ud = mem.pointee.mem_user_data
        for size in [1, 31, 32, 33, 100, 4095, 4096, 4097, 20_000] {
            var block = try XCTUnwrap(mem.pointee.malloc(size, ud))
            XCTAssertEqual(Int(bitPattern: block) % 16, 0, "16-byte aligned like malloc")
            for i in 0..<size { block.storeBytes(of: UInt8(truncatingIfNeeded: i &* 7), toByteOffset: i, as: UInt8.self) }
            for grown in [size + 1, size * 2 + 10, 5000, 3] {
                block = try XCTUnwrap(mem.pointee.realloc(block, grown, ud))
                for i in 0..<min(size, grown) {
                    XCTAssertEqual(block.load(fromByteOffset: i, as: UInt8.self), UInt8(truncatingIfNeeded: i &* 7))
                }
                // Keep the pattern valid for the next round.
                for i in 0..<grown { block.storeBytes(of: UInt8(truncatingIfNeeded: i &* 7), toByteOffset: i, as: UInt8.self) }
                if grown < size { break }
            }
            mem.pointee.free(block, ud)
        }
        mem.pointee.free(nil, ud)
        let dirty = try XCTUnwrap(mem.pointee.malloc(200, ud))
        memset(dirty, 0xAB, 200)
        mem.pointee.free(dirty, ud)
        let zeroed = try XCTUnwrap(mem.pointee.calloc(10, 20, ud))
        XCTAssertEqual(zeroed, dirty, "a freed block of the same class is reused")
        for i in 0..<200 { XCTAssertEqual(zeroed.load(fromByteOffset: i, as: UInt8.self), 0) }
        mem.pointee.free(zeroed, ud)
        XCTAssertNil(mem.pointee.calloc(Int.max, 2, ud), "overflow fails instead of wrapping")
    }

    // MARK: Stream table

    /// With 4 slots the stream table has 16 entries; 200 short streams beside one long one make
    /// later streams overwrite the long one's entry many times. Its response must still arrive.
    func testLongLivedStreamSurvivesStreamTableWrapAround() throws {
        var clientLimits = Limits()
        clientLimits.streamsPerConnectionMax = 4
        let pair = try HTTP2Pair(clientLimits: clientLimits)
        var heldStreamID: Int32?
        pair.onServerEvent = { event, server in
            guard case .request(let request) = event else { return }
            if request.path == "/held" { heldStreamID = request.streamID; return }
            server.respond(streamID: request.streamID, status: 200, headers: [HTTP2Header("apns-id", request.path)], body: Array(request.path.utf8))
        }
        try pair.pump()
        let held = try XCTUnwrap(pair.client.submit(HTTP2Pair.request("/held"), tag: 0))
        for tag in 1...200 as ClosedRange<UInt64> {
            XCTAssertNotNil(pair.client.submit(HTTP2Pair.request("/r\(tag)"), tag: tag))
            try pair.pump()
        }
        XCTAssertEqual(heldStreamID, held)
        XCTAssertEqual(pair.clientEvents.compactMap(\.tag).count, 200)
        for tag in 1...200 as ClosedRange<UInt64> {
            let response = try XCTUnwrap(pair.clientEvents.first { $0.tag == tag }?.response)
            XCTAssertEqual(response.body, Array("/r\(tag)".utf8))
            XCTAssertEqual(response.header("apns-id"), "/r\(tag)")
        }
        pair.server.respond(streamID: held, status: 410, headers: [], body: Array("held".utf8))
        try pair.pump()
        let late = try XCTUnwrap(pair.clientEvents.first { $0.tag == 0 }?.response)
        XCTAssertEqual(late.status, 410)
        XCTAssertEqual(late.body, Array("held".utf8))
        XCTAssertEqual(pair.clientEvents.filter { $0.tag == 0 }.count, 1, "exactly one outcome")
        XCTAssertEqual(pair.client.streamsOpen, 0)
    }

    // MARK: Header block and body storage

    /// The requests a server saw, by path.
    final class RequestLog {
        var seen: [String: HTTP2ServerRequest] = [:]
    }

    /// A pair past its SETTINGS exchange whose server answers 200 to every request and logs it.
    private func answeringPair(serverLimits: Limits = Limits()) throws -> (HTTP2Pair, RequestLog) {
        let pair = try HTTP2Pair(serverLimits: serverLimits)
        try pair.pump()
        let log = RequestLog()
        pair.onServerEvent = { event, server in
            guard case .request(let request) = event else { return }
            log.seen[request.path] = request
            server.respond(streamID: request.streamID, status: 200, headers: [], body: [])
        }
        return (pair, log)
    }

    func testLargeHeadersAndBodiesOfChangingSizesRoundTripExactly() throws {
        var serverLimits = Limits()
        serverLimits.requestBodyBytesMax = 64 * 1024
        let (pair, log) = try answeringPair(serverLimits: serverLimits)
        // Sizes straddle the builder's first 2 KiB, the slot's kept 4 KiB body, and shrink again.
        let sizes = [10, 3000, 5000, 20_000, 60, 0, 4096, 4097, 1]
        for (index, size) in sizes.enumerated() {
            let body = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ index) }
            let long = String(repeating: "v", count: size % 6000 + 1)
            var request = HTTP2Pair.request("/size/\(index)", body: body)
            request.headers.append(HTTP2Header("x-long", long))
            XCTAssertNotNil(pair.client.submit(request, tag: UInt64(index)))
            try pair.pump()
            let got = try XCTUnwrap(log.seen["/size/\(index)"])
            XCTAssertEqual(got.body, body, "body of \(size) bytes")
            XCTAssertEqual(got.header("x-long"), long)
            XCTAssertEqual(got.header("apns-topic"), "com.example.app")
            XCTAssertEqual(got.authority, "api.push.example")
            XCTAssertEqual(got.method, "POST")
        }
        XCTAssertEqual(pair.clientEvents.compactMap(\.response).count, sizes.count)
    }

    // MARK: Event buffer

    func testEventsCausedWhileTakingArriveInOrderFromTheSameCall() throws {
        let pair = try HTTP2Pair()
        try pair.pump()
        pair.onServerEvent = { _, _ in }  // never answer
        XCTAssertNotNil(pair.client.submit(HTTP2Pair.request("/a"), tag: 1))
        XCTAssertNotNil(pair.client.submit(HTTP2Pair.request("/b"), tag: 2))
        try pair.pump()
        pair.client.connectionLost()
        var order: [String] = []
        pair.client.takeEvents { event in
            // A nested take returns at once; the outer call keeps the order.
            pair.client.takeEvents { _ in order.append("nested") }
            switch event {
            case .failed(let tag, let failure): order.append("failed \(tag) \(failure)")
            case .closed: order.append("closed")
            default: order.append("other")
            }
        }
        XCTAssertEqual(order, ["failed 1 connectionLost", "failed 2 connectionLost", "closed"])
        var more = 0
        pair.client.takeEvents { _ in more += 1 }
        XCTAssertEqual(more, 0)
    }

    /// Every request event's tag is named twice before its event is handled: `lookAhead` events
    /// ahead, then half as far (near), in the events' order; GOAWAY and close have no tag.
    func testUpcomingTagsAreHintedTwiceBeforeTheirEvents() throws {
        let pair = try HTTP2Pair()
        try pair.pump()
        pair.onServerEvent = { _, _ in }  // never answer
        let tags: [UInt64] = Array(1...20)
        for tag in tags { XCTAssertNotNil(pair.client.submit(HTTP2Pair.request("/\(tag)"), tag: tag)) }
        try pair.pump()
        pair.client.connectionLost()
        var far: [UInt64] = [], near: [UInt64] = [], handled: [UInt64] = []
        var untagged = 0
        pair.client.takeEvents(upcoming: { tag, isNear in
            XCTAssertFalse(handled.contains(tag), "tag \(tag) hinted after its event")
            if isNear {
                XCTAssertTrue(far.contains(tag), "tag \(tag): the near hint came first")
                near.append(tag)
            } else {
                far.append(tag)
            }
        }) { event in
            if let tag = event.tag {
                let lead = far.count - handled.count
                XCTAssertTrue(lead == HTTP2ClientSession.lookAhead + 1 || far.count == tags.count, "lead \(lead) at tag \(tag)")
                handled.append(tag)
            } else {
                untagged += 1
            }
        }
        XCTAssertEqual(handled, tags)
        XCTAssertEqual(far, tags)
        XCTAssertEqual(near, tags)
        XCTAssertEqual(untagged, 1)  // .closed
    }

    // MARK: HPACK

    /// A header marked never-indexed (apns-id: a new value on every request) goes out as a
    /// never-indexed literal and stays out of the peer's dynamic table; the campaign's repeated
    /// headers are indexed once and then sent as one-byte references.
    func testNonIndexableHeaderIsNeverIndexedAndRepeatedHeadersAreIndexed() throws {
        let pair = try HTTP2Pair()
        try pair.pump()
        let inflater = try XCTUnwrap({ () -> OpaquePointer? in
            var inflater: OpaquePointer?
            return nghttp2_hd_inflate_new(&inflater) == 0 ? inflater : nil
        }())
        defer { nghttp2_hd_inflate_del(inflater) }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 16)
        defer { buffer.deallocate() }
        var blockSizes: [Int] = []
        for n in 0..<3 {
            var request = HTTP2Pair.request("/3/device/\(n)")
            request.headers = [HTTP2Header("apns-topic", "com.example.app"),
                               HTTP2Header("apns-id", "0a0b0c0d-0e0f-5000-8000-00000000000\(n)", neverIndexed: true)]
            XCTAssertNotNil(pair.client.submit(request, tag: UInt64(n)))
            var output: [UInt8] = []
            while true {
                let count = pair.client.produce(into: buffer)
                if count == 0 { break }
                output += buffer[0..<count]
            }
            // The HEADERS frame's block (RFC 9113 §4.1: 9-byte frame headers), decoded by an
            // independent nghttp2 inflater that keeps its own dynamic table across requests.
            var offset = 0
            var block: [UInt8]?
            while offset + 9 <= output.count {
                let length = Int(output[offset]) << 16 | Int(output[offset + 1]) << 8 | Int(output[offset + 2])
                if output[offset + 3] == 0x1 { block = Array(output[(offset + 9)..<(offset + 9 + length)]) }
                offset += 9 + length
            }
            let headers = try XCTUnwrap(block, "request \(n) sent a HEADERS frame")
            blockSizes.append(headers.count)
            var flagsByName: [String: UInt8] = [:]
            var values: [String: String] = [:]
            try headers.withUnsafeBufferPointer { bytes in
                var consumed = 0
                while consumed < bytes.count {
                    var nv = nghttp2_nv()
                    var flags: Int32 = 0
                    let rv = nghttp2_hd_inflate_hd2(inflater, &nv, &flags, bytes.baseAddress! + consumed, bytes.count - consumed, 1)
                    XCTAssertGreaterThanOrEqual(rv, 0)
                    guard rv >= 0 else { return }
                    consumed += rv
                    if flags & Int32(NGHTTP2_HD_INFLATE_EMIT.rawValue) != 0 {
                        let name = String(decoding: UnsafeBufferPointer(start: nv.name, count: nv.namelen), as: UTF8.self)
                        flagsByName[name] = nv.flags
                        values[name] = String(decoding: UnsafeBufferPointer(start: nv.value, count: nv.valuelen), as: UTF8.self)
                    }
                    if flags & Int32(NGHTTP2_HD_INFLATE_FINAL.rawValue) != 0 { break }
                    if rv == 0 && flags == 0 {
                        XCTFail("the inflater made no progress on request \(n)'s header block")
                        return
                    }
                }
                nghttp2_hd_inflate_end_headers(inflater)
            }
            XCTAssertEqual(values["apns-id"], "0a0b0c0d-0e0f-5000-8000-00000000000\(n)")
            XCTAssertEqual(values["apns-topic"], "com.example.app")
            XCTAssertEqual(flagsByName["apns-id"].map { $0 & UInt8(NGHTTP2_NV_FLAG_NO_INDEX.rawValue) }, UInt8(NGHTTP2_NV_FLAG_NO_INDEX.rawValue),
                           "apns-id is a never-indexed literal")
            XCTAssertEqual(flagsByName["apns-topic"].map { $0 & UInt8(NGHTTP2_NV_FLAG_NO_INDEX.rawValue) }, 0)
            // The dynamic table holds the indexable headers only: apns-topic and :authority
            // (:path is never indexed by nghttp2), never an apns-id.
            XCTAssertEqual(nghttp2_hd_inflate_get_num_table_entries(inflater) - 61, 2, "request \(n)")
        }
        // From the second request on, apns-topic and :authority are one-byte references.
        XCTAssertLessThan(blockSizes[1], blockSizes[0] - 20)
        XCTAssertEqual(blockSizes[1], blockSizes[2])
    }

    /// Fixed headers from a template arrive with the per-request ones, intact, in order, and
    /// with their no-index flag; a template replaced mid-run (a renewed bearer) is freed while
    /// requests that used it are still in flight, which is safe because nghttp2 copied its bytes
    /// at submit time. The builder's own bytes grow past 2 KiB around the template's pointers.
    func testFixedHeaderTemplateIsSentLikePlainHeaders() throws {
        let (pair, log) = try answeringPair()
        var request = HTTP2Pair.request("/t/")
        for round in 0..<4 {
            // A new template each round; the previous one has no owner left once it is replaced.
            request.fixedHeaders = HTTP2HeaderTemplate([
                HTTP2Header("apns-topic", "com.example.app"),
                HTTP2Header("authorization", "bearer token-\(round)-" + String(repeating: "j", count: 180)),
                HTTP2Header("x-secret", "s\(round)", neverIndexed: true),
            ])
            for n in 0..<25 {
                request.pathSuffix = "\(round)/\(n)"
                request.headers = [HTTP2Header("apns-id", "id-\(round)-\(n)", neverIndexed: true),
                                   HTTP2Header("x-long", String(repeating: "v", count: n * 100))]
                // Output back-pressure (16 KiB queued) closes the session to new streams; the pump
                // drains it, so some requests of the previous template are still queued here.
                if !pair.client.canOpenStream { try pair.pump() }
                XCTAssertNotNil(pair.client.submit(request, tag: UInt64(round * 100 + n)))
            }
        }
        request.fixedHeaders = nil
        try pair.pump()
        XCTAssertEqual(log.seen.count, 100)
        for round in 0..<4 {
            for n in 0..<25 {
                let got = try XCTUnwrap(log.seen["/t/\(round)/\(n)"])
                XCTAssertEqual(got.headers.map(\.name), ["apns-topic", "authorization", "x-secret", "apns-id", "x-long"])
                XCTAssertEqual(got.header("authorization"), "bearer token-\(round)-" + String(repeating: "j", count: 180))
                XCTAssertEqual(got.header("x-secret"), "s\(round)")
                XCTAssertEqual(got.header("apns-id"), "id-\(round)-\(n)")
                XCTAssertEqual(got.header("x-long")?.count, n * 100)
            }
        }
        XCTAssertEqual(pair.clientEvents.compactMap(\.response).count, 100)
        XCTAssertEqual(request.allHeaders.map(\.name), ["apns-id", "x-long"])
    }

    /// A Web Push endpoint is the token: `:path` leaves out its origin (`pathSuffixSkip`), which
    /// the authority already names, for packed and plain suffixes alike.
    func testPathSuffixSkipLeavesTheTokensPrefixOut() throws {
        var request = HTTP2Pair.request("")
        request.pathSuffix = "https://push.example:8443/sub/abc?x=1"
        request.pathSuffixSkip = "https://push.example:8443".utf8.count
        XCTAssertEqual(request.fullPath, "/sub/abc?x=1")
        let (pair, log) = try answeringPair()
        XCTAssertNotNil(pair.client.submit(request, tag: 1))
        request.path = "/h/"
        request.pathSuffix = String(repeating: "ab", count: 32)
        request.pathSuffixSkip = 60
        XCTAssertEqual(request.fullPath, "/h/abab")
        XCTAssertNotNil(pair.client.submit(request, tag: 2))
        request.pathSuffixSkip = 200
        request.path = "/only"
        XCTAssertNotNil(pair.client.submit(request, tag: 3))
        try pair.pump()
        XCTAssertNotNil(log.seen["/sub/abc?x=1"])
        XCTAssertNotNil(log.seen["/h/abab"], "a packed hex token, its first 60 characters left out")
        XCTAssertNotNil(log.seen["/only"], "a skip past the token's end leaves none of it")
    }
}
