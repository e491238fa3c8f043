// The epoll backend: the same semantics as io_uring with readiness instead of completions.
//
// Level-triggered epoll over non-blocking sockets. A readable socket gets one recv(2) per turn
// into a per-reactor buffer (level triggering brings it back next turn, which keeps turns fair).
// Staged bytes are sent at the start of the next turn; EAGAIN adds EPOLLOUT to the registration
// until the staging ring drains. Listeners accept in a bounded accept4 loop. Results known
// outside epoll_wait (an immediate connect, a drained send, a pwrite) are queued and delivered
// in the coming turn, which then does not block. `data.u64` packs op, slot and generation as
// io_uring's user_data does, so a readiness event for a closed slot is dropped the same way.

import CURing
import Glibc

final class EpollBackend: ReactorBackend {
    private enum DeferredEvent {
        case connected(Slot)
        case connectFailed(Slot, errno: Int32)
        case writable(Slot)
        case closed(Slot, errno: Int32)
    }

    private enum SendOutcome {
        case idle
        case drained
        case waitingForOutput
        case failed(errno: Int32)
    }

    let kind = IOBackendKind.epoll
    let receiveMode = ReceiveMode.readinessIntoReactorBuffer
    private(set) var staleCompletionsDropped = 0
    var hasImmediateWork: Bool { !deferred.isEmpty }

    private static let acceptsPerTurnMax = 256
    private let slots: SlotTable
    private let epollFD: Int32
    private let events: UnsafeMutablePointer<epoll_event>
    private let eventsMax: Int32
    private let receiveBuffer: UnsafeMutableRawPointer
    private let receiveBufferBytes: Int
    private var deferred: [DeferredEvent] = []
    private var deferredDraining: [DeferredEvent] = []
    private var wakerFD: Int32 = -1
    private var isShutDown = false

    init(configuration: ReactorConfiguration, slots: SlotTable) throws(ReactorError) {
        self.slots = slots
        epollFD = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard epollFD >= 0 else { throw ReactorError(syscall: "epoll_create1", errno: errno) }
        eventsMax = Int32(min(configuration.slotsMax + 1, 1024))
        events = .allocate(capacity: Int(eventsMax))
        receiveBufferBytes = configuration.receiveBufferBytes
        receiveBuffer = .allocate(byteCount: receiveBufferBytes, alignment: 64)
        deferred.reserveCapacity(configuration.slotsMax)
        deferredDraining.reserveCapacity(configuration.slotsMax)
    }

    func shutdown() {
        guard !isShutDown else { return }
        isShutDown = true
        for position in 0..<slots.capacity {
            let record = slots[UInt32(position)]
            if record.pointee.state != .free && record.pointee.fd >= 0 {
                Glibc.close(record.pointee.fd)
                record.pointee.fd = -1
            }
        }
        Glibc.close(epollFD)
        events.deallocate()
        receiveBuffer.deallocate()
    }

    // MARK: Registration

    private func interest(_ record: SlotRecord) -> UInt32 {
        switch record.state {
        case .connecting: return EPOLLOUT.rawValue
        case .listening: return EPOLLIN.rawValue
        case .connected: return EPOLLIN.rawValue | EPOLLRDHUP.rawValue | (record.outputInterest ? EPOLLOUT.rawValue : 0)
        case .free, .closing: preconditionFailure("no interest in a free or closing slot")
        }
    }

    private func control(_ operation: Int32, _ index: UInt32) -> Int32 {
        let record = slots[index].pointee
        var event = epoll_event()
        event.events = interest(record)
        event.data.u64 = UserData(.socket, index: index, generation: record.generation).raw
        return epoll_ctl(epollFD, operation, record.fd, &event) == 0 ? 0 : errno
    }

    private func updateInterest(_ index: UInt32) {
        let code = control(EPOLL_CTL_MOD, index)
        precondition(code == 0, "epoll_ctl(MOD) on a registered socket failed: \(errnoDescription(code))")
    }

    func startConnect(_ index: UInt32) {
        let record = slots[index]
        let result = slots.address(index).withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
            Glibc.connect(record.pointee.fd, address, record.pointee.addressLength)
        }
        let slot = slots.slot(index)
        if result == 0 {
            record.pointee.state = .connected
        } else if errno != EINPROGRESS {
            deferred.append(.connectFailed(slot, errno: errno))
            return
        }
        let code = control(EPOLL_CTL_ADD, index)
        if code != 0 {
            deferred.append(.connectFailed(slot, errno: code))
        } else if result == 0 {
            deferred.append(.connected(slot))
        }
    }

    func startAccepting(_ index: UInt32) throws(ReactorError) {
        let code = control(EPOLL_CTL_ADD, index)
        if code != 0 { throw ReactorError(syscall: "epoll_ctl(ADD listener)", errno: code) }
    }

    func close(_ index: UInt32) {
        slots.retire(index)
        // Nothing of the slot is in the kernel's hands; closing the fd also drops its registration.
        let record = slots[index]
        if record.pointee.fd >= 0 { Glibc.close(record.pointee.fd) }
        slots.free(index)
    }

    func registerWaker(fd: Int32) throws(ReactorError) {
        wakerFD = fd
        var event = epoll_event()
        event.events = EPOLLIN.rawValue
        event.data.u64 = UserData(.waker, index: 0, generation: 0).raw
        guard epoll_ctl(epollFD, EPOLL_CTL_ADD, fd, &event) == 0 else {
            throw ReactorError(syscall: "epoll_ctl(ADD eventfd)", errno: errno)
        }
    }

    // MARK: The turn

    func turn(waitNanoseconds: UInt64?, _ handle: (ReactorEvent) -> Void) throws(ReactorError) {
        slots.drainPendingSends { index in flushQueuedSend(index) }
        let timeoutMilliseconds: Int32
        if !deferred.isEmpty {
            timeoutMilliseconds = 0
        } else if let nanoseconds = waitNanoseconds {
            // Round up, so a timer is due when the wait ends.
            timeoutMilliseconds = Int32(min((nanoseconds + 999_999) / 1_000_000, UInt64(Int32.max)))
        } else {
            timeoutMilliseconds = -1
        }
        var readyCount = epoll_wait(epollFD, events, eventsMax, timeoutMilliseconds)
        if readyCount < 0 {
            guard errno == EINTR else { throw ReactorError(syscall: "epoll_wait", errno: errno) }
            readyCount = 0
        }
        dispatchDeferred(handle)
        for position in 0..<Int(readyCount) {
            let event = events[position]
            ready(userData: UserData(raw: event.data.u64), events: event.events, handle)
        }
    }

    private func flushQueuedSend(_ index: UInt32) {
        let record = slots[index]
        guard record.pointee.state == .connected, !record.pointee.outputInterest else { return }
        let slot = slots.slot(index)
        switch flushSend(index) {
        case .idle, .waitingForOutput: break
        case .drained: deferred.append(.writable(slot))
        case .failed(let code): deferred.append(.closed(slot, errno: code))
        }
    }

    private func flushSend(_ index: UInt32) -> SendOutcome {
        let record = slots[index]
        var sentAny = false
        while record.pointee.sendCount > 0 {
            let region = slots.nextSendRegion(index)
            let sent = send(record.pointee.fd, region.baseAddress, region.count, Int32(MSG_NOSIGNAL))
            if sent > 0 {
                slots.completeSend(index, bytes: sent)
                sentAny = true
                continue
            }
            let code = errno
            if sent < 0 && code == EINTR { continue }
            if sent < 0 && (code == EAGAIN || code == EWOULDBLOCK) {
                if !record.pointee.outputInterest {
                    record.pointee.outputInterest = true
                    updateInterest(index)
                }
                return .waitingForOutput
            }
            return .failed(errno: sent < 0 ? code : EPIPE)
        }
        if record.pointee.outputInterest {
            record.pointee.outputInterest = false
            updateInterest(index)
        }
        return sentAny ? .drained : .idle
    }

    private func dispatchDeferred(_ handle: (ReactorEvent) -> Void) {
        guard !deferred.isEmpty else { return }
        // Events queued by the handlers below wait for the next turn.
        swap(&deferred, &deferredDraining)
        for event in deferredDraining {
            switch event {
            case .connected(let slot):
                guard current(slot) else { continue }
                handle(.connected(slot))
            case .connectFailed(let slot, let code):
                guard current(slot) else { continue }
                handle(.connectFailed(slot, errno: code))
                closeIfCurrent(slot)
            case .writable(let slot):
                guard current(slot) else { continue }
                handle(.writable(slot))
            case .closed(let slot, let code):
                guard current(slot) else { continue }
                handle(.closed(slot, errno: code))
                closeIfCurrent(slot)
            }
        }
        deferredDraining.removeAll(keepingCapacity: true)
    }

    /// Counts the event as stale when `slot` is no longer current.
    private func current(_ slot: Slot) -> Bool {
        if slots.isCurrent(slot) { return true }
        staleCompletionsDropped += 1
        return false
    }

    private func closeIfCurrent(_ slot: Slot) {
        if slots.isCurrent(slot) { close(slot.index) }
    }

    private func ready(userData: UserData, events: UInt32, _ handle: (ReactorEvent) -> Void) {
        switch userData.operation {
        case .waker?:
            var value: UInt64 = 0
            _ = read(wakerFD, &value, MemoryLayout<UInt64>.size)
            return
        case .socket?:
            break
        default:
            preconditionFailure("epoll registration with an unknown operation")
        }
        let slot = Slot(index: userData.index, generation: userData.generation)
        guard current(slot) else { return }
        switch slots[slot.index].pointee.state {
        case .listening:
            acceptReady(slot, handle)
        case .connecting:
            connectReady(slot, handle)
        case .connected:
            connectionReady(slot, events: events, handle)
        case .free, .closing:
            preconditionFailure("a current slot is neither free nor closing")
        }
    }

    private func connectReady(_ slot: Slot, _ handle: (ReactorEvent) -> Void) {
        let record = slots[slot.index]
        let code = Sockets.pendingError(record.pointee.fd)
        guard code == 0 else {
            handle(.connectFailed(slot, errno: code))
            closeIfCurrent(slot)
            return
        }
        record.pointee.state = .connected
        updateInterest(slot.index)
        handle(.connected(slot))
        if slots.isCurrent(slot) && record.pointee.sendCount > 0 { slots.queueSend(slot.index) }
    }

    private func connectionReady(_ slot: Slot, events: UInt32, _ handle: (ReactorEvent) -> Void) {
        let record = slots[slot.index]
        if events & EPOLLOUT.rawValue != 0 && record.pointee.outputInterest {
            switch flushSend(slot.index) {
            case .idle, .waitingForOutput: break
            case .drained: handle(.writable(slot))
            case .failed(let code):
                handle(.closed(slot, errno: code))
                closeIfCurrent(slot)
                return
            }
        }
        let readable = EPOLLIN.rawValue | EPOLLRDHUP.rawValue | EPOLLERR.rawValue | EPOLLHUP.rawValue
        guard events & readable != 0, slots.isCurrent(slot) else { return }
        let received = recv(record.pointee.fd, receiveBuffer, receiveBufferBytes, 0)
        if received > 0 {
            handle(.received(slot, UnsafeRawBufferPointer(start: receiveBuffer, count: received)))
            return
        }
        let code = received == 0 ? 0 : errno
        if code == EAGAIN || code == EWOULDBLOCK || code == EINTR { return }
        handle(.closed(slot, errno: code))
        closeIfCurrent(slot)
    }

    private func acceptReady(_ listener: Slot, _ handle: (ReactorEvent) -> Void) {
        let listenerFD = slots[listener.index].pointee.fd
        for _ in 0..<EpollBackend.acceptsPerTurnMax {
            let fd = curing_accept_nonblocking(listenerFD)
            if fd < 0 {
                if errno == EINTR || errno == ECONNABORTED { continue }
                // EAGAIN: drained. EMFILE and friends: try again next turn (level-triggered).
                return
            }
            accepted(listener, fd: fd, handle)
            guard slots.isCurrent(listener) else { return }
        }
    }

    private func accepted(_ listener: Slot, fd: Int32, _ handle: (ReactorEvent) -> Void) {
        guard let index = slots.adoptAccepted(fd: fd) else { return }
        guard control(EPOLL_CTL_ADD, index) == 0 else {
            close(index)
            return
        }
        handle(.accepted(listener: listener, connection: slots.slot(index)))
    }

    func injectReceiveError(index: UInt32, generation: UInt32, errno code: Int32, _ handle: (ReactorEvent) -> Void) {
        // An error readiness: recv on the socket would report `code` if the event were not stale.
        _ = code
        ready(userData: UserData(.socket, index: index, generation: generation),
              events: EPOLLERR.rawValue | EPOLLHUP.rawValue | EPOLLIN.rawValue, handle)
    }
}
