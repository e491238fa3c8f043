#if canImport(Glibc)
import Glibc
#endif

/// The C library's byte scans and moves (memchr, memcmp, memmove: vectorised, and no Swift loop
/// matches them), for the line splitters over large buffers. Inlined: a call is the C call.
public enum RawMemory {
    /// The first `byte` in `count` bytes from `start`, nil when there is none.
    @inlinable @inline(__always)
    public static func find(_ byte: UInt8, in start: UnsafeRawPointer, count: Int) -> UnsafeMutableRawPointer? {
        memchr(start, Int32(byte), count)
    }

    /// Whether `count` bytes at `a` and at `b` are the same.
    @inlinable @inline(__always)
    public static func equal(_ a: UnsafeRawPointer, _ b: UnsafeRawPointer, count: Int) -> Bool {
        memcmp(a, b, count) == 0
    }

    /// Copies `count` bytes from `source` to `destination`; the ranges may overlap.
    @inlinable @inline(__always)
    public static func move(to destination: UnsafeMutableRawPointer, from source: UnsafeRawPointer, count: Int) {
        memmove(destination, source, count)
    }
}
