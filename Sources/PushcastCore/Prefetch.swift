import CPrefetch

/// Cache prefetch hints, for loops over memory written long ago: an outcome's strings were
/// allocated when its row was read, and are read again when its answer comes back 50 ms later,
/// long out of cache. A hint never faults and changes no result, only when the loads start.
public enum Prefetch {
    @inlinable @inline(__always)
    public static func read(_ address: UnsafeRawPointer?) {
        guard let address else { return }
        cprefetch_read(address)
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

    /// The header of the storage of the array stored at `address` (an array's one word is its
    /// storage object's address).
    @inlinable @inline(__always)
    public static func arrayStorage(at address: UnsafeRawPointer) {
        read(UnsafeRawPointer(bitPattern: address.load(as: UInt.self)))
    }

    /// The storage of up to three Strings and one array stored at these offsets from `base` in
    /// a struct (-1: none).
    @inlinable @inline(__always)
    public static func storages(from base: UnsafeRawPointer, strings: (Int, Int, Int), array: Int = -1) {
        if strings.0 >= 0 { stringStorage(at: base + strings.0) }
        if strings.1 >= 0 { stringStorage(at: base + strings.1) }
        if strings.2 >= 0 { stringStorage(at: base + strings.2) }
        if array >= 0 { arrayStorage(at: base + array) }
    }
}
