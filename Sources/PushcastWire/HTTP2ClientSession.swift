// HTTP2ClientSession: the client role of HTTP/2 over nghttp2's mem_recv/mem_send, with no I/O.
// Plaintext bytes go in through `receive`, plaintext bytes come out of `produce`, time comes in
// through `tick`, and what happened comes out of `takeEvents` as values.
//
// nghttp2's callbacks capture nothing; they reach this object through `user_data` and only
// record state and events (docs/DESIGN.md §2.3). Per-stream state lives in a fixed slab of slots sized
// at init from `Limits.streamsPerConnectionMax`; the slot number travels as nghttp2's stream
// user data. Active slots are also threaded on a list in submission order: every stream gets the
// same timeout, so the list head always holds the earliest deadline.

import CNGHTTP2
import PushcastCore

public final class HTTP2ClientSession {
    // MARK: State

    /// Where the connection stands. New streams open only while `.open` (RFC 9113 §6.8).
    enum Lifecycle: Equatable {
        case open
        /// GOAWAY received, or `close()` called: open streams finish, no new ones start.
        case draining
        case closed
    }

    struct Slot {
        enum State: Equatable {
            case free
            /// Submitted; HEADERS not yet serialized by mem_send.
            case queued
            /// HEADERS serialized; `headersOutputOffset` says where its first byte lies.
            case sent
        }

        var state: State = .free
        var streamID: Int32 = 0
        var tag: UInt64 = 0
        var deadlineNanoseconds: UInt64 = 0
        /// Submission-order list of active slots, or the free list (through `next`).
        var previous: Int = -1
        var next: Int = -1
        /// Offset in the session's output byte count of the HEADERS frame's first byte.
        var headersOutputOffset: Int64 = -1
        var unsentHeaderBytes = 0
        /// A copy of the request body, in storage the slot keeps for its next stream (freed at
        /// `finish` when larger than `requestBodyKeptMax`), so reading it costs no refcounting.
        var requestBody: UnsafeMutablePointer<UInt8>? = nil
        var requestBodyCapacity = 0
        var requestBodyCount = 0
        var requestBodyOffset = 0
        /// The request's values sent as raw literals (`HTTP2CredentialLiterals`): each a 2-byte
        /// big-endian length and the bytes, in placeholder order; storage kept like the body's.
        var literals: UnsafeMutablePointer<UInt8>? = nil
        var literalsCapacity = 0
        var literalsCount = 0
        var status = 0
        var responseHeaders: [HTTP2Header] = []
        var responseBody: [UInt8] = []
        var responseBodyTruncated = false
        var responseComplete = false
        /// Response bytes seen so far, against `Limits.responseBodyBytesAccepted` and
        /// `Limits.responseHeaderBytesAccepted`.
        var responseBodyBytes = 0
        var responseHeaderBytes = 0
    }

    /// A slot keeps body storage up to this size between streams (APNs and FCM cap payloads at 4 KiB).
    static let requestBodyKeptMax = 4096

    private let limits: Limits
    /// `Limits.responseHeadersKept`, as bytes for comparison in the header callback.
    private let keptHeaderNames: [[UInt8]]
    private let clock: MonotonicClock
    private var session: OpaquePointer!
    /// nghttp2's allocator for this session (HTTP2MemoryPool); freed after the session.
    private let memory: UnsafeMutablePointer<nghttp2_mem>
    private let slots: UnsafeMutablePointer<Slot>
    private let slotCapacity: Int
    /// Client stream ids are odd and ascending, so (id >> 1) & mask spreads the live ones over a
    /// table twice the slab's size; entries are hints, checked in `slotIndex`.
    private let streamTable: UnsafeMutablePointer<Int32>
    private let streamTableMask: Int
    private var freeSlot = -1
    private var oldestSlot = -1
    private var newestSlot = -1
    public private(set) var streamsOpen = 0

    private var lifecycle = Lifecycle.open
    private var closeRequested = false
    private var terminateSubmitted = false
    private var goAwayLastStreamID: Int32?
    private var peerMaxConcurrentStreams: Int
    private var connectionErrorText: String?

    /// Events recorded and not yet taken (`takeEvents`).
    private let events: HTTP2EventQueue<HTTP2ClientEvent>

    private let headerBlock = HTTP2HeaderBlockBuilder()
    private var remainder = HTTP2OutputRemainder()
    /// The `authorization` values sent as raw literals, and the rewrite that puts them in.
    private var credentials = HTTP2CredentialLiterals()
    /// The slot of the HEADERS frame nghttp2 is handing out now, when it has literal values.
    private var literalSlot = -1
    /// Submitted streams whose HEADERS frame still waits for its literal values (tests).
    var literalFramesWaiting: Int { (0..<slotCapacity).reduce(0) { $0 + (slots[$1].literalsCount > 0 ? 1 : 0) } }
    /// Bytes returned by mem_send so far, and bytes handed to the caller by `produce` so far.
    private var outputGenerated: Int64 = 0
    private var outputHandedOut: Int64 = 0
    /// Header and body bytes submitted but not yet serialized by mem_send.
    private var outputQueuedBytes = 0

    private var lastReceiveNanoseconds: UInt64
    private var pingSentNanoseconds: UInt64?
    private var pingCounter: UInt64 = 0

    // MARK: Init

    public init(limits: Limits, clock: MonotonicClock) throws(HTTP2Error) {
        precondition(limits.streamsPerConnectionMax >= 1)
        self.limits = limits
        self.keptHeaderNames = limits.responseHeadersKept.map { Array($0.lowercased().utf8) }
        self.clock = clock
        slotCapacity = limits.streamsPerConnectionMax
        memory = HTTP2MemoryPool.make(streamsMax: limits.streamsPerConnectionMax)
        slots = .allocate(capacity: slotCapacity)
        slots.initialize(repeating: Slot(), count: slotCapacity)
        var tableSize = 16
        while tableSize < 2 * slotCapacity { tableSize <<= 1 }
        streamTable = .allocate(capacity: tableSize)
        streamTable.initialize(repeating: -1, count: tableSize)
        streamTableMask = tableSize - 1
        for index in 0..<slotCapacity { slots[index].next = index + 1 < slotCapacity ? index + 1 : -1 }
        freeSlot = 0
        // nghttp2 assumes 100 until the peer's first SETTINGS; assume no more than our own cap.
        peerMaxConcurrentStreams = min(100, limits.streamsPerConnectionMax)
        lastReceiveNanoseconds = clock.nowNanoseconds()
        events = HTTP2EventQueue(capacity: slotCapacity + 16)

        var callbacks: OpaquePointer?
        var rv = nghttp2_session_callbacks_new(&callbacks)
        guard rv == 0, let callbacks else { throw HTTP2Error(code: Int(rv), "nghttp2_session_callbacks_new") }
        defer { nghttp2_session_callbacks_del(callbacks) }
        Self.install(callbacks)

        var option: OpaquePointer?
        rv = nghttp2_option_new(&option)
        guard rv == 0, let option else { throw HTTP2Error(code: Int(rv), "nghttp2_option_new") }
        defer { nghttp2_option_del(option) }
        nghttp2_option_set_peer_max_concurrent_streams(option, UInt32(peerMaxConcurrentStreams))

        var created: OpaquePointer?
        rv = nghttp2_session_client_new3(&created, callbacks, Unmanaged.passUnretained(self).toOpaque(), option, memory)
        guard rv == 0, let created else { throw HTTP2Error(code: Int(rv), "nghttp2_session_client_new3") }
        session = created

        // RFC 9113 §3.4: the preface is the magic (added by nghttp2) and a SETTINGS frame.
        let settings = [
            nghttp2_settings_entry(settings_id: NG.settingsEnablePush, value: 0),
            nghttp2_settings_entry(settings_id: NG.settingsInitialWindowSize, value: UInt32(limits.windowBytes)),
            // RFC 9218 §2.1: we send no RFC 7540 priority signals; nghttp2 then schedules
            // without its priority tree and keeps no closed streams for it.
            nghttp2_settings_entry(settings_id: NG.settingsNoRFC7540Priorities, value: 1),
        ]
        try NG.submitInitialSettings(session, settings, windowBytes: limits.windowBytes)
    }

    deinit {
        if let session { nghttp2_session_del(session) }
        HTTP2MemoryPool.destroy(memory)
        for index in 0..<slotCapacity {
            slots[index].requestBody?.deallocate()
            slots[index].literals?.deallocate()
        }
        slots.deinitialize(count: slotCapacity)
        slots.deallocate()
        streamTable.deallocate()
        remainder.deallocate()
        credentials.deallocate()
    }

    // MARK: Capacity

    /// min(our cap, the peer's SETTINGS_MAX_CONCURRENT_STREAMS); 0 once draining or closed.
    public var streamsAllowed: Int {
        guard lifecycle == .open else { return 0 }
        // `peerMaxConcurrentStreams` mirrors nghttp2's remote setting: the option before the
        // first SETTINGS, and each SETTINGS frame's value after (see `frameReceived`).
        return min(limits.streamsPerConnectionMax, peerMaxConcurrentStreams)
    }

    /// Bytes the caller has not yet pulled: submitted but unserialized, plus the held remainder.
    public var outputPendingBytes: Int { outputQueuedBytes + remainder.count }

    /// True once the peer's first SETTINGS frame arrived. Until then no stream opens: the peer's
    /// SETTINGS_MAX_CONCURRENT_STREAMS may be lower than nghttp2's assumed 100 (APNs starts at 1).
    public private(set) var peerSettingsReceived = false

    public var canOpenStream: Bool {
        peerSettingsReceived && lifecycle == .open && streamsOpen < streamsAllowed && outputPendingBytes <= limits.pendingOutputBytesMax
            && nghttp2_session_check_request_allowed(session) != 0
    }

    public var isGoingAway: Bool { lifecycle != .open }
    public var isClosed: Bool { lifecycle == .closed }

    // MARK: Requests

    /// Opens a stream for `request`; nil when `canOpenStream` is false. The deadline is now plus
    /// `Limits.requestTimeoutNanoseconds`.
    public func submit(_ request: HTTP2Request, tag: UInt64) -> Int32? {
        withUnsafePointer(to: request) { submit($0, tag: tag) }
    }

    /// The same, reading the request in place (a caller that keeps one request and changes it
    /// between submissions passes it without a copy: no retain or release of its strings and
    /// buffers).
    public func submit(_ request: UnsafePointer<HTTP2Request>, tag: UInt64) -> Int32? {
        guard canOpenStream else { return nil }
        let index = freeSlot
        precondition(index >= 0, "streamsAllowed never exceeds the slab")

        let fields = assembleHeaders(request, slot: slots + index)
        let headerBytes = headerBlock.byteCount

        let streamID: Int32
        if request.pointee.body.isEmpty {
            streamID = nghttp2_submit_request(session, nil, fields, headerBlock.count, nil, NG.userData(slot: index))
        } else {
            var provider = nghttp2_data_provider()
            provider.read_callback = { _, streamID, buffer, length, flags, _, userData in
                Unmanaged<HTTP2ClientSession>.fromOpaque(userData!)._withUnsafeGuaranteedRef {
                    $0.readRequestBody(streamID: streamID, into: buffer!, length: length, flags: flags!)
                }
            }
            streamID = nghttp2_submit_request(session, nil, fields, headerBlock.count, &provider, NG.userData(slot: index))
        }
        guard streamID > 0 else {
            slots[index].literalsCount = 0
            return nil
        }

        let slot = slots + index
        freeSlot = slot.pointee.next
        // Back-pressure estimate: HPACK output is at most about the raw field bytes, plus the
        // 9-byte frame header (RFC 9113 §4.1).
        let estimatedHeaderBytes = headerBytes + 9
        slot.pointee.state = .queued
        slot.pointee.streamID = streamID
        slot.pointee.tag = tag
        slot.pointee.deadlineNanoseconds = clock.nowNanoseconds() &+ limits.requestTimeoutNanoseconds
        slot.pointee.previous = newestSlot
        slot.pointee.next = -1
        slot.pointee.headersOutputOffset = -1
        slot.pointee.unsentHeaderBytes = estimatedHeaderBytes
        // A free slot keeps its last body; the same body again (a campaign's shared payload)
        // then costs no retain/release.
        request.pointee.body.withUnsafeBufferPointer { body in
            if body.count > slot.pointee.requestBodyCapacity {
                slot.pointee.requestBody?.deallocate()
                slot.pointee.requestBody = .allocate(capacity: body.count)
                slot.pointee.requestBodyCapacity = body.count
            }
            if let base = body.baseAddress, body.count > 0 { slot.pointee.requestBody!.update(from: base, count: body.count) }
            slot.pointee.requestBodyCount = body.count
        }
        slot.pointee.requestBodyOffset = 0
        slot.pointee.status = 0
        slot.pointee.responseBodyTruncated = false
        slot.pointee.responseComplete = false
        slot.pointee.responseBodyBytes = 0
        slot.pointee.responseHeaderBytes = 0
        streamTable[Int(streamID >> 1) & streamTableMask] = Int32(truncatingIfNeeded: index)
        if newestSlot >= 0 { slots[newestSlot].next = index } else { oldestSlot = index }
        newestSlot = index
        streamsOpen += 1
        outputQueuedBytes += estimatedHeaderBytes + request.pointee.body.count
        return streamID
    }

    // MARK: Bytes

    /// Feeds plaintext from the peer. A connection error (ours to detect or nghttp2's) throws,
    /// fails every open stream and closes the session.
    public func receive(_ bytes: UnsafeRawBufferPointer) throws(HTTP2Error) {
        guard lifecycle != .closed else { throw HTTP2Error("receive on a closed HTTP/2 client session") }
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        lastReceiveNanoseconds = clock.nowNanoseconds()
        let rv = nghttp2_session_mem_recv(session, base.assumingMemoryBound(to: UInt8.self), bytes.count)
        if rv < 0 {
            let error = HTTP2Error(code: rv, "nghttp2_session_mem_recv")
            abandon()
            throw error
        }
        // nghttp2 answers most connection errors (RFC 9113 §5.4.1) by queueing GOAWAY and
        // ignoring further input; request permission is the public trace of that.
        let idsLeft = nghttp2_session_get_next_stream_id(session) <= UInt32(Int32.max)
        if goAwayLastStreamID == nil && !terminateSubmitted && idsLeft && nghttp2_session_check_request_allowed(session) == 0 {
            let error = HTTP2Error("HTTP/2 connection error: \(connectionErrorText ?? "peer violated the protocol")")
            abandon()
            throw error
        }
        finishIfDone()
    }

    public var wantsWrite: Bool {
        guard lifecycle != .closed else { return false }
        return !remainder.isEmpty || nghttp2_session_want_write(session) != 0
    }

    /// Copies up to `buffer.count` bytes of output into `buffer`; returns how many.
    public func produce(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        guard lifecycle != .closed, buffer.count > 0 else { return 0 }
        var written = remainder.drain(into: buffer, at: 0)
        while written < buffer.count && remainder.isEmpty {
            var chunk: UnsafePointer<UInt8>?
            literalSlot = -1
            let n = nghttp2_session_mem_send(session, &chunk)
            if n < 0 {
                connectionErrorText = HTTP2Error(code: n, "nghttp2_session_mem_send").description
                outputHandedOut += Int64(written)
                abandon()
                return written
            }
            guard n > 0, let chunk else { break }
            switch rewrite(chunk, count: n) {
            case .unchanged:
                written += emit(UnsafeRawBufferPointer(start: chunk, count: n), into: buffer, at: written)
            case .rewritten:
                written += emit(credentials.rewritten, into: buffer, at: written)
            case .failed:
                // Unreachable while blocks stay under blockBytesMax; a placeholder must never
                // reach the server, so the connection ends before the frame goes out.
                connectionErrorText = "internal error: a HEADERS frame could not take its literal values"
                outputHandedOut += Int64(written)
                abandon()
                return written
            }
        }
        outputHandedOut += Int64(written)
        finishIfDone()
        return written
    }

    /// Replaces placeholders in a HEADERS frame from nghttp2 (HTTP2CredentialLiterals); the
    /// frame's stream's own values are those of `literalSlot`, noted by before_frame_send.
    private func rewrite(_ frame: UnsafePointer<UInt8>, count: Int) -> HTTP2CredentialLiterals.Rewrite {
        var literals: UnsafeRawBufferPointer?
        if literalSlot >= 0 {
            let index = literalSlot
            literalSlot = -1
            literals = UnsafeRawBufferPointer(start: slots[index].literals, count: slots[index].literalsCount)
            slots[index].literalsCount = 0
        }
        guard literals != nil || !credentials.isEmpty else { return .unchanged }
        return credentials.rewrite(frame, count: count, literals: literals)
    }

    /// Where the request's Strings, template and header array sit, for reading them in place.
    private static let methodOffset = MemoryLayout<HTTP2Request>.offset(of: \HTTP2Request.method)!
    private static let schemeOffset = MemoryLayout<HTTP2Request>.offset(of: \HTTP2Request.scheme)!
    private static let authorityOffset = MemoryLayout<HTTP2Request>.offset(of: \HTTP2Request.authority)!
    private static let pathOffset = MemoryLayout<HTTP2Request>.offset(of: \HTTP2Request.path)!
    private static let pathSuffixOffset = MemoryLayout<HTTP2Request>.offset(of: \HTTP2Request.packedPathSuffix)!
    private static let pathSuffixSkipOffset = MemoryLayout<HTTP2Request>.offset(of: \HTTP2Request.pathSuffixSkip)!
    private static let packedHeaderOffset = MemoryLayout<HTTP2Request>.offset(of: \HTTP2Request.packedHeader)!
    private static let fixedHeadersOffset = MemoryLayout<HTTP2Request>.offset(of: \HTTP2Request.fixedHeaders)!
    private static let headersOffset = MemoryLayout<HTTP2Request>.offset(of: \HTTP2Request.headers)!

    /// The request's fields in `headerBlock`: pseudo-headers, the template's, then the request's own.
    private func assembleHeaders(_ request: UnsafePointer<HTTP2Request>, slot: UnsafeMutablePointer<Slot>) -> UnsafeMutablePointer<nghttp2_nv> {
        headerBlock.begin()
        let raw = UnsafeRawPointer(request)
        func field(_ offset: Int) -> UnsafePointer<String> { (raw + offset).assumingMemoryBound(to: String.self) }
        headerBlock.append(.method, at: field(Self.methodOffset))
        headerBlock.append(.scheme, at: field(Self.schemeOffset))
        headerBlock.append(.authority, at: field(Self.authorityOffset))
        headerBlock.append(.path, at: field(Self.pathOffset), suffixAt: (raw + Self.pathSuffixOffset).assumingMemoryBound(to: PackedText.self),
                           skipping: (raw + Self.pathSuffixSkipOffset).load(as: Int.self))
        // The template and the header array are read where they lie, unretained: the request
        // owns them for the whole call, and a retain here is an atomic write per request to
        // memory the adapter's thread also touches (perf: 0.9 % of the client).
        let fixed = (raw + Self.fixedHeadersOffset).load(as: Unmanaged<HTTP2HeaderTemplate>?.self)
        var credentialField = -1
        if let fixed {
            fixed._withUnsafeGuaranteedRef { template in
                if template.authorizationField >= 0 { credentialField = headerBlock.count + template.authorizationField }
                headerBlock.append(template: template)
            }
        }
        let ownFields = headerBlock.count
        (raw + Self.headersOffset).assumingMemoryBound(to: [HTTP2Header].self).pointee.withUnsafeBufferPointer { headers in
            for i in headers.indices { headerBlock.append(headerAt: headers.baseAddress! + i) }
        }
        let packed = (raw + Self.packedHeaderOffset).assumingMemoryBound(to: HTTP2PackedHeader.self)
        if packed.pointee.isPresent { headerBlock.append(packedHeaderAt: packed) }
        useLiterals(slot: slot, ownFields: ownFields)
        if credentialField >= 0, let fixed { fixed._withUnsafeGuaranteedRef { useCredentialLiteral($0, field: credentialField) } }
        return headerBlock.finish()
    }

    /// Moves the request's long values (`:path`, and its own never-indexed headers) into the
    /// slot and points their fields at placeholders that `produce` replaces with the values as
    /// raw literals. Nothing moves for a large block, or one with a value of its own that looks
    /// like a placeholder.
    private func useLiterals(slot: UnsafeMutablePointer<Slot>, ownFields: Int) {
        slot.pointee.literalsCount = 0
        guard headerBlock.byteCount <= HTTP2CredentialLiterals.blockBytesMax else { return }
        let fields = headerBlock.fields
        let count = headerBlock.count
        func isLiteral(_ i: Int) -> Bool {
            guard fields[i].valuelen >= HTTP2CredentialLiterals.literalBytesMin else { return false }
            return i == 3 || (i >= ownFields && fields[i].flags & UInt8(NGHTTP2_NV_FLAG_NO_INDEX.rawValue) != 0)
        }
        var bytes = 0
        var chosen = 0
        for i in 0..<count {
            if HTTP2CredentialLiterals.looksLikePlaceholder(fields[i].value, count: fields[i].valuelen) { return }
            if chosen < HTTP2CredentialLiterals.literalsMax && isLiteral(i) {
                chosen += 1
                bytes += 2 + fields[i].valuelen
            }
        }
        guard chosen > 0 else { return }
        if bytes > slot.pointee.literalsCapacity {
            slot.pointee.literals?.deallocate()
            slot.pointee.literals = .allocate(capacity: bytes)
            slot.pointee.literalsCapacity = bytes
        }
        let storage = slot.pointee.literals!
        var at = 0
        var k = 0
        for i in 0..<count where k < chosen && isLiteral(i) {
            let length = fields[i].valuelen
            storage[at] = UInt8(length >> 8)
            storage[at + 1] = UInt8(length & 0xFF)
            (storage + at + 2).update(from: fields[i].value, count: length)
            at += 2 + length
            fields[i].value = credentials.literalPlaceholder(k)
            fields[i].valuelen = 2
            k += 1
        }
        slot.pointee.literalsCount = at
    }

    /// Copies a frame from nghttp2 (or its rewrite) into `buffer` at `offset`; what does not fit
    /// waits in `remainder`. Returns the bytes copied.
    private func emit(_ frame: UnsafeRawBufferPointer, into buffer: UnsafeMutableRawBufferPointer, at offset: Int) -> Int {
        outputGenerated += Int64(frame.count)
        let fits = min(frame.count, buffer.count - offset)
        (buffer.baseAddress! + offset).copyMemory(from: frame.baseAddress!, byteCount: fits)
        if fits < frame.count { remainder.store(UnsafeRawBufferPointer(rebasing: frame[fits...])) }
        return fits
    }

    /// Points the block's `authorization` field at a placeholder that `produce` replaces with the
    /// value as a raw literal (HTTP2CredentialLiterals); the real value goes through nghttp2 when
    /// the block is large or every credential slot is busy.
    private func useCredentialLiteral(_ template: HTTP2HeaderTemplate, field: Int) {
        guard headerBlock.byteCount <= HTTP2CredentialLiterals.blockBytesMax else { return }
        let nv = headerBlock.fields[field]
        guard let k = credentials.slot(for: template, value: UnsafeBufferPointer(start: nv.value, count: nv.valuelen)) else { return }
        headerBlock.fields[field].value = credentials.placeholders + 2 * k
        headerBlock.fields[field].valuelen = 2
        headerBlock.fields[field].flags |= UInt8(NGHTTP2_NV_FLAG_NO_INDEX.rawValue)
    }

    // MARK: Time

    /// Fires request deadlines, sends a PING after `pingIntervalNanoseconds` without input, and
    /// declares the connection dead after `pingTimeoutNanoseconds` without the ACK.
    public func tick() {
        guard lifecycle != .closed else { return }
        let now = clock.nowNanoseconds()
        while oldestSlot >= 0 && slots[oldestSlot].deadlineNanoseconds <= now {
            let index = oldestSlot
            nghttp2_submit_rst_stream(session, NG.flagNone, slots[index].streamID, NG.cancel)
            finish(index, .failed(tag: slots[index].tag, bodyBlockedByFlowControl(index) ? .flowControlBlocked : .deadlineExceeded))
        }
        if let sent = pingSentNanoseconds {
            if now &- sent >= limits.pingTimeoutNanoseconds {
                events.append(.pingTimedOut)
                abandon()
                return
            }
        } else if now &- lastReceiveNanoseconds >= limits.pingIntervalNanoseconds {
            pingCounter &+= 1
            var opaque = pingCounter.bigEndian
            let rv = withUnsafeBytes(of: &opaque) { nghttp2_submit_ping(session, NG.flagNone, $0.bindMemory(to: UInt8.self).baseAddress) }
            if rv == 0 { pingSentNanoseconds = now }
        }
        finishIfDone()
    }

    /// The earliest time at which `tick()` has work; nil once closed.
    public var nextDeadlineNanoseconds: UInt64? {
        guard lifecycle != .closed else { return nil }
        let liveness: UInt64
        if let sent = pingSentNanoseconds {
            liveness = sent &+ limits.pingTimeoutNanoseconds
        } else {
            liveness = lastReceiveNanoseconds &+ limits.pingIntervalNanoseconds
        }
        guard oldestSlot >= 0 else { return liveness }
        return min(liveness, slots[oldestSlot].deadlineNanoseconds)
    }

    // MARK: Lifecycle

    /// The transport died. Streams with no byte handed out become `.notSent`, the others
    /// `.connectionLost`; then `.closed`.
    public func connectionLost() {
        guard lifecycle != .closed else { return }
        abandon()
    }

    /// Graceful close: no new streams; GOAWAY(NO_ERROR) once the open ones finish; then `.closed`.
    public func close() {
        guard lifecycle != .closed else { return }
        closeRequested = true
        if lifecycle == .open { lifecycle = .draining }
        finishIfDone()
    }

    /// Hands every recorded event to `body`, in order. `body` may call back into the session;
    /// events it causes are handed out by the same call, after the ones before them. A nested
    /// `takeEvents` from inside `body` returns at once (the outer call delivers them).
    /// `upcoming` hears the tags of request events ahead of the one `body` gets, each twice:
    /// `lookAhead` events ahead (`near` false), then half as far (`near` true). A workload can
    /// start loading that request's state in two steps, the second through pointers the first
    /// brought in (`ClientWorkload.willReceive`).
    public func takeEvents(upcoming: (_ tag: UInt64, _ near: Bool) -> Void = { _, _ in }, _ body: (HTTP2ClientEvent) -> Void) {
        events.take { base, n in HTTP2EventBuffer.deliver(base, count: n, upcoming: upcoming, body) }
    }

    /// How many events ahead of the one being handled `takeEvents` first names a request's tag.
    static var lookAhead: Int { HTTP2EventBuffer<HTTP2ClientEvent>.lookAhead }

    // MARK: Internals

    /// Ends the stream in slot `index` with `event`, and returns the slot to the free list.
    private func finish(_ index: Int, _ event: HTTP2ClientEvent) {
        let slot = slots + index
        precondition(slot.pointee.state != .free)
        events.append(event)
        outputQueuedBytes -= slot.pointee.unsentHeaderBytes + (slot.pointee.requestBodyCount - slot.pointee.requestBodyOffset)
        // nghttp2 may still hold the stream (an RST_STREAM not yet sent) and name it in a later
        // callback: `slotIndex` checks the stream id, which a reused slot never repeats.
        let previous = slot.pointee.previous
        let next = slot.pointee.next
        if previous >= 0 { slots[previous].next = next } else { oldestSlot = next }
        if next >= 0 { slots[next].previous = previous } else { newestSlot = previous }
        slot.pointee.state = .free
        slot.pointee.previous = -1
        slot.pointee.next = freeSlot
        if slot.pointee.requestBodyCapacity > Self.requestBodyKeptMax {
            slot.pointee.requestBody?.deallocate()
            slot.pointee.requestBody = nil
            slot.pointee.requestBodyCapacity = 0
        }
        slot.pointee.requestBodyCount = 0
        slot.pointee.requestBodyOffset = 0
        slot.pointee.literalsCount = 0  // nonzero only if its HEADERS frame never went out
        if slot.pointee.literalsCapacity > Self.requestBodyKeptMax {
            slot.pointee.literals?.deallocate()
            slot.pointee.literals = nil
            slot.pointee.literalsCapacity = 0
        }
        if !slot.pointee.responseHeaders.isEmpty { slot.pointee.responseHeaders = [] }
        if !slot.pointee.responseBody.isEmpty { slot.pointee.responseBody = [] }
        freeSlot = index
        streamsOpen -= 1
    }

    /// The slot of an active stream, checked against the stream id so that a stale pointer from
    /// nghttp2 can never reach a reused slot. The direct-mapped table answers almost always;
    /// nghttp2's stream user data is the fallback when two live streams share a table entry.
    @inline(__always)
    private func slotIndex(streamID: Int32) -> Int? {
        let hint = Int(streamTable[Int(streamID >> 1) & streamTableMask])
        if hint >= 0, slots[hint].state != .free, slots[hint].streamID == streamID { return hint }
        if let index = NG.slot(userData: nghttp2_session_get_stream_user_data(session, streamID)),
           index < slotCapacity, slots[index].state != .free, slots[index].streamID == streamID {
            return index
        }
        return nil
    }

    /// The slow path for frames of streams nghttp2 never opened (their HEADERS were not sent).
    private func slotIndexByScan(streamID: Int32) -> Int? {
        var index = oldestSlot
        while index >= 0 {
            if slots[index].streamID == streamID { return index }
            index = slots[index].next
        }
        return nil
    }

    private func failureForLostConnection(_ index: Int) -> HTTP2StreamFailure {
        if let answered = answeredStatus(index) { return answered }
        let offset = slots[index].headersOutputOffset
        guard offset >= 0 && outputHandedOut > offset else { return .notSent }
        return bodyBlockedByFlowControl(index) ? .flowControlBlocked : .connectionLost
    }

    /// Whether the stream in slot `index` sent its HEADERS but not one byte of its body because
    /// the peer's flow-control window (the stream's or the connection's) is closed: no END_STREAM
    /// went out, so the server holds an incomplete request.
    private func bodyBlockedByFlowControl(_ index: Int) -> Bool {
        guard slots[index].state == .sent, slots[index].requestBodyCount > 0, slots[index].requestBodyOffset == 0 else { return false }
        let stream = nghttp2_session_get_stream_remote_window_size(session, slots[index].streamID)
        let notFound = NGHTTP2_ERR_INVALID_ARGUMENT.rawValue
        return (stream <= 0 && stream != notFound) || nghttp2_session_get_remote_window_size(session) <= 0
    }

    /// Open streams whose bodies wait on a closed flow-control window (for a diagnosis).
    public var streamsBlockedByFlowControl: Int {
        guard lifecycle != .closed else { return 0 }
        var count = 0
        var index = oldestSlot
        while index >= 0 {
            if bodyBlockedByFlowControl(index) { count += 1 }
            index = slots[index].next
        }
        return count
    }

    /// A response over one of the limits: the stream is reset (CANCEL) and fails with `failure`;
    /// nghttp2's later callbacks for it find no slot, so the rest is read and dropped.
    private func rejectResponse(_ index: Int, _ failure: HTTP2StreamFailure) {
        nghttp2_submit_rst_stream(session, NG.flagNone, slots[index].streamID, NG.cancel)
        finish(index, .failed(tag: slots[index].tag, failure))
    }

    /// The connection is unusable: fail every open stream in submission order, then `.closed`.
    private func abandon() {
        guard lifecycle != .closed else { return }
        while oldestSlot >= 0 {
            let index = oldestSlot
            finish(index, .failed(tag: slots[index].tag, failureForLostConnection(index)))
        }
        lifecycle = .closed
        remainder.discard()
        events.append(.closed)
    }

    /// A stream that received its response's `:status` was processed, whatever the server says
    /// of it afterwards: its failure, or nil when no HEADERS came.
    private func answeredStatus(_ index: Int) -> HTTP2StreamFailure? {
        slots[index].status == 0 ? nil : .cutAfterResponse(status: slots[index].status)
    }

    /// Streams above a GOAWAY's last-stream-id were not processed (RFC 9113 §6.8), including
    /// those still queued in nghttp2, which it would otherwise drop without a stream close. One
    /// that already got response HEADERS contradicts that, and is not safe to send again.
    private func failStreamsAbove(_ lastStreamID: Int32) {
        var index = oldestSlot
        while index >= 0 {
            let next = slots[index].next
            if slots[index].streamID > lastStreamID {
                finish(index, .failed(tag: slots[index].tag, answeredStatus(index) ?? .goAwayUnprocessed))
            }
            index = next
        }
    }

    private func finishIfDone() {
        guard lifecycle != .closed else { return }
        if closeRequested && !terminateSubmitted && streamsOpen == 0 {
            terminateSubmitted = true
            nghttp2_session_terminate_session(session, NG.noError)
        }
        if nghttp2_session_want_read(session) == 0 && nghttp2_session_want_write(session) == 0 && remainder.isEmpty {
            abandon()
        }
    }

    // MARK: Callback targets (record and return; docs/DESIGN.md §2.3)

    fileprivate func readRequestBody(streamID: Int32, into buffer: UnsafeMutablePointer<UInt8>, length: Int,
                                     flags: UnsafeMutablePointer<UInt32>) -> Int {
        guard let index = slotIndex(streamID: streamID) else { return NG.temporalCallbackFailure }
        let slot = slots + index
        let remaining = slot.pointee.requestBodyCount - slot.pointee.requestBodyOffset
        let n = min(remaining, length)
        if n > 0 {
            buffer.update(from: slot.pointee.requestBody! + slot.pointee.requestBodyOffset, count: n)
            slot.pointee.requestBodyOffset += n
            outputQueuedBytes -= n
        }
        if slot.pointee.requestBodyOffset == slot.pointee.requestBodyCount {
            flags.pointee |= NG.dataFlagEOF
        }
        return n
    }

    fileprivate func beforeFrameSend(_ frame: UnsafePointer<nghttp2_frame>) {
        guard frame.pointee.hd.type == NG.frameHeaders,
              let index = slotIndex(streamID: frame.pointee.hd.stream_id),
              slots[index].state == .queued else { return }
        // mem_send returns one frame per call, so this frame starts at the current output count.
        if slots[index].literalsCount > 0 { literalSlot = index }
        slots[index].state = .sent
        slots[index].headersOutputOffset = outputGenerated
        outputQueuedBytes -= slots[index].unsentHeaderBytes
        slots[index].unsentHeaderBytes = 0
    }

    fileprivate func frameNotSent(_ frame: UnsafePointer<nghttp2_frame>, error: Int32) {
        guard frame.pointee.hd.type == NG.frameHeaders else { return }
        let streamID = frame.pointee.hd.stream_id
        guard let index = slotIndex(streamID: streamID) ?? slotIndexByScan(streamID: streamID) else { return }
        let failure: HTTP2StreamFailure
        if let last = goAwayLastStreamID, streamID > last {
            failure = .goAwayUnprocessed
        } else if slots[index].state == .queued {
            failure = .notSent
        } else {
            failure = .connectionLost
        }
        finish(index, .failed(tag: slots[index].tag, failure))
    }

    fileprivate func header(streamID: Int32, name: UnsafePointer<UInt8>?, nameLength: Int,
                            value: UnsafePointer<UInt8>?, valueLength: Int) {
        guard let index = slotIndex(streamID: streamID), let name, nameLength > 0 else { return }
        let slot = slots + index
        slot.pointee.responseHeaderBytes += nameLength + valueLength + 32
        if slot.pointee.responseHeaderBytes > limits.responseHeaderBytesAccepted {
            rejectResponse(index, .responseHeadersTooLarge)
            return
        }
        if name[0] == 0x3A {  // ':'
            if bytesEqual(name, nameLength, ":status"), let value, valueLength == 3 {
                slot.pointee.status = Int(value[0] &- 0x30) * 100 + Int(value[1] &- 0x30) * 10 + Int(value[2] &- 0x30)
            }
            return
        }
        // :status comes first, so a success is known before its regular headers arrive.
        if !limits.responseHeadersKeptOnSuccess && slot.pointee.status / 100 == 2 { return }
        guard slot.pointee.responseHeaders.count < HTTP2Response.headersKeptMax,
              keptHeaderNames.contains(where: { bytesEqual(name, nameLength, $0) }) else { return }
        slot.pointee.responseHeaders.append(HTTP2Header(makeString(name, nameLength), makeString(value, valueLength)))
    }

    fileprivate func dataChunk(streamID: Int32, data: UnsafePointer<UInt8>?, length: Int) {
        guard let index = slotIndex(streamID: streamID), let data, length > 0 else { return }
        let slot = slots + index
        slot.pointee.responseBodyBytes += length
        if slot.pointee.responseBodyBytes > limits.responseBodyBytesAccepted {
            rejectResponse(index, .responseBodyTooLarge)
            return
        }
        let room = limits.responseBodyBytesMax - slot.pointee.responseBody.count
        if length > room { slot.pointee.responseBodyTruncated = true }
        let kept = min(room, length)
        if kept > 0 { slot.pointee.responseBody.append(contentsOf: UnsafeBufferPointer(start: data, count: kept)) }
    }

    fileprivate func frameReceived(_ frame: UnsafePointer<nghttp2_frame>) {
        let hd = frame.pointee.hd
        switch hd.type {
        case NG.frameHeaders, NG.frameData:
            if hd.flags & NG.flagEndStream != 0, let index = slotIndex(streamID: hd.stream_id) {
                slots[index].responseComplete = true
            }
        case NG.frameSettings:
            guard hd.flags & NG.flagAck == 0 else { return }
            peerSettingsReceived = true
            let value = Int(nghttp2_session_get_remote_settings(session, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS))
            if value != peerMaxConcurrentStreams {
                peerMaxConcurrentStreams = value
                events.append(.settingsChanged(maxConcurrentStreams: value))
            }
        case NG.framePing:
            if hd.flags & NG.flagAck != 0 { pingSentNanoseconds = nil }
        case NG.frameGoAway:
            let goAway = frame.pointee.goaway
            let last = goAwayLastStreamID.map { min($0, goAway.last_stream_id) } ?? goAway.last_stream_id
            goAwayLastStreamID = last
            if lifecycle == .open { lifecycle = .draining }
            let debugData = makeString(goAway.opaque_data, min(goAway.opaque_data_len, 1024))
            events.append(.goAway(lastStreamID: goAway.last_stream_id, errorCode: goAway.error_code, debugData: debugData))
            failStreamsAbove(last)
        default:
            return
        }
    }

    fileprivate func streamClosed(streamID: Int32, errorCode: UInt32) {
        guard let index = slotIndex(streamID: streamID) else { return }
        let slot = slots + index
        if slot.pointee.responseComplete {
            var headers: [HTTP2Header] = []
            var body: [UInt8] = []
            swap(&headers, &slot.pointee.responseHeaders)
            swap(&body, &slot.pointee.responseBody)
            let response = HTTP2Response(status: slot.pointee.status, headers: headers, body: body,
                                         bodyTruncated: slot.pointee.responseBodyTruncated)
            finish(index, .response(tag: slot.pointee.tag, response))
            return
        }
        let failure: HTTP2StreamFailure
        if let answered = answeredStatus(index) {
            failure = answered
        } else if let last = goAwayLastStreamID, streamID > last {
            failure = .goAwayUnprocessed
        } else if errorCode == NG.refusedStream {
            failure = .refusedStream
        } else {
            failure = .reset(errorCode: errorCode)
        }
        finish(index, .failed(tag: slot.pointee.tag, failure))
    }

    fileprivate func connectionError(_ text: String) {
        if connectionErrorText == nil { connectionErrorText = text }
    }

    // MARK: Callback table

    private static func install(_ callbacks: OpaquePointer) {
        nghttp2_session_callbacks_set_before_frame_send_callback(callbacks) { _, frame, userData in
            Unmanaged<HTTP2ClientSession>.fromOpaque(userData!)._withUnsafeGuaranteedRef { $0.beforeFrameSend(frame!) }
            return 0
        }
        nghttp2_session_callbacks_set_on_frame_not_send_callback(callbacks) { _, frame, error, userData in
            Unmanaged<HTTP2ClientSession>.fromOpaque(userData!)._withUnsafeGuaranteedRef { $0.frameNotSent(frame!, error: error) }
            return 0
        }
        nghttp2_session_callbacks_set_on_header_callback(callbacks) { _, frame, name, nameLength, value, valueLength, _, userData in
            Unmanaged<HTTP2ClientSession>.fromOpaque(userData!)._withUnsafeGuaranteedRef {
                $0.header(streamID: frame!.pointee.hd.stream_id, name: name, nameLength: nameLength, value: value, valueLength: valueLength)
            }
            return 0
        }
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks) { _, _, streamID, data, length, userData in
            Unmanaged<HTTP2ClientSession>.fromOpaque(userData!)._withUnsafeGuaranteedRef {
                $0.dataChunk(streamID: streamID, data: data, length: length)
            }
            return 0
        }
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks) { _, frame, userData in
            Unmanaged<HTTP2ClientSession>.fromOpaque(userData!)._withUnsafeGuaranteedRef { $0.frameReceived(frame!) }
            return 0
        }
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks) { _, streamID, errorCode, userData in
            Unmanaged<HTTP2ClientSession>.fromOpaque(userData!)._withUnsafeGuaranteedRef {
                $0.streamClosed(streamID: streamID, errorCode: errorCode)
            }
            return 0
        }
        nghttp2_session_callbacks_set_error_callback2(callbacks) { _, code, message, length, userData in
            Unmanaged<HTTP2ClientSession>.fromOpaque(userData!).takeUnretainedValue()
                .connectionError("\(makeString(UnsafeRawPointer(message)?.assumingMemoryBound(to: UInt8.self), length)) (\(code))")
            return 0
        }
    }
}
