// The io_uring backend (liburing 2.3; see liburing's examples/proxy.c and echo-server.c).
//
// - The ring is created with SINGLE_ISSUER|DEFER_TASKRUN (completions are posted only when this
//   thread enters the kernel, with no task-work interrupts). Kernels before 6.1 reject those flags
//   with -EINVAL; the ring is then created with no flags, which behaves the same, less cheaply.
//   It is also created disabled (R_DISABLED) and enabled by the first `poll`: a SINGLE_ISSUER
//   ring belongs to the thread that enables it, so a reactor may be built on one thread and then
//   run, from its first poll on, by another.
// - Receives come from one provided-buffer ring (group 0), registered by hand because liburing 2.3
//   has no io_uring_setup_buf_ring. Multishot recv when the kernel has it (6.0+), otherwise
//   single-shot recv with buffer selection; each buffer goes back right after its handler.
// - Listeners use multishot accept; connect and send are single submissions.
// - Every CQE is checked for IORING_CQE_F_MORE; a multishot that ended is re-armed. -ENOBUFS
//   re-arms too: the new SQE goes out with the next turn's submit, after this turn's buffers
//   have been returned.
// - One send per slot is in flight at a time, straight from the slot's staging ring; a short send
//   leaves the rest staged for the next one.
// - Kernel-visible memory (ring of buffers, buffers, waker word) is one mmap that is unmapped only
//   after the ring is gone.

import CURing
import Glibc

struct URingSetupFailure: Error, CustomStringConvertible {
    let description: String
    /// io_uring_queue_init's result when that is the step that failed.
    let queueInitResult: Int32?
}

final class URingBackend: ReactorBackend {
    let kind = IOBackendKind.uring
    let receiveMode: ReceiveMode
    private(set) var staleCompletionsDropped = 0
    var hasImmediateWork: Bool { false }
    /// Whether the ring runs with SINGLE_ISSUER|DEFER_TASKRUN.
    let deferredTaskRun: Bool

    private let slots: SlotTable
    private let ring: UnsafeMutablePointer<io_uring>
    private let completions: UnsafeMutablePointer<curing_completion>
    private let completionsMax: UInt32
    private let bufferGroup: UInt16 = 0
    private let bufferCount: Int
    private let bufferBytes: Int
    private let bufferRing: UnsafeMutablePointer<io_uring_buf_ring>
    private let buffers: UnsafeMutableRawPointer
    private let wakerWord: UnsafeMutablePointer<UInt64>
    private let kernelMemory: UnsafeMutableRawPointer
    private let kernelMemoryBytes: Int
    private var wakerFD: Int32 = -1
    private var isShutDown = false
    private var isEnabled: Bool

    init(configuration: ReactorConfiguration, slots: SlotTable) throws(URingSetupFailure) {
        self.slots = slots
        ring = .allocate(capacity: 1)
        ring.initialize(to: io_uring())
        var params = io_uring_params()
        params.flags = curing_setup_flags_single_issuer_defer_taskrun() | UInt32(IORING_SETUP_R_DISABLED)
        var result: Int32
        if let simulated = configuration.simulatedURingInitError {
            result = simulated
        } else {
            result = io_uring_queue_init_params(configuration.ringEntries, ring, &params)
            if result == -EINVAL {
                params = io_uring_params()
                result = io_uring_queue_init_params(configuration.ringEntries, ring, &params)
            }
        }
        guard result == 0 else {
            ring.deallocate()
            throw URingSetupFailure(description: "io_uring_queue_init: \(errnoDescription(-result)) (errno \(-result))",
                                    queueInitResult: result)
        }
        deferredTaskRun = params.flags & curing_setup_flags_single_issuer_defer_taskrun() != 0
        isEnabled = params.flags & UInt32(IORING_SETUP_R_DISABLED) == 0
        completionsMax = params.cq_entries
        completions = .allocate(capacity: Int(params.cq_entries))

        bufferCount = configuration.receiveBufferCount
        bufferBytes = configuration.receiveBufferBytes
        let pageBytes = Int(sysconf(Int32(_SC_PAGESIZE)))
        let ringBytes = (curing_buf_ring_bytes(UInt32(bufferCount)) + pageBytes - 1) / pageBytes * pageBytes
        kernelMemoryBytes = ringBytes + pageBytes + bufferCount * bufferBytes
        guard let memory = mmap(nil, kernelMemoryBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0),
              memory != MAP_FAILED
        else {
            let code = errno
            io_uring_queue_exit(ring)
            ring.deallocate()
            completions.deallocate()
            throw URingSetupFailure(description: "mmap(provided buffers): \(errnoDescription(code))", queueInitResult: nil)
        }
        kernelMemory = memory
        bufferRing = memory.bindMemory(to: io_uring_buf_ring.self, capacity: 1)
        wakerWord = (memory + ringBytes).bindMemory(to: UInt64.self, capacity: 1)
        buffers = memory + ringBytes + pageBytes

        do throws(URingSetupFailure) {
            let multishot = try URingBackend.probe(ring)
            receiveMode = multishot && !configuration.forceSingleShotReceive
                ? .multishotProvidedBuffers : .singleShotProvidedBuffers
            try registerBufferRing()
        } catch {
            io_uring_queue_exit(ring)
            ring.deallocate()
            completions.deallocate()
            munmap(kernelMemory, kernelMemoryBytes)
            throw error
        }
    }

    /// Checks the opcodes this backend needs; returns whether multishot recv is available.
    private static func probe(_ ring: UnsafeMutablePointer<io_uring>) throws(URingSetupFailure) -> Bool {
        guard let probe = io_uring_get_probe_ring(ring) else {
            throw URingSetupFailure(description: "io_uring_get_probe_ring failed", queueInitResult: nil)
        }
        defer { io_uring_free_probe(probe) }
        let required: [(Int32, String)] = [
            (Int32(IORING_OP_CONNECT.rawValue), "connect"), (Int32(IORING_OP_ACCEPT.rawValue), "accept"),
            (Int32(IORING_OP_RECV.rawValue), "recv"), (Int32(IORING_OP_SEND.rawValue), "send"),
            (Int32(IORING_OP_ASYNC_CANCEL.rawValue), "async cancel"), (Int32(IORING_OP_READ.rawValue), "read"),
            (Int32(IORING_OP_WRITE.rawValue), "write"),
        ]
        for (opcode, name) in required where io_uring_opcode_supported(probe, opcode) == 0 {
            throw URingSetupFailure(description: "io_uring: the kernel lacks the \(name) opcode", queueInitResult: nil)
        }
        // IORING_RECV_MULTISHOT is a flag, not an opcode, so the probe can't report it. It came in
        // 6.0 together with IORING_OP_SEND_ZC, whose presence stands in for it.
        return io_uring_opcode_supported(probe, Int32(IORING_OP_SEND_ZC.rawValue)) != 0
    }

    private func registerBufferRing() throws(URingSetupFailure) {
        io_uring_buf_ring_init(bufferRing)
        var registration = io_uring_buf_reg()
        registration.ring_addr = UInt64(UInt(bitPattern: UnsafeMutableRawPointer(bufferRing)))
        registration.ring_entries = UInt32(bufferCount)
        registration.bgid = bufferGroup
        let result = io_uring_register_buf_ring(ring, &registration, 0)
        guard result == 0 else {
            throw URingSetupFailure(description: "io_uring_register_buf_ring: \(errnoDescription(-result)) (errno \(-result))",
                                    queueInitResult: nil)
        }
        let mask = io_uring_buf_ring_mask(UInt32(bufferCount))
        for bufferID in 0..<bufferCount {
            io_uring_buf_ring_add(bufferRing, buffers + bufferID * bufferBytes, UInt32(bufferBytes),
                                  UInt16(bufferID), mask, Int32(bufferID))
        }
        io_uring_buf_ring_advance(bufferRing, Int32(bufferCount))
    }

    func shutdown() {
        guard !isShutDown else { return }
        isShutDown = true
        // Closing the ring cancels whatever is in flight; only then do buffers go away.
        io_uring_queue_exit(ring)
        for position in 0..<slots.capacity {
            let record = slots[UInt32(position)]
            if record.pointee.state != .free && record.pointee.fd >= 0 {
                Glibc.close(record.pointee.fd)
                record.pointee.fd = -1
            }
        }
        ring.deallocate()
        completions.deallocate()
        munmap(kernelMemory, kernelMemoryBytes)
    }

    // MARK: Submissions

    private func nextSQE() -> UnsafeMutablePointer<io_uring_sqe> {
        if let sqe = io_uring_get_sqe(ring) { return sqe }
        // The submission queue is full: hand it to the kernel now rather than lose the request.
        _ = io_uring_submit(ring)
        guard let sqe = io_uring_get_sqe(ring) else { preconditionFailure("io_uring: no SQE after submit") }
        return sqe
    }

    private func userData(_ operation: Operation, _ index: UInt32) -> UInt64 {
        UserData(operation, index: index, generation: slots[index].pointee.generation).raw
    }

    private func submitted(_ index: UInt32) {
        slots[index].pointee.operationsInFlight += 1
    }

    func startConnect(_ index: UInt32) {
        let record = slots[index]
        let sqe = nextSQE()
        slots.address(index).withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
            io_uring_prep_connect(sqe, record.pointee.fd, address, record.pointee.addressLength)
        }
        io_uring_sqe_set_data64(sqe, userData(.connect, index))
        submitted(index)
    }

    func startAccepting(_ index: UInt32) throws(ReactorError) {
        armAccept(index)
    }

    private func armAccept(_ index: UInt32) {
        let sqe = nextSQE()
        io_uring_prep_multishot_accept(sqe, slots[index].pointee.fd, nil, nil,
                                       Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue))
        io_uring_sqe_set_data64(sqe, userData(.accept, index))
        submitted(index)
    }

    private func armReceive(_ index: UInt32) {
        let record = slots[index]
        guard record.pointee.state == .connected, !record.pointee.receiveArmed else { return }
        let sqe = nextSQE()
        if receiveMode == .multishotProvidedBuffers {
            io_uring_prep_recv_multishot(sqe, record.pointee.fd, nil, 0, 0)
        } else {
            io_uring_prep_recv(sqe, record.pointee.fd, nil, bufferBytes, 0)
        }
        curing_sqe_select_buffer(sqe, bufferGroup)
        io_uring_sqe_set_data64(sqe, userData(.receive, index))
        record.pointee.receiveArmed = true
        submitted(index)
    }

    private func submitSend(_ index: UInt32) {
        let record = slots[index]
        guard record.pointee.state == .connected, record.pointee.sendInFlightBytes == 0,
              record.pointee.sendCount > 0
        else { return }
        let region = slots.nextSendRegion(index)
        let sqe = nextSQE()
        io_uring_prep_send(sqe, record.pointee.fd, region.baseAddress, region.count, Int32(MSG_NOSIGNAL))
        io_uring_sqe_set_data64(sqe, userData(.send, index))
        record.pointee.sendInFlightBytes = region.count
        submitted(index)
    }

    func close(_ index: UInt32) {
        slots.retire(index)
        let record = slots[index]
        if record.pointee.operationsInFlight == 0 {
            finishClosing(index)
            return
        }
        // The fd stays open until the cancellation has been submitted and everything it cancels
        // has completed: the cancel finds its targets by fd, and the staging memory of an
        // in-flight send must not be handed to a new occupant.
        let sqe = nextSQE()
        io_uring_prep_cancel_fd(sqe, record.pointee.fd, UInt32(IORING_ASYNC_CANCEL_ALL))
        io_uring_sqe_set_data64(sqe, userData(.cancel, index))
        submitted(index)
    }

    private func finishClosing(_ index: UInt32) {
        let record = slots[index]
        if record.pointee.fd >= 0 { Glibc.close(record.pointee.fd) }
        slots.free(index)
    }

    func registerWaker(fd: Int32) throws(ReactorError) {
        wakerFD = fd
        armWaker()
    }

    private func armWaker() {
        let sqe = nextSQE()
        io_uring_prep_read(sqe, wakerFD, wakerWord, UInt32(MemoryLayout<UInt64>.size), 0)
        io_uring_sqe_set_data64(sqe, UserData(.waker, index: 0, generation: 0).raw)
    }

    // MARK: The turn

    func turn(waitNanoseconds: UInt64?, _ handle: (ReactorEvent) -> Void) throws(ReactorError) {
        if !isEnabled {
            let result = curing_enable_rings(ring)
            guard result == 0 else { throw ReactorError(syscall: "io_uring_register(ENABLE_RINGS)", errno: -result) }
            isEnabled = true
        }
        slots.drainPendingSends { index in submitSend(index) }
        try submitAndWait(waitNanoseconds)
        let count = curing_reap(ring, completions, completionsMax)
        for position in 0..<Int(count) {
            let completion = completions[position]
            dispatch(userData: UserData(raw: completion.user_data), result: completion.res,
                     flags: completion.flags, handle)
        }
    }

    /// The one io_uring_enter of the turn: submits and waits for at least one completion.
    private func submitAndWait(_ waitNanoseconds: UInt64?) throws(ReactorError) {
        var result: Int32
        switch waitNanoseconds {
        case nil:
            result = io_uring_submit_and_wait(ring, 1)
        case 0?:
            result = io_uring_submit_and_get_events(ring)
        case let nanoseconds?:
            var timeout = __kernel_timespec(tv_sec: Int64(nanoseconds / 1_000_000_000),
                                            tv_nsec: Int64(nanoseconds % 1_000_000_000))
            var cqe: UnsafeMutablePointer<io_uring_cqe>?
            result = io_uring_submit_and_wait_timeout(ring, &cqe, 1, &timeout, nil)
        }
        // -ETIME: the timeout passed. -EINTR: a signal. -EBUSY/-EAGAIN: completions are backed up,
        // so reaping is exactly what to do next.
        if result < 0 && result != -ETIME && result != -EINTR && result != -EBUSY && result != -EAGAIN {
            throw ReactorError(syscall: "io_uring_submit_and_wait", errno: -result)
        }
    }

    private func dispatch(userData: UserData, result: Int32, flags: UInt32, _ handle: (ReactorEvent) -> Void) {
        guard let operation = userData.operation else { return }
        switch operation {
        case .waker:
            // A read of the eventfd completed (the counter is now zero again): watch for the next.
            if result >= 0 || result == -EAGAIN || result == -EINTR { armWaker() }
            return
        case .socket:
            preconditionFailure("io_uring never submits the epoll-only socket operation")
        case .connect, .accept, .receive, .send, .cancel:
            break
        }
        let index = userData.index
        let record = slots[index]
        let final = flags & UInt32(IORING_CQE_F_MORE) == 0
        if final {
            record.pointee.operationsInFlight -= 1
            precondition(record.pointee.operationsInFlight >= 0)
            if operation == .receive { record.pointee.receiveArmed = false }
            if operation == .send { record.pointee.sendInFlightBytes = 0 }
        }
        guard record.pointee.generation == userData.generation, record.pointee.state != .closing,
              operation != .cancel
        else {
            dropStale(operation: operation, index: index, result: result, flags: flags)
            return
        }
        let slot = Slot(index: index, generation: userData.generation)
        switch operation {
        case .connect: connectCompleted(slot, result: result, handle)
        case .accept: acceptCompleted(slot, result: result, final: final, handle)
        case .receive: receiveCompleted(slot, result: result, flags: flags, final: final, handle)
        case .send: sendCompleted(slot, result: result, handle)
        case .cancel, .waker, .socket: preconditionFailure("handled above")
        }
    }

    private func dropStale(operation: Operation, index: UInt32, result: Int32, flags: UInt32) {
        if operation != .cancel { staleCompletionsDropped += 1 }
        if flags & UInt32(IORING_CQE_F_BUFFER) != 0 { recycleBuffer(flags) }
        if operation == .accept && result >= 0 { Glibc.close(result) }
        let record = slots[index]
        if record.pointee.state == .closing && record.pointee.operationsInFlight == 0 {
            finishClosing(index)
        }
    }

    private func connectCompleted(_ slot: Slot, result: Int32, _ handle: (ReactorEvent) -> Void) {
        guard result == 0 else {
            handle(.connectFailed(slot, errno: -result))
            closeIfCurrent(slot)
            return
        }
        slots[slot.index].pointee.state = .connected
        handle(.connected(slot))
        guard slots.isCurrent(slot) else { return }
        armReceive(slot.index)
        if slots[slot.index].pointee.sendCount > 0 { slots.queueSend(slot.index) }
    }

    private func acceptCompleted(_ listener: Slot, result: Int32, final: Bool, _ handle: (ReactorEvent) -> Void) {
        if result >= 0 {
            accepted(listener, fd: result, handle)
        }
        // Errors such as -EMFILE end the multishot accept; it is re-armed and retried next turn.
        if final && slots.isCurrent(listener) {
            armAccept(listener.index)
        }
    }

    private func accepted(_ listener: Slot, fd: Int32, _ handle: (ReactorEvent) -> Void) {
        guard let index = slots.adoptAccepted(fd: fd) else { return }
        let connection = slots.slot(index)
        handle(.accepted(listener: listener, connection: connection))
        if slots.isCurrent(connection) { armReceive(index) }
    }

    private func receiveCompleted(_ slot: Slot, result: Int32, flags: UInt32, final: Bool,
                                  _ handle: (ReactorEvent) -> Void)
    {
        if result > 0 {
            precondition(flags & UInt32(IORING_CQE_F_BUFFER) != 0, "recv completed without a buffer")
            let bufferID = Int(flags >> UInt32(IORING_CQE_BUFFER_SHIFT))
            let bytes = UnsafeRawBufferPointer(start: buffers + bufferID * bufferBytes, count: Int(result))
            handle(.received(slot, bytes))
            recycleBuffer(flags)
            if final && slots.isCurrent(slot) { armReceive(slot.index) }
            return
        }
        if flags & UInt32(IORING_CQE_F_BUFFER) != 0 { recycleBuffer(flags) }
        if result == -ENOBUFS {
            // Every buffer was in use; this turn's handlers return them before the next submit.
            if final { armReceive(slot.index) }
            return
        }
        handle(.closed(slot, errno: -result))
        closeIfCurrent(slot)
    }

    private func sendCompleted(_ slot: Slot, result: Int32, _ handle: (ReactorEvent) -> Void) {
        guard result >= 0 else {
            handle(.closed(slot, errno: -result))
            closeIfCurrent(slot)
            return
        }
        slots.completeSend(slot.index, bytes: Int(result))
        if slots[slot.index].pointee.sendCount > 0 {
            slots.queueSend(slot.index)
        } else {
            handle(.writable(slot))
        }
    }

    private func closeIfCurrent(_ slot: Slot) {
        if slots.isCurrent(slot) { close(slot.index) }
    }

    private func recycleBuffer(_ flags: UInt32) {
        let bufferID = Int(flags >> UInt32(IORING_CQE_BUFFER_SHIFT))
        io_uring_buf_ring_add(bufferRing, buffers + bufferID * bufferBytes, UInt32(bufferBytes),
                              UInt16(bufferID), io_uring_buf_ring_mask(UInt32(bufferCount)), 0)
        io_uring_buf_ring_advance(bufferRing, 1)
    }

    func injectReceiveError(index: UInt32, generation: UInt32, errno code: Int32, _ handle: (ReactorEvent) -> Void) {
        // Flagged F_MORE so that it ends no submission: the slot's own operations stay accounted.
        dispatch(userData: UserData(.receive, index: index, generation: generation), result: -code,
                 flags: UInt32(IORING_CQE_F_MORE), handle)
    }
}
