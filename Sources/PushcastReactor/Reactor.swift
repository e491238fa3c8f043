// The public face of the reactor; see ReactorTypes.swift for the module overview.

import CURing
import Glibc
import PushcastCore
import PushcastSystem

public final class Reactor {
    public let backendKind: IOBackendKind
    /// True when receives use io_uring multishot recv from a provided-buffer ring. False on
    /// epoll, and on kernels without IORING_RECV_MULTISHOT (single-shot recv with buffer
    /// selection instead); `receiveMode` says which.
    public let multishotReceive: Bool
    public let receiveMode: ReceiveMode

    let slots: SlotTable
    let backend: any ReactorBackend
    private var timers: TimerHeap
    private var waker: ReactorWaker?
    private var isPolling = false

    public convenience init(configuration: ReactorConfiguration) throws(ReactorError) {
        try self.init(configuration: configuration) { slots throws(ReactorError) in
            try Reactor.makeBackend(configuration: configuration, slots: slots)
        }
    }

    init(configuration: ReactorConfiguration, makeBackend: (SlotTable) throws(ReactorError) -> any ReactorBackend) throws(ReactorError) {
        precondition(configuration.receiveBufferBytes > 0, "receiveBufferBytes must be positive")
        precondition(configuration.receiveBufferCount > 0 && configuration.receiveBufferCount <= 32768
                         && configuration.receiveBufferCount & (configuration.receiveBufferCount - 1) == 0,
                     "receiveBufferCount must be a power of two, at most 32768")
        precondition(configuration.ringEntries > 0, "ringEntries must be positive")
        slots = try SlotTable(capacity: configuration.slotsMax, sendBufferBytes: configuration.sendBufferBytes)
        backend = try makeBackend(slots)
        backendKind = backend.kind
        receiveMode = backend.receiveMode
        multishotReceive = backend.receiveMode == .multishotProvidedBuffers
        timers = TimerHeap(capacity: 64)
    }

    deinit {
        backend.shutdown()
    }

    private static func makeBackend(configuration: ReactorConfiguration, slots: SlotTable)
        throws(ReactorError) -> any ReactorBackend
    {
        switch configuration.backend {
        case .simulated:
            throw ReactorError("a simulated reactor needs its network: Reactor(configuration:sockets:)")
        case .epoll:
            return try EpollBackend(configuration: configuration, slots: slots)
        case .uring:
            do {
                return try URingBackend(configuration: configuration, slots: slots)
            } catch {
                throw ReactorError(error.description)
            }
        case nil:
            do {
                return try URingBackend(configuration: configuration, slots: slots)
            } catch let failure {
                guard let result = failure.queueInitResult else { throw ReactorError(failure.description) }
                switch fallbackAfterURingInitFailure(result: result, requested: nil) {
                case .useEpoll(let notice):
                    ReactorNotices.write(notice)
                    return try EpollBackend(configuration: configuration, slots: slots)
                case .fail(let description):
                    throw ReactorError(description)
                }
            }
        }
    }

    /// CLOCK_MONOTONIC in nanoseconds: the clock of the reactor's timers.
    @inline(__always)
    public static func nowNanoseconds() -> UInt64 { SystemClock.monotonicNanoseconds() }

    public var slotsInUse: Int { slots.inUse }

    // MARK: Sockets

    /// Starts a non-blocking TCP connection (TCP_NODELAY) to an IPv4 or IPv6 literal.
    /// `.connected` or `.connectFailed` follows from `poll`.
    public func connect(host: String, port: UInt16) throws(ReactorError) -> Slot {
        var storage = sockaddr_storage()
        guard let length = Sockets.parse(host: host, port: port, into: &storage) else {
            throw ReactorError("connect: \(host) is not an IPv4 or IPv6 literal")
        }
        let fd = try backend.makeStreamSocket(family: storage.ss_family)
        guard let index = slots.allocate(fd: fd, state: .connecting) else {
            if fd >= 0 { Glibc.close(fd) }
            throw ReactorError("connect: all \(slots.capacity) slots are in use")
        }
        slots.address(index).pointee = storage
        slots[index].pointee.addressLength = length
        let slot = slots.slot(index)
        backend.startConnect(index)
        return slot
    }

    /// Binds and listens (SO_REUSEADDR, plus SO_REUSEPORT when asked); port 0 picks a free port.
    /// Accepts continuously and reports each connection as `.accepted`.
    public func listen(host: String, port: UInt16, backlog: Int32 = 1024, reusePort: Bool = false)
        throws(ReactorError) -> (slot: Slot, port: UInt16)
    {
        let listener = try Sockets.makeListener(host: host, port: port, backlog: backlog, reusePort: reusePort)
        guard let index = slots.allocate(fd: listener.fd, state: .listening) else {
            Glibc.close(listener.fd)
            throw ReactorError("listen: all \(slots.capacity) slots are in use")
        }
        let slot = slots.slot(index)
        do throws(ReactorError) {
            try backend.startAccepting(index)
        } catch {
            backend.close(index)
            throw error
        }
        return (slot, listener.port)
    }

    /// Offers the free tail of the slot's staging buffer to `fill`, which writes bytes at its start
    /// and returns how many. The bytes go out from the next `poll` (once connected, for a slot
    /// still connecting). Returns 0 without calling `fill` when the slot is stale, a listener, or
    /// the buffer is full.
    public func stage(_ slot: Slot, _ fill: (UnsafeMutableRawBufferPointer) -> Int) -> Int {
        guard slots.isCurrent(slot), slots[slot.index].pointee.state != .listening else { return 0 }
        return slots.stage(slot.index, fill)
    }

    /// Bytes staged and not yet sent (including those of the send in flight).
    public func stagedBytes(_ slot: Slot) -> Int {
        guard slots.isCurrent(slot) else { return 0 }
        return slots[slot.index].pointee.sendCount
    }

    /// Bytes `stage` can accept right now (contiguous free space).
    public func stageCapacity(_ slot: Slot) -> Int {
        guard slots.isCurrent(slot), slots[slot.index].pointee.state != .listening else { return 0 }
        return slots.stageCapacity(slot.index)
    }

    /// Cancels the slot's in-flight operations and closes its socket. No event for this
    /// generation is delivered afterwards. Closing a stale slot does nothing.
    public func close(_ slot: Slot) {
        guard slots.isCurrent(slot) else { return }
        backend.close(slot.index)
    }

    // MARK: Timers

    /// Fires `.timer(id:)` once, at or after `deadlineNanoseconds` (on the `nowNanoseconds` clock).
    public func scheduleTimer(id: UInt64, deadlineNanoseconds: UInt64) {
        timers.insert(id: id, deadlineNanoseconds: deadlineNanoseconds)
    }

    // MARK: The loop

    /// One loop turn: submit everything staged, wait for a completion, the earliest timer or the
    /// timeout (nil: no timeout; 0: don't block), reap a batch, dispatch it, then fire due timers.
    /// A signal may end the wait early (EINTR); the turn then simply dispatches what there is.
    /// Must not be called from inside `handle`. A SINGLE_ISSUER ring belongs to the thread of the
    /// first poll, so keep every later call on that thread.
    public func poll(timeoutNanoseconds: UInt64?, _ handle: (ReactorEvent) -> Void) throws(ReactorError) {
        precondition(!isPolling, "Reactor.poll called from inside an event handler")
        isPolling = true
        defer { isPolling = false }
        var wait = timeoutNanoseconds
        if backend.hasImmediateWork {
            wait = 0
        } else if let deadline = timers.earliestDeadline {
            let now = Reactor.nowNanoseconds()
            let untilTimer = deadline > now ? deadline - now : 0
            wait = min(wait ?? UInt64.max, untilTimer)
        }
        try backend.turn(waitNanoseconds: wait, handle)
        fireDueTimers(handle)
    }

    private func fireDueTimers(_ handle: (ReactorEvent) -> Void) {
        guard timers.count > 0 else { return }
        let now = Reactor.nowNanoseconds()
        // Bounded by the timers present now, so a handler that schedules due timers can't spin.
        for _ in 0..<timers.count {
            guard let entry = timers.popDue(nowNanoseconds: now) else { return }
            handle(.timer(id: entry.id))
        }
    }

    /// An eventfd-backed waker: `wake()` from any thread makes a blocked `poll` return.
    /// Every call returns the same waker.
    public func makeWaker() throws(ReactorError) -> ReactorWaker {
        if let waker { return waker }
        let fd = eventfd(0, Int32(EFD_NONBLOCK) | Int32(EFD_CLOEXEC))
        guard fd >= 0 else { throw ReactorError(syscall: "eventfd", errno: errno) }
        let made = ReactorWaker(fd: fd)
        try backend.registerWaker(fd: fd)
        waker = made
        return made
    }

    // MARK: Test hooks

    var staleCompletionsDropped: Int { backend.staleCompletionsDropped }

    func injectStaleReceiveError(for slot: Slot, errno code: Int32, _ handle: (ReactorEvent) -> Void) {
        backend.injectReceiveError(index: slot.index, generation: slot.generation, errno: code, handle)
    }
}

/// Makes a blocked `Reactor.poll` return; safe to call from any thread.
public final class ReactorWaker: Waker, @unchecked Sendable {
    // Immutable after init; write(2) on an eventfd is thread-safe.
    private let fd: Int32

    init(fd: Int32) {
        self.fd = fd
    }

    deinit {
        Glibc.close(fd)
    }

    public func wake() {
        var one: UInt64 = 1
        // EAGAIN means the counter is saturated, so a wake-up is already pending.
        _ = write(fd, &one, MemoryLayout<UInt64>.size)
    }
}
