import PushcastCore
import PushcastInput

/// Reads token files through a `ReadableFile`, decompressing gzip and zstd exports on the
/// way (`DecompressingByteSource` goes by the first bytes; plain files pass through unchanged).
/// Every reader of an input (send's reads, check, merge, prune-apply, stdin) opens it here, so all
/// of them, and the journal's input fingerprint (`HashingByteSource` wraps this), see the
/// decompressed bytes.
public final class InputFileSource: ByteSource {
    let file: any ReadableFile
    private let decompressing: DecompressingByteSource

    public init(_ file: any ReadableFile) {
        self.file = file
        decompressing = DecompressingByteSource(Raw(file), name: file.path == "-" ? "<stdin>" : file.path)
    }

    /// What the first read found (gzip, zstd or none); nil before it.
    public var compression: InputCompression? { decompressing.compression }

    public func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int { try decompressing.read(into: buffer) }

    /// The file's bytes as they are on disk.
    private final class Raw: ByteSource {
        let file: any ReadableFile
        init(_ file: any ReadableFile) { self.file = file }
        func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int { try file.read(into: buffer) }
    }
}
