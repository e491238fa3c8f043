import PushcastCore
import PushcastJSON
import PushcastProviderKit
import PushcastWire

/// Where a row's subscription keys are: `p256dh` and `auth` columns (Laravel's `public_key`
/// and `auth_token`, NDJSON's nested `keys` flattened by name), a `keys` column holding the
/// object's JSON (NDJSON keeps a nested object's text), or a `subscription` column holding the
/// whole subscription. Laravel's `content_encoding` is checked when present.
public struct WebPushColumns: Sendable, Equatable {
    public var p256dh: Int?
    public var auth: Int?
    public var keys: Int?
    public var subscription: Int?
    public var contentEncoding: Int?

    public static let p256dhNames = ["p256dh", "public_key", "keys.p256dh"]
    public static let authNames = ["auth", "auth_token", "keys.auth"]

    /// `p256dhColumn`, `authColumn`: names given on the command line, used instead of the usual ones.
    public init(columns: [String], p256dhColumn: String? = nil, authColumn: String? = nil) {
        func find(_ names: [String]) -> Int? {
            for name in names { if let index = columns.firstIndex(where: { $0.lowercased() == name.lowercased() }) { return index } }
            return nil
        }
        p256dh = find(p256dhColumn.map { [$0] } ?? Self.p256dhNames)
        auth = find(authColumn.map { [$0] } ?? Self.authNames)
        keys = find(["keys"])
        subscription = find(["subscription"])
        contentEncoding = find(["content_encoding"])
    }

    /// Whether any column can hold a row's keys.
    public var findsKeys: Bool { (p256dh != nil && auth != nil) || keys != nil || subscription != nil }
}

/// Web Push bodies, as the reader thread leaves them for the worker to seal: the subscription's
/// 65-byte p256dh key, its 16-byte auth secret, then the rendered payload (at most 3,993 bytes,
/// what one aes128gcm record holds). The worker encrypts them (`WebPushAdapter.seal`).
public struct WebPushRendering: ProviderRendering {
    public let template: PayloadTemplate
    public let columns: WebPushColumns
    public init(template: PayloadTemplate, columns: WebPushColumns) {
        self.template = template
        self.columns = columns
    }
    public func makeRenderer(campaign: String) -> any NotificationRenderer { WebPushRenderer(template: template, columns: columns) }

    /// Bytes before the payload in a rendered body.
    public static let keyBytes = P256Key.pointBytes + WebPushSubscription.authSecretBytes
}

/// One preparer's Web Push renderer (scratch buffers kept between rows).
public final class WebPushRenderer: NotificationRenderer {
    let template: PayloadTemplate
    let columns: WebPushColumns
    public private(set) var rowProblem: RowProblem?
    private var plaintext: [UInt8] = []
    private var decoded = [UInt8](repeating: 0, count: 128)

    init(template: PayloadTemplate, columns: WebPushColumns) {
        self.template = template
        self.columns = columns
        plaintext.reserveCapacity(WebPushContentCoding.plaintextBytesMax + 1024)
    }

    public var bodyBytesMax: Int { WebPushRendering.keyBytes + WebPushContentCoding.plaintextBytesMax }
    public var bodyName: String { "Web Push payload" }
    public func notificationID(token: UnsafeRawBufferPointer) -> PackedText? { nil }

    public func render(token: UnsafeRawBufferPointer, into buffer: inout [UInt8], field: (Int) -> UnsafeRawBufferPointer?) -> Int {
        rowProblem = nil
        if let problem = readKeys(into: &buffer, field: field) ?? checkEncoding(field) {
            rowProblem = problem
            return RowProblem.size
        }
        let size = template.render(into: &plaintext, value: field)
        guard size <= WebPushContentCoding.plaintextBytesMax else {
            rowProblem = RowProblem(reason: WebPushReason.tooLarge, field: nil,
                                    message: "the payload is \(size) bytes; Web Push encrypts at most \(WebPushContentCoding.plaintextBytesMax)")
            return RowProblem.size
        }
        buffer.append(contentsOf: plaintext)
        return buffer.count
    }

    private func checkEncoding(_ field: (Int) -> UnsafeRawBufferPointer?) -> RowProblem? {
        guard let column = columns.contentEncoding, let value = field(column), !value.isEmpty,
              !value.elementsEqual("aes128gcm".utf8) else { return nil }
        return RowProblem(reason: WebPushReason.invalidSubscription, field: "content_encoding",
                          message: "'\(String(decoding: value.prefix(32), as: UTF8.self))' is not supported: pushcast sends aes128gcm (RFC 8291)")
    }

    /// Writes the key and the auth secret into `buffer`, or says which field is wrong.
    private func readKeys(into buffer: inout [UInt8], field: (Int) -> UnsafeRawBufferPointer?) -> RowProblem? {
        func filled(_ column: Int?) -> UnsafeRawBufferPointer? {
            guard let column, let value = field(column), value.contains(where: { !WebPushEndpoint.isSpace($0) }) else { return nil }
            return value
        }
        if let p256dh = filled(columns.p256dh) {
            guard let auth = filled(columns.auth) else { return missing("auth") }
            return decode(p256dh: p256dh, auth: auth, into: &buffer, names: ("p256dh", "auth"))
        }
        if let keys = filled(columns.keys) {
            return fromJSON(keys, keysMember: false, into: &buffer, field: "keys")
        }
        if let subscription = filled(columns.subscription) {
            return fromJSON(subscription, keysMember: true, into: &buffer, field: "subscription")
        }
        return missing("p256dh")
    }

    private func missing(_ field: String) -> RowProblem {
        RowProblem(reason: WebPushReason.invalidSubscription, field: field, message: "missing (a subscription needs its p256dh key and auth secret)")
    }

    private func fromJSON(_ json: UnsafeRawBufferPointer, keysMember: Bool, into buffer: inout [UInt8], field: String) -> RowProblem? {
        let scanner = JSONScanner(json.bindMemory(to: UInt8.self))
        guard json.count <= WebPushSubscription.jsonBytesMax, var object = scanner.rootObject() else {
            return RowProblem(reason: WebPushReason.invalidSubscription, field: field, message: "not a JSON object")
        }
        if keysMember {
            guard let keys = scanner.member("keys", ofObjectAt: object) else { return missing("\(field).keys") }
            object = keys.lowerBound
        }
        let prefix = keysMember ? "\(field).keys." : "\(field)."
        guard var p256dh = scanner.member("p256dh", ofObjectAt: object).flatMap({ scanner.string($0, bytesMax: 128) }) else { return missing(prefix + "p256dh") }
        guard var auth = scanner.member("auth", ofObjectAt: object).flatMap({ scanner.string($0, bytesMax: 128) }) else { return missing(prefix + "auth") }
        return p256dh.withUTF8 { p in
            auth.withUTF8 { a in
                decode(p256dh: UnsafeRawBufferPointer(p), auth: UnsafeRawBufferPointer(a), into: &buffer, names: (prefix + "p256dh", prefix + "auth"))
            }
        }
    }

    private func decode(p256dh: UnsafeRawBufferPointer, auth: UnsafeRawBufferPointer, into buffer: inout [UInt8],
                        names: (p256dh: String, auth: String)) -> RowProblem? {
        func problem(_ field: String, _ message: String) -> RowProblem {
            RowProblem(reason: WebPushReason.invalidSubscription, field: field, message: message)
        }
        guard let count = decoded.withUnsafeMutableBytes({ WebPushBase64.decode(p256dh, into: $0) }) else { return problem(names.p256dh, "not base64url") }
        guard count == P256Key.pointBytes else { return problem(names.p256dh, "decodes to \(count) bytes; a P-256 public key is 65 (0x04, X, Y)") }
        guard decoded[0] == 0x04 else { return problem(names.p256dh, "not an uncompressed point (its first byte is not 0x04)") }
        buffer.append(contentsOf: decoded[0..<count])
        guard let authCount = decoded.withUnsafeMutableBytes({ WebPushBase64.decode(auth, into: $0) }) else { return problem(names.auth, "not base64url") }
        guard authCount == WebPushSubscription.authSecretBytes else {
            return problem(names.auth, "decodes to \(authCount) bytes; the authentication secret is \(WebPushSubscription.authSecretBytes)")
        }
        buffer.append(contentsOf: decoded[0..<authCount])
        return nil
    }
}
