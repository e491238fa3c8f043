import PushcastEngine
import PushcastInput
import XCTest

/// The first read's chunk hashes, and the reads that send checking them: the same bytes pass
/// whatever the read sizes; any change, a shorter or a longer input fails at the changed chunk,
/// before any of its bytes is handed out.
final class InputChunksTests: XCTestCase {
    private func plan(_ bytes: [UInt8]) throws -> InputChunkPlan {
        let recorder = ChunkRecordingByteSource(MemoryByteSource(bytes, chunkSize: 100_000))
        var buffer = [UInt8](repeating: 0, count: 70_000)
        while try buffer.withUnsafeMutableBytes({ try recorder.read(into: $0) }) > 0 {}
        return recorder.plan
    }

    /// Reads everything through a verifier; returns the bytes handed out before an error, and the error.
    private func verify(_ bytes: [UInt8], against plan: InputChunkPlan, chunkSize: Int) -> (Int, InputChangedError?) {
        let verifier = ChunkVerifyingByteSource(MemoryByteSource(bytes, chunkSize: chunkSize), plan: plan)
        var buffer = [UInt8](repeating: 0, count: 50_000)
        var total = 0
        do {
            while true {
                let n = try buffer.withUnsafeMutableBytes { try verifier.read(into: $0) }
                if n == 0 { return (total, nil) }
                total += n
            }
        } catch {
            return (total, error as? InputChangedError)
        }
    }

    func testTheSameBytesPassAndAnyChangeStopsAtItsChunk() throws {
        let chunk = InputChunkPlan.chunkBytes
        let bytes = (0..<(2 * chunk + 12_345)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 9) }
        let recorded = try plan(bytes)
        XCTAssertEqual(recorded.hashes.count, 3)
        XCTAssertEqual(recorded.byteCount, bytes.count)
        for size in [1_000, 65_536, 3 * chunk] {
            let (total, error) = verify(bytes, against: recorded, chunkSize: size)
            XCTAssertNil(error, "read size \(size)")
            XCTAssertEqual(total, bytes.count)
        }
        var changed = bytes
        changed[chunk + 7] ^= 1
        let (beforeChange, change) = verify(changed, against: recorded, chunkSize: 4096)
        XCTAssertEqual(change?.offset, chunk)
        XCTAssertEqual(beforeChange, chunk, "nothing of the changed chunk was handed out")

        let (_, shorter) = verify(Array(bytes.prefix(2 * chunk)), against: recorded, chunkSize: 4096)
        XCTAssertEqual(shorter?.what, "it ends early")
        let (_, longer) = verify(bytes + [10], against: recorded, chunkSize: 4096)
        XCTAssertNotNil(longer, "one more byte at the end")
        let (_, empty) = verify([], against: recorded, chunkSize: 4096)
        XCTAssertEqual(empty?.what, "it ends early")
    }
}
