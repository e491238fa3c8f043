import PushcastCore
import PushcastJSON
import PushcastProviderKit
import PushcastWire

// Web Push (RFC 8030, 8291, 8292) as a pushcast provider. A row's token is its subscription's
// endpoint, a capability URL on the browser vendor's push service; the endpoint's origin names
// the server, so Web Push is a routed provider: one lane per push service. The catalog line is
// `WebPushPushProvider()` (PushcastProviders).

extension ProviderID {
    public static let webpush = ProviderID("webpush", position: 2)
}

public struct WebPushPushProvider: PushProvider {
    public init() {}
    public var id: ProviderID { .webpush }
    public var displayName: String { "Web Push" }
    public var platformAliases: [String] { ["web", "browser"] }
    /// The push service's Location header: the URL of the message it accepted.
    public var messageIDField: String { "location" }
    public var isRouted: Bool { true }
    /// A mixed export leaves `token` empty on web rows and puts the endpoint (or the whole
    /// subscription JSON) in a column of its own.
    public var tokenColumns: [String] { ["endpoint", "subscription"] }

    public func normalize(token raw: UnsafeRawBufferPointer, into output: inout [UInt8]) -> TokenProblem? {
        WebPushEndpoint.normalize(raw, into: &output)
    }

    public func routeLength(token: UnsafeRawBufferPointer) -> Int? { WebPushEndpoint.originLength(token) }

    public var reasons: ReasonTable { Self.reasonTable }

    /// What the push services answer (RFC 8030 §5-§8; Mozilla's autopush errno; Apple's reasons).
    static let reasonTable = ReasonTable(source: "Web Push", reference: "RFC 8030 §5-§8, RFC 8292 §4", [
        (WebPushReason.gone, "410: the subscription expired or was unsubscribed", "pruned: delete the subscription"),
        (WebPushReason.notFound, "404: the push service does not know the subscription", "pruned: delete the subscription"),
        (WebPushReason.tooLarge, "413: the encrypted message is larger than the push service takes (4096 bytes)", "shorten the --webpush-payload template"),
        (WebPushReason.tooManyRequests, "429: over the push service's rate for this sender", "retried after its Retry-After; lower --rate"),
        (WebPushReason.badRequest, "400: the push service refused the request (a header or the encoding)", "check --webpush-ttl, --webpush-topic and the subscription"),
        (WebPushReason.badVAPID, "401/403: the push service refused the VAPID signature, its key or subject (Apple: BadJwtToken)",
         "check --vapid-key and --vapid-subject; the key must be the one the browser subscribed with"),
        (WebPushReason.invalidSubscription, "the subscription's p256dh key is not a P-256 point, or its auth secret is not 16 bytes",
         "fix or delete the subscription; it was never sent"),
        (WebPushReason.serverError, "5xx: the push service failed", "retried with backoff; resend the failed rows later"),
    ])
}

/// The reasons a Web Push outcome carries.
public enum WebPushReason {
    public static let gone = "Gone"
    public static let notFound = "NotFound"
    public static let tooLarge = "PayloadTooLarge"
    public static let tooManyRequests = "TooManyRequests"
    public static let badRequest = "BadRequest"
    public static let badVAPID = "BadVAPID"
    public static let invalidSubscription = "InvalidSubscription"
    public static let serverError = "ServerError"
}

/// A push endpoint as a token: trimmed, `https://` with the scheme and host lower-cased and a
/// port of 443 left out (`WebPushOrigin`), then the path as given. A token column holding a
/// whole subscription JSON gives its `endpoint`.
public enum WebPushEndpoint {
    /// Runs once per row on the reader thread: no allocation once `output` has grown, but for a
    /// token column holding a subscription's JSON.
    public static func normalize(_ raw: UnsafeRawBufferPointer, into output: inout [UInt8]) -> TokenProblem? {
        var start = 0, end = raw.count
        while start < end && isSpace(raw[start]) { start += 1 }
        while end > start && isSpace(raw[end - 1]) { end -= 1 }
        let trimmed = UnsafeRawBufferPointer(rebasing: raw[start..<end])
        if trimmed.first == UInt8(ascii: "{") {
            guard var endpoint = subscriptionEndpoint(trimmed) else { return TokenProblem("the subscription JSON has no endpoint string") }
            return endpoint.withUTF8 { normalize(url: UnsafeRawBufferPointer($0), into: &output) }
        }
        return normalize(url: trimmed, into: &output)
    }

    private static func normalize(url: UnsafeRawBufferPointer, into output: inout [UInt8]) -> TokenProblem? {
        switch WebPushOrigin.origin(of: url, into: &output) {
        case .failure(let problem):
            return TokenProblem("the endpoint \(problem.description)")
        case .success(let authorityEnd):
            guard authorityEnd < url.count, url[authorityEnd] == UInt8(ascii: "/") else { return TokenProblem("the endpoint has no path") }
            output.append(contentsOf: url[authorityEnd...])
            return nil
        }
    }

    /// The origin's length in a normalised endpoint: up to the path's first `/`.
    public static func originLength(_ token: UnsafeRawBufferPointer) -> Int? {
        let scheme = 8
        guard token.count > scheme, token.prefix(scheme).elementsEqual("https://".utf8) else { return nil }
        guard let slash = token[scheme...].firstIndex(of: UInt8(ascii: "/")), slash > scheme else { return nil }
        return slash
    }

    /// `endpoint` of a subscription's JSON text, or nil.
    static func subscriptionEndpoint(_ json: UnsafeRawBufferPointer) -> String? {
        guard json.count <= WebPushSubscription.jsonBytesMax else { return nil }
        let scanner = JSONScanner(json.bindMemory(to: UInt8.self))
        guard let root = scanner.rootObject(), let value = scanner.member("endpoint", ofObjectAt: root) else { return nil }
        return scanner.string(value, bytesMax: WebPushSubscription.endpointBytesMax + 1)
    }

    @inline(__always) static func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0D || byte == 0x0A }
}
