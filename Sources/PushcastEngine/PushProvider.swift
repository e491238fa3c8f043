import PushcastAPNs
import PushcastCore
import PushcastFCM
import PushcastJSON

/// What the engine knows about one push provider: everything that differs between APNs, FCM
/// and any provider added later, as a value. The reader side asks it which `platform` values
/// route to it and what its tokens look like; a `ProviderRendering` (the campaign's templates)
/// turns rows into request bodies; a `ProviderAdapter` on each worker speaks its protocol and
/// maps its answers onto `ProviderVerdict`s. Nothing in the engine branches on which provider a
/// row is for: it looks the provider up by `id.position` and asks.
///
/// A provider added to pushcast brings one of these, an adapter and a rendering, in a module of
/// its own, and one line in the catalog its command builds (`ProviderCatalog.standard` for the
/// CLI). `StubProviderTests` sends a whole campaign to a provider defined only in a test target.
public protocol PushProvider: Sendable {
    var id: ProviderID { get }
    /// The service's name in messages: "APNs", "FCM".
    var displayName: String { get }
    /// The `platform`/`provider` column values that route a row here, lower case (the name in
    /// `id` is always one of them).
    var platformAliases: [String] { get }
    /// The results column holding the provider's id for the notification (the apns-id sent with
    /// it, FCM's message name), `OutcomeRecord.messageID`.
    var messageIDField: String { get }
    /// Writes the token as it is sent (APNs: lower-case hex) into `output`, emptied first, or
    /// says why it is not a token of this provider. Runs once per row on the reader thread: no
    /// allocation once `output` has grown.
    func normalize(token raw: UnsafeRawBufferPointer, into output: inout [UInt8]) -> TokenProblem?
    /// The campaign-wide rate its lane keeps to without `--rate` (a provider-wide quota), or
    /// nil for none.
    var defaultRatePerSecond: Double? { get }
}

extension PushProvider {
    public var defaultRatePerSecond: Double? { nil }
}

/// Why a token is not a token, in words.
public struct TokenProblem: Error, Sendable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// How one provider's rows become request bodies in this campaign (its templates and limits).
/// One renderer is made per preparer, on the reader thread, so it may keep scratch state.
public protocol ProviderRendering: Sendable {
    func makeRenderer(campaign: String) -> any NotificationRenderer
}

/// Renders one provider's request bodies on the reader thread.
public protocol NotificationRenderer: AnyObject {
    /// The most bytes a body may have, and what the body is called in the error for a larger one.
    var bodyBytesMax: Int { get }
    var bodyName: String { get }
    /// Renders the body for `token` (normalised, UTF-8) and the row's fields into `buffer`
    /// (emptied first by the caller); returns the body's size, which may exceed `bodyBytesMax`.
    func render(token: UnsafeRawBufferPointer, into buffer: inout [UInt8], field: (Int) -> UnsafeRawBufferPointer?) -> Int
    /// The id the request carries and the results record before any answer (APNs: the apns-id
    /// derived from campaign and token), or nil.
    func notificationID(token: UnsafeRawBufferPointer) -> PackedText?
}

/// The providers a command knows, in the order they are listed and reported. Tables by
/// provider are indexed by `ProviderID.position`.
public struct ProviderCatalog: Sendable {
    public let providers: [any PushProvider]
    /// By position: nil where no provider of the catalog sits.
    private let byPosition: [(any PushProvider)?]
    private let aliases: [(bytes: [[UInt8]], id: ProviderID)]

    public init(_ providers: [any PushProvider]) {
        var byPosition = [(any PushProvider)?](repeating: nil, count: ProviderID.positionsMax)
        for provider in providers {
            precondition(byPosition[provider.id.position] == nil, "two providers at position \(provider.id.position)")
            byPosition[provider.id.position] = provider
        }
        self.providers = providers
        self.byPosition = byPosition
        aliases = providers.map { p in (([p.id.rawValue] + p.platformAliases).map { Array($0.lowercased().utf8) }, p.id) }
    }

    /// APNs and FCM: what the pushcast command sends to.
    public static let standard = ProviderCatalog([APNsPushProvider(), FCMPushProvider()])

    public var ids: [ProviderID] { providers.map(\.id) }

    @inline(__always)
    public subscript(id: ProviderID) -> any PushProvider {
        guard let provider = byPosition[id.position], provider.id == id else { preconditionFailure("\(id) is not in this catalog") }
        return provider
    }

    public func provider(named name: some StringProtocol) -> ProviderID? {
        let lowered = name.lowercased()
        return providers.first { $0.id.rawValue == lowered }?.id
    }

    /// The provider a `platform` column value names (its name or one of its aliases).
    public func provider(columnBytes value: UnsafeRawBufferPointer) -> ProviderID? {
        for (words, id) in aliases where ProviderID.matches(value, anyOf: words) { return id }
        return nil
    }

    /// "ios/apns or android/fcm": what a `platform` value may be, for an error message.
    public var aliasHint: String {
        providers.map { ([$0.platformAliases.first].compactMap { $0 } + [$0.id.rawValue]).joined(separator: "/") }.joined(separator: " or ")
    }

    /// The results' message-id columns, in catalog order, each once.
    public var messageIDFields: [String] {
        var fields: [String] = []
        for provider in providers where !fields.contains(provider.messageIDField) { fields.append(provider.messageIDField) }
        return fields
    }
}

// MARK: - APNs and FCM

public struct APNsPushProvider: PushProvider {
    public init() {}
    public var id: ProviderID { .apns }
    public var displayName: String { "APNs" }
    public var platformAliases: [String] { ["ios", "ipados", "macos", "watchos", "tvos"] }
    public var messageIDField: String { "apns_id" }
    public func normalize(token raw: UnsafeRawBufferPointer, into output: inout [UInt8]) -> TokenProblem? {
        do { try APNsDeviceToken.normalize(raw, into: &output) } catch { return TokenProblem(error.description) }
        return nil
    }
}

public struct FCMPushProvider: PushProvider {
    public init() {}
    public var id: ProviderID { .fcm }
    public var displayName: String { "FCM" }
    public var platformAliases: [String] { ["android", "firebase"] }
    public var messageIDField: String { "fcm_name" }
    /// FCM's default quota is per project: 600,000 messages a minute.
    public var defaultRatePerSecond: Double? { 10_000 }
    public func normalize(token raw: UnsafeRawBufferPointer, into output: inout [UInt8]) -> TokenProblem? {
        do { try FCMToken.normalize(raw, into: &output) } catch { return TokenProblem(error.description) }
        return nil
    }
}

/// APNs bodies: the payload template, 4096 bytes (5120 for voip), and the apns-id derived from
/// (campaign, token).
public struct APNsRendering: ProviderRendering {
    public let template: PayloadTemplate
    public let payloadBytesMax: Int
    public init(template: PayloadTemplate, payloadBytesMax: Int) {
        self.template = template
        self.payloadBytesMax = payloadBytesMax
    }
    public func makeRenderer(campaign: String) -> any NotificationRenderer { Renderer(self, campaign: campaign) }

    final class Renderer: NotificationRenderer {
        let rendering: APNsRendering
        /// One SHA-256 context for the reader thread's apns-id derivations.
        let ids: APNsIDGenerator
        init(_ rendering: APNsRendering, campaign: String) {
            self.rendering = rendering
            ids = APNsIDGenerator(campaign: campaign)
        }
        var bodyBytesMax: Int { rendering.payloadBytesMax }
        var bodyName: String { "payload" }
        func render(token: UnsafeRawBufferPointer, into buffer: inout [UInt8], field: (Int) -> UnsafeRawBufferPointer?) -> Int {
            rendering.template.render(into: &buffer, value: field)
        }
        func notificationID(token: UnsafeRawBufferPointer) -> PackedText? { ids.derivePacked(token: token) }
    }
}

/// FCM bodies: `{"message":{…}}` from the message template, the token inside; 4096 bytes.
public struct FCMRendering: ProviderRendering {
    public let template: FCMMessageTemplate
    public init(template: FCMMessageTemplate) { self.template = template }
    public func makeRenderer(campaign: String) -> any NotificationRenderer { Renderer(template) }

    final class Renderer: NotificationRenderer {
        let template: FCMMessageTemplate
        init(_ template: FCMMessageTemplate) { self.template = template }
        var bodyBytesMax: Int { FCMMessageTemplate.messageBytesMax }
        var bodyName: String { "FCM message" }
        func render(token: UnsafeRawBufferPointer, into buffer: inout [UInt8], field: (Int) -> UnsafeRawBufferPointer?) -> Int {
            template.render(token: token, into: &buffer, value: field)
        }
        func notificationID(token: UnsafeRawBufferPointer) -> PackedText? { nil }
    }
}
