#if canImport(Glibc)
import Glibc
#endif

/// Turns a host name into an IP literal the reactor can connect to (getaddrinfo, at start-up only).
public enum AddressResolution {
    public static func resolve(host: String) throws(ReactorError) -> String {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var result: UnsafeMutablePointer<addrinfo>? = nil
        let rc = getaddrinfo(host, nil, &hints, &result)
        guard rc == 0, let first = result else {
            throw ReactorError("cannot resolve \(host): \(String(cString: gai_strerror(rc)))")
        }
        defer { freeaddrinfo(result) }
        // Prefer IPv4 when both exist: loopback mocks usually listen on 127.0.0.1.
        var chosen: UnsafeMutablePointer<addrinfo>? = first
        var cursor: UnsafeMutablePointer<addrinfo>? = first
        while let c = cursor {
            if c.pointee.ai_family == AF_INET { chosen = c; break }
            cursor = c.pointee.ai_next
        }
        guard let ai = chosen, let sa = ai.pointee.ai_addr else {
            throw ReactorError("cannot resolve \(host): no address")
        }
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        if ai.pointee.ai_family == AF_INET {
            sa.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { sin in
                var a = sin.pointee.sin_addr
                _ = inet_ntop(AF_INET, &a, &text, socklen_t(text.count))
            }
        } else {
            sa.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { sin6 in
                var a = sin6.pointee.sin6_addr
                _ = inet_ntop(AF_INET6, &a, &text, socklen_t(text.count))
            }
        }
        return String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
