// The simulated backend: the reactor's slots over `SimulatedSockets` (PushcastCore) instead of a
// kernel. No file descriptors; staged bytes are offered to the network at the start of each turn,
// and the network's events come back as the same `ReactorEvent`s io_uring and epoll report, with
// the same stale-slot rule. The hot paths of the real backends do not change: the backend already
// sits behind `ReactorBackend`.

import Glibc
import PushcastCore

final class SimulatedBackend: ReactorBackend {
    let kind = IOBackendKind.simulated
    let receiveMode = ReceiveMode.readinessIntoReactorBuffer
    private(set) var staleCompletionsDropped = 0
    var hasImmediateWork: Bool { sockets.hasDueEvents }

    private let slots: SlotTable
    private let sockets: any SimulatedSockets
    private var slotOf: [Int: Slot] = [:]
    private var connectionOf: [UInt32: Int] = [:]

    init(slots: SlotTable, sockets: any SimulatedSockets) {
        self.slots = slots
        self.sockets = sockets
    }

    func makeStreamSocket(family: sa_family_t) throws(ReactorError) -> Int32 { -1 }

    func startConnect(_ index: UInt32) {
        let id = sockets.connect()
        slotOf[id] = slots.slot(index)
        connectionOf[index] = id
    }

    func startAccepting(_ index: UInt32) throws(ReactorError) {
        throw ReactorError("a simulated reactor does not listen")
    }

    func close(_ index: UInt32) {
        slots.retire(index)
        if let id = connectionOf.removeValue(forKey: index) {
            slotOf[id] = nil
            sockets.close(id)
        }
        slots.free(index)
    }

    func registerWaker(fd: Int32) throws(ReactorError) {}

    func turn(waitNanoseconds: UInt64?, _ handle: (ReactorEvent) -> Void) throws(ReactorError) {
        slots.drainPendingSends { index in send(index) }
        sockets.turn(waitNanoseconds: waitNanoseconds) { event in
            switch event {
            case .connected(let id):
                guard let slot = current(id) else { return }
                slots[slot.index].pointee.state = .connected
                if slots[slot.index].pointee.sendCount > 0 { slots.queueSend(slot.index) }
                handle(.connected(slot))
            case .connectFailed(let id, let code):
                guard let slot = current(id) else { return }
                handle(.connectFailed(slot, errno: code))
                if slots.isCurrent(slot) { close(slot.index) }
            case .received(let id, let bytes):
                guard let slot = current(id) else { return }
                bytes.withUnsafeBytes { handle(.received(slot, $0)) }
            case .closed(let id, let code):
                guard let slot = current(id) else { return }
                handle(.closed(slot, errno: code))
                if slots.isCurrent(slot) { close(slot.index) }
            }
        }
    }

    /// Offers the slot's staged bytes to the network; what it does not take waits for a later turn.
    private func send(_ index: UInt32) {
        guard slots[index].pointee.state == .connected, let id = connectionOf[index] else { return }
        while slots[index].pointee.sendCount > 0 {
            let region = slots.nextSendRegion(index)
            let taken = sockets.send(id, region)
            slots.completeSend(index, bytes: taken)
            if taken < region.count {
                slots.queueSend(index)
                return
            }
        }
    }

    private func current(_ id: Int) -> Slot? {
        if let slot = slotOf[id], slots.isCurrent(slot) { return slot }
        staleCompletionsDropped += 1
        return nil
    }

    func injectReceiveError(index: UInt32, generation: UInt32, errno code: Int32, _ handle: (ReactorEvent) -> Void) {
        let slot = Slot(index: index, generation: generation)
        guard slots.isCurrent(slot) else {
            staleCompletionsDropped += 1
            return
        }
        handle(.closed(slot, errno: code))
        close(index)
    }

    func shutdown() {
        // In slot order, so that a simulation replays exactly.
        for index in connectionOf.keys.sorted() { sockets.close(connectionOf[index]!) }
        connectionOf.removeAll()
        slotOf.removeAll()
    }
}

extension Reactor {
    /// A reactor whose sockets are `sockets` (the simulator's network) instead of the kernel's.
    /// It never listens, and its timers read the real clock, so a simulated user schedules none.
    public convenience init(configuration: ReactorConfiguration, sockets: any SimulatedSockets) throws(ReactorError) {
        try self.init(configuration: configuration) { slots in SimulatedBackend(slots: slots, sockets: sockets) }
    }
}
