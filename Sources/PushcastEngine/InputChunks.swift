import PushcastInput

/// What the first read of an export saw, chunk by chunk: a hash of each `chunkBytes` of its
/// (decompressed) bytes. The reads that send verify each chunk against it before handing out
/// any of its bytes, so an export rewritten while a campaign runs (`cat new.csv > in.csv`)
/// stops the run at the first changed chunk, and nothing of the new content is sent.
public struct InputChunkPlan: Sendable {
    public static let chunkBytes = 1 << 20
    public internal(set) var hashes: [UInt64] = []
    public internal(set) var byteCount = 0

    public init() {}
}

/// The input changed since the first read: the chunk at `offset` differs (or the input ends
/// early, or runs on past where it ended).
public struct InputChangedError: Error, CustomStringConvertible {
    public let offset: Int
    public let what: String

    public init(offset: Int, what: String) {
        self.offset = offset
        self.what = what
    }

    public var description: String {
        "the input changed since it was first read (\(what) at byte \(offset)): nothing from the new content was sent"
    }
}

/// Records the chunk hashes on the first read (wraps the source that read sees).
public final class ChunkRecordingByteSource: ByteSource {
    private let inner: ByteSource
    private var current = ContentHash()
    public private(set) var plan = InputChunkPlan()

    public init(_ inner: ByteSource) { self.inner = inner }

    public func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        let count = try inner.read(into: buffer)
        var done = 0
        while done < count {
            let room = InputChunkPlan.chunkBytes - current.byteCount
            let n = min(room, count - done)
            current.add(UnsafeRawBufferPointer(rebasing: buffer[done..<(done + n)]))
            done += n
            if current.byteCount == InputChunkPlan.chunkBytes { closeChunk() }
        }
        plan.byteCount += count
        if count == 0 && current.byteCount > 0 { closeChunk() }
        return count
    }

    private func closeChunk() {
        plan.hashes.append(current.value)
        current = ContentHash()
    }
}

/// Serves an input only after each whole chunk has been read and found equal to the first
/// read's (one chunk buffered: memory stays flat).
public final class ChunkVerifyingByteSource: ByteSource {
    private let inner: ByteSource
    private let plan: InputChunkPlan
    private var chunk: [UInt8]
    private var filled = 0
    private var served = 0
    private var index = 0
    private var ended = false

    public init(_ inner: ByteSource, plan: InputChunkPlan) {
        self.inner = inner
        self.plan = plan
        chunk = [UInt8](repeating: 0, count: InputChunkPlan.chunkBytes)
    }

    public func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        if served == filled {
            if ended { return 0 }
            try loadChunk()
            if filled == 0 { return 0 }
        }
        let n = min(buffer.count, filled - served)
        chunk.withUnsafeBytes { bytes in
            buffer.baseAddress!.copyMemory(from: bytes.baseAddress! + served, byteCount: n)
        }
        served += n
        return n
    }

    /// Reads the next whole chunk (or the rest of the input) and checks it.
    private func loadChunk() throws {
        filled = 0
        served = 0
        while filled < chunk.count {
            let n = try chunk.withUnsafeMutableBytes { try inner.read(into: UnsafeMutableRawBufferPointer(rebasing: $0[filled...])) }
            if n == 0 { ended = true; break }
            filled += n
        }
        let offset = index * InputChunkPlan.chunkBytes
        if filled == 0 {
            guard index == plan.hashes.count else { throw InputChangedError(offset: offset, what: "it ends early") }
            return
        }
        guard index < plan.hashes.count else { throw InputChangedError(offset: offset, what: "it runs on past its first end") }
        var hash = ContentHash()
        chunk.withUnsafeBytes { hash.add(UnsafeRawBufferPointer(rebasing: $0[0..<filled])) }
        guard hash.value == plan.hashes[index] else {
            throw InputChangedError(offset: offset, what: "the bytes differ from the first read's")
        }
        if ended && index + 1 != plan.hashes.count { throw InputChangedError(offset: offset + filled, what: "it ends early") }
        index += 1
    }
}
