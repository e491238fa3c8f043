import PushcastCore
import PushcastProviderKit

/// The servers a routed provider's rows go to (`PushProvider.routeLength`): each route (a token
/// prefix such as a push service's origin) and how many rows the first read of the file found
/// for it. Looked up by the prefix's bytes, without making a String.
public struct RouteTable: Sendable {
    /// The routes in the order they were first seen.
    public private(set) var routes: [String] = []
    /// Rows counted for each route.
    public private(set) var rows: [Int] = []
    private var bytes: [[UInt8]] = []
    /// Route indexes by the XXH64 of their bytes.
    private var byHash: [UInt64: [Int]] = [:]
    /// The most routes the table takes; a route past it is refused (`add` returns false).
    public let routesMax: Int

    public init(routesMax: Int) { self.routesMax = routesMax }

    public init(routes: [String]) {
        self.init(routesMax: max(1, routes.count))
        for route in routes {
            var text = route
            _ = text.withUTF8 { add(UnsafeRawBufferPointer($0)) }
        }
    }

    public var count: Int { routes.count }

    /// The index of the route whose bytes are `prefix`, or nil.
    public func index(of prefix: UnsafeRawBufferPointer) -> Int? {
        guard let candidates = byHash[XXH64.hash(prefix, seed: 0)] else { return nil }
        return candidates.first { index in bytes[index].withUnsafeBytes { $0.elementsEqual(prefix) } }
    }

    /// Whether the route of `token` (normalised, of `provider`) is in the table.
    func contains(routeOf token: [UInt8], _ provider: any PushProvider) -> Bool {
        token.withUnsafeBytes { bytes in
            guard let length = provider.routeLength(token: bytes), length <= bytes.count else { return false }
            return index(of: UnsafeRawBufferPointer(rebasing: bytes.prefix(length))) != nil
        }
    }

    /// Counts one row for `prefix`, adding the route when it is new; false when it is new and
    /// the table already holds `routesMax` routes.
    @discardableResult
    public mutating func add(_ prefix: UnsafeRawBufferPointer) -> Bool {
        if let index = index(of: prefix) {
            rows[index] += 1
            return true
        }
        guard routes.count < routesMax else { return false }
        byHash[XXH64.hash(prefix, seed: 0), default: []].append(routes.count)
        bytes.append(Array(prefix))
        routes.append(String(decoding: prefix, as: UTF8.self))
        rows.append(1)
        return true
    }

    /// The routes split into at most `groupsMax` groups, each read by a feed of its own: the
    /// busiest routes alone, the rest together in the last group. Deterministic for the same
    /// file, so a resume groups the same way.
    public func groups(max groupsMax: Int) -> [[String]] {
        let order = routes.indices.sorted { rows[$0] != rows[$1] ? rows[$0] > rows[$1] : routes[$0] < routes[$1] }
        guard order.count > groupsMax, groupsMax > 0 else { return order.map { [routes[$0]] } }
        let alone = order.prefix(groupsMax - 1).map { [routes[$0]] }
        return alone + [order.dropFirst(groupsMax - 1).map { routes[$0] }]
    }
}
