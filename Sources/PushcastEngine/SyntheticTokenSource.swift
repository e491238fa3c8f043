import PushcastInput

/// A CSV token file that is generated as it is read: a `token` header, then `count` distinct
/// 64-digit hex tokens. `pushcast bench` sends these through the real send path without a file on
/// disk, in constant memory.
public final class SyntheticTokenSource: ByteSource {
    private let count: Int
    private var next = 0
    private var headerSent = false
    private var pending: [UInt8] = []
    private var pendingOffset = 0
    private let seed: UInt64

    public init(count: Int, seed: UInt64 = 0x5eed) {
        self.count = count
        self.seed = seed
        pending.reserveCapacity(70 * 256)
    }

    public func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        var written = 0
        while written < buffer.count {
            if pendingOffset == pending.count {
                pending.removeAll(keepingCapacity: true)
                pendingOffset = 0
                if !headerSent {
                    pending += "token\n".utf8
                    headerSent = true
                }
                var produced = 0
                while next < count && produced < 256 {
                    Self.appendToken(index: next, seed: seed, to: &pending)
                    next += 1
                    produced += 1
                }
                if pending.isEmpty { break }
            }
            let n = min(buffer.count - written, pending.count - pendingOffset)
            pending.withUnsafeBytes { source in
                (buffer.baseAddress! + written).copyMemory(from: source.baseAddress! + pendingOffset, byteCount: n)
            }
            written += n
            pendingOffset += n
        }
        return written
    }

    /// Token `index`: 64 hex digits from a SplitMix64-style mix of (seed, index), starting with a
    /// digit 0-3 so that none collides with the mock's special prefixes (dead, bad0, 5030, 4290).
    static func appendToken(index: Int, seed: UInt64, to out: inout [UInt8]) {
        let hex: [UInt8] = Array("0123456789abcdef".utf8)
        var state = seed &+ UInt64(index) &* 0x9E37_79B9_7F4A_7C15
        for word in 0..<4 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            z ^= z >> 31
            if word == 0 { z &= 0x3FFF_FFFF_FFFF_FFFF }
            for shift in stride(from: 60, through: 0, by: -4) { out.append(hex[Int((z >> UInt64(shift)) & 0xF)]) }
        }
        out.append(0x0A)
    }
}
