/// `--resolve HOST:PORT:ADDRESS` (curl's option): the address to connect to for a host and
/// port, instead of resolving the host. The host still names the server in SNI, certificate
/// checks, `:authority` and a Web Push endpoint's VAPID audience; only the socket goes elsewhere
/// (a push service pinned to 127.0.0.1 in a test, a canary address).
public struct AddressOverrides: Sendable, Equatable {
    /// By "host:port", the host lower-cased and without brackets.
    public private(set) var addresses: [String: String] = [:]
    /// `--connect-to`: by "host:port", the port to connect to instead (the address is in
    /// `addresses`).
    public private(set) var ports: [String: UInt16] = [:]
    /// More entries than this are refused.
    public static let entriesMax = 256

    public init() {}

    /// Reads each `HOST:PORT:ADDRESS`; an IPv6 host or address goes in brackets (`[::1]`). A
    /// later entry for the same host and port replaces an earlier one.
    public init(_ entries: [String], connectTo: [String] = []) throws(EndpointError) {
        guard entries.count + connectTo.count <= Self.entriesMax else {
            throw EndpointError("at most \(Self.entriesMax) --resolve and --connect-to entries")
        }
        for entry in entries {
            let (host, rest) = try Self.bracketed(Substring(entry), entry)
            guard rest.first == ":" else { throw EndpointError("--resolve \(entry): expected HOST:PORT:ADDRESS") }
            let afterHost = rest.dropFirst()
            guard let colon = afterHost.firstIndex(of: ":") else { throw EndpointError("--resolve \(entry): expected HOST:PORT:ADDRESS") }
            guard let port = UInt16(afterHost[..<colon]), port > 0 else {
                throw EndpointError("--resolve \(entry): the port must be a number from 1 to 65535")
            }
            let (address, tail) = try Self.bracketed(afterHost[afterHost.index(after: colon)...], entry)
            guard tail.isEmpty, !host.isEmpty, !address.isEmpty,
                  address.allSatisfy({ $0.isHexDigit || $0 == "." || $0 == ":" }) else {
                throw EndpointError("--resolve \(entry): ADDRESS must be an IPv4 or IPv6 address")
            }
            addresses[Self.key(host: String(host), port: port)] = String(address)
        }
        for entry in connectTo { try addConnectTo(entry) }
    }

    /// `HOST:PORT:ADDRESS:PORT2` (curl's --connect-to, with an address for the second host):
    /// connections for HOST:PORT go to ADDRESS:PORT2.
    private mutating func addConnectTo(_ entry: String) throws(EndpointError) {
        let shape = "--connect-to \(entry): expected HOST:PORT:ADDRESS:PORT2"
        let (host, rest) = try Self.bracketed(Substring(entry), entry, option: "--connect-to")
        guard rest.first == ":", !host.isEmpty else { throw EndpointError(shape) }
        let afterHost = rest.dropFirst()
        guard let colon = afterHost.firstIndex(of: ":"), let port = UInt16(afterHost[..<colon]), port > 0 else { throw EndpointError(shape) }
        let (address, tail) = try Self.bracketed(afterHost[afterHost.index(after: colon)...], entry, option: "--connect-to")
        guard !address.isEmpty, address.allSatisfy({ $0.isHexDigit || $0 == "." || $0 == ":" }) else {
            throw EndpointError("--connect-to \(entry): ADDRESS must be an IPv4 or IPv6 address")
        }
        guard tail.first == ":", let target = UInt16(tail.dropFirst()), target > 0 else {
            throw EndpointError("--connect-to \(entry): PORT2 must be a number from 1 to 65535")
        }
        let key = Self.key(host: String(host), port: port)
        addresses[key] = String(address)
        ports[key] = target
    }

    /// The address given for `endpoint`, or nil to resolve its host.
    public func address(for endpoint: Endpoint) -> String? {
        addresses.isEmpty ? nil : addresses[Self.key(host: endpoint.host, port: endpoint.port)]
    }

    /// The port given for `endpoint` by --connect-to, or nil to connect to its own.
    public func port(for endpoint: Endpoint) -> UInt16? {
        ports.isEmpty ? nil : ports[Self.key(host: endpoint.host, port: endpoint.port)]
    }

    private static func key(host: String, port: UInt16) -> String { "\(host.lowercased()):\(port)" }

    /// A leading `[…]` (its inside) or the text up to the next `:`, and what follows.
    private static func bracketed(_ text: Substring, _ entry: String, option: String = "--resolve") throws(EndpointError) -> (Substring, Substring) {
        if text.first == "[" {
            guard let close = text.firstIndex(of: "]") else { throw EndpointError("\(option) \(entry): unclosed bracket") }
            return (text[text.index(after: text.startIndex)..<close], text[text.index(after: close)...])
        }
        let end = text.firstIndex(of: ":") ?? text.endIndex
        return (text[..<end], text[end...])
    }
}
