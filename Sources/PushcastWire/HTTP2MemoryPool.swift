// HTTP2MemoryPool: a per-session nghttp2_mem allocator with size-class free lists.
//
// Why: nghttp2 allocates and frees several small blocks per stream (the stream, its outbound
// items, the copied header block, map and queue entries). Through glibc that was ~12 % of the
// client's CPU per request; a free list per size class makes the steady state allocation-free
// (docs/DESIGN.md §2.4, "allocate nothing per notification on the hot path").
//
// Rules it relies on:
// - One session, one thread: nghttp2 calls the allocator only from inside the session's own
//   calls, so the lists need no locks.
// - Bounded: each size class caches at most `cachedMax` blocks; a free beyond that goes back to
//   libc. Blocks larger than the biggest class go straight to libc.
// - Lifetime: nghttp2 copies the nghttp2_mem value into the session, so the pool's state must
//   outlive `nghttp2_session_del`; `destroy()` runs after it and frees every cached block (by
//   then nghttp2 has returned every block it held).
//
// Every block carries a 16-byte header (its size class, or its byte count for a large block),
// which keeps the payload 16-byte aligned like malloc's.

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import CNGHTTP2

struct HTTP2MemoryPool {
    /// Size classes are 32, 64, ..., 4096 bytes of payload.
    static let classCount = 8
    static let smallestShift = 5
    static let largestClassBytes = 1 << (smallestShift + classCount - 1)
    static let headerBytes = 16
    /// The header's class word for a block that bypasses the lists.
    static let largeClass = -1

    /// Free-list heads, one per class; the link lives in the first word of each free payload.
    private let heads: UnsafeMutablePointer<UnsafeMutableRawPointer?>
    private let cached: UnsafeMutablePointer<Int>
    private let cachedMax: UnsafeMutablePointer<Int>

    private init(streamsMax: Int) {
        heads = .allocate(capacity: Self.classCount)
        heads.initialize(repeating: nil, count: Self.classCount)
        cached = .allocate(capacity: Self.classCount)
        cached.initialize(repeating: 0, count: Self.classCount)
        cachedMax = .allocate(capacity: Self.classCount)
        // A few blocks per stream (stream, items, header copy), but no more than 1 MiB per class.
        let perStream = 4 * streamsMax + 64
        for index in 0..<Self.classCount {
            cachedMax[index] = max(16, min(perStream, (1 << 20) / Self.classBytes(index)))
        }
    }

    /// A pool and the nghttp2_mem that reaches it. Release both with `destroy(_:)`.
    static func make(streamsMax: Int) -> UnsafeMutablePointer<nghttp2_mem> {
        let pool = UnsafeMutablePointer<HTTP2MemoryPool>.allocate(capacity: 1)
        pool.initialize(to: HTTP2MemoryPool(streamsMax: streamsMax))
        let mem = UnsafeMutablePointer<nghttp2_mem>.allocate(capacity: 1)
        mem.initialize(to: nghttp2_mem(
            mem_user_data: UnsafeMutableRawPointer(pool),
            malloc: { size, userData in
                userData!.assumingMemoryBound(to: HTTP2MemoryPool.self).pointee.allocate(size)
            },
            free: { pointer, userData in
                userData!.assumingMemoryBound(to: HTTP2MemoryPool.self).pointee.release(pointer)
            },
            calloc: { count, size, userData in
                userData!.assumingMemoryBound(to: HTTP2MemoryPool.self).pointee.allocateZeroed(count, size)
            },
            realloc: { pointer, size, userData in
                userData!.assumingMemoryBound(to: HTTP2MemoryPool.self).pointee.reallocate(pointer, size)
            }))
        return mem
    }

    /// Frees every cached block and the pool itself. Call only after `nghttp2_session_del`.
    static func destroy(_ mem: UnsafeMutablePointer<nghttp2_mem>) {
        let pool = mem.pointee.mem_user_data.assumingMemoryBound(to: HTTP2MemoryPool.self)
        pool.pointee.freeCached()
        pool.deinitialize(count: 1)
        pool.deallocate()
        mem.deinitialize(count: 1)
        mem.deallocate()
    }

    // MARK: Size classes

    @inline(__always)
    static func classBytes(_ index: Int) -> Int { 1 << (smallestShift + index) }

    /// The smallest class holding `size` bytes, or nil for a large block.
    @inline(__always)
    static func classIndex(_ size: Int) -> Int? {
        guard size <= largestClassBytes else { return nil }
        if size <= 1 << smallestShift { return 0 }
        // ceil(log2(size)) - smallestShift
        return (Int.bitWidth - (size - 1).leadingZeroBitCount) - smallestShift
    }

    // MARK: Operations (nghttp2_mem)

    @inline(__always)
    func allocate(_ size: Int) -> UnsafeMutableRawPointer? {
        guard let index = Self.classIndex(size) else {
            guard let raw = malloc(Self.headerBytes + size) else { return nil }
            raw.storeBytes(of: Self.largeClass, as: Int.self)
            raw.storeBytes(of: size, toByteOffset: 8, as: Int.self)
            return raw + Self.headerBytes
        }
        if let payload = heads[index] {
            heads[index] = payload.load(as: UnsafeMutableRawPointer?.self)
            cached[index] -= 1
            return payload
        }
        guard let raw = malloc(Self.headerBytes + Self.classBytes(index)) else { return nil }
        raw.storeBytes(of: index, as: Int.self)
        return raw + Self.headerBytes
    }

    @inline(__always)
    func release(_ payload: UnsafeMutableRawPointer?) {
        guard let payload else { return }
        let raw = payload - Self.headerBytes
        let index = raw.load(as: Int.self)
        if index == Self.largeClass || cached[index] >= cachedMax[index] {
            free(raw)
            return
        }
        payload.storeBytes(of: heads[index], as: UnsafeMutableRawPointer?.self)
        heads[index] = payload
        cached[index] += 1
    }

    func allocateZeroed(_ count: Int, _ size: Int) -> UnsafeMutableRawPointer? {
        let (total, overflow) = count.multipliedReportingOverflow(by: size)
        guard !overflow, let payload = allocate(total) else { return nil }
        if total > 0 { memset(payload, 0, total) }
        return payload
    }

    func reallocate(_ payload: UnsafeMutableRawPointer?, _ size: Int) -> UnsafeMutableRawPointer? {
        guard let payload else { return allocate(size) }
        if size == 0 {
            release(payload)
            return nil
        }
        let raw = payload - Self.headerBytes
        let index = raw.load(as: Int.self)
        let capacity = index == Self.largeClass ? raw.load(fromByteOffset: 8, as: Int.self) : Self.classBytes(index)
        if index != Self.largeClass && size <= capacity { return payload }
        guard let moved = allocate(size) else { return nil }
        moved.copyMemory(from: payload, byteCount: min(capacity, size))
        release(payload)
        return moved
    }

    private func freeCached() {
        for index in 0..<Self.classCount {
            var next = heads[index]
            while let payload = next {
                next = payload.load(as: UnsafeMutableRawPointer?.self)
                free(payload - Self.headerBytes)
            }
            heads[index] = nil
            cached[index] = 0
        }
        heads.deallocate()
        cached.deallocate()
        cachedMax.deallocate()
    }
}
