// Socket set-up shared by both backends: literal address parsing, socket creation and options.
// Every socket is non-blocking and close-on-exec; connections get TCP_NODELAY. Sends use
// MSG_NOSIGNAL, so SIGPIPE never fires.

import Glibc

enum Sockets {
    /// Parses an IPv4 or IPv6 literal into `storage`; returns the address length.
    static func parse(host: String, port: UInt16, into storage: UnsafeMutablePointer<sockaddr_storage>)
        -> socklen_t?
    {
        storage.pointee = sockaddr_storage()
        var ipv4 = in_addr()
        if inet_pton(AF_INET, host, &ipv4) == 1 {
            return storage.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { address in
                address.pointee.sin_family = sa_family_t(AF_INET)
                address.pointee.sin_port = port.bigEndian
                address.pointee.sin_addr = ipv4
                return socklen_t(MemoryLayout<sockaddr_in>.size)
            }
        }
        var ipv6 = in6_addr()
        if inet_pton(AF_INET6, host, &ipv6) == 1 {
            return storage.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { address in
                address.pointee.sin6_family = sa_family_t(AF_INET6)
                address.pointee.sin6_port = port.bigEndian
                address.pointee.sin6_addr = ipv6
                return socklen_t(MemoryLayout<sockaddr_in6>.size)
            }
        }
        return nil
    }

    static func makeStreamSocket(family: sa_family_t) throws(ReactorError) -> Int32 {
        let fd = socket(Int32(family), Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue)
                            | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw ReactorError(syscall: "socket", errno: errno) }
        return fd
    }

    static func setOption(_ fd: Int32, level: Int32, name: Int32, syscallName: String) throws(ReactorError) {
        var one: Int32 = 1
        guard setsockopt(fd, level, name, &one, socklen_t(MemoryLayout<Int32>.size)) == 0 else {
            throw ReactorError(syscall: "setsockopt(\(syscallName))", errno: errno)
        }
    }

    static func setNoDelay(_ fd: Int32) throws(ReactorError) {
        try setOption(fd, level: Int32(IPPROTO_TCP), name: TCP_NODELAY, syscallName: "TCP_NODELAY")
    }

    /// A bound, listening socket and the port it got.
    static func makeListener(host: String, port: UInt16, backlog: Int32, reusePort: Bool)
        throws(ReactorError) -> (fd: Int32, port: UInt16)
    {
        var storage = sockaddr_storage()
        guard let length = parse(host: host, port: port, into: &storage) else {
            throw ReactorError("listen: \(host) is not an IPv4 or IPv6 literal")
        }
        let fd = try makeStreamSocket(family: storage.ss_family)
        do throws(ReactorError) {
            try setOption(fd, level: SOL_SOCKET, name: SO_REUSEADDR, syscallName: "SO_REUSEADDR")
            if reusePort {
                try setOption(fd, level: SOL_SOCKET, name: SO_REUSEPORT, syscallName: "SO_REUSEPORT")
            }
            let bound = withUnsafePointer(to: &storage) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
            }
            guard bound == 0 else { throw ReactorError(syscall: "bind(\(host):\(port))", errno: errno) }
            guard Glibc.listen(fd, backlog) == 0 else { throw ReactorError(syscall: "listen", errno: errno) }
            var local = sockaddr_storage()
            var localLength = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let named = withUnsafeMutablePointer(to: &local) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &localLength) }
            }
            guard named == 0 else { throw ReactorError(syscall: "getsockname", errno: errno) }
            return (fd, boundPort(local))
        } catch {
            Glibc.close(fd)
            throw error
        }
    }

    static func boundPort(_ storage: sockaddr_storage) -> UInt16 {
        var copy = storage
        return withUnsafePointer(to: &copy) { pointer in
            if storage.ss_family == sa_family_t(AF_INET) {
                return pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin_port) }
            }
            return pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin6_port) }
        }
    }

    /// The pending error of a socket whose non-blocking connect finished (SO_ERROR).
    static func pendingError(_ fd: Int32) -> Int32 {
        var value: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_ERROR, &value, &length) == 0 else { return errno }
        return value
    }
}
