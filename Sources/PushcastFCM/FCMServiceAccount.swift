// A Google service-account key file (the JSON the Firebase console downloads), read at start-up
// for the OAuth2 flow of FCM HTTP v1 (docs/PROTOCOL.md §2.2). The private key stays inside this
// module: it is never part of a description, a mirror or an error message, and errors name the
// file and the field instead.
//
// The file also holds `GoogleJSON`, the small defensive JSON reader and writer used for Google's
// formats (this file, the JWT parts, the token endpoint's answers, FCM request and error bodies).

import COpenSSL
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A service-account file or key that cannot be used. The message names the file and the field,
/// never key material.
public struct FCMCredentialError: Error, Sendable, Equatable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// The fields of a Google service-account key file that the OAuth2 flow needs.
public struct FCMServiceAccount: Sendable {
    public let projectID: String
    public let clientEmail: String
    public let privateKeyID: String
    public let tokenURI: String
    /// How messages name the file (its path as given).
    public let source: String
    /// PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`). Internal: only `RS256Signer` reads it.
    let privateKeyPEM: [UInt8]

    /// The file's size limit: real ones are about 2.3 KiB.
    public static let fileBytesMax = 64 * 1024

    /// Reads and parses the file at `path` (start-up only).
    public static func load(path: String) throws(FCMCredentialError) -> FCMServiceAccount {
        let bytes = try CredentialFile.contents(path, what: "FCM service-account file", bytesMax: fileBytesMax)
        return try FCMServiceAccount(json: bytes, source: path)
    }

    /// Parses Google's format: `type` ("service_account"), `project_id`, `private_key_id`,
    /// `private_key`, `client_email`, `token_uri`; other members are ignored.
    public init(json: [UInt8], source: String) throws(FCMCredentialError) {
        let file = "the FCM service-account file '\(source)'"
        guard json.count <= Self.fileBytesMax else { throw FCMCredentialError("\(file) is larger than 64 KiB; it is not a service-account key") }
        let root: GoogleJSON.Value
        switch GoogleJSON.parse(json) {
        case .success(let value): root = value
        case .failure(let error): throw FCMCredentialError("\(file) is not valid JSON (byte \(error.offset): \(error.message))")
        }
        guard case .object = root else { throw FCMCredentialError("\(file) is not a JSON object") }

        func field(_ name: String) throws(FCMCredentialError) -> String {
            guard let value = root[name] else { throw FCMCredentialError("\(file) has no \"\(name)\" field") }
            guard let text = value.stringValue, !text.isEmpty else { throw FCMCredentialError("\(file) has an empty or non-string \"\(name)\" field") }
            return text
        }
        let type = try field("type")
        guard type == "service_account" else {
            throw FCMCredentialError("\(file) has \"type\": \"\(GoogleJSON.sanitized(type, limit: 40))\"; FCM needs a service-account key (\"type\": \"service_account\")")
        }
        projectID = try field("project_id")
        guard projectID.utf8.allSatisfy({ Self.isProjectIDByte($0) }) else {
            throw FCMCredentialError("\(file) has a \"project_id\" that is not letters, digits, '-', '.' or ':'")
        }
        privateKeyID = try field("private_key_id")
        clientEmail = try field("client_email")
        guard clientEmail.utf8.contains(UInt8(ascii: "@")) else { throw FCMCredentialError("\(file) has a \"client_email\" that is not an email address") }
        tokenURI = try field("token_uri")
        guard tokenURI.hasPrefix("https://") else {
            throw FCMCredentialError("\(file) has a \"token_uri\" that is not an https:// URL; the signed assertion must not travel in clear text")
        }
        let key = try field("private_key")
        guard key.contains("-----BEGIN") && key.contains("PRIVATE KEY-----") else {
            throw FCMCredentialError("\(file) has a \"private_key\" field that is not a PEM private key (expected text starting with -----BEGIN PRIVATE KEY-----)")
        }
        privateKeyPEM = Array(key.utf8)
        self.source = source
    }

    /// Google project IDs are lower-case letters, digits and hyphens; domain-scoped ones add
    /// `example.com:`. Anything else would change the meaning of the send path.
    static func isProjectIDByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
             UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: ":"):
            return true
        default:
            return false
        }
    }
}

/// Printing an account never shows its key (`print`, string interpolation, `dump`, debuggers).
extension FCMServiceAccount: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public var description: String {
        "FCMServiceAccount(project: \(projectID), client: \(clientEmail), key ID: \(privateKeyID), token URI: \(tokenURI), file: \(source))"
    }
    public var debugDescription: String { description }
    public var customMirror: Mirror {
        Mirror(self, children: ["projectID": projectID, "clientEmail": clientEmail, "privateKeyID": privateKeyID,
                                "tokenURI": tokenURI, "source": source, "privateKey": "(redacted)"])
    }
}

/// Throw-away service accounts for the mock, the demo and the tests. Real ones come from the
/// Firebase console.
public enum FCMServiceAccountGenerator {
    /// A fresh 2048-bit RSA key pair written as a Google-format service-account JSON, and the
    /// SubjectPublicKeyInfo PEM of its public half (what the mock verifies assertions with).
    public static func generate(projectID: String, clientEmail: String, tokenURI: String) throws(FCMCredentialError) -> (serviceAccountJSON: [UInt8], publicKeyPEM: [UInt8]) {
        let key = try RSAKey.generate(bits: 2048)
        guard let privateKeyPEM = key.pem(publicOnly: false), let publicKeyPEM = key.pem(publicOnly: true) else {
            throw FCMCredentialError("cannot write the generated RSA key pair as PEM")
        }
        let keyID = try hexRandom(byteCount: 20)
        let clientID = try hexRandom(byteCount: 8)
        let members: [(String, String)] = [
            ("type", "service_account"),
            ("project_id", projectID),
            ("private_key_id", keyID),
            ("private_key", String(decoding: privateKeyPEM, as: UTF8.self)),
            ("client_email", clientEmail),
            ("client_id", clientID),
            ("auth_uri", "https://accounts.google.com/o/oauth2/auth"),
            ("token_uri", tokenURI),
            ("auth_provider_x509_cert_url", "https://www.googleapis.com/oauth2/v1/certs"),
            ("universe_domain", "googleapis.com"),
        ]
        var json: [UInt8] = Array("{\n".utf8)
        for (index, member) in members.enumerated() {
            json += Array("  ".utf8)
            GoogleJSON.appendString(member.0, to: &json)
            json += Array(": ".utf8)
            GoogleJSON.appendString(member.1, to: &json)
            json += Array((index + 1 < members.count ? ",\n" : "\n").utf8)
        }
        json += Array("}\n".utf8)
        return (json, publicKeyPEM)
    }

    private static func hexRandom(byteCount: Int) throws(FCMCredentialError) -> String {
        var bytes = [UInt8](repeating: 0, count: byteCount)
        guard RAND_bytes(&bytes, Int32(byteCount)) == 1 else { throw FCMCredentialError("the random number generator failed") }
        let digits = Array("0123456789abcdef".utf8)
        return String(decoding: bytes.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 15)]] }, as: UTF8.self)
    }
}

/// Small credential files read whole at start-up.
enum CredentialFile {
    static func contents(_ path: String, what: String, bytesMax: Int) throws(FCMCredentialError) -> [UInt8] {
        let descriptor = open(path, O_RDONLY)
        guard descriptor >= 0 else { throw FCMCredentialError("cannot open the \(what) '\(path)': \(String(cString: strerror(errno)))") }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count >= 0 else { throw FCMCredentialError("cannot read the \(what) '\(path)': \(String(cString: strerror(errno)))") }
            if count == 0 { return bytes }
            bytes += chunk[..<count]
            guard bytes.count <= bytesMax else { throw FCMCredentialError("the \(what) '\(path)' is larger than \(bytesMax / 1024) KiB") }
        }
    }
}

// MARK: - JSON for Google's formats

/// A defensive JSON (RFC 8259) reader and writer for Google's formats. Objects keep their members
/// in order (FCM names a bad `data` entry by its index) and lookups take the last of duplicate
/// keys, as Google does. Nesting depth, input size and string lengths are bounded so that a
/// hostile body costs little; none of this is on a per-notification hot path of the client.
public enum GoogleJSON {
    public static let depthMax = 32
    public static let inputBytesMax = 1 << 20

    public indirect enum Value: Sendable, Equatable {
        case object([Member])
        case array([Value])
        case string(String)
        /// The number's text exactly as written.
        case number(String)
        case bool(Bool)
        case null

        /// The value of the last member named `key`, when this is an object.
        public subscript(key: String) -> Value? {
            guard case .object(let members) = self else { return nil }
            return members.last(where: { $0.key == key })?.value
        }

        public var stringValue: String? {
            if case .string(let text) = self { return text }
            return nil
        }

        /// An integer number (no fraction or exponent) that fits in 64 bits.
        public var int64Value: Int64? {
            if case .number(let text) = self { return Int64(text) }
            return nil
        }

        public var members: [Member]? {
            if case .object(let members) = self { return members }
            return nil
        }
    }

    public struct Member: Sendable, Equatable {
        public let key: String
        public let value: Value
        public init(key: String, value: Value) {
            self.key = key
            self.value = value
        }
    }

    public struct SyntaxError: Error, Sendable, Equatable {
        public let offset: Int
        public let message: String
    }

    public static func parse(_ bytes: [UInt8]) -> Result<Value, SyntaxError> {
        bytes.withUnsafeBufferPointer { parse($0) }
    }

    /// Parses exactly one JSON value surrounded by optional whitespace.
    public static func parse(_ bytes: UnsafeBufferPointer<UInt8>) -> Result<Value, SyntaxError> {
        guard bytes.count <= inputBytesMax else { return .failure(SyntaxError(offset: inputBytesMax, message: "document larger than 1 MiB")) }
        var reader = Reader(bytes: bytes)
        do throws(SyntaxError) {
            reader.skipWhitespace()
            let value = try reader.value(depth: 0)
            reader.skipWhitespace()
            guard reader.index == bytes.count else { throw reader.fail("unexpected data after the JSON value") }
            return .success(value)
        } catch {
            return .failure(error)
        }
    }

    /// Appends `text` as a JSON string literal (quotes included), escaping `"`, `\` and control
    /// characters.
    public static func appendString(_ text: String, to out: inout [UInt8]) {
        let hex = Array("0123456789abcdef".utf8)
        out.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"): out += [UInt8(ascii: "\\"), byte]
            case 0x0A: out += [UInt8(ascii: "\\"), UInt8(ascii: "n")]
            case 0x0D: out += [UInt8(ascii: "\\"), UInt8(ascii: "r")]
            case 0x09: out += [UInt8(ascii: "\\"), UInt8(ascii: "t")]
            case 0x00..<0x20: out += Array("\\u00".utf8) + [hex[Int(byte >> 4)], hex[Int(byte & 15)]]
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    /// `text` as a JSON string literal.
    public static func quoted(_ text: String) -> String {
        var out: [UInt8] = []
        appendString(text, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

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

    /// Recursive descent over the bytes; every failure carries the byte offset.
    private struct Reader {
        let bytes: UnsafeBufferPointer<UInt8>
        var index = 0

        func fail(_ message: String) -> SyntaxError { SyntaxError(offset: index, message: message) }

        mutating func skipWhitespace() {
            while index < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { index += 1 }
        }

        mutating func value(depth: Int) throws(SyntaxError) -> Value {
            guard depth <= GoogleJSON.depthMax else { throw fail("nesting deeper than \(GoogleJSON.depthMax) levels") }
            guard index < bytes.count else { throw fail("unexpected end of input, expected a value") }
            switch bytes[index] {
            case UInt8(ascii: "{"): return try object(depth: depth + 1)
            case UInt8(ascii: "["): return try array(depth: depth + 1)
            case UInt8(ascii: "\""): return .string(try string())
            case UInt8(ascii: "t"): try literal("true"); return .bool(true)
            case UInt8(ascii: "f"): try literal("false"); return .bool(false)
            case UInt8(ascii: "n"): try literal("null"); return .null
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try number())
            default: throw fail("unexpected character, expected a value")
            }
        }

        mutating func object(depth: Int) throws(SyntaxError) -> Value {
            index += 1
            var members: [Member] = []
            skipWhitespace()
            if index < bytes.count && bytes[index] == UInt8(ascii: "}") { index += 1; return .object(members) }
            while true {
                skipWhitespace()
                guard index < bytes.count && bytes[index] == UInt8(ascii: "\"") else { throw fail("expected a string key") }
                let key = try string()
                skipWhitespace()
                guard index < bytes.count && bytes[index] == UInt8(ascii: ":") else { throw fail("expected ':' after a key") }
                index += 1
                skipWhitespace()
                members.append(Member(key: key, value: try value(depth: depth)))
                skipWhitespace()
                guard index < bytes.count else { throw fail("unterminated object") }
                index += 1
                switch bytes[index - 1] {
                case UInt8(ascii: ","): continue
                case UInt8(ascii: "}"): return .object(members)
                default: index -= 1; throw fail("expected ',' or '}' in an object")
                }
            }
        }

        mutating func array(depth: Int) throws(SyntaxError) -> Value {
            index += 1
            var elements: [Value] = []
            skipWhitespace()
            if index < bytes.count && bytes[index] == UInt8(ascii: "]") { index += 1; return .array(elements) }
            while true {
                skipWhitespace()
                elements.append(try value(depth: depth))
                skipWhitespace()
                guard index < bytes.count else { throw fail("unterminated array") }
                index += 1
                switch bytes[index - 1] {
                case UInt8(ascii: ","): continue
                case UInt8(ascii: "]"): return .array(elements)
                default: index -= 1; throw fail("expected ',' or ']' in an array")
                }
            }
        }

        mutating func literal(_ word: String) throws(SyntaxError) {
            for expected in word.utf8 {
                guard index < bytes.count && bytes[index] == expected else { throw fail("invalid literal, expected '\(word)'") }
                index += 1
            }
        }

        mutating func number() throws(SyntaxError) -> String {
            let start = index
            func digits(_ reader: inout Reader) -> Int {
                let first = reader.index
                while reader.index < reader.bytes.count, (0x30...0x39).contains(reader.bytes[reader.index]) { reader.index += 1 }
                return reader.index - first
            }
            if bytes[index] == UInt8(ascii: "-") { index += 1 }
            let leadingZero = index < bytes.count && bytes[index] == UInt8(ascii: "0")
            let integerDigits = digits(&self)
            guard integerDigits > 0, !(leadingZero && integerDigits > 1) else { throw fail("invalid number") }
            if index < bytes.count && bytes[index] == UInt8(ascii: ".") {
                index += 1
                guard digits(&self) > 0 else { throw fail("invalid number, expected a digit after '.'") }
            }
            if index < bytes.count && (bytes[index] | 0x20) == UInt8(ascii: "e") {
                index += 1
                if index < bytes.count && (bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-")) { index += 1 }
                guard digits(&self) > 0 else { throw fail("invalid number, expected an exponent digit") }
            }
            return String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
        }

        /// A string token from its opening quote; escapes decoded, UTF-8 validated.
        mutating func string() throws(SyntaxError) -> String {
            let start = index
            index += 1
            var out: [UInt8] = []
            while index < bytes.count {
                let byte = bytes[index]
                index += 1
                switch byte {
                case UInt8(ascii: "\""):
                    guard let text = String(validating: out, as: UTF8.self) else { index = start; throw fail("invalid UTF-8 in a string") }
                    return text
                case UInt8(ascii: "\\"):
                    try escape(into: &out)
                case 0x00..<0x20:
                    index -= 1
                    throw fail("control character must be escaped inside a string")
                default:
                    out.append(byte)
                }
            }
            index = start
            throw fail("unterminated string")
        }

        mutating func escape(into out: inout [UInt8]) throws(SyntaxError) {
            guard index < bytes.count else { throw fail("unterminated escape") }
            let escaped = bytes[index]
            index += 1
            switch escaped {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(escaped)
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = try hex4()
                if (0xD800..<0xDC00).contains(scalar) {
                    guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                        throw fail("unpaired surrogate in a \\u escape")
                    }
                    index += 2
                    let low = try hex4()
                    guard (0xDC00..<0xE000).contains(low) else { throw fail("unpaired surrogate in a \\u escape") }
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                }
                guard let unicode = Unicode.Scalar(scalar) else { throw fail("unpaired surrogate in a \\u escape") }
                out += Array(String(Character(unicode)).utf8)
            default:
                index -= 1
                throw fail("invalid escape")
            }
        }

        mutating func hex4() throws(SyntaxError) -> UInt32 {
            var scalar: UInt32 = 0
            for _ in 0..<4 {
                guard index < bytes.count else { throw fail("invalid \\u escape, expected 4 hex digits") }
                let byte = bytes[index] | 0x20
                let digit: UInt8
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - 0x30
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - 0x61 + 10
                default: throw fail("invalid \\u escape, expected 4 hex digits")
                }
                scalar = scalar << 4 | UInt32(digit)
                index += 1
            }
            return scalar
        }
    }
}
