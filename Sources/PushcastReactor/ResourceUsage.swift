import PushcastCore
#if canImport(Glibc)
import Glibc
#endif

/// CPU time and peak memory of this process, from getrusage(2).
public struct ResourceUsage: Sendable, Equatable {
    public var userMicroseconds: UInt64
    public var systemMicroseconds: UInt64
    /// Peak resident set size in KiB.
    public var peakResidentKibibytes: UInt64

    public var cpuMicroseconds: UInt64 { userMicroseconds + systemMicroseconds }

    public static func current() -> ResourceUsage {
        var usage = rusage()
        // In this module Glibc sees getrusage with the __USE_GNU signature (int who), because
        // CURing brings in liburing.h, which defines _GNU_SOURCE; convert explicitly.
        getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
        return ResourceUsage(
            userMicroseconds: UInt64(usage.ru_utime.tv_sec) * 1_000_000 + UInt64(usage.ru_utime.tv_usec),
            systemMicroseconds: UInt64(usage.ru_stime.tv_sec) * 1_000_000 + UInt64(usage.ru_stime.tv_usec),
            peakResidentKibibytes: UInt64(usage.ru_maxrss))
    }

    /// The number of online processors.
    public static var processorCount: Int { max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))) }
}

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

extension Reactor {
    /// Wall-clock seconds since the Unix epoch (CLOCK_REALTIME), with fractions.
    public static func wallClockSeconds() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}

/// The real wall clock, for JWT issue times and 410 timestamps, in whole seconds: read from
/// CLOCK_REALTIME_COARSE (the time at the last timer tick, a few milliseconds behind at most),
/// which costs a memory read instead of a TSC read. Each APNs request asks whether its JWT is due
/// for renewal (`APNsTokenSource.isCurrent`): the fine clock was 0.5 % of the client's CPU.
public final class SystemWallClock: WallClock {
    public init() {}
    public func secondsSinceEpoch() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME_COARSE, &ts)
        return Int64(ts.tv_sec)
    }
}
