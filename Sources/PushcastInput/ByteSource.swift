// PushcastInput: streaming, constant-memory readers for token exports (CSV and NDJSON).
//
// The module is sans-I/O (docs/DESIGN.md §2.1): bytes arrive through a `ByteSource` that the caller
// supplies (the reactor module provides files and stdin, tests use `MemoryByteSource`), and the
// readers never call the kernel themselves. Every buffer is sized at start-up from
// `TokenFileReaderOptions` (docs/DESIGN.md §2.4): a reader holds one fixed buffer of
// `bufferBytes + lineBytesMax` bytes whatever the input, and a row is a borrowed view into it.

/// Where bytes come from. The reactor module provides a file/stdin implementation; tests use
/// memory.
public protocol ByteSource: AnyObject {
    /// Reads up to `buffer.count` bytes into `buffer`; returns 0 at the end of input. Throws on an
    /// I/O error.
    func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int
}

/// A `ByteSource` over bytes in memory. `chunkSize` caps each read, so tests can split the input
/// at every possible boundary.
public final class MemoryByteSource: ByteSource {
    private let bytes: [UInt8]
    private let chunkSize: Int
    private var offset = 0

    public init(_ bytes: [UInt8], chunkSize: Int = 65536) {
        precondition(chunkSize >= 1, "chunkSize must be at least 1")
        self.bytes = bytes
        self.chunkSize = chunkSize
    }

    public func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        let count = min(chunkSize, bytes.count - offset, buffer.count)
        guard count > 0 else { return 0 }
        bytes.withUnsafeBytes { all in
            buffer.baseAddress!.copyMemory(from: all.baseAddress! + offset, byteCount: count)
        }
        offset += count
        return count
    }
}
