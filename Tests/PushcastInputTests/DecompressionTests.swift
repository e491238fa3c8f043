import CCompression
import Foundation
@testable import PushcastInput
import XCTest

/// gzip and zstd exports read through `DecompressingByteSource`: compressed here with zlib and
/// zstd themselves, read back at every read size, cut short, corrupted, and inflated from a tiny
/// input into 50 MB.
final class DecompressionTests: XCTestCase {
    /// Read sizes from the inner source: byte by byte, odd, and whole buffers.
    static let sourceChunks = [1, 7, 65536]

    // MARK: - Compressors (zlib and zstd, streaming, so a big input never sits in memory)

    /// A gzip member (deflate with windowBits 31) of `count` copies of `chunk`.
    static func gzip(_ chunk: [UInt8], times count: Int = 1, level: Int32 = 6) -> [UInt8] {
        let stream = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
        stream.initialize(to: z_stream())
        defer { deflateEnd(stream); stream.deallocate() }
        precondition(pushcast_deflateInit2(stream, level, 15 + 16) == Z_OK)
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        var chunk = chunk
        for index in 0..<max(count, 1) {
            let flush = index == max(count, 1) - 1 ? Z_FINISH : Z_NO_FLUSH
            let input = count == 0 ? 0 : chunk.count
            chunk.withUnsafeMutableBufferPointer { source in
                stream.pointee.next_in = source.baseAddress
                stream.pointee.avail_in = UInt32(input)
                repeat {
                    let produced = buffer.withUnsafeMutableBufferPointer { target -> Int in
                        stream.pointee.next_out = target.baseAddress
                        stream.pointee.avail_out = UInt32(target.count)
                        let status = deflate(stream, flush)
                        precondition(status == Z_OK || status == Z_STREAM_END || status == Z_BUF_ERROR, "deflate \(status)")
                        return target.count - Int(stream.pointee.avail_out)
                    }
                    out += buffer[0..<produced]
                } while stream.pointee.avail_out == 0 || stream.pointee.avail_in > 0
            }
        }
        return out
    }

    /// A zstd frame of `count` copies of `chunk` (with a checksum, so corruption shows).
    static func zstd(_ chunk: [UInt8], times count: Int = 1, level: Int32 = 3) -> [UInt8] {
        let context = ZSTD_createCCtx()!
        defer { ZSTD_freeCCtx(context) }
        ZSTD_CCtx_setParameter(context, ZSTD_c_compressionLevel, level)
        ZSTD_CCtx_setParameter(context, ZSTD_c_checksumFlag, 1)
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        for index in 0..<max(count, 1) {
            let mode = index == max(count, 1) - 1 ? ZSTD_e_end : ZSTD_e_continue
            chunk.withUnsafeBytes { source in
                var input = ZSTD_inBuffer(src: source.baseAddress, size: count == 0 ? 0 : source.count, pos: 0)
                var remaining = 0
                repeat {
                    let produced = buffer.withUnsafeMutableBytes { target -> Int in
                        var output = ZSTD_outBuffer(dst: target.baseAddress, size: target.count, pos: 0)
                        remaining = ZSTD_compressStream2(context, &output, &input, mode)
                        precondition(ZSTD_isError(remaining) == 0, String(cString: ZSTD_getErrorName(remaining)))
                        return output.pos
                    }
                    out += buffer[0..<produced]
                } while input.pos < input.size || (mode == ZSTD_e_end && remaining != 0)
            }
        }
        return out
    }

    /// A zstd frame through the one-shot API (no checksum), as most exporters write it.
    static func zstdOneShot(_ bytes: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: ZSTD_compressBound(bytes.count))
        let size = out.withUnsafeMutableBytes { target in
            bytes.withUnsafeBytes { ZSTD_compress(target.baseAddress, target.count, $0.baseAddress, $0.count, 3) }
        }
        precondition(ZSTD_isError(size) == 0)
        return Array(out[0..<size])
    }

    /// A zlib member through compress2 (a zlib header, not gzip): what windowBits 15 + 32 also reads.
    static func zlib(_ bytes: [UInt8]) -> [UInt8] {
        var size = compressBound(uLong(bytes.count))
        var out = [UInt8](repeating: 0, count: Int(size))
        precondition(compress2(&out, &size, bytes, uLong(bytes.count), 6) == Z_OK)
        return Array(out[0..<Int(size)])
    }

    // MARK: - Reading

    /// Everything the source gives, read into a buffer of `bufferBytes`.
    static func drain(_ source: DecompressingByteSource, bufferBytes: Int = 4096) throws -> [UInt8] {
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: bufferBytes)
        while true {
            let count = try buffer.withUnsafeMutableBytes { try source.read(into: $0) }
            if count == 0 { return out }
            XCTAssertLessThanOrEqual(count, bufferBytes)
            out += buffer[0..<count]
        }
    }

    static func decompress(_ bytes: [UInt8], chunkSize: Int, bufferBytes: Int = 4096) throws -> (InputCompression?, [UInt8]) {
        let source = DecompressingByteSource(MemoryByteSource(bytes, chunkSize: chunkSize), name: "t.csv.gz")
        let out = try drain(source, bufferBytes: bufferBytes)
        return (source.compression, out)
    }

    /// The error reading `bytes` throws (failing the test when it reads cleanly).
    static func failure(_ bytes: [UInt8], chunkSize: Int = 65536, file: StaticString = #filePath,
                        line: UInt = #line) -> DecompressionError? {
        do {
            _ = try decompress(bytes, chunkSize: chunkSize)
            XCTFail("read \(bytes.count) bytes without an error", file: file, line: line)
        } catch let error as DecompressionError {
            return error
        } catch {
            XCTFail("unexpected error \(error)", file: file, line: line)
        }
        return nil
    }

    /// A CSV export of `rows` rows, varied enough to compress like a real one.
    static func export(rows: Int) -> [UInt8] {
        var generator = SeededGenerator(state: 7)
        var text = "device_id,token,first_name\n"
        for row in 1...rows {
            let token = (0..<4).map { _ in String(format: "%016llx", generator.next()) }.joined()
            text += "d\(row),\(token),N\u{e9}e \(row % 97)\n"
        }
        return Array(text.utf8)
    }

    // MARK: - Compressed, then read back

    func testGzipReadsBackAtEveryReadSize() throws {
        let plain = Self.export(rows: 3000)
        let compressed = Self.gzip(plain)
        XCTAssertLessThan(compressed.count, plain.count)
        for chunk in Self.sourceChunks {
            for bufferBytes in [1, 13, 65536] where chunk != 1 || bufferBytes != 1 {
                let (found, out) = try Self.decompress(compressed, chunkSize: chunk, bufferBytes: bufferBytes)
                XCTAssertEqual(found, .gzip)
                XCTAssertEqual(out, plain, "chunk \(chunk) buffer \(bufferBytes)")
            }
        }
    }

    func testZstdReadsBackAtEveryReadSize() throws {
        let plain = Self.export(rows: 3000)
        for compressed in [Self.zstd(plain), Self.zstdOneShot(plain)] {
            for chunk in Self.sourceChunks {
                for bufferBytes in [1, 13, 65536] where chunk != 1 || bufferBytes != 1 {
                    let (found, out) = try Self.decompress(compressed, chunkSize: chunk, bufferBytes: bufferBytes)
                    XCTAssertEqual(found, .zstd)
                    XCTAssertEqual(out, plain, "chunk \(chunk) buffer \(bufferBytes)")
                }
            }
        }
    }

    /// `cat a.gz b.gz` and pigz make several members; all of them are the file. zstd frames
    /// likewise, and an empty member or frame in between is nothing.
    func testEveryGzipMemberAndZstdFrameIsRead() throws {
        let a = Self.export(rows: 500), b = Array("d9,tail\n".utf8), c = Self.export(rows: 20)
        let gzip = Self.gzip(a) + Self.gzip([]) + Self.gzip(b) + Self.gzip(c, level: 1)
        let zstd = Self.zstd(a) + Self.zstdOneShot([]) + Self.zstdOneShot(b) + Self.zstd(c)
        for chunk in Self.sourceChunks {
            XCTAssertEqual(try Self.decompress(gzip, chunkSize: chunk).1, a + b + c, "gzip, chunk \(chunk)")
            XCTAssertEqual(try Self.decompress(zstd, chunkSize: chunk).1, a + b + c, "zstd, chunk \(chunk)")
        }
        // A zlib-wrapped member after a gzip one reads too (windowBits 15 + 32 detects either).
        XCTAssertEqual(try Self.decompress(Self.gzip(a) + Self.zlib(b), chunkSize: 7).1, a + b)
    }

    /// The rows of a compressed export are the rows of the plain one.
    func testTheReaderSeesTheSameRowsThroughEitherCompression() throws {
        let plain = Self.export(rows: 2000)
        let expected = try readAll(plain, .csv, chunkSize: 65536).records
        for compressed in [Self.gzip(plain), Self.zstd(plain)] {
            for chunk in [7, 65536] {
                let source = DecompressingByteSource(MemoryByteSource(compressed, chunkSize: chunk))
                let reader = try TokenFileReader(source: source, format: .csv, fileName: "t.csv", options: smallBufferOptions())
                var rows = 0
                while let record = try reader.next() {
                    guard case .row(let view) = record else { return XCTFail("malformed \(record)") }
                    guard case .row(let row, _, let values) = expected[rows] else { return XCTFail("expected \(expected[rows])") }
                    XCTAssertEqual(view.row, row)
                    XCTAssertEqual((0..<view.fieldCount).map { view.string($0) }, values)
                    rows += 1
                }
                XCTAssertEqual(rows, 2000)
            }
        }
    }

    // MARK: - Plain input and inputs shorter than a magic

    func testPlainBytesPassThroughUnchanged() throws {
        let plain = Self.export(rows: 300)
        let lookalikes: [[UInt8]] = [[0x1F, 0x00, 0x41], [0x28, 0xB5, 0x2F, 0x00, 0x0A], [0x50, 0x2A, 0x4D, 0x00], Array("token\n".utf8)]
        for input in [plain] + lookalikes {
            for chunk in Self.sourceChunks {
                let (found, out) = try Self.decompress(input, chunkSize: chunk, bufferBytes: 13)
                XCTAssertEqual(found, InputCompression.none)
                XCTAssertEqual(out, input, "chunk \(chunk)")
            }
        }
    }

    func testInputsShorterThanAMagicAreReadAsTheyAre() throws {
        for input: [UInt8] in [[], [0x1F], [0x28], [0x28, 0xB5, 0x2F], Array("a,b".utf8), [0x0A]] {
            for chunk in [1, 65536] {
                let (found, out) = try Self.decompress(input, chunkSize: chunk)
                XCTAssertEqual(found, InputCompression.none, "\(input)")
                XCTAssertEqual(out, input)
            }
        }
        // The gzip magic alone is a gzip file cut short.
        let error = Self.failure([0x1F, 0x8B])
        XCTAssertEqual(error?.kind, .truncated)
        XCTAssertEqual(error?.offset, 2)
    }

    func testSniffingKnowsTheMagics() {
        XCTAssertEqual(InputCompression.sniff([0x1F, 0x8B, 0x08]), .gzip)
        XCTAssertEqual(InputCompression.sniff([0x28, 0xB5, 0x2F, 0xFD, 0x00]), .zstd)
        XCTAssertEqual(InputCompression.sniff([0x5E, 0x2A, 0x4D, 0x18]), .zstd, "a skippable frame (pzstd)")
        XCTAssertEqual(InputCompression.sniff([0x28, 0xB5, 0x2F]), InputCompression.none)
        XCTAssertEqual(InputCompression.sniff(Array("token,".utf8)), InputCompression.none)
        XCTAssertEqual(InputCompression.sniff([UInt8]()), InputCompression.none)
    }

    // MARK: - Truncated and corrupt input

    /// Cut anywhere, even just before the trailer's last byte: the error says where the file ends.
    func testATruncatedFileNamesWhereItEnds() throws {
        let plain = Self.export(rows: 1000)
        for (name, compressed) in [("gzip", Self.gzip(plain)), ("zstd", Self.zstd(plain)), ("zstd", Self.zstdOneShot(plain))] {
            for cut in [compressed.count / 2, compressed.count - 1, 10, 5] {
                for chunk in [1, 65536] {
                    let error = Self.failure(Array(compressed[0..<cut]), chunkSize: chunk)
                    XCTAssertEqual(error?.kind, .truncated, "\(name) cut at \(cut): \(String(describing: error))")
                    XCTAssertEqual(error?.offset, cut)
                    XCTAssertEqual(error?.description,
                                   "t.csv.gz: \(name) stream ends early at compressed byte \(cut): the file is truncated")
                }
            }
        }
    }

    func testCorruptDataGivesTheLibrarysMessageAndTheOffset() throws {
        let plain = Self.export(rows: 1000)
        var gzipMethod = Self.gzip(plain)
        gzipMethod[2] = 7  // not deflate
        var gzipCRC = Self.gzip(plain)
        gzipCRC[gzipCRC.count - 6] ^= 0xFF  // the trailer's CRC-32
        var zstdBlock = Self.zstd(plain)
        zstdBlock[zstdBlock.count / 2] ^= 0x55  // a block's data (or, failing that, the checksum shows it)
        var zstdChecksum = Self.zstd(plain)
        zstdChecksum[zstdChecksum.count - 2] ^= 0xFF  // the frame's checksum
        let gzipGarbage = Self.gzip(plain) + Array("trailing junk".utf8)
        let cases: [(String, [UInt8], InputCompression, ClosedRange<Int>)] = [
            ("gzip method", gzipMethod, .gzip, 0...10),
            ("gzip CRC", gzipCRC, .gzip, (gzipCRC.count - 8)...gzipCRC.count),
            ("gzip trailing garbage", gzipGarbage, .gzip, (gzipGarbage.count - 13)...gzipGarbage.count),
            ("zstd block", zstdBlock, .zstd, 0...zstdBlock.count),
            ("zstd checksum", zstdChecksum, .zstd, (zstdChecksum.count - 4)...zstdChecksum.count),
        ]
        for (what, input, compression, offsets) in cases {
            for chunk in [1, 65536] {
                let error = Self.failure(input, chunkSize: chunk)
                guard case .corrupt(let message)? = error?.kind else {
                    XCTFail("\(what): \(String(describing: error))")
                    continue
                }
                XCTAssertFalse(message.isEmpty, what)
                XCTAssertEqual(error?.compression, compression, what)
                XCTAssertTrue(offsets.contains(error?.offset ?? -1), "\(what): offset \(error?.offset ?? -1) outside \(offsets)")
                XCTAssertTrue(error?.description.hasPrefix("t.csv.gz: \(compression) data is corrupt at compressed byte ") == true,
                              error?.description ?? "")
            }
        }
    }

    /// What was decoded before the corruption is handed out first, at every read size, and the
    /// error then stays: reading again throws it again. (zlib reports the output of the step that
    /// failed; zstd does not, so a zstd read gives a prefix: the blocks before the failing step.)
    func testTheBytesBeforeAnErrorComeFirstAndTheErrorStays() throws {
        let plain = Self.export(rows: 1000)
        var gzipCRC = Self.gzip(plain)
        gzipCRC[gzipCRC.count - 6] ^= 0xFF
        var zstdChecksum = Self.zstd(plain)
        zstdChecksum[zstdChecksum.count - 2] ^= 0xFF
        for (input, whole) in [(gzipCRC, true), (zstdChecksum, false)] {
            for chunk in Self.sourceChunks {
                let source = DecompressingByteSource(MemoryByteSource(input, chunkSize: chunk))
                var out: [UInt8] = []
                var buffer = [UInt8](repeating: 0, count: 4096)
                var first: DecompressionError?
                do {
                    while true {
                        let count = try buffer.withUnsafeMutableBytes { try source.read(into: $0) }
                        if count == 0 { break }
                        out += buffer[0..<count]
                    }
                } catch let error as DecompressionError {
                    first = error
                }
                if whole {
                    XCTAssertEqual(out, plain, "chunk \(chunk)")
                } else {
                    XCTAssertEqual(out, Array(plain.prefix(out.count)), "chunk \(chunk)")
                    XCTAssertGreaterThan(out.count, 0, "chunk \(chunk)")
                }
                XCTAssertNotNil(first)
                XCTAssertThrowsError(try buffer.withUnsafeMutableBytes { try source.read(into: $0) }) {
                    XCTAssertEqual($0 as? DecompressionError, first)
                }
            }
        }
    }

    /// The inner source's own errors come through as they are.
    func testTheInnerSourcesErrorsPassThrough() {
        let compressed = Self.gzip(Self.export(rows: 100))
        let source = DecompressingByteSource(FailingByteSource(Array(compressed[0..<40])))
        XCTAssertThrowsError(try Self.drain(source)) { XCTAssertTrue($0 is FailingByteSource.Failure, "\($0)") }
    }

    // MARK: - Memory

    /// 50 MB of zeros from about 50 KB of gzip and 2 KB of zstd stream through a 64 KiB buffer:
    /// the output goes straight into the caller's buffer, so the process's peak memory barely moves.
    func testABombStreamsInFlatMemory() throws {
        let zeros = [UInt8](repeating: 0, count: 1 << 20)
        let total = 50 << 20
        for compressed in [Self.gzip(zeros, times: 50), Self.zstd(zeros, times: 50)] {
            XCTAssertLessThan(compressed.count, 100_000)
            let peakBefore = Self.peakResidentBytes()
            let source = DecompressingByteSource(MemoryByteSource(compressed))
            var buffer = [UInt8](repeating: 0xAA, count: 64 * 1024)
            let zeroBlock = [UInt8](repeating: 0, count: buffer.count)
            var count = 0, nonZero = false
            while true {
                let read = try buffer.withUnsafeMutableBytes { try source.read(into: $0) }
                if read == 0 { break }
                count += read
                nonZero = nonZero || memcmp(buffer, zeroBlock, read) != 0
            }
            XCTAssertEqual(count, total)
            XCTAssertFalse(nonZero)
            XCTAssertLessThan(Self.peakResidentBytes() - peakBefore, 16 << 20, "peak memory grew while decompressing")
        }
    }

    /// The process's peak resident set (getrusage's ru_maxrss is in KiB on Linux).
    static func peakResidentBytes() -> Int {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return usage.ru_maxrss * 1024
    }

    // MARK: - Names

    func testACompressionSuffixIsLookedThroughForTheFormat() {
        XCTAssertEqual(InputFormat.guess(path: "tokens.csv.gz"), .csv)
        XCTAssertEqual(InputFormat.guess(path: "/data/Tokens.CSV.GZIP"), .csv)
        XCTAssertEqual(InputFormat.guess(path: "tokens.ndjson.zst"), .ndjson)
        XCTAssertEqual(InputFormat.guess(path: "tokens.jsonl.zstd"), .ndjson)
        XCTAssertEqual(InputFormat.guess(path: "tokens.json.gz"), .ndjson)
        XCTAssertNil(InputFormat.guess(path: "tokens.gz"))
        XCTAssertNil(InputFormat.guess(path: ".csv.gz"))
        XCTAssertNil(InputFormat.guess(path: "tokens.csv.gz.gz"), "one suffix only")
        XCTAssertNil(InputFormat.guess(path: "tokens.tsv.zst"))
        XCTAssertEqual(InputFormat.guess(path: "tokens.csv"), .csv)
    }
}
