// JSON text out: string literals (`appendString`, `quoted`) and the escaping the payload template
// splices row values with (`appendEscaped`), one escaper for both.

/// The lower-case hex digit for a nibble (0...15).
@inline(__always)
public func hexDigit(_ nibble: UInt8) -> UInt8 {
    nibble < 10 ? 0x30 &+ nibble : 0x61 &+ (nibble &- 10)
}

public enum JSONWriter {
    /// Appends `text` as a JSON string literal (quotes included), escaped as `appendEscaped` does.
    public static func appendString(_ text: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var text = text
        text.withUTF8 { appendEscaped($0, to: &out) }
        out.append(UInt8(ascii: "\""))
    }

    /// `text` as a JSON string literal.
    public static func quoted(_ text: String) -> String {
        var out: [UInt8] = []
        appendString(text, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Appends `bytes` as the inside of a JSON string: `"` and `\` are escaped, control characters
    /// use \n \r \t \b \f or \u00XX, U+2028 and U+2029 become \u2028 and \u2029 (they end lines in
    /// JavaScript), ill-formed UTF-8 becomes U+FFFD, and everything else (RTL text, CJK, emoji)
    /// passes through unchanged. Runs of safe bytes are copied in one call.
    public static func appendEscaped(_ bytes: UnsafeBufferPointer<UInt8>, to buffer: inout [UInt8]) {
        var runStart = 0
        var index = 0
        let count = bytes.count
        @inline(__always) func flush(_ end: Int) {
            if end > runStart { buffer.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<end])) }
        }
        while index < count {
            let byte = bytes[index]
            if byte >= 0x20 && byte < 0x80 && byte != UInt8(ascii: "\"") && byte != UInt8(ascii: "\\") {
                index += 1
                continue
            }
            if byte >= 0x80 {
                let length = utf8SequenceLength(bytes, index)
                if length == 3 && byte == 0xE2 && bytes[index + 1] == 0x80 && (bytes[index + 2] == 0xA8 || bytes[index + 2] == 0xA9) {
                    flush(index)
                    appendASCII(bytes[index + 2] == 0xA8 ? "\\u2028" : "\\u2029", to: &buffer)
                    index += 3
                    runStart = index
                } else if length == 0 {
                    flush(index)
                    buffer.append(contentsOf: [0xEF, 0xBF, 0xBD] as [UInt8])
                    index += 1
                    runStart = index
                } else {
                    index += length
                }
                continue
            }
            flush(index)
            switch byte {
            case UInt8(ascii: "\""): buffer.append(UInt8(ascii: "\\")); buffer.append(UInt8(ascii: "\""))
            case UInt8(ascii: "\\"): buffer.append(UInt8(ascii: "\\")); buffer.append(UInt8(ascii: "\\"))
            case 0x0A: buffer.append(UInt8(ascii: "\\")); buffer.append(UInt8(ascii: "n"))
            case 0x0D: buffer.append(UInt8(ascii: "\\")); buffer.append(UInt8(ascii: "r"))
            case 0x09: buffer.append(UInt8(ascii: "\\")); buffer.append(UInt8(ascii: "t"))
            case 0x08: buffer.append(UInt8(ascii: "\\")); buffer.append(UInt8(ascii: "b"))
            case 0x0C: buffer.append(UInt8(ascii: "\\")); buffer.append(UInt8(ascii: "f"))
            default:
                appendASCII("\\u00", to: &buffer)
                buffer.append(hexDigit(byte >> 4))
                buffer.append(hexDigit(byte & 0x0F))
            }
            index += 1
            runStart = index
        }
        flush(count)
    }

    @inline(__always)
    private static func appendASCII(_ text: StaticString, to buffer: inout [UInt8]) {
        buffer.append(contentsOf: UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }
}

/// Text from outside (a server's error message, a file's field) made fit for our own messages.
public enum UntrustedText {
    /// Text from an untrusted source made safe to put in a message: printable ASCII only (other
    /// bytes become '?'), runs that look like a JWT or a long token redacted, and at most `limit`
    /// characters.
    public static func sanitized(_ text: String, limit: Int = 200) -> String {
        var out: [UInt8] = []
        var run: [UInt8] = []
        func flushRun() {
            // 40 or more base64url characters (dots included) in a row are a JWT (an assertion a
            // server echoed back), an access token or a key, never words.
            out += run.count >= 40 ? Array("[redacted]".utf8) : run
            run.removeAll(keepingCapacity: true)
        }
        for byte in text.utf8.prefix(limit * 4) {
            if isTokenByte(byte) { run.append(byte); continue }
            flushRun()
            out.append(byte >= 0x20 && byte < 0x7F ? byte : UInt8(ascii: "?"))
        }
        flushRun()
        if out.count > limit { return String(decoding: out.prefix(limit), as: UTF8.self) + "..." }
        return String(decoding: out, as: UTF8.self)
    }

    private static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
             UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."):
            return true
        default:
            return false
        }
    }
}
