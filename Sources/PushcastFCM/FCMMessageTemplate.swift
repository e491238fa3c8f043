// The FCM message template (`--fcm-payload FILE`): a JSON template for the HTTP v1 `message`
// object (docs/PROTOCOL.md §2.1) with `{{column}}` placeholders inside string values, exactly as the
// APNs `PayloadTemplate`. It is built on PayloadTemplate rather than beside it: the file is
// compiled once as a PayloadTemplate (JSON validation, placeholder rules and their errors with
// byte offsets), the FCM rules are checked on its structure, and then the whole request body
//
//     {"validate_only":true,"message":{"token":"{{<token>}}",<the message's members>}}
//
// is compiled as a second PayloadTemplate whose first column is the row's token. A row is then one
// byte-level render: literal chunks copied, the token and column values JSON-escaped and spliced.
//
// Forms and rules (checked at compile time; errors name the file and a JSON path such as
// `$.message.data["google.x"]`):
// - The file's top level is either the message object itself, or a wrapper
//   `{"message":{...}}` that may also carry `"validate_only": true|false`. A top-level object with
//   a member named `message` is the wrapper (the Message resource has no such field); the wrapper
//   may hold nothing else, and neither member twice.
// - validate_only: the run decides (the `validateOnly` argument, from the command line). A
//   wrapper may restate it; a wrapper value that contradicts it is an error, so a template copied
//   from a dry run can never silently turn a real campaign into a dry run, or the reverse. Inside
//   the message object it is an error (FCM would refuse every request).
// - The message must not set `token`, `topic`, `condition` or `fid`: the row's token is the target.
// - `data` (and `android.data`), when present, must be an object whose values are all strings
//   (placeholders live only inside strings, so a string stays a string) and whose keys are not
//   reserved: `from`, `message_type`, or starting with `google.` or `gcm.`.

import PushcastJSON

/// Why an FCM message template cannot be used. Reported before the first send.
public enum FCMTemplateError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Not a usable template at all: JSON syntax, not an object, or a placeholder problem.
    case invalidTemplate(source: String, PayloadTemplateError)
    /// The JSON is fine but breaks an FCM rule at `path`.
    case invalidMessage(source: String, path: String, problem: FCMTemplateProblem)

    public var description: String {
        switch self {
        case .invalidTemplate(let source, let error):
            return "\(source): FCM \(error)"
        case .invalidMessage(let source, let path, let problem):
            return "\(source): FCM message template, at \(path): \(problem)"
        }
    }
}

/// An FCM rule a template breaks.
public enum FCMTemplateProblem: Sendable, Equatable, CustomStringConvertible {
    /// The message, `data` or `android.data` is not a JSON object.
    case notAnObject
    /// A wrapper member other than `message` and `validate_only`.
    case unexpectedWrapperMember
    /// `message` or `validate_only` twice in the wrapper.
    case duplicateWrapperMember
    /// `validate_only` is not `true` or `false`.
    case validateOnlyNotBoolean
    /// The wrapper's `validate_only` contradicts the run's.
    case validateOnlyConflict(template: Bool, run: Bool)
    /// `validate_only` inside the message object, where FCM does not accept it.
    case validateOnlyInsideMessage
    /// `token`, `topic`, `condition` or `fid`: the row's token is the only target.
    case targetInTemplate
    /// A `data` value that is not a string.
    case dataValueNotString
    /// A reserved `data` key.
    case reservedDataKey

    public var description: String {
        switch self {
        case .notAnObject:
            return "must be a JSON object"
        case .unexpectedWrapperMember:
            return "a {\"message\": ...} wrapper may hold only \"message\" and \"validate_only\""
        case .duplicateWrapperMember:
            return "appears twice in the wrapper"
        case .validateOnlyNotBoolean:
            return "validate_only must be true or false"
        case .validateOnlyConflict(let template, let run):
            return "the template says validate_only: \(template) but the run's validate-only setting is \(run); "
                + "the command line decides, so remove validate_only from the template or change the option"
        case .validateOnlyInsideMessage:
            return "validate_only belongs beside the message, not inside it: {\"validate_only\": ..., \"message\": {...}} (or use the command-line option)"
        case .targetInTemplate:
            return "the message must not set a target (token, topic, condition or fid): each row's token is the target"
        case .dataValueNotString:
            return "data values must be strings (FCM rejects anything else); quote the value"
        case .reservedDataKey:
            return "reserved data key (from, message_type, google.*, gcm.* are FCM's)"
        }
    }
}

/// A compiled FCM message template. Immutable and `Sendable`: compile once, share with every worker.
public struct FCMMessageTemplate: Sendable {
    /// FCM's limit for most messages (docs/PROTOCOL.md §2.6, from Firebase's ErrorCode reference). `render` returns the byte count
    /// of the whole rendered message object, token included, so comparing it with this limit is
    /// conservative: FCM counts only the keys and values of the payload.
    public static let messageBytesMax = 4096

    /// The whole request body; column 0 is the row's token, column i + 1 is input column i.
    let body: PayloadTemplate
    /// Bytes of the body that are not the message object: the prefix up to `"message":` and the
    /// closing `}`.
    let envelopeByteCount: Int

    /// Whether the rendered body carries `"validate_only":true`.
    public let validateOnly: Bool
    /// The input column index of each placeholder, in template order (repeats included).
    public let placeholderColumns: [Int]
    /// Bytes of the message object when the token and every placeholder are empty.
    public var messageLiteralByteCount: Int { body.literalByteCount - envelopeByteCount }

    public static func compile(text: String, columns: [String], validateOnly: Bool, source: String) throws(FCMTemplateError) -> FCMMessageTemplate {
        do {
            // Validation, placeholder rules and their errors, with offsets into the file itself.
            _ = try PayloadTemplate.compile(text: text, columns: columns)
        } catch {
            throw .invalidTemplate(source: source, error)
        }
        let bytes = Array(text.utf8)
        let interior = try bytes.withUnsafeBufferPointer { buffer throws(FCMTemplateError) in
            try FCMMessageRules(reader: JSONScanner(buffer), source: source, validateOnly: validateOnly).messageInterior()
        }
        let prefix = validateOnly ? #"{"validate_only":true,"message":"# : #"{"message":"#
        var tokenColumn = "pushcast.token"
        while columns.contains(tokenColumn) { tokenColumn += "_" }
        var bodyText = prefix + #"{"token":"{{"# + tokenColumn + #"}}""#
        let members = bytes[interior]
        if members.contains(where: { !($0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D) }) {
            bodyText += "," + String(decoding: members, as: UTF8.self)
        }
        bodyText += "}}"
        let body: PayloadTemplate
        do {
            body = try PayloadTemplate.compile(text: bodyText, columns: [tokenColumn] + columns)
        } catch {
            // The message's members were valid JSON a moment ago; nothing spliced around them can
            // break that.
            preconditionFailure("FCM request body template failed to compile: \(error)")
        }
        return FCMMessageTemplate(
            body: body, envelopeByteCount: prefix.utf8.count + 1, validateOnly: validateOnly,
            placeholderColumns: body.placeholderColumns.dropFirst().map { $0 - 1 })
    }

    /// Appends the whole request body, `{"message":{"token":"<token>",…template members…}}` (with
    /// `"validate_only":true,` first when set), to `buffer`, and returns the byte count of the
    /// message object (what `messageBytesMax` applies to). The token and values are JSON-escaped.
    /// `value(column)` gives the raw UTF-8 bytes of an input column for this row, or nil for none.
    ///
    /// Allocation: when `buffer` is empty the body is rendered straight into it, and a buffer
    /// reused with its capacity stops allocating after the first rows. When `buffer` already holds
    /// bytes, the body is rendered into a temporary first (PayloadTemplate renders into a buffer of
    /// its own), which costs one allocation and one copy per call.
    @inline(__always)
    public func render(token: UnsafeRawBufferPointer, into buffer: inout [UInt8], value: (Int) -> UnsafeRawBufferPointer?) -> Int {
        if buffer.isEmpty {
            return body.render(into: &buffer) { $0 == 0 ? token : value($0 - 1) } - envelopeByteCount
        }
        var rendered: [UInt8] = []
        let count = body.render(into: &rendered) { $0 == 0 ? token : value($0 - 1) }
        buffer.append(contentsOf: rendered)
        return count - envelopeByteCount
    }

    /// Renders with `String` values (tests and tools; the hot path passes bytes).
    public func render(token: String, values: [String?]) -> [UInt8] {
        body.render(values: [token] + values)
    }
}

/// The structural rules of the header comment, over a file PayloadTemplate has already validated.
private struct FCMMessageRules {
    let reader: JSONScanner
    let source: String
    let validateOnly: Bool

    static let targets: Set<String> = ["token", "topic", "condition", "fid"]

    func fail(_ path: String, _ problem: FCMTemplateProblem) -> FCMTemplateError {
        .invalidMessage(source: source, path: path, problem: problem)
    }

    /// The byte range between the message object's braces.
    func messageInterior() throws(FCMTemplateError) -> Range<Int> {
        guard let root = reader.firstValue() else { throw fail("$", .notAnObject) }
        let rootMembers = reader.members(ofObjectAt: root.lowerBound, limit: .max)
        guard rootMembers.contains(where: { $0.key == "message" }) else {
            try checkMessage(root, path: "$")
            return (root.lowerBound + 1)..<(root.upperBound - 1)
        }
        var message: Range<Int>?
        var sawValidateOnly = false
        for member in rootMembers {
            let path = Self.path("$", member.key)
            switch member.key {
            case "message":
                if message != nil { throw fail(path, .duplicateWrapperMember) }
                message = member.value
            case "validate_only":
                if sawValidateOnly { throw fail(path, .duplicateWrapperMember) }
                sawValidateOnly = true
                let literal = Array(reader.bytes[member.value])
                guard literal == Array("true".utf8) || literal == Array("false".utf8) else { throw fail(path, .validateOnlyNotBoolean) }
                let stated = literal.count == 4
                if stated != validateOnly { throw fail(path, .validateOnlyConflict(template: stated, run: validateOnly)) }
            default:
                throw fail(path, .unexpectedWrapperMember)
            }
        }
        let range = message!
        try checkMessage(range, path: "$.message")
        return (range.lowerBound + 1)..<(range.upperBound - 1)
    }

    private func checkMessage(_ range: Range<Int>, path: String) throws(FCMTemplateError) {
        guard reader.bytes[range.lowerBound] == UInt8(ascii: "{") else { throw fail(path, .notAnObject) }
        for member in reader.members(ofObjectAt: range.lowerBound, limit: .max) {
            let memberPath = Self.path(path, member.key)
            if Self.targets.contains(member.key) { throw fail(memberPath, .targetInTemplate) }
            if member.key == "validate_only" { throw fail(memberPath, .validateOnlyInsideMessage) }
            if member.key == "data" { try checkData(member.value, path: memberPath) }
            if member.key == "android", reader.bytes[member.value.lowerBound] == UInt8(ascii: "{") {
                for inner in reader.members(ofObjectAt: member.value.lowerBound, limit: .max) where inner.key == "data" {
                    try checkData(inner.value, path: Self.path(memberPath, "data"))
                }
            }
        }
    }

    private func checkData(_ range: Range<Int>, path: String) throws(FCMTemplateError) {
        guard reader.bytes[range.lowerBound] == UInt8(ascii: "{") else { throw fail(path, .notAnObject) }
        for member in reader.members(ofObjectAt: range.lowerBound, limit: .max) {
            let memberPath = Self.path(path, member.key)
            if Self.isReservedDataKey(member.key) { throw fail(memberPath, .reservedDataKey) }
            if reader.bytes[member.value.lowerBound] != UInt8(ascii: "\"") { throw fail(memberPath, .dataValueNotString) }
        }
    }

    /// Reserved by FCM (docs/PROTOCOL.md §2.1: `from`, `message_type`, `google.`, `gcm.notification.`;
    /// the whole `gcm.` prefix is refused here, as FCM's legacy documentation did).
    static func isReservedDataKey(_ key: String) -> Bool {
        key == "from" || key == "message_type" || key.hasPrefix("google.") || key.hasPrefix("gcm.")
    }

    /// `parent.key` for identifier-like keys, `parent["key"]` otherwise.
    static func path(_ parent: String, _ key: String) -> String {
        let plain = !key.isEmpty && key.utf8.allSatisfy { JSONScanner.isWordByte($0) || $0 == UInt8(ascii: "@") }
        if plain { return parent + "." + key }
        var quoted = ""
        for character in key.unicodeScalars {
            if character == "\"" || character == "\\" { quoted.unicodeScalars.append("\\") }
            quoted.unicodeScalars.append(character)
        }
        return parent + "[\"" + quoted + "\"]"
    }
}
