// Shared helpers for the real-kernel reactor tests (docs/DESIGN.md §2.8, fourth layer): every scenario
// runs on io_uring with multishot recv, io_uring with single-shot recv, and epoll.

import Glibc
import XCTest
@testable import PushcastReactor

enum Variant: String, CaseIterable {
    case uring
    case uringSingleShot
    case epoll

    func configuration(_ adjust: (inout ReactorConfiguration) -> Void = { _ in }) -> ReactorConfiguration {
        var configuration = ReactorConfiguration()
        configuration.slotsMax = 64
        configuration.sendBufferBytes = 64 * 1024
        switch self {
        case .uring:
            configuration.backend = .uring
        case .uringSingleShot:
            configuration.backend = .uring
            configuration.forceSingleShotReceive = true
        case .epoll:
            configuration.backend = .epoll
        }
        adjust(&configuration)
        return configuration
    }

    var isURing: Bool { self != .epoll }
}

/// A `ReactorEvent` with its bytes copied out, so it can outlive the handler.
enum RecordedEvent: Equatable {
    case connected(Slot)
    case connectFailed(Slot, errno: Int32)
    case accepted(listener: Slot, connection: Slot)
    case received(Slot, [UInt8])
    case writable(Slot)
    case closed(Slot, errno: Int32)
    case timer(id: UInt64)

    init(_ event: ReactorEvent) {
        switch event {
        case .connected(let slot): self = .connected(slot)
        case .connectFailed(let slot, let code): self = .connectFailed(slot, errno: code)
        case .accepted(let listener, let connection): self = .accepted(listener: listener, connection: connection)
        case .received(let slot, let bytes): self = .received(slot, Array(bytes))
        case .writable(let slot): self = .writable(slot)
        case .closed(let slot, let code): self = .closed(slot, errno: code)
        case .timer(let id): self = .timer(id: id)
        }
    }

    var slots: [Slot] {
        switch self {
        case .connected(let slot), .connectFailed(let slot, _), .received(let slot, _), .writable(let slot),
             .closed(let slot, _):
            return [slot]
        case .accepted(let listener, let connection): return [listener, connection]
        case .timer: return []
        }
    }
}

struct PumpTimeout: Error, CustomStringConvertible {
    let description: String
}

extension Reactor {
    /// Polls until `done()` holds, failing after `seconds`. Each turn waits at most 50 ms.
    func pump(seconds: Double = 10, _ what: String, until done: () -> Bool,
              _ handle: (ReactorEvent) -> Void) throws
    {
        let deadline = Reactor.nowNanoseconds() + UInt64(seconds * 1e9)
        while !done() {
            guard Reactor.nowNanoseconds() < deadline else {
                throw PumpTimeout(description: "timed out after \(seconds) s waiting for \(what)")
            }
            try poll(timeoutNanoseconds: 50_000_000, handle)
        }
    }

    /// Stages all of `bytes` if it fits; returns how many were staged.
    func stage(_ slot: Slot, bytes: ArraySlice<UInt8>) -> Int {
        stage(slot) { buffer in
            let count = min(buffer.count, bytes.count)
            bytes.withUnsafeBytes { source in
                buffer.baseAddress!.copyMemory(from: source.baseAddress!, byteCount: count)
            }
            return count
        }
    }
}

/// Bytes waiting to be staged on one connection, with the staging loop that back-pressure needs.
struct Outbox {
    private(set) var bytes: [UInt8] = []
    private(set) var offset = 0
    /// How many times the staging buffer was too full to take everything offered.
    private(set) var shortStages = 0
    var chunkSizes: [Int] = [Int.max]
    private var chunkIndex = 0

    var isEmpty: Bool { offset == bytes.count }

    mutating func append<S: Sequence>(_ more: S) where S.Element == UInt8 {
        if offset == bytes.count {
            bytes.removeAll(keepingCapacity: true)
            offset = 0
        }
        bytes.append(contentsOf: more)
    }

    /// Stages chunks until the outbox is empty or the staging buffer is full.
    mutating func flush(_ reactor: Reactor, _ slot: Slot) {
        while offset < bytes.count {
            let chunk = min(chunkSizes[chunkIndex % chunkSizes.count], bytes.count - offset)
            let staged = reactor.stage(slot, bytes: bytes[offset..<offset + chunk])
            offset += staged
            if staged < chunk {
                shortStages += 1
                return
            }
            chunkIndex += 1
        }
    }
}

func randomBytes(_ count: Int, seed: UInt64) -> [UInt8] {
    var state = seed
    var result = [UInt8]()
    result.reserveCapacity(count)
    for _ in 0..<count {
        state = state &* 6364136223846793005 &+ 1442695040888963407
        result.append(UInt8(truncatingIfNeeded: state >> 33))
    }
    return result
}

/// A loopback port nobody listens on: bound, then closed again.
func unusedLoopbackPort() throws -> UInt16 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw PumpTimeout(description: "socket failed") }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw -> Int32 in
            guard bind(fd, raw, length) == 0 else { return -1 }
            return getsockname(fd, raw, &length)
        }
    }
    guard bound == 0 else { throw PumpTimeout(description: "bind failed") }
    return UInt16(bigEndian: address.sin_port)
}
