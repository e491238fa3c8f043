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
        // Glibc's module may see getrusage with the __USE_GNU signature (int who) or the plain
        // one, depending on which C headers came in first; convert explicitly.
        getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
        return ResourceUsage(
            userMicroseconds: UInt64(usage.ru_utime.tv_sec) * 1_000_000 + UInt64(usage.ru_utime.tv_usec),
            systemMicroseconds: UInt64(usage.ru_stime.tv_sec) * 1_000_000 + UInt64(usage.ru_stime.tv_usec),
            peakResidentKibibytes: UInt64(usage.ru_maxrss))
    }

    /// The number of online processors.
    public static var processorCount: Int { max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))) }
}
