// HTTP1RequestReader: one HTTP/1.1 request (RFC 9112 §2-§6) read from a byte array, for
// HTTP1ServerSession: a request line, header lines, a Content-Length body. Pure; every bound
// comes from HTTP1Limits and Limits.

import PushcastCore

enum HTTP1RequestReader {
    struct Head {
        var method = ""
        var target = ""
        var host = ""
        var headers: [HTTP2Header] = []
        var keepAlive = true
        var contentLength = 0
    }

    enum Outcome {
        /// More bytes are needed.
        case incomplete
        /// Refuse with this status (then close): the input cannot be read further.
        case refused(status: Int, why: String)
        /// A whole request; `end` is where the next one starts.
        case request(Head, body: [UInt8], end: Int)
    }

    /// Headers a request carries about its connection, not for the responder.
    private static let connectionHeaders: Set<String> = ["host", "content-length", "connection", "keep-alive", "te", "upgrade",
                                                         "proxy-connection", "transfer-encoding"]

    static func read(_ input: [UInt8], from start: Int, limits: Limits, http1: HTTP1Limits) -> Outcome {
        var lines: [ArraySlice<UInt8>] = []
        var index = start
        // Blank lines before a request line are ignored (RFC 9112 §2.2).
        while index + 1 < input.count && input[index] == 13 && input[index + 1] == 10 { index += 2 }
        var lineStart = index
        while true {
            guard let lf = input[lineStart...].firstIndex(of: 10) else {
                let bound = lines.isEmpty ? http1.statusLineBytesMax : http1.headerLineBytesMax
                return input.count - lineStart > bound ? .refused(status: lines.isEmpty ? 400 : 431, why: "line too long") : .incomplete
            }
            guard lf > lineStart, input[lf - 1] == 13 else { return .refused(status: 400, why: "a line not ended by CRLF") }
            let line = input[lineStart..<(lf - 1)]
            lineStart = lf + 1
            if line.isEmpty { break }
            let bound = lines.isEmpty ? http1.statusLineBytesMax : http1.headerLineBytesMax
            if line.count > bound { return .refused(status: lines.isEmpty ? 400 : 431, why: "line too long") }
            if lines.count > http1.headerCountMax { return .refused(status: 431, why: "too many header lines") }
            lines.append(line)
        }
        guard let first = lines.first else { return .refused(status: 400, why: "no request line") }
        var head = Head()
        if let refusal = readRequestLine(first, into: &head) { return refusal }
        if let refusal = readHeaders(lines.dropFirst(), into: &head, limits: limits) { return refusal }
        let end = lineStart + head.contentLength
        guard end <= input.count else { return .incomplete }
        return .request(head, body: Array(input[lineStart..<end]), end: end)
    }

    /// method SP request-target SP HTTP-version; nil when it reads.
    private static func readRequestLine(_ line: ArraySlice<UInt8>, into head: inout Head) -> Outcome? {
        let parts = line.split(separator: 32, omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, parts[0].allSatisfy(isTokenByte),
              parts[1].first == UInt8(ascii: "/"), parts[1].allSatisfy({ $0 > 32 && $0 < 127 }) else {
            return .refused(status: 400, why: "malformed request line")
        }
        let version = String(decoding: parts[2], as: UTF8.self)
        switch version {
        case "HTTP/1.1": head.keepAlive = true
        case "HTTP/1.0": head.keepAlive = false
        default:
            return version.hasPrefix("HTTP/") ? .refused(status: 505, why: "version \(version)") : .refused(status: 400, why: "no HTTP version")
        }
        head.method = String(decoding: parts[0], as: UTF8.self)
        head.target = String(decoding: parts[1], as: UTF8.self)
        return nil
    }

    private static func readHeaders(_ lines: ArraySlice<ArraySlice<UInt8>>, into head: inout Head, limits: Limits) -> Outcome? {
        var length: Int? = nil
        var sawHost = false
        let http10 = !head.keepAlive
        for line in lines {
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")), colon > line.startIndex,
                  line[line.startIndex..<colon].allSatisfy(isTokenByte) else {
                return .refused(status: 400, why: "malformed header line")
            }
            let name = String(decoding: line[line.startIndex..<colon], as: UTF8.self).lowercased()
            let rawValue = line[(colon + 1)...]
            guard rawValue.allSatisfy({ $0 == 9 || ($0 >= 32 && $0 != 127) }) else { return .refused(status: 400, why: "control byte in \(name)") }
            let value = String(decoding: rawValue, as: UTF8.self).trimmingSpaces()
            switch name {
            case "transfer-encoding": return .refused(status: 501, why: "Transfer-Encoding in a request is not supported")
            case "content-length":
                guard !value.isEmpty, value.utf8.count <= 12, value.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }), let n = Int(value),
                      length == nil || length == n else { return .refused(status: 400, why: "bad Content-Length") }
                guard n <= limits.requestBodyBytesMax else { return .refused(status: 413, why: "body over \(limits.requestBodyBytesMax) bytes") }
                length = n
            case "host":
                guard !sawHost else { return .refused(status: 400, why: "two Host headers") }
                sawHost = true
                head.host = value
            case "connection":
                let tokens = value.lowercased().split(separator: ",").map { String($0).trimmingSpaces() }
                if tokens.contains("close") { head.keepAlive = false } else if http10 && tokens.contains("keep-alive") { head.keepAlive = true }
            default:
                break
            }
            if !connectionHeaders.contains(name) && head.headers.count < HTTP2Response.headersKeptMax {
                head.headers.append(HTTP2Header(name, value))
            }
        }
        if !sawHost && !http10 { return .refused(status: 400, why: "no Host header") }
        head.contentLength = length ?? 0
        return nil
    }

    /// RFC 9110 §5.6.2 tchar.
    static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): return true
        default: return "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }

    /// Whether a response header can be written as one line: a token name, a value without CR,
    /// LF, NUL or another control byte.
    static func isSafe(_ header: HTTP2Header) -> Bool {
        !header.name.isEmpty && header.name.utf8.allSatisfy(isTokenByte)
            && header.value.utf8.allSatisfy { $0 == 9 || ($0 >= 32 && $0 != 127) }
    }
}

extension String {
    /// Without leading and trailing spaces and tabs (OWS).
    fileprivate func trimmingSpaces() -> String {
        let bytes = Array(utf8)
        guard let first = bytes.firstIndex(where: { $0 != 32 && $0 != 9 }),
              let last = bytes.lastIndex(where: { $0 != 32 && $0 != 9 }) else { return "" }
        return String(decoding: bytes[first...last], as: UTF8.self)
    }
}
