import CCompression

/// The compression a token export arrives in, told by its first bytes rather than its name: an
/// export renamed, or piped in on stdin, is still read right.
public enum InputCompression: String, Sendable, CaseIterable {
    case none
    case gzip
    case zstd

    /// The longest magic `sniff` looks at.
    public static let magicBytes = 4

    /// gzip's magic is 1f 8b (RFC 1952); a zstd frame starts 28 b5 2f fd, a zstd skippable frame
    /// 5X 2a 4d 18 (RFC 8878; pzstd writes one first). Anything else, including input shorter than
    /// a magic, is `none`: a plain CSV or NDJSON file cannot start with these bytes (1f is a
    /// control character, 8b and b5 are UTF-8 continuation bytes).
    public static func sniff(_ prefix: some Collection<UInt8>) -> InputCompression {
        let bytes = Array(prefix.prefix(magicBytes))
        if bytes.count >= 2 && bytes[0] == 0x1F && bytes[1] == 0x8B { return .gzip }
        guard bytes.count == 4 else { return .none }
        if bytes == [0x28, 0xB5, 0x2F, 0xFD] { return .zstd }
        if bytes[0] & 0xF0 == 0x50 && bytes[1...] == [0x2A, 0x4D, 0x18] { return .zstd }
        return .none
    }
}

/// Why a compressed input cannot be read on. It names the compression and the compressed byte
/// offset, which is what a user can check against the file (`ls -l`, `gzip -t`).
public struct DecompressionError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        /// The input ended inside a gzip member or zstd frame.
        case truncated
        /// zlib's or zstd's own message.
        case corrupt(String)
        /// The decoder neither took input nor gave output: reading on would spin.
        case stalled
    }

    /// The input's name as the user gave it (`tokens.csv.gz`, `<stdin>`), when known.
    public var name: String?
    public var compression: InputCompression
    /// Compressed bytes before the point where the problem showed (for `truncated`, the input's
    /// whole length).
    public var offset: Int
    public var kind: Kind

    public init(name: String?, compression: InputCompression, offset: Int, kind: Kind) {
        self.name = name
        self.compression = compression
        self.offset = offset
        self.kind = kind
    }

    public var description: String {
        let prefix = name.map { "\($0): " } ?? ""
        switch kind {
        case .truncated:
            return "\(prefix)\(compression) stream ends early at compressed byte \(offset): the file is truncated"
        case .corrupt(let message):
            return "\(prefix)\(compression) data is corrupt at compressed byte \(offset): \(message)"
        case .stalled:
            return "\(prefix)\(compression) decoder made no progress at compressed byte \(offset)"
        }
    }
}

/// A `ByteSource` that reads gzip and zstd exports as the bytes they hold, and plain input as it
/// is. Token exports are often shipped compressed (`tokens.csv.gz`, `tokens.ndjson.zst`); reading
/// them here keeps every reader above (CSV, NDJSON, the input fingerprint) unaware of it.
///
/// The first read sniffs the magic (`InputCompression.sniff`). Memory is fixed whatever the file
/// or its ratio: one 64 KiB input buffer, the decoder's state (zlib's 32 KiB window; zstd's window,
/// at most 128 MiB, zstd's default limit), and output goes straight into the caller's buffer, so
/// a decompression bomb streams through like any big file. gzip is read with zlib's automatic
/// header detection (windowBits 15 + 32) and member after member, as `cat a.gz b.gz` and pigz make
/// them; zstd frames follow each other in `ZSTD_decompressStream` itself.
public final class DecompressingByteSource: ByteSource {
    /// Compressed bytes read from the inner source at a time.
    public static let inputBufferBytes = 64 * 1024

    private let inner: ByteSource
    private let name: String?
    private let input: UnsafeMutableRawBufferPointer
    /// Unused input is `input[inputStart..<inputEnd]`.
    private var inputStart = 0
    private var inputEnd = 0
    /// Compressed bytes read before `input[0]`: the base of every offset an error names.
    private var inputBase = 0
    private var innerEnded = false
    private var decoder: StreamDecoder?
    /// The error reading stopped at. Every later read throws it again; one found in a step that
    /// also gave output is thrown by the next read, so the bytes decoded before it are handed out
    /// first, however the input was split.
    private var failed: DecompressionError?

    /// What the first bytes announced; nil until the first `read` (or `detect()`).
    public private(set) var compression: InputCompression?

    /// `name` is the input's name for error messages (`tokens.csv.gz`, `<stdin>`).
    public init(_ inner: ByteSource, name: String? = nil) {
        self.inner = inner
        self.name = name
        input = .allocate(byteCount: Self.inputBufferBytes, alignment: 16)
    }

    deinit { input.deallocate() }

    /// The compression the input's first bytes announce, reading them now if no read has yet.
    /// The bytes read stay buffered: nothing is lost.
    public func detect() throws -> InputCompression {
        if let compression { return compression }
        while inputEnd < InputCompression.magicBytes {
            let count = try inner.read(into: UnsafeMutableRawBufferPointer(rebasing: input[inputEnd...]))
            if count == 0 { innerEnded = true; break }
            inputEnd += count
        }
        let found = InputCompression.sniff(UnsafeRawBufferPointer(rebasing: input[0..<inputEnd]))
        do {
            switch found {
            case .none: decoder = nil
            case .gzip: decoder = try GzipDecoder()
            case .zstd: decoder = try ZstdDecoder()
            }
        } catch {
            throw DecompressionError(name: name, compression: found, offset: 0, kind: .corrupt(error.message))
        }
        compression = found
        return found
    }

    public func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        guard buffer.count > 0 else { return 0 }
        if let failed { throw failed }
        _ = try detect()
        guard let decoder else { return try passThrough(into: buffer) }
        return try decode(decoder, into: buffer)
    }

    /// Plain input: the sniffed bytes first, then the inner source's reads as they come.
    private func passThrough(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        guard inputStart < inputEnd else { return innerEnded ? 0 : try inner.read(into: buffer) }
        let count = min(buffer.count, inputEnd - inputStart)
        buffer.baseAddress!.copyMemory(from: input.baseAddress! + inputStart, byteCount: count)
        inputStart += count
        return count
    }

    /// Steps the decoder until it gives output (returned at once, into the caller's buffer) or the
    /// input ends. Every step either takes input, gives output, or ends a member or frame; one
    /// that does none of these is an error, so no input can make this loop spin.
    private func decode(_ decoder: StreamDecoder, into output: UnsafeMutableRawBufferPointer) throws -> Int {
        while true {
            if inputStart == inputEnd && !innerEnded { try refill() }
            let pending = UnsafeRawBufferPointer(rebasing: input[inputStart..<inputEnd])
            if pending.isEmpty && innerEnded && decoder.atBoundary { return 0 }
            let wasAtBoundary = decoder.atBoundary
            let step: (consumed: Int, produced: Int)
            do {
                step = try decoder.step(pending, output)
            } catch {
                inputStart += error.consumed
                let corrupt = failure(.corrupt(error.message), at: inputStart)
                guard error.produced > 0 else { throw corrupt }
                return error.produced
            }
            inputStart += step.consumed
            if step.produced > 0 { return step.produced }
            if step.consumed > 0 || (!wasAtBoundary && decoder.atBoundary) { continue }
            throw failure(pending.isEmpty && innerEnded ? .truncated : .stalled, at: inputStart)
        }
    }

    /// Reads the next compressed bytes into the (used up) input buffer.
    private func refill() throws {
        inputBase += inputEnd
        inputStart = 0
        inputEnd = try inner.read(into: input)
        if inputEnd == 0 { innerEnded = true }
    }

    /// The error for `kind` at `position` in the input buffer, kept for every later read.
    private func failure(_ kind: DecompressionError.Kind, at position: Int) -> DecompressionError {
        let error = DecompressionError(name: name, compression: compression ?? .none, offset: inputBase + position, kind: kind)
        failed = error
        return error
    }
}

/// A decoder's failure: the library's message, and how much of the step's input it took and
/// output it gave before it.
struct DecoderFailure: Error {
    let message: String
    var consumed = 0
    var produced = 0
}

/// One decompression library behind the step `DecompressingByteSource.decode` drives.
protocol StreamDecoder: AnyObject {
    /// True between gzip members or zstd frames (and not before the first): an input that ends
    /// here ends cleanly.
    var atBoundary: Bool { get }
    /// Decodes what it can of `input` into `output` (never empty); how much it took and gave.
    func step(_ input: UnsafeRawBufferPointer, _ output: UnsafeMutableRawBufferPointer) throws(DecoderFailure) -> (consumed: Int, produced: Int)
}

/// zlib's inflate, member after member. The `z_stream` lives at a fixed heap address: zlib keeps a
/// pointer back to it and refuses a stream that has moved.
final class GzipDecoder: StreamDecoder {
    private let stream: UnsafeMutablePointer<z_stream>
    private(set) var atBoundary = false

    init() throws(DecoderFailure) {
        stream = .allocate(capacity: 1)
        stream.initialize(to: z_stream())
        // 15 + 32: the largest window, and a gzip (or zlib) header detected automatically.
        let status = pushcast_inflateInit2(stream, 15 + 32)
        guard status == Z_OK else {
            stream.deallocate()
            throw DecoderFailure(message: "zlib cannot start (inflateInit2 returned \(status))")
        }
    }

    deinit {
        inflateEnd(stream)
        stream.deinitialize(count: 1)
        stream.deallocate()
    }

    func step(_ input: UnsafeRawBufferPointer, _ output: UnsafeMutableRawBufferPointer) throws(DecoderFailure) -> (consumed: Int, produced: Int) {
        if atBoundary {
            // Another member follows (multi-member gzip); inflateReset keeps the window's memory.
            guard !input.isEmpty else { return (0, 0) }
            inflateReset(stream)
            atBoundary = false
        }
        let inputCount = min(input.count, Int(UInt32.max))
        let outputCount = min(output.count, Int(UInt32.max))
        stream.pointee.next_in = UnsafeMutablePointer(mutating: input.baseAddress?.assumingMemoryBound(to: UInt8.self))
        stream.pointee.avail_in = UInt32(inputCount)
        stream.pointee.next_out = output.baseAddress?.assumingMemoryBound(to: UInt8.self)
        stream.pointee.avail_out = UInt32(outputCount)
        let status = inflate(stream, Z_NO_FLUSH)
        let consumed = inputCount - Int(stream.pointee.avail_in)
        let produced = outputCount - Int(stream.pointee.avail_out)
        switch status {
        case Z_OK, Z_BUF_ERROR:
            return (consumed, produced)
        case Z_STREAM_END:
            atBoundary = true
            return (consumed, produced)
        case Z_NEED_DICT:
            throw DecoderFailure(message: "the stream needs a preset dictionary", consumed: consumed, produced: produced)
        default:
            let message = stream.pointee.msg.map { String(cString: $0) } ?? "zlib error \(status)"
            throw DecoderFailure(message: message, consumed: consumed, produced: produced)
        }
    }
}

/// zstd's streaming decompression. `ZSTD_decompressStream` returns 0 exactly when a frame is
/// decoded and flushed, and starts the next frame on its own.
final class ZstdDecoder: StreamDecoder {
    private let context: OpaquePointer
    private(set) var atBoundary = false

    init() throws(DecoderFailure) {
        guard let context = ZSTD_createDCtx() else { throw DecoderFailure(message: "zstd cannot start (out of memory)") }
        self.context = context
    }

    deinit { ZSTD_freeDCtx(context) }

    func step(_ input: UnsafeRawBufferPointer, _ output: UnsafeMutableRawBufferPointer) throws(DecoderFailure) -> (consumed: Int, produced: Int) {
        // Between frames with nothing to read: a call would report a new frame begun.
        if atBoundary && input.isEmpty { return (0, 0) }
        var inBuffer = ZSTD_inBuffer(src: input.baseAddress, size: input.count, pos: 0)
        var outBuffer = ZSTD_outBuffer(dst: output.baseAddress, size: output.count, pos: 0)
        let result = ZSTD_decompressStream(context, &outBuffer, &inBuffer)
        if ZSTD_isError(result) != 0 {
            throw DecoderFailure(message: String(cString: ZSTD_getErrorName(result)), consumed: inBuffer.pos, produced: outBuffer.pos)
        }
        atBoundary = result == 0
        return (inBuffer.pos, outBuffer.pos)
    }
}
