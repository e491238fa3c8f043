/// The kernel's side of a reactor's sockets, simulated: what a `Reactor` built over it asks where
/// io_uring or epoll would make a syscall. The simulator's network implements it, so that the
/// real client worker, its TLS and its HTTP/2 run over a seeded in-memory network on a virtual
/// clock. Connections are named by ids the network hands out; nothing here reads a clock.
public protocol SimulatedSockets: AnyObject {
    /// Starts a connection; its id, reported later in `.connected` or `.connectFailed`.
    func connect() -> Int
    /// Offers bytes written to `connection`; returns how many the network took (fewer when the
    /// peer reads slowly: the rest is offered again on a later turn).
    func send(_ connection: Int, _ bytes: UnsafeRawBufferPointer) -> Int
    /// The reactor closed `connection` (its peer sees the close); nothing more is reported for it.
    func close(_ connection: Int)
    /// True when an event is due now, so that the reactor's turn must not wait.
    var hasDueEvents: Bool { get }
    /// One reactor turn: hands each event due now to `body`. `waitNanoseconds` is how long the
    /// reactor would block if nothing were due (nil: until something happens), for the
    /// simulation's scheduler; the call itself never blocks.
    func turn(waitNanoseconds: UInt64?, _ body: (SimulatedSocketEvent) -> Void)
}

/// What happened on a simulated connection, as a kernel completion would say it.
public enum SimulatedSocketEvent {
    case connected(Int)
    case connectFailed(Int, errno: Int32)
    case received(Int, [UInt8])
    /// 0: an orderly close by the peer; else the error (ECONNRESET, ...).
    case closed(Int, errno: Int32)
}
