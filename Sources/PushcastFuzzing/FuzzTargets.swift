// Fuzz bodies: pure functions from bytes to nothing, shared by the libFuzzer binaries
// (Tests/Fuzz, built only by `make fuzz`) and the corpus replay test (Tests/PushcastFuzzingTests,
// part of `make test`). A body returns normally for any input; a broken invariant traps
// (`precondition`), which libFuzzer records as a crash and the replay test reports as one.
//
// Every module a body reaches is imported here and only here, so moving a type between modules
// changes one import line.

import PushcastAPNs
import PushcastCore
import PushcastFCM
import PushcastInput
import PushcastJSON
import PushcastProviderKit
import PushcastWebPush
import PushcastWire

/// One fuzz target. `rawValue` names its binary's corpus and regression folders
/// (Tests/Fuzz/Corpus/<rawValue>/, Tests/Fuzz/Regressions/<rawValue>/).
public enum FuzzTarget: String, CaseIterable, Sendable {
    case csv
    case ndjson
    case jsonScanner = "json-scanner"
    case template
    case apnsResponse = "apns-response"
    case fcmResponse = "fcm-response"
    case oauthResponse = "oauth-response"
    case http2Client = "http2-client"
    case http1Client = "http1-client"
    case decompress
    case webpushSubscription = "webpush-subscription"

    /// Runs one input through the target's body.
    public func run(_ bytes: UnsafeRawBufferPointer) {
        let input = Array(bytes)
        switch self {
        case .csv: FuzzBodies.tokenFile(input, format: .csv)
        case .ndjson: FuzzBodies.tokenFile(input, format: .ndjson)
        case .jsonScanner: FuzzBodies.jsonScanner(input)
        case .template: FuzzBodies.template(input)
        case .apnsResponse: FuzzBodies.apnsResponse(input)
        case .fcmResponse: FuzzBodies.fcmResponse(input)
        case .oauthResponse: FuzzBodies.oauthResponse(input)
        case .http2Client: FuzzHTTP2.run(input)
        case .http1Client: FuzzHTTP1.run(input)
        case .decompress: FuzzBodies.decompress(input)
        case .webpushSubscription: FuzzWebPush.subscription(input)
        }
    }

    public func run(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { run($0) }
    }
}

/// The first byte of an input, which several bodies read as settings, and the rest.
struct FuzzHeader {
    let flags: UInt8
    let rest: [UInt8]

    init(_ input: [UInt8]) {
        flags = input.first ?? 0
        rest = Array(input.dropFirst())
    }
}

enum FuzzBodies {
    // MARK: Token files

    /// Chunk sizes for the source (as in Tests/PushcastInputTests): framing must not depend on
    /// where reads end.
    static let chunkSizes = [1, 2, 3, 7, 64, 65536]

    /// Flags: bits 0-2 pick the chunk size, bit 3 small limits (a 40-byte line cap, the smallest
    /// buffer, 3 columns), so the too-long and too-many-columns paths are reachable.
    static func tokenFile(_ input: [UInt8], format: InputFormat) {
        let header = FuzzHeader(input)
        var options = TokenFileReaderOptions()
        if header.flags & 0x08 != 0 {
            options.lineBytesMax = 40
            options.bufferBytes = 64
            options.columnsMax = 3
        }
        let chunked = readTokenFile(header.rest, format: format, chunkSize: chunkSizes[Int(header.flags & 0x07) % chunkSizes.count],
                                    options: options)
        let whole = readTokenFile(header.rest, format: format, chunkSize: 65536, options: options)
        precondition(chunked == whole, "\(format) reading depends on read boundaries:\n\(chunked)\nversus\n\(whole)")
    }

    /// Everything a reader reports, as text, checking the documented invariants on the way.
    static func readTokenFile(_ bytes: [UInt8], format: InputFormat, chunkSize: Int, options: TokenFileReaderOptions) -> [String] {
        readTokenFile(MemoryByteSource(bytes, chunkSize: chunkSize), byteCount: bytes.count, format: format, options: options) { error in
            preconditionFailure("MemoryByteSource never throws, but next() threw \(error)")
        }
    }

    /// As above, from any source of at most `byteCount` bytes; a source error ends the report
    /// after `failed` has checked it.
    static func readTokenFile(_ source: ByteSource, byteCount: Int, format: InputFormat, options: TokenFileReaderOptions,
                              failed: (Error) -> Void) -> [String] {
        var report: [String] = []
        let reader: TokenFileReader
        do {
            reader = try TokenFileReader(source: source, format: format, fileName: "fuzz", options: options)
        } catch {
            return ["init: \(error)"]
        }
        var expectedRow = 1
        var lastLine = 0
        // Every record but the first ends at a line end, so there are at most count + 1 of them.
        for _ in 0...(byteCount + 1) {
            let record: InputRecord?
            do {
                record = try reader.next()
            } catch {
                failed(error)
                return report + ["error: \(error)"]
            }
            guard let record else {
                report.append("columns \(reader.columns)")
                return report
            }
            switch record {
            case .row(let row):
                precondition(row.row == expectedRow, "row \(row.row) where \(expectedRow) was due")
                precondition(row.line > lastLine, "line \(row.line) after line \(lastLine)")
                precondition(row.fieldCount <= reader.columns.count, "row has \(row.fieldCount) fields for \(reader.columns.count) columns")
                lastLine = row.line
                var fields: [String] = []
                for column in 0..<row.fieldCount {
                    guard let field = row.field(column) else { fields.append("-"); continue }
                    let text = String(validating: field.bindMemory(to: UInt8.self), as: UTF8.self)
                    precondition(text != nil, "row \(row.row) column \(column) is not valid UTF-8")
                    precondition(text == row.string(column), "field and string disagree")
                    fields.append(text!.debugDescription)
                }
                precondition(row.field(row.fieldCount) == nil && row.field(-1) == nil, "a field outside the row")
                report.append("row \(row.row) line \(row.line): \(fields.joined(separator: ","))")
            case .malformed(let row, let problem):
                precondition(row == expectedRow, "malformed row \(row) where \(expectedRow) was due")
                precondition(problem.line > lastLine, "line \(problem.line) after line \(lastLine)")
                lastLine = problem.line
                report.append("malformed \(row): \(problem)")
            }
            expectedRow += 1
        }
        preconditionFailure("the \(format) reader returned more records than an input of \(byteCount) bytes can hold")
    }

    // MARK: Compressed token files

    /// Decompressed bytes read per input, at most: a 4 KiB bomb can hold gigabytes, and the
    /// reading past this point is the same loop again.
    static let decompressedBytesMax = 256 * 1024

    /// Flags: bits 0-2 pick the chunk size of the compressed source, bit 3 small reader limits
    /// (as `csv`). The rest goes through `DecompressingByteSource`, in pieces and whole: the same
    /// compression is sniffed; plain input comes back unchanged; an error names an offset inside
    /// the input; input that decodes cleanly decodes to the same bytes however it is split, and
    /// the CSV reader over the decompressing source reports what it reports for those bytes. On
    /// any input the CSV reader over it ends, with rows or with a `DecompressionError`.
    static func decompress(_ input: [UInt8]) {
        let header = FuzzHeader(input)
        let chunkSize = chunkSizes[Int(header.flags & 0x07) % chunkSizes.count]
        var options = TokenFileReaderOptions()
        if header.flags & 0x08 != 0 {
            options.lineBytesMax = 40
            options.bufferBytes = 64
            options.columnsMax = 3
        }
        let whole = decompressed(header.rest, chunkSize: 65536)
        let chunked = decompressed(header.rest, chunkSize: chunkSize)
        precondition(whole.compression == chunked.compression && whole.compression == InputCompression.sniff(header.rest),
                     "sniffed \(String(describing: whole.compression)) whole, \(String(describing: chunked.compression)) in pieces")
        if whole.compression == InputCompression.none {
            precondition(whole.error == nil && whole.bytes == Array(header.rest.prefix(whole.bytes.count))
                         && whole.bytes.count >= min(header.rest.count, decompressedBytesMax), "plain input changed")
        }
        let source = CappedByteSource(DecompressingByteSource(MemoryByteSource(header.rest, chunkSize: chunkSize)),
                                      bytesMax: decompressedBytesMax)
        let streamed = readTokenFile(source, byteCount: decompressedBytesMax, format: .csv, options: options) { error in
            precondition(error is DecompressionError, "the CSV reader threw \(error)")
        }
        guard whole.error == nil && whole.bytes.count < decompressedBytesMax else { return }
        precondition(chunked.error == nil && chunked.bytes == whole.bytes, "decoding depends on read boundaries: \(chunked.error ?? "")")
        let plain = readTokenFile(whole.bytes, format: .csv, chunkSize: 65536, options: options)
        precondition(streamed == plain, "the CSV reader over the decompressor:\n\(streamed)\nversus the bytes:\n\(plain)")
    }

    /// Up to `decompressedBytesMax` decompressed bytes (read 4 KiB at a time), the compression
    /// found, and the error's text if reading stopped at one.
    static func decompressed(_ bytes: [UInt8], chunkSize: Int) -> (bytes: [UInt8], compression: InputCompression?, error: String?) {
        let source = DecompressingByteSource(MemoryByteSource(bytes, chunkSize: chunkSize))
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        do {
            while out.count < decompressedBytesMax {
                let count = try buffer.withUnsafeMutableBytes { try source.read(into: $0) }
                precondition(count >= 0 && count <= buffer.count, "read returned \(count) for a buffer of \(buffer.count)")
                if count == 0 { break }
                out += buffer[0..<count]
            }
        } catch let error as DecompressionError {
            precondition(error.offset >= 0 && error.offset <= bytes.count, "error offset \(error.offset) outside \(bytes.count) bytes")
            precondition(error.compression == source.compression && error.compression != InputCompression.none, "\(error)")
            return (out, source.compression, error.description)
        } catch {
            preconditionFailure("MemoryByteSource never throws, but the decompressor threw \(error)")
        }
        return (out, source.compression, nil)
    }

    // MARK: JSON scanner

    static func jsonScanner(_ input: [UInt8]) {
        input.withUnsafeBytes { bytes in
            let anyValue = JSONValidation.firstError(bytes, requireObject: false)
            let object = JSONValidation.firstError(bytes, requireObject: true)
            for error in [anyValue, object].compactMap({ $0 }) {
                precondition(error.offset >= 0 && error.offset <= bytes.count, "error offset \(error.offset) outside \(bytes.count) bytes")
                precondition(!error.message.isEmpty, "an error without a message")
            }
            precondition(JSONValidation.isObject(bytes) == (object == nil), "isObject disagrees with firstError")
            if object == nil { precondition(anyValue == nil, "a valid object that is not a valid value") }
        }
        // A template without placeholders compiles exactly when it is a JSON object.
        guard let text = String(validating: input, as: UTF8.self), !text.contains("{{") else { return }
        let compiles = (try? PayloadTemplate.compile(text: text, columns: [])) != nil
        let isObject = input.withUnsafeBytes { JSONValidation.isObject($0) }
        precondition(compiles == isObject, "template compile (\(compiles)) and JSON validation (\(isObject)) disagree")
    }

    // MARK: Templates

    static let templateColumns = ["token", "title", "body", "name"]

    /// Input: flags, then the template text, then NUL-separated column values. Flags: bit 0 adds
    /// every name the template's placeholders use to the columns, bit 1 leaves every third value
    /// out, bit 2 renders FCM bodies with validate_only.
    static func template(_ input: [UInt8]) {
        let header = FuzzHeader(input)
        let parts = header.rest.split(separator: 0, omittingEmptySubsequences: false).map { Array($0) }
        let text = String(decoding: parts[0], as: UTF8.self)
        var columns = templateColumns
        if header.flags & 0x01 != 0 {
            for name in PayloadTemplate.placeholderNames(in: text) where !columns.contains(name) { columns.append(name) }
        }
        let values: [[UInt8]?] = columns.indices.map { column in
            guard parts.count > 1, !(header.flags & 0x02 != 0 && column % 3 == 2) else { return nil }
            return parts[1 + column % (parts.count - 1)]
        }
        let token = parts.count > 1 ? parts[parts.count - 1] : []
        renderAPNs(text, columns: columns, values: values)
        renderFCM(text, columns: columns, values: values, token: token, validateOnly: header.flags & 0x04 != 0)
    }

    static func renderAPNs(_ text: String, columns: [String], values: [[UInt8]?]) {
        guard let template = try? PayloadTemplate.compile(text: text, columns: columns) else { return }
        precondition(template.placeholderColumns.allSatisfy { columns.indices.contains($0) }, "a placeholder outside the columns")
        var buffer: [UInt8] = []
        let count = withFieldValues(values) { value in template.render(into: &buffer, value: value) }
        precondition(count == buffer.count, "render returned \(count) for \(buffer.count) bytes")
        precondition(buffer.withUnsafeBytes { JSONValidation.isObject($0) }, "rendered payload is not a JSON object: \(show(buffer))")
        let strings = template.render(values: values.map { $0.map { String(decoding: $0, as: UTF8.self) } })
        precondition(strings.withUnsafeBytes { JSONValidation.isObject($0) }, "rendered payload is not a JSON object: \(show(strings))")
        let empty = template.render(values: [])
        precondition(empty.count == template.literalByteCount, "empty render is \(empty.count) bytes, not \(template.literalByteCount)")
    }

    static func renderFCM(_ text: String, columns: [String], values: [[UInt8]?], token: [UInt8], validateOnly: Bool) {
        guard let template = try? FCMMessageTemplate.compile(text: text, columns: columns, validateOnly: validateOnly, source: "fuzz")
        else { return }
        precondition(template.placeholderColumns.allSatisfy { columns.indices.contains($0) }, "a placeholder outside the columns")
        var fresh: [UInt8] = []
        var appended: [UInt8] = Array("prefix".utf8)
        let (first, second) = token.withUnsafeBytes { token in
            withFieldValues(values) { value in
                (template.render(token: token, into: &fresh, value: value), template.render(token: token, into: &appended, value: value))
            }
        }
        precondition(first == second && Array(appended.dropFirst(6)) == fresh, "rendering into a used buffer differs")
        precondition(first <= fresh.count, "message bytes \(first) exceed the body's \(fresh.count)")
        precondition(fresh.withUnsafeBytes { JSONValidation.isObject($0) }, "rendered FCM body is not a JSON object: \(show(fresh))")
        let strings = template.render(token: String(decoding: token, as: UTF8.self),
                                      values: values.map { $0.map { String(decoding: $0, as: UTF8.self) } })
        precondition(strings.withUnsafeBytes { JSONValidation.isObject($0) }, "rendered FCM body is not a JSON object: \(show(strings))")
    }

    /// Calls `body` with a lookup from column index to that column's bytes (nil when absent).
    static func withFieldValues<R>(_ values: [[UInt8]?], _ body: ((Int) -> UnsafeRawBufferPointer?) -> R) -> R {
        var joined: [UInt8] = []
        let ranges: [Range<Int>?] = values.map { value in
            guard let value else { return nil }
            joined += value
            return (joined.count - value.count)..<joined.count
        }
        return joined.withUnsafeBytes { all in
            body { column in
                guard column >= 0, column < ranges.count, let range = ranges[column] else { return nil }
                return UnsafeRawBufferPointer(rebasing: all[range])
            }
        }
    }

    static func show(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self).debugDescription }

    // MARK: Provider responses

    static let statuses = [200, 400, 401, 403, 404, 405, 410, 413, 429, 500, 503, 204, 302]

    /// Input: a byte picking the status, then the body.
    static func apnsResponse(_ input: [UInt8]) {
        let header = FuzzHeader(input)
        let status = statuses[Int(header.flags) % statuses.count]
        let body = APNsErrorBody.parse(header.rest)
        if let reason = body.reason { precondition(APNsReason(reason).rawValue == reason, "reason \(reason.debugDescription) not kept as sent") }
        if let date = body.unregisteredAt { precondition(date.utf8.count == 24 && date.hasSuffix("Z"), "bad unregistered_at \(date)") }
        let summary = APNsResponseSummary(response: HTTP2Response(status: status, headers: [HTTP2Header("apns-id", "fuzz")], body: header.rest))
        precondition(summary.status == status && summary.apnsID == "fuzz", "summary lost the status or apns-id")
        precondition(summary.verdict == APNsResponseClassifier.verdict(status: status, reason: summary.reason), "verdict differs")
        if status == 200 { precondition(summary.reason == nil && summary.timestampMilliseconds == nil, "a 200 with a reason") }
    }

    /// Input: a byte picking the status, a flags byte (bit 0: a wall clock for HTTP-date
    /// Retry-After), a Retry-After value up to the first LF, then the body.
    static func fcmResponse(_ input: [UInt8]) {
        let header = FuzzHeader(input)
        let status = statuses[Int(header.flags) % statuses.count]
        let flags = header.rest.first ?? 0
        let rest = header.rest.dropFirst()
        let newline = rest.firstIndex(of: 0x0A) ?? rest.endIndex
        let retryAfter = String(decoding: rest[..<newline], as: UTF8.self)
        let body = Array(rest[newline...].dropFirst())
        let now: Int64? = flags & 0x01 != 0 ? 1_800_000_000 : nil
        let summary = FCMResponseSummary(status: status, headers: [HTTP2Header("retry-after", retryAfter)], body: body, nowEpochSeconds: now)
        if let seconds = summary.retryAfterSeconds {
            precondition(seconds >= 0 && seconds <= RetryAfter.secondsMax, "retry-after \(seconds) outside 0...\(RetryAfter.secondsMax)")
        }
        if case .delivered(let name?) = summary.verdict {
            precondition(name.utf8.count <= FCMResponseSummary.nameBytesMax, "message name of \(name.utf8.count) bytes")
        }
        let parsed = FCMErrorBody.parse(body)
        if let message = parsed.message {
            precondition(message.utf8.count <= FCMErrorBody.messageBytesMax, "message of \(message.utf8.count) bytes")
            precondition(!message.unicodeScalars.contains { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) }, "control character kept")
        }
        for identifier in [parsed.errorCode, parsed.status].compactMap({ $0 }) {
            precondition(!identifier.isEmpty && identifier.utf8.count <= FCMErrorBody.identifierBytesMax, "identifier length")
            precondition(identifier.utf8.allSatisfy { isIdentifierByte($0) }, "identifier \(identifier.debugDescription)")
        }
        precondition(parsed.fieldViolations.count <= FCMErrorBody.fieldViolationsKeptMax, "too many field violations kept")
        _ = parsed.isAboutRegistrationToken
    }

    static func isIdentifierByte(_ byte: UInt8) -> Bool {
        (byte >= 0x30 && byte <= 0x39) || (byte | 0x20 >= 0x61 && byte | 0x20 <= 0x7A) || byte == 0x5F || byte == 0x2E
    }

    /// Input: a byte picking the status (even: 200), then the body; the body also serves as a
    /// form body and, decoded, as an access token and an assertion for round trips.
    static func oauthResponse(_ input: [UInt8]) {
        let header = FuzzHeader(input)
        let status = header.flags & 0x01 == 0 ? 200 : statuses[Int(header.flags >> 1) % statuses.count]
        let body = header.rest
        switch OAuthTokenExchange.parseResponse(status: status, body: body) {
        case .success(let token):
            precondition(status == 200, "a token from a \(status) answer")
            precondition(!token.accessToken.isEmpty && token.accessToken.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F }, "unusable token accepted")
            precondition(token.expiresInSeconds > 0 && token.expiresInSeconds <= Int(Int32.max), "expires_in \(token.expiresInSeconds)")
        case .failure(let error):
            precondition(error.status == status, "error status \(error.status) for \(status)")
            _ = error.description
            _ = error.isCredentialRejected
        }
        _ = OAuthTokenExchange.parseRequestBody(body)

        let text = String(decoding: body, as: UTF8.self)
        let form = OAuthTokenExchange.parseRequestBody(OAuthTokenExchange.requestBody(assertion: text))
        precondition(form.grantType == OAuthTokenExchange.grantType && form.assertion == text, "form round trip lost the assertion")

        let expires = Int(header.flags) + 1
        let answer = OAuthTokenExchange.successBody(accessToken: text, expiresInSeconds: expires)
        let usable = !text.isEmpty && text.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F } && answer.count <= OAuthTokenExchange.responseBytesMax
        let reread = OAuthTokenExchange.parseResponse(status: 200, body: answer)
        if usable {
            precondition(reread == .success(OAuthAccessToken(accessToken: text, expiresInSeconds: expires)), "token round trip: \(reread)")
        } else if text.isEmpty {
            precondition((try? reread.get()) == nil, "an empty access_token accepted")
        }
    }
}

/// A source that ends after `bytesMax` bytes of its inner one: the decompress body's bound on a
/// bomb's output.
final class CappedByteSource: ByteSource {
    private let inner: ByteSource
    private var left: Int

    init(_ inner: ByteSource, bytesMax: Int) {
        self.inner = inner
        left = bytesMax
    }

    func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        guard left > 0 else { return 0 }
        let count = try inner.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<min(buffer.count, left)]))
        left -= count
        return count
    }
}
