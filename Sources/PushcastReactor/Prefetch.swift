import CURing

/// Cache prefetch hints, for loops over memory written long ago: an outcome's strings were
/// allocated when its row was read, and are read again when its answer comes back 50 ms later,
/// long out of cache. A hint never faults and changes no result, only when the loads start.
public enum Prefetch {
    @inlinable @inline(__always)
    public static func read(_ address: UnsafeRawPointer?) {
        guard let address else { return }
        curing_prefetch(address)
    }

    /// The first 128 bytes of the storage of the `String` (or `String?`) stored at `address`,
    /// read without copying the string: a copy would retain it, and the retain itself waits for
    /// the cache line. A native string keeps its storage object's address in the low 60 bits of
    /// its second word, and its UTF-8 bytes from 32 bytes into that object; any other string (a
    /// small one kept inline, a literal, nil) makes this a hint at an address nothing needs,
    /// which is harmless.
    @inlinable @inline(__always)
    public static func stringStorage(at address: UnsafeRawPointer) {
        let object = address.load(fromByteOffset: 8, as: UInt.self) & 0x0FFF_FFFF_FFFF_FFFF
        read(UnsafeRawPointer(bitPattern: object))
        read(UnsafeRawPointer(bitPattern: object &+ 64))
    }
}
