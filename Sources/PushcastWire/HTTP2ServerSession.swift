// HTTP2ServerSession: the server role of HTTP/2 over nghttp2's mem_recv/mem_send, with no I/O.
// The mock APNs/FCM server and the in-memory tests drive it; the client is tested against it
// (docs/DESIGN.md §1). Requests come out of `takeEvents` once complete; answers go in through
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
        /// The request's pseudo-headers and headers, and its body. Both buffers stay with the
        /// slot across requests; a caller still holding the last request makes the slot take a
        /// fresh buffer (copy-on-write), so reported requests are never changed under it.
        var fields = HTTP2ServerRequestFields()
        var body: [UInt8] = []
        var responseBody: [UInt8] = []
        var responseBodyOffset = 0
        /// The body starts over when it ends, forever (`respond(…, repeatingBodyForever:)`).
        var responseBodyRepeats = false
    }

    /// The largest header block this server will send (nghttp2's default is 64 KiB). Raised so
    /// that the hostile mock's huge-headers answers go out; real answers are far smaller.
    public static let sentHeaderBlockBytesMax = 4 << 20

    /// Body buffers larger than this are not kept on a free slot.
    private static let keptBodyCapacityMax = 2048

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
    /// Hostile half answers (`sendStatusOnly`): what to send once their HEADERS are out. nghttp2
    /// would drop a response HEADERS queued behind the stream's own RST_STREAM or a GOAWAY below
    /// it, so these wait until `produce` has serialised everything queued.
    private var cutsAfterStatus: [(streamID: Int32, errorCode: UInt32)] = []
    private var goAwayAfterStatus: (errorCode: UInt32, debugData: String)?
    /// Recorded by the callbacks, moved out by `takeEvents` (no copy, no retain per event).
    private let events: HTTP2EventQueue<HTTP2ServerEvent>
    private let headerBlock = HTTP2HeaderBlockBuilder()
    private var remainder = HTTP2OutputRemainder()
    /// nghttp2's allocator for this session (HTTP2MemoryPool); freed after the session.
    private let memory: UnsafeMutablePointer<nghttp2_mem>
    /// The nv array of an inline response (`:status` and at most one header), and a stable
    /// copy of the header's value for the duration of the submit call (nghttp2 copies it).
    private let inlineFields: UnsafeMutablePointer<nghttp2_nv>
    private let inlineValue: UnsafeMutablePointer<UInt8>
    /// The slot found by the last stream lookup: nghttp2 reports a HEADERS frame's fields one
    /// callback at a time, all for the same stream, so most lookups hit here instead of going
    /// through nghttp2's stream map.
    private var cachedSlot = 0

    /// `resetGuard`: the rapid-reset guard's burst and refill rate (a test passes a narrow one,
    /// so that a flood trips it however slowly the machine runs).
    public init(limits: Limits, resetGuard: (burst: UInt64, perSecond: UInt64) = (streamResetBurst, streamResetsPerSecond)) throws(HTTP2Error) {
        precondition(limits.streamsPerConnectionMax >= 1)
        self.limits = limits
        slotCapacity = limits.streamsPerConnectionMax
        memory = HTTP2MemoryPool.make(streamsMax: limits.streamsPerConnectionMax)
        inlineFields = .allocate(capacity: 2)
        inlineValue = .allocate(capacity: HTTP2InlineHeader.capacity)
        slots = .allocate(capacity: slotCapacity)
        slots.initialize(repeating: Slot(), count: slotCapacity)
        for index in 0..<slotCapacity { slots[index].next = index + 1 < slotCapacity ? index + 1 : -1 }
        freeSlot = 0
        events = HTTP2EventQueue(capacity: slotCapacity + 8)

        var callbacks: OpaquePointer?
        var rv = nghttp2_session_callbacks_new(&callbacks)
        guard rv == 0, let callbacks else { throw HTTP2Error(code: Int(rv), "nghttp2_session_callbacks_new") }
        defer { nghttp2_session_callbacks_del(callbacks) }
        Self.install(callbacks)

        var option: OpaquePointer?
        rv = nghttp2_option_new(&option)
        guard rv == 0, let option else { throw HTTP2Error(code: Int(rv), "nghttp2_option_new") }
        defer { nghttp2_option_del(option) }
        // Closed streams are kept only to rebuild the RFC 7540 priority tree, which this server
        // does not use for scheduling decisions worth the cost (one answer per stream).
        nghttp2_option_set_no_closed_streams(option, 1)
        nghttp2_option_set_max_send_header_block_length(option, Self.sentHeaderBlockBytesMax)
        // nghttp2's rapid-reset guard (CVE-2023-44487) ends a connection with GOAWAY(INTERNAL_ERROR)
        // once a client has reset 1,000 streams beyond 33 a second. curl 7.88 resets the streams of
        // its requests to this server, so it lost its connection after ~1,035 requests; a mock
        // under benchmark load keeps a guard, but a far wider one.
        nghttp2_option_set_stream_reset_rate_limit(option, resetGuard.burst, resetGuard.perSecond)

        var created: OpaquePointer?
        rv = nghttp2_session_server_new3(&created, callbacks, Unmanaged.passUnretained(self).toOpaque(), option, memory)
        guard rv == 0, let created else { throw HTTP2Error(code: Int(rv), "nghttp2_session_server_new3") }
        session = created

        let settings = [
            nghttp2_settings_entry(settings_id: NG.settingsMaxConcurrentStreams, value: UInt32(limits.streamsPerConnectionMax)),
            nghttp2_settings_entry(settings_id: NG.settingsInitialWindowSize, value: UInt32(limits.windowBytes)),
            // RFC 9218 §2.1: we ignore RFC 7540 priority signals; a peer that says the same
            // (pushcast's client does) spares both sides nghttp2's priority tree.
            nghttp2_settings_entry(settings_id: NG.settingsNoRFC7540Priorities, value: 1),
        ]
        try NG.submitInitialSettings(session, settings, windowBytes: limits.windowBytes)
    }

    deinit {
        if let session { nghttp2_session_del(session) }
        HTTP2MemoryPool.destroy(memory)
        inlineFields.deallocate()
        inlineValue.deallocate()
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
            guard n > 0, let chunk else {
                submitCutsAfterStatus()
                break
            }
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
    public func respond(streamID: Int32, slotHint: Int32 = -1, status: Int, headers: [HTTP2Header], body: [UInt8]) {
        guard !closed, let index = slotIndex(streamID: streamID, hint: slotHint), slots[index].state == .awaitingResponse else { return }
        var byteCount = 3
        for header in headers { byteCount += header.name.utf8.count + header.value.utf8.count }
        headerBlock.begin(fieldCount: 1 + headers.count, byteCount: byteCount)
        headerBlock.appendStatus(status)
        for header in headers { headerBlock.append(header) }
        submitResponse(index: index, streamID: streamID, fields: headerBlock.fields, count: headerBlock.count, body: body)
    }

    /// Answers with `:status` and at most one header held inline, which allocates nothing
    /// outside nghttp2: the status text and the header name are static (NO_COPY), the value is
    /// copied by nghttp2 during the call.
    public func respond(streamID: Int32, slotHint: Int32 = -1, status: Int, header: HTTP2InlineHeader?, body: [UInt8]) {
        guard !closed, let index = slotIndex(streamID: streamID, hint: slotHint), slots[index].state == .awaitingResponse else { return }
        precondition(status >= 100 && status <= 999, "HTTP status must have three digits")
        let noCopyName = UInt8(NGHTTP2_NV_FLAG_NO_COPY_NAME.rawValue)
        let noCopyValue = UInt8(NGHTTP2_NV_FLAG_NO_COPY_VALUE.rawValue)
        inlineFields[0] = nghttp2_nv(
            name: UnsafeMutablePointer(mutating: HTTP2StatusText.name.utf8Start), value: HTTP2StatusText.text(status),
            namelen: HTTP2StatusText.name.utf8CodeUnitCount, valuelen: 3, flags: noCopyName | noCopyValue)
        var count = 1
        if let header {
            let n = header.withValue { value -> Int in
                if let base = value.baseAddress, value.count > 0 {
                    UnsafeMutableRawPointer(inlineValue).copyMemory(from: base, byteCount: value.count)
                }
                return value.count
            }
            let indexFlag = header.neverIndexed ? UInt8(NGHTTP2_NV_FLAG_NO_INDEX.rawValue) : 0
            inlineFields[1] = nghttp2_nv(
                name: UnsafeMutablePointer(mutating: header.name.utf8Start), value: inlineValue,
                namelen: header.name.utf8CodeUnitCount, valuelen: n, flags: noCopyName | indexFlag)
            count = 2
        }
        submitResponse(index: index, streamID: streamID, fields: inlineFields, count: count, body: body)
    }

    /// A hostile answer: `body` sent over and over, never ending (the stream ends only when the
    /// client resets it or the connection goes). `body` must not be empty.
    public func respond(streamID: Int32, status: Int, headers: [HTTP2Header], repeatingBodyForever body: [UInt8]) {
        precondition(!body.isEmpty)
        respond(streamID: streamID, status: status, headers: headers, body: body)
        if let index = slotIndex(streamID: streamID), slots[index].state == .answered { slots[index].responseBodyRepeats = true }
    }

    private func submitResponse(index: Int, streamID: Int32, fields: UnsafeMutablePointer<nghttp2_nv>, count: Int, body: [UInt8]) {
        slots[index].state = .answered
        let rv: Int32
        if body.isEmpty {
            rv = nghttp2_submit_response(session, streamID, fields, count, nil)
        } else {
            slots[index].responseBody = body
            slots[index].responseBodyOffset = 0
            var provider = nghttp2_data_provider()
            provider.read_callback = { _, streamID, buffer, length, flags, _, userData in
                Unmanaged<HTTP2ServerSession>.fromOpaque(userData!)._withUnsafeGuaranteedRef {
                    $0.readResponseBody(streamID: streamID, into: buffer!, length: length, flags: flags!)
                }
            }
            rv = nghttp2_submit_response(session, streamID, fields, count, &provider)
        }
        if rv != 0 { slots[index].state = .dropped }
    }

    /// A hostile half answer (a proxy that contradicts itself): response HEADERS with `:status`
    /// and no END_STREAM, then, once they are out, RST_STREAM with `resetCode` when given. A
    /// stream that is gone is ignored.
    public func sendStatusOnly(streamID: Int32, status: Int, thenReset resetCode: UInt32?) {
        guard !closed, let index = slotIndex(streamID: streamID), slots[index].state == .awaitingResponse else { return }
        headerBlock.begin(fieldCount: 1, byteCount: 3)
        headerBlock.appendStatus(status)
        slots[index].state = .answered
        if nghttp2_submit_headers(session, NG.flagNone, streamID, nil, headerBlock.fields, headerBlock.count, nil) < 0 {
            slots[index].state = .dropped
            return
        }
        if let resetCode { cutsAfterStatus.append((streamID, resetCode)) }
    }

    /// GOAWAY with last-stream-id 0, sent after the half answers queued so far are out (the
    /// contradiction: answered streams declared unprocessed). A stream the client opens from now
    /// on is refused unprocessed, as the GOAWAY will say: while the GOAWAY waits behind a full
    /// window, a request that arrived meanwhile must not be processed and then disowned.
    public func goAwayZeroAfterStatus(errorCode: UInt32, debugData: String) {
        guard !closed else { return }
        goAwayAfterStatus = (errorCode, debugData)
        goAwayLastStreamID = 0
    }

    /// A hostile burst of `count` PING frames (a flood: a client that must acknowledge each one
    /// is entitled to drop the connection).
    public func floodPings(_ count: Int) {
        guard !closed else { return }
        var opaque = [UInt8](repeating: 0x50, count: 8)
        for _ in 0..<count { nghttp2_submit_ping(session, NG.flagNone, &opaque) }
    }

    /// Everything queued has been serialised: the half answers' resets and GOAWAY go now.
    private func submitCutsAfterStatus() {
        for cut in cutsAfterStatus {
            if let index = slotIndex(streamID: cut.streamID) { slots[index].state = .dropped }
            nghttp2_submit_rst_stream(session, NG.flagNone, cut.streamID, cut.errorCode)
        }
        cutsAfterStatus.removeAll()
        if let goAway = goAwayAfterStatus {
            goAwayAfterStatus = nil
            self.goAway(lastStreamID: 0, errorCode: goAway.errorCode, debugData: goAway.debugData)
        }
    }

    /// RST_STREAM(REFUSED_STREAM): the client may retry elsewhere (RFC 9113 §8.7).
    public func refuse(streamID: Int32) {
        reset(streamID: streamID, errorCode: Self.refusedStreamErrorCode)
    }

    /// RST_STREAM with `errorCode` (RFC 9113 §7) instead of an answer. With any code but
    /// REFUSED_STREAM the client cannot know whether the request was processed. A stream that
    /// is gone (cancelled, or never reported) is ignored.
    public func reset(streamID: Int32, errorCode: UInt32) {
        guard !closed, let index = slotIndex(streamID: streamID) else { return }
        slots[index].state = .dropped
        nghttp2_submit_rst_stream(session, NG.flagNone, streamID, errorCode)
    }

    /// The rapid-reset guard: RST_STREAMs a client may send at once, and per second after that.
    public static let streamResetBurst: UInt64 = 100_000
    public static let streamResetsPerSecond: UInt64 = 100_000

    /// RFC 9113 §7 error codes for `reset(streamID:errorCode:)` and `goAway`.
    public static let noErrorCode = NG.noError
    public static let internalErrorCode = NGHTTP2_INTERNAL_ERROR.rawValue
    public static let refusedStreamErrorCode = NG.refusedStream

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
        // Each event is moved out, so a request's buffers are released as soon as `body` is done
        // with it, and the slot reuses them.
        events.take { base, n in for i in 0..<n { body((base + i).move()) } }
    }

    // MARK: Internals

    @inline(__always)
    private func slotIndex(streamID: Int32, hint: Int32 = -1) -> Int? {
        // A free slot has stream id 0, which no request stream has.
        if hint >= 0 && Int(hint) < slotCapacity && slots[Int(hint)].streamID == streamID { return Int(hint) }
        if slots[cachedSlot].streamID == streamID { return cachedSlot }
        if let index = NG.slot(userData: nghttp2_session_get_stream_user_data(session, streamID)),
           index < slotCapacity, slots[index].state != .free, slots[index].streamID == streamID {
            cachedSlot = index
            return index
        }
        return nil
    }

    /// Only from on_stream_close, after which nghttp2 drops the stream and its user data: clearing
    /// that would cost a stream-map lookup for nothing (a stale pointer is caught by `slotIndex`,
    /// which checks the slot's stream id).
    private func release(_ index: Int) {
        let slot = slots + index
        slot.pointee.state = .free
        slot.pointee.streamID = 0
        slot.pointee.responseBody = []
        slot.pointee.responseBodyOffset = 0
        slot.pointee.responseBodyRepeats = false
        if slot.pointee.body.capacity > Self.keptBodyCapacityMax { slot.pointee.body = [] }
        slot.pointee.next = freeSlot
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

    // MARK: Callback targets (record and return; docs/DESIGN.md §2.3)

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
        let slot = slots + index
        freeSlot = slot.pointee.next
        slot.pointee.state = .receiving
        slot.pointee.streamID = streamID
        slot.pointee.next = -1
        if slot.pointee.fields.bytes.capacity == 0 {
            slot.pointee.fields.bytes.reserveCapacity(256)
        } else {
            slot.pointee.fields.reset()
        }
        slot.pointee.body.removeAll(keepingCapacity: true)
        cachedSlot = index
        streamsOpen += 1
        nghttp2_session_set_stream_user_data(session, streamID, NG.userData(slot: index))
    }

    fileprivate func header(streamID: Int32, name: UnsafePointer<UInt8>?, nameLength: Int,
                            value: UnsafePointer<UInt8>?, valueLength: Int) {
        guard let index = slotIndex(streamID: streamID), slots[index].state == .receiving,
              let name, nameLength > 0 else { return }
        let slot = slots + index
        let valueBytes = UnsafeRawBufferPointer(start: value, count: value == nil ? 0 : valueLength)
        if name[0] == 0x3A {  // ':'
            let nameBytes = UnsafeRawBufferPointer(start: name, count: nameLength)
            switch nameLength {
            case 5 where bytesEqual(nameBytes, ":path"): slot.pointee.fields.setPseudo(.path, valueBytes)
            case 7 where bytesEqual(nameBytes, ":method"): slot.pointee.fields.setPseudo(.method, valueBytes)
            case 10 where bytesEqual(nameBytes, ":authority"): slot.pointee.fields.setPseudo(.authority, valueBytes)
            default: break
            }
            return
        }
        let isHost = nameLength == 4 && slot.pointee.fields.authority.count == 0
            && bytesEqual(UnsafeRawBufferPointer(start: name, count: 4), "host")
        guard slot.pointee.fields.headerCount < HTTP2Response.headersKeptMax else {
            // Past the kept headers, `host` still names the authority. Nothing is appended after
            // this (every later header is dropped here), so the records stay contiguous.
            if isHost { slot.pointee.fields.appendLoose(valueBytes, as: .authority) }
            return
        }
        let valueStart = slot.pointee.fields.appendHeader(name: UnsafeRawBufferPointer(start: name, count: nameLength), value: valueBytes)
        if isHost {
            slot.pointee.fields.authority = HTTP2ByteSpan(start: Int32(valueStart), count: Int32(valueBytes.count))
        }
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
        // Shares the slot's buffers with the caller; the next request on this slot copies on write
        // if the caller still holds this one.
        events.append(.request(HTTP2ServerRequest(streamID: hd.stream_id, slotHint: Int32(index), fields: slot.pointee.fields,
                                                  body: slot.pointee.body)))
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
        if slot.pointee.responseBodyOffset == slot.pointee.responseBody.count {
            if slot.pointee.responseBodyRepeats { slot.pointee.responseBodyOffset = 0 } else { flags.pointee |= NG.dataFlagEOF }
        }
        return n
    }

    // MARK: Callback table

    private static func install(_ callbacks: OpaquePointer) {
        nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks) { _, frame, userData in
            Unmanaged<HTTP2ServerSession>.fromOpaque(userData!)._withUnsafeGuaranteedRef {
                $0.beginHeaders(frame!)
            }
            return 0
        }
        nghttp2_session_callbacks_set_on_header_callback(callbacks) { _, frame, name, nameLength, value, valueLength, _, userData in
            Unmanaged<HTTP2ServerSession>.fromOpaque(userData!)._withUnsafeGuaranteedRef {
                $0.header(streamID: frame!.pointee.hd.stream_id, name: name, nameLength: nameLength, value: value, valueLength: valueLength)
            }
            return 0
        }
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks) { _, _, streamID, data, length, userData in
            Unmanaged<HTTP2ServerSession>.fromOpaque(userData!)._withUnsafeGuaranteedRef {
                $0.dataChunk(streamID: streamID, data: data, length: length)
            }
            return 0
        }
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks) { _, frame, userData in
            Unmanaged<HTTP2ServerSession>.fromOpaque(userData!)._withUnsafeGuaranteedRef {
                $0.frameReceived(frame!)
            }
            return 0
        }
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks) { _, streamID, _, userData in
            Unmanaged<HTTP2ServerSession>.fromOpaque(userData!)._withUnsafeGuaranteedRef {
                $0.streamClosed(streamID: streamID)
            }
            return 0
        }
    }
}

/// One response header held inline: a static name and a value of up to `capacity` bytes, so a
/// reply carrying it (an `apns-id`, say) allocates nothing. A per-response value such as an id
/// is sent never-indexed by default: putting it in the HPACK dynamic table (RFC 7541 §6.2.1)
/// would only evict entries that do repeat, on both sides.
public struct HTTP2InlineHeader: Sendable {
    public static let capacity = 64
    public let name: StaticString
    public let neverIndexed: Bool
    public let count: Int
    private var storage: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0, 0, 0)

    /// Nil when `value` is longer than `capacity`.
    public init?(name: StaticString, value: UnsafeRawBufferPointer, neverIndexed: Bool = true) {
        guard value.count <= Self.capacity else { return nil }
        self.init(name: name, count: value.count, neverIndexed: neverIndexed) { out in
            if let base = value.baseAddress, value.count > 0 { out.baseAddress!.copyMemory(from: base, byteCount: value.count) }
        }
    }

    /// A value of `count` (at most `capacity`) bytes, written by `initialize`.
    public init(name: StaticString, count: Int, neverIndexed: Bool = true, initializingWith initialize: (UnsafeMutableRawBufferPointer) -> Void) {
        precondition(count >= 0 && count <= Self.capacity, "inline header value too long")
        precondition(name.hasPointerRepresentation, "header name must be a string literal")
        self.name = name
        self.neverIndexed = neverIndexed
        self.count = count
        withUnsafeMutableBytes(of: &storage) { initialize(UnsafeMutableRawBufferPointer(rebasing: $0[0..<count])) }
    }

    public func withValue<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try withUnsafeBytes(of: storage) { try body(UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
    }

    public var value: String { withValue { String(decoding: $0, as: UTF8.self) } }

    /// The same header as an ordinary value.
    public var header: HTTP2Header { HTTP2Header(String(describing: name), value) }
}

/// `:status` values as static text, so a response's status needs no copy (NO_COPY_VALUE).
enum HTTP2StatusText {
    static let name: StaticString = ":status"
    /// "100" through "999", three bytes each, at (status - 100) * 3. Never freed.
    nonisolated(unsafe) static let table: UnsafeMutablePointer<UInt8> = {
        let table = UnsafeMutablePointer<UInt8>.allocate(capacity: 900 * 3)
        for status in 100...999 {
            let at = (status - 100) * 3
            table[at] = UInt8(0x30 + status / 100)
            table[at + 1] = UInt8(0x30 + (status / 10) % 10)
            table[at + 2] = UInt8(0x30 + status % 10)
        }
        return table
    }()

    @inline(__always)
    static func text(_ status: Int) -> UnsafeMutablePointer<UInt8> { table + (status - 100) * 3 }
}
