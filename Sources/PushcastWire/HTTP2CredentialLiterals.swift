// HTTP2CredentialLiterals: the request's `authorization` header as a raw never-indexed literal.
//
// nghttp2 never indexes `authorization` (RFC 7541 §7.1.3: a never-indexed literal) and Huffman-
// codes its value whenever that is shorter, so a 200-byte JWT or OAuth2 bearer was Huffman-encoded
// by the client and Huffman-decoded by the server on every request: about a quarter of
// `pushcast mock`'s CPU per request. nghttp2 has no switch for Huffman coding, and no way to hand
// it a pre-encoded field, so the session submits a 2-byte placeholder value (`~` and a slot digit;
// '~' has a 13-bit Huffman code, so nghttp2 writes the placeholder raw) and rewrites that one field
// in nghttp2's HEADERS frame on its way out: same representation (literal never indexed, name
// index 23), the real value, raw (RFC 7541 §5.2, H = 0). A never-indexed literal touches neither
// side's dynamic table, so nghttp2's encoder state and the peer's stay in step.
//
// The same rewrite sends a request's own long values raw: its `:path` (the device token) and its
// never-indexed headers (`apns-id`). nghttp2 never indexes either, so it Huffman-coded them on
// every request and the server decoded them: about 6 % of `pushcast mock`'s CPU at 125,000
// requests a second. The session keeps those values with the stream (`literals`, in placeholder
// order) and submits `~a`, `~b`, ... in their place; the rewrite keeps each field's
// representation and name bytes as nghttp2 wrote them (literal without indexing, or never
// indexed: neither touches a dynamic table) and puts the real value, raw, after them.
//
// The rewrite parses the block's field representations (RFC 7541 §6) to find the placeholder;
// it never decodes a string. The submit side only uses placeholders for blocks far below the
// smallest frame size (RFC 9113 §4.2), so each such block goes out in one HEADERS frame. A frame
// that does not parse, or is not a whole HEADERS frame, is left as it is when it could only hold
// credential placeholders (the real value then went through nghttp2); a frame whose stream has
// literal values waiting is never sent without them (`Rewrite.failed`: the session ends the
// connection first).

import CNGHTTP2

struct HTTP2CredentialLiterals {
    /// Credentials known at once (a renewed bearer takes a new slot while requests that carry
    /// the old one may still be queued).
    static let slotsMax = 8
    /// Per-request values a block may carry as raw literals (placeholders `~a` to `~d`).
    static let literalsMax = 4
    /// Shorter values are not worth a placeholder.
    static let literalBytesMin = 16
    /// Blocks larger than this (raw field bytes) carry the real value (nghttp2's own encoding).
    static let blockBytesMax = 8 * 1024
    private static let placeholderMark: UInt8 = 0x7E  // '~'
    /// RFC 7541 Appendix A: `authorization` is static-table entry 23.
    private static let authorizationIndex = 23

    private var values: [[UInt8]] = []
    /// Submitted HEADERS frames not yet rewritten, per slot: a slot in use is never reused. A frame
    /// that is never serialized (its stream failed first) keeps its slot busy for the rest of the
    /// connection; with every slot busy, the real value goes through nghttp2 (correct, only slower).
    private var queued: [Int] = []
    private var nextVictim = 0
    /// The last template's slot: a campaign sends one template for an hour.
    private var lastTemplate: HTTP2HeaderTemplate?
    private var lastSlot = -1
    /// "~0"..."~7", the placeholder values nghttp2 copies at submit.
    let placeholders: UnsafeMutablePointer<UInt8>
    /// The rewritten frame: written with plain copies (Array appends cost a uniqueness and a
    /// capacity check each, a tenth of a worker's time at 125,000 requests a second).
    private var output: UnsafeMutablePointer<UInt8>
    private var outputCapacity = 4096
    private var outputCount = 0
    /// The placeholders found in the frame being rewritten (kept, so a rewrite allocates nothing):
    /// `slot` is a credential slot, or `-1 - k` for the request's k-th literal.
    private var found: [(start: Int, valueStart: Int, end: Int, slot: Int)] = []
    /// Where each of the request's literals starts in its storage (kept, like `found`).
    private var literalStarts: [Int] = []

    /// What `rewrite` did with a frame.
    enum Rewrite {
        /// Nothing to replace: the frame goes out as nghttp2 wrote it.
        case unchanged
        /// `rewritten` holds the frame to send.
        case rewritten
        /// The frame's stream has literals, but the frame is not one whole HEADERS frame with
        /// each placeholder once: it must not go out (the session ends the connection).
        case failed
    }

    init() {
        output = .allocate(capacity: outputCapacity)
        placeholders = .allocate(capacity: 2 * (Self.slotsMax + Self.literalsMax))
        for k in 0..<Self.slotsMax {
            placeholders[2 * k] = Self.placeholderMark
            placeholders[2 * k + 1] = 0x30 + UInt8(k)
        }
        for k in 0..<Self.literalsMax {
            placeholders[2 * (Self.slotsMax + k)] = Self.placeholderMark
            placeholders[2 * (Self.slotsMax + k) + 1] = 0x61 + UInt8(k)  // 'a' + k
        }
    }

    /// The placeholder of a request's k-th literal value.
    func literalPlaceholder(_ k: Int) -> UnsafeMutablePointer<UInt8> { placeholders + 2 * (Self.slotsMax + k) }

    /// Whether a value could be taken for a placeholder (`~` and one byte): a block with such a
    /// value of its own sends its literals through nghttp2.
    static func looksLikePlaceholder(_ value: UnsafePointer<UInt8>, count: Int) -> Bool {
        count == 2 && value[0] == placeholderMark
    }

    func deallocate() {
        placeholders.deallocate()
        output.deallocate()
    }

    var isEmpty: Bool { values.isEmpty }

    /// The slot for `template`'s credential (taking one if needed), or nil when every slot has
    /// frames queued (the caller then sends the real value).
    mutating func slot(for template: HTTP2HeaderTemplate, value: UnsafeBufferPointer<UInt8>) -> Int? {
        if lastTemplate === template, lastSlot >= 0 { return take(lastSlot) }
        if let k = values.firstIndex(where: { $0.elementsEqual(value) }) { return remember(template, take(k)) }
        if values.count < Self.slotsMax {
            values.append(Array(value))
            queued.append(0)
            return remember(template, take(values.count - 1))
        }
        for _ in 0..<Self.slotsMax {
            let k = nextVictim
            nextVictim = (nextVictim + 1) % Self.slotsMax
            if queued[k] == 0 {
                values[k] = Array(value)
                return remember(template, take(k))
            }
        }
        return nil
    }

    private mutating func take(_ k: Int) -> Int {
        queued[k] += 1
        return k
    }

    private mutating func remember(_ template: HTTP2HeaderTemplate, _ k: Int) -> Int {
        lastTemplate = template
        lastSlot = k
        return k
    }

    /// Rewrites the frame nghttp2 produced into `rewritten`, each placeholder replaced by its
    /// value. `literals`: the frame's stream's own values (each a 2-byte big-endian length and
    /// the bytes, in placeholder order), nil when it has none.
    mutating func rewrite(_ frame: UnsafePointer<UInt8>, count: Int, literals: UnsafeRawBufferPointer?) -> Rewrite {
        let expected = literals.map { Self.indexLiterals($0, into: &literalStarts) } ?? 0
        let failure: Rewrite = expected > 0 ? .failed : .unchanged
        guard let (blockStart, blockEnd) = Self.headersBlock(frame, count: count) else { return failure }
        found.removeAll(keepingCapacity: true)
        guard Self.scan(frame, from: blockStart, to: blockEnd, slots: values.count, literals: expected, into: &found) else { return failure }
        guard found.reduce(0, { $0 + ($1.slot < 0 ? 1 : 0) }) == expected else { return failure }
        guard !found.isEmpty else { return .unchanged }
        var bound = count
        for field in found {
            bound += 10 + (field.slot >= 0 ? values[field.slot].count : literals!.count)
        }
        if bound > outputCapacity {
            output.deallocate()
            outputCapacity = max(bound, 2 * outputCapacity)
            output = .allocate(capacity: outputCapacity)
        }
        outputCount = 0
        put(frame, 9)
        var at = 9
        for field in found {
            if field.slot >= 0 {
                put(frame + at, field.start - at)
                putField(field.slot)
                queued[field.slot] = max(0, queued[field.slot] - 1)
            } else {
                // The representation and the name as nghttp2 wrote them, then the value raw.
                put(frame + at, field.valueStart - at)
                let start = literalStarts[-1 - field.slot]
                let value = literals!.baseAddress!.assumingMemoryBound(to: UInt8.self) + start
                let length = Int(value[0]) << 8 | Int(value[1])
                putInteger(length, prefixBits: 7, firstByte: 0x00)
                put(value + 2, length)
            }
            at = field.end
        }
        put(frame + at, count - at)
        let newLength = outputCount - 9
        output[0] = UInt8(newLength >> 16)
        output[1] = UInt8((newLength >> 8) & 0xFF)
        output[2] = UInt8(newLength & 0xFF)
        return .rewritten
    }

    /// The header block of a whole HEADERS frame with END_HEADERS, without padding and
    /// priority fields; nil for any other frame.
    private static func headersBlock(_ frame: UnsafePointer<UInt8>, count: Int) -> (Int, Int)? {
        guard count >= 9, frame[3] == 0x1, frame[4] & 0x4 != 0 else { return nil }  // HEADERS, END_HEADERS
        let length = Int(frame[0]) << 16 | Int(frame[1]) << 8 | Int(frame[2])
        guard length == count - 9 else { return nil }
        var blockStart = 9
        var padding = 0
        if frame[4] & 0x8 != 0 {  // PADDED
            guard count > 9 else { return nil }
            padding = Int(frame[9])
            blockStart += 1
        }
        if frame[4] & 0x20 != 0 { blockStart += 5 }  // PRIORITY
        let blockEnd = count - padding
        guard blockStart <= blockEnd else { return nil }
        return (blockStart, blockEnd)
    }

    /// Notes where each literal starts; returns how many there are (0 if the storage is damaged).
    private static func indexLiterals(_ literals: UnsafeRawBufferPointer, into starts: inout [Int]) -> Int {
        starts.removeAll(keepingCapacity: true)
        var at = 0
        while at + 2 <= literals.count {
            starts.append(at)
            at += 2 + (Int(literals[at]) << 8 | Int(literals[at + 1]))
        }
        return at == literals.count && starts.count <= literalsMax ? starts.count : 0
    }

    /// The frame the last successful `rewrite` made.
    var rewritten: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: output, count: outputCount) }

    @inline(__always)
    private mutating func put(_ bytes: UnsafePointer<UInt8>, _ n: Int) {
        (output + outputCount).update(from: bytes, count: n)
        outputCount += n
    }

    /// An HPACK integer (RFC 7541 §5.1) into the output.
    @inline(__always)
    private mutating func putInteger(_ value: Int, prefixBits: Int, firstByte: UInt8) {
        outputCount += Self.writeInteger(value, prefixBits: prefixBits, firstByte: firstByte, to: output + outputCount)
    }

    /// Literal never indexed, name index 23, raw value (RFC 7541 §6.2.3, §5.1, §5.2).
    private mutating func putField(_ slot: Int) {
        putInteger(Self.authorizationIndex, prefixBits: 4, firstByte: 0x10)
        putInteger(values[slot].count, prefixBits: 7, firstByte: 0x00)
        values[slot].withUnsafeBufferPointer { if let base = $0.baseAddress { put(base, $0.count) } }
    }

    /// Walks the field representations of `block[start..<end]`, noting each placeholder; false
    /// when the block does not parse.
    private static func scan(_ block: UnsafePointer<UInt8>, from start: Int, to end: Int, slots: Int, literals: Int,
                             into found: inout [(start: Int, valueStart: Int, end: Int, slot: Int)]) -> Bool {
        var at = start
        var literalsSeen = 0
        while at < end {
            let fieldStart = at
            let first = block[at]
            if first & 0x80 != 0 {  // indexed field
                guard integer(block, &at, end, prefixBits: 7) != nil else { return false }
                continue
            }
            if first & 0xE0 == 0x20 {  // dynamic table size update
                guard integer(block, &at, end, prefixBits: 5) != nil else { return false }
                continue
            }
            let prefixBits = first & 0xC0 == 0x40 ? 6 : 4
            guard let nameIndex = integer(block, &at, end, prefixBits: prefixBits) else { return false }
            if nameIndex == 0 { guard skipString(block, &at, end) != nil else { return false } }
            let valueStart = at
            guard let raw = skipString(block, &at, end) else { return false }
            guard raw, at - valueStart == 3, block[valueStart] == 0x02, block[valueStart + 1] == placeholderMark else { continue }
            if first & 0xF0 == 0x10, nameIndex == authorizationIndex {
                let k = Int(block[valueStart + 2]) - 0x30
                if k >= 0 && k < slots { found.append((fieldStart, valueStart, at, k)) }
            } else if first & 0xE0 == 0x00 {  // literal without indexing, or never indexed
                let k = Int(block[valueStart + 2]) - 0x61
                if k >= 0 && k < literals {
                    // Each once, in order: anything else is not a block this session made.
                    guard literalsSeen == k else { return false }
                    literalsSeen += 1
                    found.append((fieldStart, valueStart, at, -1 - k))
                }
            }
        }
        return true
    }

    /// Skips a string literal; returns whether it was raw (H = 0), nil if it runs past `end`.
    private static func skipString(_ block: UnsafePointer<UInt8>, _ at: inout Int, _ end: Int) -> Bool? {
        guard at < end else { return nil }
        let raw = block[at] & 0x80 == 0
        guard let length = integer(block, &at, end, prefixBits: 7), length <= end - at else { return nil }
        at += length
        return raw
    }

    /// An HPACK integer with an N-bit prefix (RFC 7541 §5.1); nil if malformed or too large.
    static func integer(_ block: UnsafePointer<UInt8>, _ at: inout Int, _ end: Int, prefixBits: Int) -> Int? {
        guard at < end else { return nil }
        let mask = (1 << prefixBits) - 1
        var value = Int(block[at]) & mask
        at += 1
        guard value == mask else { return value }
        var shift = 0
        while at < end {
            let byte = Int(block[at])
            at += 1
            value += (byte & 0x7F) << shift
            if byte & 0x80 == 0 { return value }
            shift += 7
            if shift > 28 { return nil }
        }
        return nil
    }

    static func appendInteger(_ value: Int, prefixBits: Int, firstByte: UInt8, to out: inout [UInt8]) {
        var bytes: (UInt64, UInt64) = (0, 0)  // an Int takes at most 1 + 10 bytes
        withUnsafeMutableBytes(of: &bytes) { raw in
            let base = raw.baseAddress!.assumingMemoryBound(to: UInt8.self)
            out.append(contentsOf: UnsafeBufferPointer(start: base, count: writeInteger(value, prefixBits: prefixBits, firstByte: firstByte, to: base)))
        }
    }

    /// Writes an HPACK integer with an N-bit prefix (RFC 7541 §5.1) at `out`; returns its length
    /// (at most 11 bytes).
    @inline(__always)
    static func writeInteger(_ value: Int, prefixBits: Int, firstByte: UInt8, to out: UnsafeMutablePointer<UInt8>) -> Int {
        let mask = (1 << prefixBits) - 1
        if value < mask {
            out[0] = firstByte | UInt8(value)
            return 1
        }
        out[0] = firstByte | UInt8(mask)
        var n = 1
        var rest = value - mask
        while rest >= 0x80 {
            out[n] = UInt8(rest & 0x7F) | 0x80
            n += 1
            rest >>= 7
        }
        out[n] = UInt8(rest)
        return n + 1
    }
}
