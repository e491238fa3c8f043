// Packing of io_uring `user_data` and epoll `data.u64`: op (8 bits), slot index (24 bits) and
// slot generation (32 bits), as in liburing's examples/proxy.h and SwiftNIO's registration ids.

/// What a submission (or an epoll registration) was for.
enum Operation: UInt8 {
    case connect = 1
    case accept = 2
    case receive = 3
    case send = 4
    case cancel = 5
    case waker = 6
    // 7 was a file write (Reactor.writeFile), which nothing used.
    /// epoll only: the registration of a slot's socket, whatever its state.
    case socket = 8
}

struct UserData: Equatable {
    static let indexLimit: UInt32 = 1 << 24

    let raw: UInt64

    init(raw: UInt64) {
        self.raw = raw
    }

    init(_ operation: Operation, index: UInt32, generation: UInt32) {
        precondition(index < UserData.indexLimit, "slot index must fit in 24 bits")
        raw = UInt64(operation.rawValue) << 56 | UInt64(index) << 32 | UInt64(generation)
    }

    /// nil for values this reactor never submits (liburing's internal timeout user_data is all ones).
    var operation: Operation? { Operation(rawValue: UInt8(truncatingIfNeeded: raw >> 56)) }
    var index: UInt32 { UInt32(truncatingIfNeeded: raw >> 32) & (UserData.indexLimit - 1) }
    var generation: UInt32 { UInt32(truncatingIfNeeded: raw) }
}
