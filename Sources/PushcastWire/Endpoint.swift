/// Where to connect: an `https://host:port` URL, split.
public struct Endpoint: Sendable, Equatable, CustomStringConvertible {
    /// The host as written (a name or an IP literal); used for SNI, verification and :authority.
    public var host: String
    public var port: UInt16

    public init(host: String, port: UInt16) {
        self.host = host
        self.port = port
    }

    /// Parses `https://host[:port]` (port 443 by default). IPv6 literals go in brackets.
    public init(url: String) throws(EndpointError) {
        guard url.hasPrefix("https://") else { throw EndpointError("endpoint must start with https://: \(url)") }
        var rest = Substring(url.dropFirst("https://".count))
        if let slash = rest.firstIndex(of: "/") {
            guard rest[slash...] == "/" else { throw EndpointError("endpoint must not have a path: \(url)") }
            rest = rest[..<slash]
        }
        var hostPart = rest
        var portPart: Substring? = nil
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { throw EndpointError("unclosed IPv6 bracket: \(url)") }
            hostPart = rest[rest.index(after: rest.startIndex)..<close]
            let after = rest[rest.index(after: close)...]
            if after.hasPrefix(":") { portPart = after.dropFirst() } else if !after.isEmpty {
                throw EndpointError("bad endpoint: \(url)")
            }
        } else if let colon = rest.lastIndex(of: ":") {
            hostPart = rest[..<colon]
            portPart = rest[rest.index(after: colon)...]
        }
        guard !hostPart.isEmpty else { throw EndpointError("endpoint has no host: \(url)") }
        var port: UInt16 = 443
        if let portPart {
            guard let p = UInt16(portPart), p > 0 else { throw EndpointError("bad port in endpoint: \(url)") }
            port = p
        }
        self.init(host: String(hostPart), port: port)
    }

    /// Splits a URL with a path (an OAuth2 `token_uri`): the endpoint, and the path (at least "/").
    public static func split(url: String) throws(EndpointError) -> (endpoint: Endpoint, path: String) {
        guard url.hasPrefix("https://") else { throw EndpointError("URL must start with https://: \(url)") }
        let rest = url.dropFirst("https://".count)
        guard let slash = rest.firstIndex(of: "/") else { return (try Endpoint(url: url), "/") }
        let path = String(rest[slash...])
        guard !path.contains(where: { $0 == " " || $0 == "#" }) else { throw EndpointError("bad path in URL: \(url)") }
        return (try Endpoint(url: "https://" + rest[..<slash]), path)
    }

    /// The `:authority` pseudo-header value.
    public var authority: String {
        let h = host.contains(":") ? "[\(host)]" : host
        return port == 443 ? h : "\(h):\(port)"
    }

    public var description: String { "https://\(authority)" }
}

public struct EndpointError: Error, CustomStringConvertible, Equatable {
    public let description: String
    public init(_ description: String) { self.description = description }
}
