// HTTP2MemoryPool: a per-session nghttp2_mem allocator with a free stack per size class.
//
// Why: nghttp2 allocates and frees several small blocks per stream (the stream, its outbound
// items, the copied header block, map and queue entries). Through glibc that was ~12 % of the
// client's CPU per request; a free stack per size class makes the steady state allocation-free
// (docs/DESIGN.md §2.4, "allocate nothing per notification on the hot path").
//
// Rules it relies on:
// - One session, one thread: nghttp2 calls the allocator only from inside the session's own
//   calls, so the stacks need no locks.
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
    /// The header's class word for a block that bypasses the stacks.
    static let largeClass = -1
    /// A class's stack starts this deep and doubles up to its cap.
    static let stackInitial = 64

    /// Per class, a stack of free payloads. The links live out of line, not in the free blocks:
    /// with thousands of streams in flight a free block is often cold, and a list threaded
    /// through the blocks made every allocation wait on a cache miss to find the next head
    /// (perf: 95 % of the allocator's samples on that one load, 5 % of the mock's CPU).
    private let stacks: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutableRawPointer>?>
    private let cached: UnsafeMutablePointer<Int>
    private let capacity: UnsafeMutablePointer<Int>
    private let cachedMax: UnsafeMutablePointer<Int>

    private init(streamsMax: Int) {
        stacks = .allocate(capacity: Self.classCount)
        stacks.initialize(repeating: nil, count: Self.classCount)
        cached = .allocate(capacity: Self.classCount)
        cached.initialize(repeating: 0, count: Self.classCount)
        capacity = .allocate(capacity: Self.classCount)
        capacity.initialize(repeating: 0, count: Self.classCount)
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
        let depth = cached[index]
        if depth > 0 {
            cached[index] = depth - 1
            return stacks[index].unsafelyUnwrapped[depth - 1]
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
        guard index != Self.largeClass, cached[index] < capacity[index] || grow(index) else {
            free(raw)
            return
        }
        stacks[index].unsafelyUnwrapped[cached[index]] = payload
        cached[index] += 1
    }

    /// Makes room for one more free block of class `index`; false at the class's cap.
    private func grow(_ index: Int) -> Bool {
        let old = capacity[index]
        guard old < cachedMax[index] else { return false }
        let new = min(cachedMax[index], max(Self.stackInitial, 2 * old))
        let bigger = UnsafeMutablePointer<UnsafeMutableRawPointer>.allocate(capacity: new)
        if let stack = stacks[index] {
            bigger.moveInitialize(from: stack, count: cached[index])
            stack.deallocate()
        }
        stacks[index] = bigger
        capacity[index] = new
        return true
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
            if let stack = stacks[index] {
                for k in 0..<cached[index] { free(stack[k] - Self.headerBytes) }
                stack.deallocate()
            }
            stacks[index] = nil
            cached[index] = 0
        }
        stacks.deallocate()
        cached.deallocate()
        capacity.deallocate()
        cachedMax.deallocate()
    }
}
