import PushcastCore

/// The providers a command knows, in the order they are listed and reported. Tables by
/// provider are indexed by `ProviderID.position`. The pushcast command's catalog is assembled
/// in one place, one line per provider (`ProviderCatalog.standard`, PushcastProviders).
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
