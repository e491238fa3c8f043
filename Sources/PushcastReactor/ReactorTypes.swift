// PushcastReactor: the only target that makes syscalls (docs/DESIGN.md §1).
//
// One reactor runs on one thread and owns one io_uring ring (or one epoll fd), a fixed slab of
// socket slots, their staging buffers, a provided-buffer ring and a timer heap. Callers drive it
// with `poll(timeoutNanoseconds:_:)`, which submits everything staged, waits once, reaps a batch
// of completions and only then dispatches them as `ReactorEvent`s (docs/DESIGN.md §2.3). Every kernel
// operation carries op, slot index and slot generation in its `user_data`, so a completion for a
// slot that has since been closed or reused is dropped (docs/DESIGN.md §2.5).

import Glibc

/// Which kernel interface a reactor uses.
public enum IOBackendKind: String, Sendable {
    case uring
    case epoll
    /// The simulator's in-memory network (`Reactor(configuration:sockets:)`).
    case simulated
}

/// How a reactor receives bytes; fixed at start-up.
public enum ReceiveMode: String, Sendable {
    /// io_uring multishot recv from a provided-buffer ring (kernel 6.0 and later).
    case multishotProvidedBuffers
    /// io_uring single-shot recv with buffer selection from the same provided-buffer ring,
    /// re-armed after every completion.
    case singleShotProvidedBuffers
    /// epoll readiness, then recv(2) into one per-reactor buffer.
    case readinessIntoReactorBuffer
}

public struct ReactorConfiguration: Sendable {
    /// nil: io_uring, falling back to epoll (with one line on stderr) when the ring cannot be
    /// created because io_uring is blocked (-EPERM) or absent (-ENOSYS).
    public var backend: IOBackendKind? = nil
    /// Sockets (listeners and connections) in the fixed slab.
    public var slotsMax: Int = 1024
    /// Size of each provided receive buffer (and of the epoll backend's receive buffer).
    public var receiveBufferBytes: Int = 16384
    /// Provided-buffer ring entries; a power of two, at most 32768.
    public var receiveBufferCount: Int = 256
    /// Per-slot staging buffer for outgoing bytes; reserved once per slot, never moves.
    public var sendBufferBytes: Int = 256 * 1024
    /// io_uring submission queue entries (the completion queue gets twice as many).
    public var ringEntries: UInt32 = 1024

    /// Test hook: pretend io_uring_queue_init failed with this negative errno.
    var simulatedURingInitError: Int32? = nil
    /// Test hook: use single-shot recv even where multishot recv is supported.
    var forceSingleShotReceive: Bool = false

    public init() {}
}

/// A socket in the reactor's slab. The generation changes whenever the slot is closed, so a stale
/// `Slot` value never names the socket that later reuses the index.
public struct Slot: Hashable, Sendable, CustomStringConvertible {
    public let index: UInt32
    public let generation: UInt32

    init(index: UInt32, generation: UInt32) {
        self.index = index
        self.generation = generation
    }

    public var description: String { "slot \(index)#\(generation)" }
}

public enum ReactorEvent {
    case connected(Slot)
    /// The slot is freed after the handler returns.
    case connectFailed(Slot, errno: Int32)
    case accepted(listener: Slot, connection: Slot)
    /// The bytes are valid only during the handler call.
    case received(Slot, UnsafeRawBufferPointer)
    /// All staged bytes have been sent.
    case writable(Slot)
    /// 0 = orderly EOF from the peer, else the error. The slot is freed after the handler returns.
    case closed(Slot, errno: Int32)
    case timer(id: UInt64)
}

/// A failed syscall, named together with strerror of its errno.
public struct ReactorError: Error, CustomStringConvertible {
    public let description: String

    init(_ description: String) {
        self.description = description
    }

    init(syscall: String, errno code: Int32) {
        self.description = "\(syscall): \(errnoDescription(code)) (errno \(code))"
    }
}

func errnoDescription(_ code: Int32) -> String {
    guard let text = strerror(code) else { return "errno \(code)" }
    return String(cString: text)
}

/// Writes one line to stderr with write(2) (fputs on stderr does not compile under Swift 6).
func writeStandardError(_ line: String) {
    var text = line
    if !text.hasSuffix("\n") { text += "\n" }
    text.withCString { pointer in
        var offset = 0
        let count = strlen(pointer)
        while offset < count {
            let written = write(2, pointer + offset, count - offset)
            if written <= 0 { return }
            offset += written
        }
    }
}
