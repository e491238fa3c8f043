// Internal helpers shared by HTTP2ClientSession and HTTP2ServerSession: a reusable nghttp2_nv
// builder (no allocation per request once warm), the owned remainder of a mem_send chunk, and
// the nghttp2 constants as the integer types the C callbacks use.

import CNGHTTP2
import PushcastCore

// MARK: - nghttp2 constants, typed for the callbacks

enum NG {
    /// Submits our SETTINGS (RFC 9113 §3.4: the preface's SETTINGS frame) and enlarges the
    /// connection-level receive window to `windowBytes`, for either role.
    static func submitInitialSettings(_ session: OpaquePointer, _ entries: [nghttp2_settings_entry], windowBytes: Int32) throws(HTTP2Error) {
        var entries = entries
        var rv = nghttp2_submit_settings(session, flagNone, &entries, entries.count)
        guard rv == 0 else { throw HTTP2Error(code: Int(rv), "nghttp2_submit_settings") }
        if windowBytes > defaultWindowBytes {
            rv = nghttp2_session_set_local_window_size(session, flagNone, 0, windowBytes)
            guard rv == 0 else { throw HTTP2Error(code: Int(rv), "nghttp2_session_set_local_window_size") }
        }
    }

    static let frameData = UInt8(NGHTTP2_DATA.rawValue)
    static let frameHeaders = UInt8(NGHTTP2_HEADERS.rawValue)
    static let frameRSTStream = UInt8(NGHTTP2_RST_STREAM.rawValue)
    static let frameSettings = UInt8(NGHTTP2_SETTINGS.rawValue)
    static let framePing = UInt8(NGHTTP2_PING.rawValue)
    static let frameGoAway = UInt8(NGHTTP2_GOAWAY.rawValue)
    static let flagEndStream = UInt8(NGHTTP2_FLAG_END_STREAM.rawValue)
    static let flagAck = UInt8(NGHTTP2_FLAG_ACK.rawValue)
    static let noError = NGHTTP2_NO_ERROR.rawValue
    static let refusedStream = NGHTTP2_REFUSED_STREAM.rawValue
    static let cancel = NGHTTP2_CANCEL.rawValue
    static let dataFlagEOF = NGHTTP2_DATA_FLAG_EOF.rawValue
    static let temporalCallbackFailure = Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue)
    static let flagNone = UInt8(NGHTTP2_FLAG_NONE.rawValue)
    static let settingsMaxConcurrentStreams = Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue)
    static let settingsInitialWindowSize = Int32(NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE.rawValue)
    static let settingsEnablePush = Int32(NGHTTP2_SETTINGS_ENABLE_PUSH.rawValue)
    static let settingsNoRFC7540Priorities = Int32(NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES.rawValue)
    /// The RFC 9113 §6.5.2 default connection window, which only WINDOW_UPDATE can enlarge.
    static let defaultWindowBytes: Int32 = 65_535

    /// Slot numbers travel through nghttp2 as stream user data, offset by one so that nil
    /// means "no slot".
    @inline(__always) static func userData(slot: Int) -> UnsafeMutableRawPointer? {
        UnsafeMutableRawPointer(bitPattern: slot + 1)
    }

    @inline(__always) static func slot(userData: UnsafeMutableRawPointer?) -> Int? {
        guard let userData else { return nil }
        return Int(bitPattern: userData) - 1
    }
}

/// The pseudo-header names, kept for the session's life so that nghttp2 may skip copying them.
enum HTTP2PseudoHeader: Int, CaseIterable {
    case method, scheme, authority, path, status

    var text: StaticString {
        switch self {
        case .method: return ":method"
        case .scheme: return ":scheme"
        case .authority: return ":authority"
        case .path: return ":path"
        case .status: return ":status"
        }
    }
}

// MARK: - Header block builder

/// Builds one nghttp2_nv array at a time in storage that is reused for every frame. nghttp2
/// copies names and values during `nghttp2_submit_*` (except the pseudo-header names, which
/// live as long as this builder), so the storage is free again as soon as submit returns.
/// The storage grows on demand (rebasing the fields already built), so a block is built in one
/// pass without measuring it first.
/// Regular headers that many requests share, laid out once as bytes with their nghttp2 field
/// descriptors: a session copies the descriptors into each request's header block instead of
/// copying each name and value string (and retaining and releasing it) per request. Immutable
/// once made; nghttp2 copies the bytes it keeps when the request is submitted.
public final class HTTP2HeaderTemplate: @unchecked Sendable {
    public let headers: [HTTP2Header]
    let fields: UnsafeMutablePointer<nghttp2_nv>
    let count: Int
    /// Bytes of names and values.
    let byteCount: Int
    private let bytes: UnsafeMutablePointer<UInt8>
    /// The index of the `authorization` field, or -1: the client session sends its value as a raw
    /// literal (HTTP2CredentialLiterals) instead of nghttp2's Huffman coding of it per request.
    let authorizationField: Int

    public init(_ headers: [HTTP2Header]) {
        self.headers = headers
        var total = 0
        for header in headers { total += header.name.utf8.count + header.value.utf8.count }
        byteCount = total
        bytes = .allocate(capacity: max(1, total))
        count = headers.count
        authorizationField = headers.firstIndex { $0.name == "authorization" } ?? -1
        fields = .allocate(capacity: max(1, headers.count))
        var offset = 0
        for (i, header) in headers.enumerated() {
            let nameStart = offset
            for byte in header.name.utf8 { bytes[offset] = byte; offset += 1 }
            let valueStart = offset
            for byte in header.value.utf8 { bytes[offset] = byte; offset += 1 }
            fields[i] = nghttp2_nv(name: bytes + nameStart, value: bytes + valueStart, namelen: valueStart - nameStart,
                                   valuelen: offset - valueStart,
                                   flags: header.neverIndexed ? UInt8(NGHTTP2_NV_FLAG_NO_INDEX.rawValue) : NG.flagNone)
        }
    }

    deinit {
        fields.deallocate()
        bytes.deallocate()
    }
}

final class HTTP2HeaderBlockBuilder {
    private(set) var fields: UnsafeMutablePointer<nghttp2_nv>
    private(set) var count = 0
    private var fieldCapacity: Int
    private var bytes: UnsafeMutablePointer<UInt8>
    private var byteCapacity: Int
    private var bytesUsed = 0
    private let pseudoNames: UnsafeMutablePointer<UInt8>
    private var pseudoOffsets: [Int] = []
    private var pseudoLengths: [Int] = []

    init(fieldCapacity: Int = 16, byteCapacity: Int = 2048) {
        self.fieldCapacity = fieldCapacity
        self.byteCapacity = byteCapacity
        fields = .allocate(capacity: fieldCapacity)
        bytes = .allocate(capacity: byteCapacity)
        var total = 0
        for name in HTTP2PseudoHeader.allCases { total += name.text.utf8CodeUnitCount }
        pseudoNames = .allocate(capacity: total)
        var offset = 0
        for name in HTTP2PseudoHeader.allCases {
            let count = name.text.utf8CodeUnitCount
            (pseudoNames + offset).update(from: name.text.utf8Start, count: count)
            pseudoOffsets.append(offset)
            pseudoLengths.append(count)
            offset += count
        }
    }

    deinit {
        fields.deallocate()
        bytes.deallocate()
        pseudoNames.deallocate()
    }

    /// Bytes of names and values in the current block (not counting pseudo-header names).
    var byteCount: Int { bytesUsed + templateBytes }
    /// Bytes of the templates appended to the current block (they stay in the template).
    private var templateBytes = 0

    /// Starts a block, reserving room for `fieldCount` fields and `byteCount` bytes of names
    /// and values (not counting pseudo-header names). Grows the storage only when needed.
    func begin(fieldCount: Int = 0, byteCount: Int = 0) {
        count = 0
        bytesUsed = 0
        templateBytes = 0
        if fieldCount > fieldCapacity { growFields(to: fieldCount) }
        if byteCount > byteCapacity { growBytes(to: byteCount) }
    }

    /// The fields of the block, valid until the next `begin` or `append`.
    func finish() -> UnsafeMutablePointer<nghttp2_nv> { fields }

    /// A pseudo-header whose value is the String at `value`, followed by the one at `suffix` (a
    /// request path made of a fixed prefix and a per-request part, joined here rather than in a
    /// new String). The value is read in place through the pointer: passing a String by value
    /// retains it, an atomic write to a String that another thread may have allocated and will
    /// free (perf: 2 % of the client at 8 x 1000 streams). The suffix is a `PackedText`: a packed
    /// one holds no buffer and is formatted into the block.
    func append(_ pseudo: HTTP2PseudoHeader, at value: UnsafePointer<String>, suffixAt suffix: UnsafePointer<PackedText>? = nil,
                skipping skip: Int = 0) {
        let valueStart = copy(at: value)
        if let suffix { copy(suffix.pointee, skipping: skip) }
        let name = pseudoNames + pseudoOffsets[pseudo.rawValue]
        add(name: name, nameLength: pseudoLengths[pseudo.rawValue], value: valueStart, valueLength: bytesUsed - valueStart,
            flags: UInt8(NGHTTP2_NV_FLAG_NO_COPY_NAME.rawValue))
    }

    /// `:status` from an integer, without creating a String.
    func appendStatus(_ status: Int) {
        precondition(status >= 100 && status <= 999, "HTTP status must have three digits")
        if bytesUsed + 3 > byteCapacity { growBytes(to: bytesUsed + 3) }
        let start = bytesUsed
        bytes[start] = UInt8(0x30 + status / 100)
        bytes[start + 1] = UInt8(0x30 + (status / 10) % 10)
        bytes[start + 2] = UInt8(0x30 + status % 10)
        bytesUsed += 3
        let name = pseudoNames + pseudoOffsets[HTTP2PseudoHeader.status.rawValue]
        add(name: name, nameLength: pseudoLengths[HTTP2PseudoHeader.status.rawValue], value: start, valueLength: 3,
            flags: UInt8(NGHTTP2_NV_FLAG_NO_COPY_NAME.rawValue))
    }

    /// A template's fields, pointing at its own bytes (valid while the template lives; nghttp2
    /// copies them when the request is submitted).
    func append(template: HTTP2HeaderTemplate) {
        if count + template.count > fieldCapacity { growFields(to: count + template.count) }
        (fields + count).update(from: template.fields, count: template.count)
        count += template.count
        templateBytes += template.byteCount
    }

    func append(_ header: HTTP2Header) {
        let nameStart = copy(header.name)
        let nameLength = bytesUsed - nameStart
        let valueStart = copy(header.value)
        if count == fieldCapacity { growFields(to: count + 1) }
        fields[count] = nghttp2_nv(
            name: bytes + nameStart, value: bytes + valueStart,
            namelen: nameLength, valuelen: bytesUsed - valueStart,
            flags: header.neverIndexed ? UInt8(NGHTTP2_NV_FLAG_NO_INDEX.rawValue) : NG.flagNone)
        count += 1
    }

    @inline(__always)
    private func add(name: UnsafeMutablePointer<UInt8>, nameLength: Int, value: Int, valueLength: Int, flags: UInt8) {
        if count == fieldCapacity { growFields(to: count + 1) }
        fields[count] = nghttp2_nv(name: name, value: bytes + value, namelen: nameLength, valuelen: valueLength, flags: flags)
        count += 1
    }

    /// A header, its name and value read in place (as `append(_:at:suffixAt:)` does).
    func append(headerAt header: UnsafePointer<HTTP2Header>) {
        let raw = UnsafeRawPointer(header)
        let nameStart = copy(at: (raw + Self.headerNameOffset).assumingMemoryBound(to: String.self))
        let nameLength = bytesUsed - nameStart
        let valueStart = copy(at: (raw + Self.headerValueOffset).assumingMemoryBound(to: String.self))
        addRegular(nameStart: nameStart, nameLength: nameLength, valueStart: valueStart, neverIndexed: header.pointee.neverIndexed)
    }

    /// A packed header, its name read in place and its value formatted into the block.
    func append(packedHeaderAt header: UnsafePointer<HTTP2PackedHeader>) {
        let raw = UnsafeRawPointer(header)
        let nameStart = copy(at: (raw + Self.packedNameOffset).assumingMemoryBound(to: String.self))
        let nameLength = bytesUsed - nameStart
        let valueStart = bytesUsed
        copy(header.pointee.value)
        addRegular(nameStart: nameStart, nameLength: nameLength, valueStart: valueStart, neverIndexed: header.pointee.neverIndexed)
    }

    /// A regular field whose name and value were just copied (the value ends at `bytesUsed`).
    @inline(__always)
    private func addRegular(nameStart: Int, nameLength: Int, valueStart: Int, neverIndexed: Bool) {
        if count == fieldCapacity { growFields(to: count + 1) }
        fields[count] = nghttp2_nv(
            name: bytes + nameStart, value: bytes + valueStart,
            namelen: nameLength, valuelen: bytesUsed - valueStart,
            flags: neverIndexed ? UInt8(NGHTTP2_NV_FLAG_NO_INDEX.rawValue) : NG.flagNone)
        count += 1
    }

    private static let packedNameOffset = MemoryLayout<HTTP2PackedHeader>.offset(of: \HTTP2PackedHeader.name)!

    /// Appends a packed text's bytes after what is there.
    @inline(__always)
    private func copy(_ text: PackedText, skipping skip: Int = 0) {
        let start = bytesUsed
        text.withUTF8 { bytes in
            let kept = UnsafeRawBufferPointer(rebasing: bytes[min(skip, bytes.count)...])
            copy(kept.assumingMemoryBound(to: UInt8.self), at: start)
        }
    }

    private static let headerNameOffset = MemoryLayout<HTTP2Header>.offset(of: \HTTP2Header.name)!
    private static let headerValueOffset = MemoryLayout<HTTP2Header>.offset(of: \HTTP2Header.value)!

    /// Appends the bytes of the String at `string`, read in place; returns where they start.
    /// `withUTF8` through the pointer is an in-place access, which neither copies nor retains the
    /// string (reading `pointee` would); it changes nothing for a native string, which is what a
    /// request holds (already contiguous UTF-8).
    @inline(__always)
    private func copy(at string: UnsafePointer<String>) -> Int {
        let start = bytesUsed
        UnsafeMutablePointer(mutating: string).pointee.withUTF8 { utf8 in copy(utf8, at: start) }
        return start
    }

    /// Copies the UTF-8 of `string` into the byte storage and returns where it starts.
    @inline(__always)
    /// Appends the string's bytes after what is there; returns where they start.
    private func copy(_ string: String) -> Int {
        let start = bytesUsed
        let copied: Void? = string.utf8.withContiguousStorageIfAvailable { utf8 in copy(utf8, at: start) }
        if copied == nil {
            var string = string
            string.withUTF8 { copy($0, at: start) }
        }
        return start
    }

    @inline(__always)
    private func copy(_ utf8: UnsafeBufferPointer<UInt8>, at start: Int) {
        if start + utf8.count > byteCapacity { growBytes(to: start + utf8.count) }
        if let base = utf8.baseAddress, utf8.count > 0 {
            (bytes + start).update(from: base, count: utf8.count)
        }
        bytesUsed = start + utf8.count
    }

    private func growFields(to needed: Int) {
        let capacity = max(needed, fieldCapacity * 2)
        let grown = UnsafeMutablePointer<nghttp2_nv>.allocate(capacity: capacity)
        grown.update(from: fields, count: count)
        fields.deallocate()
        fields = grown
        fieldCapacity = capacity
    }

    /// Moves the byte storage, pointing the fields built so far at the new copy.
    private func growBytes(to needed: Int) {
        let capacity = max(needed, byteCapacity * 2)
        let grown = UnsafeMutablePointer<UInt8>.allocate(capacity: capacity)
        grown.update(from: bytes, count: bytesUsed)
        let old = bytes
        let oldEnd = bytes + byteCapacity
        for i in 0..<count {
            if fields[i].name >= old && fields[i].name < oldEnd { fields[i].name = grown + (fields[i].name - old) }
            if fields[i].value >= old && fields[i].value <= oldEnd { fields[i].value = grown + (fields[i].value - old) }
        }
        bytes.deallocate()
        bytes = grown
        byteCapacity = capacity
    }
}

// MARK: - Event buffer

/// A growable FIFO of recorded events. `takeAll` moves each one out, so handing an event to the
/// caller costs no copy (no retain of its payload) and clearing costs no release.
struct HTTP2EventBuffer<Event> {
    private(set) var storage: UnsafeMutablePointer<Event>
    private var capacity: Int
    private(set) var count = 0

    init(capacity: Int) {
        self.capacity = max(capacity, 4)
        storage = .allocate(capacity: self.capacity)
    }

    var isEmpty: Bool { count == 0 }

    mutating func append(_ event: Event) {
        if count == capacity {
            let grown = UnsafeMutablePointer<Event>.allocate(capacity: capacity * 2)
            grown.moveInitialize(from: storage, count: count)
            storage.deallocate()
            storage = grown
            capacity *= 2
        }
        (storage + count).initialize(to: event)
        count += 1
    }

    /// Forgets the events without destroying them: the caller has taken ownership of
    /// `storage[0..<count]` and moves each one out.
    mutating func releaseAll() -> (UnsafeMutablePointer<Event>, Int) {
        let taken = (storage, count)
        count = 0
        return taken
    }

    mutating func deallocate() {
        storage.deinitialize(count: count)
        storage.deallocate()
        count = 0
        capacity = 0
    }
}

/// A session's events: recorded into one buffer while `take` hands out the other by move. An
/// event recorded while `take` runs (its handler called back into the session) is handed out by
/// the same call, after the ones before it; a nested `take` returns at once. A class, so that the
/// handler's calls into the session never overlap an access to the queue.
final class HTTP2EventQueue<Event> {
    private var events: HTTP2EventBuffer<Event>
    private var draining: HTTP2EventBuffer<Event>
    private var taking = false

    init(capacity: Int) {
        events = HTTP2EventBuffer(capacity: capacity)
        draining = HTTP2EventBuffer(capacity: capacity)
    }

    deinit {
        events.deallocate()
        draining.deallocate()
    }

    var isEmpty: Bool { events.isEmpty }

    @inline(__always)
    func append(_ event: Event) { events.append(event) }

    /// Hands the events to `deliver` in batches (where they lie, how many); `deliver` moves each
    /// one out.
    @inline(__always)
    func take(_ deliver: (UnsafeMutablePointer<Event>, Int) -> Void) {
        guard !taking else { return }
        taking = true
        defer { taking = false }
        while !events.isEmpty {
            swap(&events, &draining)
            // `draining` receives no appends until the next swap, which only this loop does.
            let (base, n) = draining.releaseAll()
            deliver(base, n)
        }
    }
}

extension HTTP2EventBuffer where Event == HTTP2ClientEvent {
    /// How many events ahead of the one being handled a client session's `takeEvents` first
    /// names a request's tag.
    static var lookAhead: Int { 8 }

    /// Hands the `count` events at `base` to `body` by move, in order, naming each request's tag
    /// to `upcoming` `lookAhead` events ahead (`near` false), then half as far (`near` true):
    /// the delivery of both client sessions' `takeEvents`.
    @inline(__always)
    static func deliver(_ base: UnsafeMutablePointer<Event>, count n: Int, upcoming: (_ tag: UInt64, _ near: Bool) -> Void,
                        _ body: (Event) -> Void) {
        let near = lookAhead / 2
        for i in 0..<min(n, lookAhead) { if let tag = base[i].tag { upcoming(tag, false) } }
        for i in 0..<min(n, near) { if let tag = base[i].tag { upcoming(tag, true) } }
        for i in 0..<n {
            if i + lookAhead < n, let tag = base[i + lookAhead].tag { upcoming(tag, false) }
            if i + near < n, let tag = base[i + near].tag { upcoming(tag, true) }
            body((base + i).move())
        }
    }
}

// MARK: - Output remainder

/// The part of the last mem_send chunk that did not fit the caller's buffer. nghttp2's pointer
/// is valid only until the next call (docs/DESIGN.md §6), so the remainder is copied here.
struct HTTP2OutputRemainder {
    private var storage: UnsafeMutablePointer<UInt8>?
    private var capacity = 0
    private var start = 0
    private var end = 0

    var count: Int { end - start }
    var isEmpty: Bool { end == start }

    mutating func store(_ source: UnsafeRawBufferPointer) {
        precondition(isEmpty)
        if source.count > capacity {
            storage?.deallocate()
            capacity = max(source.count, 16 * 1024 + 64)
            storage = .allocate(capacity: capacity)
        }
        if let base = source.baseAddress, source.count > 0 {
            UnsafeMutableRawPointer(storage!).copyMemory(from: base, byteCount: source.count)
        }
        start = 0
        end = source.count
    }

    /// Copies as much as fits into `buffer` at `offset`; returns the bytes copied.
    mutating func drain(into buffer: UnsafeMutableRawBufferPointer, at offset: Int) -> Int {
        let n = min(count, buffer.count - offset)
        guard n > 0, let storage else { return 0 }
        (buffer.baseAddress! + offset).copyMemory(from: storage + start, byteCount: n)
        start += n
        if start == end { start = 0; end = 0 }
        return n
    }

    mutating func discard() { start = 0; end = 0 }

    mutating func deallocate() {
        storage?.deallocate()
        storage = nil
        capacity = 0
        start = 0
        end = 0
    }
}

// MARK: - Small conversions

@inline(__always)
func makeString(_ pointer: UnsafePointer<UInt8>?, _ length: Int) -> String {
    guard let pointer, length > 0 else { return "" }
    return String(decoding: UnsafeBufferPointer(start: pointer, count: length), as: UTF8.self)
}

@inline(__always)
/// Whether the bytes equal `expected` (a kept header name, lower-case).
func bytesEqual(_ pointer: UnsafePointer<UInt8>, _ length: Int, _ expected: [UInt8]) -> Bool {
    guard length == expected.count else { return false }
    for i in 0..<length where pointer[i] != expected[i] { return false }
    return true
}

func bytesEqual(_ pointer: UnsafePointer<UInt8>?, _ length: Int, _ literal: StaticString) -> Bool {
    guard let pointer, length == literal.utf8CodeUnitCount else { return false }
    let expected = literal.utf8Start
    for i in 0..<length where pointer[i] != expected[i] { return false }
    return true
}
