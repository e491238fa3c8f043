// HTTP2ServerSession: the server role of HTTP/2 over nghttp2's mem_recv/mem_send, with no I/O.
// The mock APNs/FCM server and the in-memory tests drive it; the client is tested against it
// (design.md 1). Requests come out of `takeEvents` once complete; answers go in through
// `respond` and `refuse`. Per-stream state lives in a fixed slab sized from
// `Limits.streamsPerConnectionMax`, the value advertised as SETTINGS_MAX_CONCURRENT_STREAMS.

import CNGHTTP2
import PushcastCore

public final class HTTP2ServerSession {
    struct Slot {
        enum State: Equatable {
            case free
            /// HEADERS seen, request not yet complete.
            case receiving
            /// `.request` reported; waiting for `respond` or `refuse`.
            case awaitingResponse
            /// Response submitted (or the stream refused / reset by us): waiting for its close.
            case answered
            /// Oversized or otherwise rejected by us: RST_STREAM submitted, no event.
            case dropped
        }

        var state: State = .free
        var streamID: Int32 = 0
        var next: Int = -1
        var method = ""
        var path = ""
        var authority = ""
        var headers: [HTTP2Header] = []
        var body: [UInt8] = []
        var responseBody: [UInt8] = []
        var responseBodyOffset = 0
    }

    private let limits: Limits
    private var session: OpaquePointer!
    private let slots: UnsafeMutablePointer<Slot>
    private let slotCapacity: Int
    private var freeSlot = -1
    public private(set) var streamsOpen = 0
    public private(set) var lastStreamID: Int32 = 0
    /// The last-stream-id of the GOAWAY we submitted. nghttp2 only stops accepting new streams
    /// once the frame is serialised, so streams above it that arrive before then are refused here:
    /// a stream the GOAWAY calls unprocessed must never be processed (RFC 9113 §6.8).
    private var goAwayLastStreamID: Int32?
    private var closed = false
    private var events: [HTTP2ServerEvent] = []
    private var drainingEvents: [HTTP2ServerEvent] = []
    private let headerBlock = HTTP2HeaderBlockBuilder()
    private var remainder = HTTP2OutputRemainder()

    public init(limits: Limits) throws(HTTP2Error) {
        precondition(limits.streamsPerConnectionMax >= 1)
        self.limits = limits
        slotCapacity = limits.streamsPerConnectionMax
        slots = .allocate(capacity: slotCapacity)
        slots.initialize(repeating: Slot(), count: slotCapacity)
        for index in 0..<slotCapacity { slots[index].next = index + 1 < slotCapacity ? index + 1 : -1 }
        freeSlot = 0
        events.reserveCapacity(slotCapacity + 8)
        drainingEvents.reserveCapacity(slotCapacity + 8)

        var callbacks: OpaquePointer?
        var rv = nghttp2_session_callbacks_new(&callbacks)
        guard rv == 0, let callbacks else { throw HTTP2Error(code: Int(rv), "nghttp2_session_callbacks_new") }
        defer { nghttp2_session_callbacks_del(callbacks) }
        Self.install(callbacks)

        var created: OpaquePointer?
        rv = nghttp2_session_server_new(&created, callbacks, Unmanaged.passUnretained(self).toOpaque())
        guard rv == 0, let created else { throw HTTP2Error(code: Int(rv), "nghttp2_session_server_new") }
        session = created

        var settings = [
            nghttp2_settings_entry(settings_id: NG.settingsMaxConcurrentStreams, value: UInt32(limits.streamsPerConnectionMax)),
            nghttp2_settings_entry(settings_id: NG.settingsInitialWindowSize, value: UInt32(limits.windowBytes)),
        ]
        rv = nghttp2_submit_settings(session, NG.flagNone, &settings, settings.count)
        guard rv == 0 else { throw HTTP2Error(code: Int(rv), "nghttp2_submit_settings") }
        if limits.windowBytes > NG.defaultWindowBytes {
            rv = nghttp2_session_set_local_window_size(session, NG.flagNone, 0, limits.windowBytes)
            guard rv == 0 else { throw HTTP2Error(code: Int(rv), "nghttp2_session_set_local_window_size") }
        }
    }

    deinit {
        if let session { nghttp2_session_del(session) }
        slots.deinitialize(count: slotCapacity)
        slots.deallocate()
        remainder.deallocate()
    }

    public var isClosed: Bool { closed }

    // MARK: Bytes

    public func receive(_ bytes: UnsafeRawBufferPointer) throws(HTTP2Error) {
        guard !closed else { throw HTTP2Error("receive on a closed HTTP/2 server session") }
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        let rv = nghttp2_session_mem_recv(session, base.assumingMemoryBound(to: UInt8.self), bytes.count)
        if rv < 0 {
            close()
            throw HTTP2Error(code: rv, "nghttp2_session_mem_recv")
        }
        finishIfDone()
    }

    public var wantsWrite: Bool {
        guard !closed else { return false }
        return !remainder.isEmpty || nghttp2_session_want_write(session) != 0
    }

    public func produce(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        guard !closed, buffer.count > 0 else { return 0 }
        var written = remainder.drain(into: buffer, at: 0)
        while written < buffer.count && remainder.isEmpty {
            var chunk: UnsafePointer<UInt8>?
            let n = nghttp2_session_mem_send(session, &chunk)
            if n < 0 {
                close()
                return written
            }
            guard n > 0, let chunk else { break }
            let fits = min(n, buffer.count - written)
            (buffer.baseAddress! + written).copyMemory(from: chunk, byteCount: fits)
            written += fits
            if fits < n { remainder.store(UnsafeRawBufferPointer(start: chunk + fits, count: n - fits)) }
        }
        finishIfDone()
        return written
    }

    // MARK: Answers

    /// Answers a request reported by `.request`. An empty body puts END_STREAM on HEADERS.
    /// A stream that is gone (cancelled, or never reported) is ignored.
    public func respond(streamID: Int32, status: Int, headers: [HTTP2Header], body: [UInt8]) {
        guard !closed, let index = slotIndex(streamID: streamID), slots[index].state == .awaitingResponse else { return }
        var byteCount = 3
        for header in headers { byteCount += header.name.utf8.count + header.value.utf8.count }
        headerBlock.begin(fieldCount: 1 + headers.count, byteCount: byteCount)
        headerBlock.appendStatus(status)
        for header in headers { headerBlock.append(header) }
        slots[index].state = .answered
        let rv: Int32
        if body.isEmpty {
            rv = nghttp2_submit_response(session, streamID, headerBlock.fields, headerBlock.count, nil)
        } else {
            slots[index].responseBody = body
            slots[index].responseBodyOffset = 0
            var provider = nghttp2_data_provider()
            provider.read_callback = { _, streamID, buffer, length, flags, _, userData in
                Unmanaged<HTTP2ServerSession>.fromOpaque(userData!).takeUnretainedValue()
                    .readResponseBody(streamID: streamID, into: buffer!, length: length, flags: flags!)
            }
            rv = nghttp2_submit_response(session, streamID, headerBlock.fields, headerBlock.count, &provider)
        }
        if rv != 0 { slots[index].state = .dropped }
    }

    /// RST_STREAM(REFUSED_STREAM): the client may retry elsewhere (RFC 9113 §8.7).
    public func refuse(streamID: Int32) {
        guard !closed, let index = slotIndex(streamID: streamID) else { return }
        slots[index].state = .dropped
        nghttp2_submit_rst_stream(session, NG.flagNone, streamID, NG.refusedStream)
    }

    /// Sends GOAWAY. `lastStreamID` nil means the highest stream processed so far; nghttp2 then
    /// ignores new streams above it (RFC 9113 §6.8).
    public func goAway(lastStreamID: Int32?, errorCode: UInt32, debugData: String) {
        guard !closed else { return }
        var last = lastStreamID ?? nghttp2_session_get_last_proc_stream_id(session)
        if let previous = goAwayLastStreamID { last = min(last, previous) }
        goAwayLastStreamID = last
        var data = Array(debugData.utf8)
        nghttp2_submit_goaway(session, NG.flagNone, last, errorCode, &data, data.count)
    }

    /// Submits SETTINGS_MAX_CONCURRENT_STREAMS = n mid-connection. The value is clamped to
    /// 0...Limits.streamsPerConnectionMax, the size of the stream slab fixed at init.
    public func setMaxConcurrentStreams(_ n: Int) {
        guard !closed else { return }
        let advertised = UInt32(min(max(n, 0), slotCapacity))
        var entry = nghttp2_settings_entry(settings_id: NG.settingsMaxConcurrentStreams, value: advertised)
        nghttp2_submit_settings(session, NG.flagNone, &entry, 1)
    }

    public func takeEvents(_ body: (HTTP2ServerEvent) -> Void) {
        while !events.isEmpty {
            swap(&events, &drainingEvents)
            for event in drainingEvents { body(event) }
            drainingEvents.removeAll(keepingCapacity: true)
        }
    }

    // MARK: Internals

    @inline(__always)
    private func slotIndex(streamID: Int32) -> Int? {
        if let index = NG.slot(userData: nghttp2_session_get_stream_user_data(session, streamID)),
           index < slotCapacity, slots[index].state != .free, slots[index].streamID == streamID {
            return index
        }
        return nil
    }

    private func release(_ index: Int) {
        nghttp2_session_set_stream_user_data(session, slots[index].streamID, nil)
        slots[index] = Slot(next: freeSlot)
        freeSlot = index
        streamsOpen -= 1
    }

    private func close() {
        guard !closed else { return }
        closed = true
        remainder.discard()
        events.append(.closed)
    }

    private func finishIfDone() {
        guard !closed else { return }
        if nghttp2_session_want_read(session) == 0 && nghttp2_session_want_write(session) == 0 && remainder.isEmpty {
            close()
        }
    }

    // MARK: Callback targets (record and return; design.md 2.3)

    fileprivate func beginHeaders(_ frame: UnsafePointer<nghttp2_frame>) {
        guard frame.pointee.hd.type == NG.frameHeaders,
              frame.pointee.headers.cat == NGHTTP2_HCAT_REQUEST else { return }
        let streamID = frame.pointee.hd.stream_id
        if let last = goAwayLastStreamID, streamID > last {
            nghttp2_submit_rst_stream(session, NG.flagNone, streamID, NG.refusedStream)
            return
        }
        lastStreamID = max(lastStreamID, streamID)
        let index = freeSlot
        guard index >= 0 else {
            // More streams than the slab: nghttp2 enforces our SETTINGS only once they are
            // acknowledged, so a client may overshoot before that (RFC 9113 §5.1.2).
            nghttp2_submit_rst_stream(session, NG.flagNone, streamID, NG.refusedStream)
            return
        }
        freeSlot = slots[index].next
        slots[index] = Slot(state: .receiving, streamID: streamID)
        streamsOpen += 1
        nghttp2_session_set_stream_user_data(session, streamID, NG.userData(slot: index))
    }

    fileprivate func header(streamID: Int32, name: UnsafePointer<UInt8>?, nameLength: Int,
                            value: UnsafePointer<UInt8>?, valueLength: Int) {
        guard let index = slotIndex(streamID: streamID), slots[index].state == .receiving,
              let name, nameLength > 0 else { return }
        let slot = slots + index
        if name[0] == 0x3A {  // ':'
            if bytesEqual(name, nameLength, ":path") {
                slot.pointee.path = makeString(value, valueLength)
            } else if bytesEqual(name, nameLength, ":method") {
                slot.pointee.method = makeString(value, valueLength)
            } else if bytesEqual(name, nameLength, ":authority") {
                slot.pointee.authority = makeString(value, valueLength)
            }
            return
        }
        if bytesEqual(name, nameLength, "host") && slot.pointee.authority.isEmpty {
            slot.pointee.authority = makeString(value, valueLength)
        }
        guard slot.pointee.headers.count < HTTP2Response.headersKeptMax else { return }
        slot.pointee.headers.append(HTTP2Header(makeString(name, nameLength), makeString(value, valueLength)))
    }

    fileprivate func dataChunk(streamID: Int32, data: UnsafePointer<UInt8>?, length: Int) {
        guard let index = slotIndex(streamID: streamID), slots[index].state == .receiving,
              let data, length > 0 else { return }
        let slot = slots + index
        guard slot.pointee.body.count + length <= limits.requestBodyBytesMax else {
            // Too large: reset with CANCEL rather than REFUSED_STREAM, which would invite a retry
            // of the same oversized request.
            slot.pointee.state = .dropped
            slot.pointee.body = []
            nghttp2_submit_rst_stream(session, NG.flagNone, streamID, NG.cancel)
            return
        }
        slot.pointee.body.append(contentsOf: UnsafeBufferPointer(start: data, count: length))
    }

    fileprivate func frameReceived(_ frame: UnsafePointer<nghttp2_frame>) {
        let hd = frame.pointee.hd
        guard hd.type == NG.frameHeaders || hd.type == NG.frameData, hd.flags & NG.flagEndStream != 0,
              let index = slotIndex(streamID: hd.stream_id), slots[index].state == .receiving else { return }
        let slot = slots + index
        slot.pointee.state = .awaitingResponse
        var headers: [HTTP2Header] = []
        var body: [UInt8] = []
        swap(&headers, &slot.pointee.headers)
        swap(&body, &slot.pointee.body)
        events.append(.request(HTTP2ServerRequest(
            streamID: hd.stream_id, method: slot.pointee.method, path: slot.pointee.path,
            authority: slot.pointee.authority, headers: headers, body: body)))
    }

    fileprivate func streamClosed(streamID: Int32) {
        guard let index = slotIndex(streamID: streamID) else { return }
        if slots[index].state == .awaitingResponse {
            events.append(.streamCancelled(streamID: streamID))
        }
        release(index)
    }

    fileprivate func readResponseBody(streamID: Int32, into buffer: UnsafeMutablePointer<UInt8>, length: Int,
                                      flags: UnsafeMutablePointer<UInt32>) -> Int {
        guard let index = slotIndex(streamID: streamID) else { return NG.temporalCallbackFailure }
        let slot = slots + index
        let n = min(slot.pointee.responseBody.count - slot.pointee.responseBodyOffset, length)
        if n > 0 {
            slot.pointee.responseBody.withUnsafeBufferPointer { body in
                buffer.update(from: body.baseAddress! + slot.pointee.responseBodyOffset, count: n)
            }
            slot.pointee.responseBodyOffset += n
        }
        if slot.pointee.responseBodyOffset == slot.pointee.responseBody.count { flags.pointee |= NG.dataFlagEOF }
        return n
    }

    // MARK: Callback table

    private static func install(_ callbacks: OpaquePointer) {
        nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks) { _, frame, userData in
            Unmanaged<HTTP2ServerSession>.fromOpaque(userData!).takeUnretainedValue().beginHeaders(frame!)
            return 0
        }
        nghttp2_session_callbacks_set_on_header_callback(callbacks) { _, frame, name, nameLength, value, valueLength, _, userData in
            Unmanaged<HTTP2ServerSession>.fromOpaque(userData!).takeUnretainedValue()
                .header(streamID: frame!.pointee.hd.stream_id, name: name, nameLength: nameLength, value: value, valueLength: valueLength)
            return 0
        }
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks) { _, _, streamID, data, length, userData in
            Unmanaged<HTTP2ServerSession>.fromOpaque(userData!).takeUnretainedValue()
                .dataChunk(streamID: streamID, data: data, length: length)
            return 0
        }
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks) { _, frame, userData in
            Unmanaged<HTTP2ServerSession>.fromOpaque(userData!).takeUnretainedValue().frameReceived(frame!)
            return 0
        }
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks) { _, streamID, _, userData in
            Unmanaged<HTTP2ServerSession>.fromOpaque(userData!).takeUnretainedValue().streamClosed(streamID: streamID)
            return 0
        }
    }
}
