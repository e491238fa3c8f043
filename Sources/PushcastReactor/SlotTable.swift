// The fixed slab of socket slots shared by both backends: generations, states, file descriptors,
// peer addresses and the per-slot staging buffers for outgoing bytes.
//
// Memory the kernel points into never moves (docs/DESIGN.md §2.5): staging buffers and addresses live
// in one mmap reservation made at start-up (pages are committed only when first touched), and a
// closed slot goes back on the free list only once no operation on it is still in flight.

import Glibc

enum SlotState: UInt8 {
    case free
    case listening
    case connecting
    case connected
    /// Closed by the reactor or its user; waiting for in-flight operations to complete.
    case closing
}

struct SlotRecord {
    var generation: UInt32 = 1
    var state: SlotState = .free
    var fd: Int32 = -1
    /// Submissions whose final completion has not arrived (a multishot one counts once).
    var operationsInFlight: Int32 = 0
    var receiveArmed: Bool = false
    /// Set while the slot's index sits in the pending-send list.
    var sendQueued: Bool = false
    /// epoll only: EPOLLOUT is part of the registration because a send hit EAGAIN.
    var outputInterest: Bool = false
    /// Staging ring: `sendCount` bytes starting at `sendStart`; the first `sendInFlightBytes` of
    /// them belong to the send the kernel is working on and must not change.
    var sendStart: Int = 0
    var sendCount: Int = 0
    var sendInFlightBytes: Int = 0
    var addressLength: socklen_t = 0
}

final class SlotTable {
    let capacity: Int
    let sendBufferBytes: Int
    private let records: UnsafeMutablePointer<SlotRecord>
    private let freeIndices: UnsafeMutablePointer<UInt32>
    private var freeCount: Int
    private let mapping: UnsafeMutableRawPointer
    private let mappingBytes: Int
    private let stagingBase: UnsafeMutableRawPointer
    private let addressBase: UnsafeMutablePointer<sockaddr_storage>
    /// Indices of slots with staged bytes to submit at the next turn.
    private var pendingSends: [UInt32] = []
    private var pendingSendsDraining: [UInt32] = []
    private(set) var inUse: Int = 0

    init(capacity: Int, sendBufferBytes: Int) throws(ReactorError) {
        precondition(capacity > 0 && UInt32(capacity) < UserData.indexLimit, "slotsMax must be 1..<2^24")
        precondition(sendBufferBytes > 0, "sendBufferBytes must be positive")
        self.capacity = capacity
        self.sendBufferBytes = sendBufferBytes
        let stagingBytes = capacity * sendBufferBytes
        let addressBytes = capacity * MemoryLayout<sockaddr_storage>.stride
        mappingBytes = stagingBytes + addressBytes
        guard let pointer = mmap(nil, mappingBytes, PROT_READ | PROT_WRITE,
                                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0),
              pointer != MAP_FAILED
        else {
            throw ReactorError(syscall: "mmap(staging buffers, \(mappingBytes) bytes)", errno: errno)
        }
        mapping = pointer
        stagingBase = pointer
        addressBase = (pointer + stagingBytes).bindMemory(to: sockaddr_storage.self, capacity: capacity)
        records = .allocate(capacity: capacity)
        records.initialize(repeating: SlotRecord(), count: capacity)
        freeIndices = .allocate(capacity: capacity)
        // Lowest index on top of the stack: a freed slot is the next one handed out (LIFO).
        for position in 0..<capacity {
            freeIndices[position] = UInt32(capacity - 1 - position)
        }
        freeCount = capacity
        pendingSends.reserveCapacity(capacity)
        pendingSendsDraining.reserveCapacity(capacity)
    }

    deinit {
        records.deinitialize(count: capacity)
        records.deallocate()
        freeIndices.deallocate()
        munmap(mapping, mappingBytes)
    }

    subscript(index: UInt32) -> UnsafeMutablePointer<SlotRecord> {
        precondition(Int(index) < capacity)
        return records + Int(index)
    }

    func slot(_ index: UInt32) -> Slot {
        Slot(index: index, generation: records[Int(index)].generation)
    }

    /// True when `slot` names the current occupant of its index and that occupant is not closing.
    func isCurrent(_ slot: Slot) -> Bool {
        guard Int(slot.index) < capacity else { return false }
        let record = records[Int(slot.index)]
        return record.generation == slot.generation && record.state != .free && record.state != .closing
    }

    func address(_ index: UInt32) -> UnsafeMutablePointer<sockaddr_storage> {
        addressBase + Int(index)
    }

    func stagingBuffer(_ index: UInt32) -> UnsafeMutableRawPointer {
        stagingBase + Int(index) * sendBufferBytes
    }

    // MARK: Allocation

    /// Takes an accepted socket into a slot (TCP_NODELAY set), or closes it when that fails or
    /// no slot is left: a full table refuses connections rather than queueing them unboundedly.
    func adoptAccepted(fd: Int32) -> UInt32? {
        do throws(ReactorError) {
            try Sockets.setNoDelay(fd)
        } catch {
            Glibc.close(fd)
            return nil
        }
        guard let index = allocate(fd: fd, state: .connected) else {
            Glibc.close(fd)
            return nil
        }
        return index
    }

    func allocate(fd: Int32, state: SlotState) -> UInt32? {
        guard freeCount > 0 else { return nil }
        freeCount -= 1
        let index = freeIndices[freeCount]
        let record = self[index]
        precondition(record.pointee.state == .free && record.pointee.operationsInFlight == 0)
        let generation = record.pointee.generation
        let queued = record.pointee.sendQueued
        record.pointee = SlotRecord()
        record.pointee.generation = generation
        record.pointee.sendQueued = queued
        record.pointee.fd = fd
        record.pointee.state = state
        inUse += 1
        return index
    }

    /// Invalidates every outstanding `Slot` for `index`; the slot stays allocated until `free`.
    func retire(_ index: UInt32) {
        let record = self[index]
        precondition(record.pointee.state != .free && record.pointee.state != .closing)
        record.pointee.generation &+= 1
        if record.pointee.generation == 0 { record.pointee.generation = 1 }
        record.pointee.state = .closing
    }

    func free(_ index: UInt32) {
        let record = self[index]
        precondition(record.pointee.state == .closing && record.pointee.operationsInFlight == 0)
        record.pointee.state = .free
        record.pointee.fd = -1
        freeIndices[freeCount] = index
        freeCount += 1
        inUse -= 1
    }

    // MARK: Staging

    /// Contiguous free bytes after the staged ones: up to the end of the buffer, or up to the
    /// oldest staged byte once the staged bytes wrap around.
    func stageCapacity(_ index: UInt32) -> Int {
        let record = self[index].pointee
        if record.sendCount == 0 { return sendBufferBytes - record.sendStart }
        if record.sendCount == sendBufferBytes { return 0 }
        let writeIndex = (record.sendStart + record.sendCount) % sendBufferBytes
        return writeIndex > record.sendStart ? sendBufferBytes - writeIndex : record.sendStart - writeIndex
    }

    func stage(_ index: UInt32, _ fill: (UnsafeMutableRawBufferPointer) -> Int) -> Int {
        let record = self[index]
        let free = stageCapacity(index)
        guard free > 0 else { return 0 }
        let writeIndex = (record.pointee.sendStart + record.pointee.sendCount) % sendBufferBytes
        let region = UnsafeMutableRawBufferPointer(start: stagingBuffer(index) + writeIndex, count: free)
        let written = fill(region)
        precondition(written >= 0 && written <= free, "stage: fill returned more bytes than it was given")
        record.pointee.sendCount += written
        if written > 0 { queueSend(index) }
        return written
    }

    func queueSend(_ index: UInt32) {
        let record = self[index]
        guard !record.pointee.sendQueued else { return }
        record.pointee.sendQueued = true
        pendingSends.append(index)
    }

    /// Hands each pending send to `body` and empties the list; `body` may queue new sends, which
    /// wait for the next drain.
    func drainPendingSends(_ body: (UInt32) -> Void) {
        guard !pendingSends.isEmpty else { return }
        swap(&pendingSends, &pendingSendsDraining)
        for index in pendingSendsDraining {
            self[index].pointee.sendQueued = false
            body(index)
        }
        pendingSendsDraining.removeAll(keepingCapacity: true)
    }

    /// The contiguous run of staged bytes that the next send should carry.
    func nextSendRegion(_ index: UInt32) -> UnsafeRawBufferPointer {
        let record = self[index].pointee
        let count = min(record.sendCount, sendBufferBytes - record.sendStart)
        return UnsafeRawBufferPointer(start: stagingBuffer(index) + record.sendStart, count: count)
    }

    /// Accounts for `bytes` sent from the front of the staging ring.
    func completeSend(_ index: UInt32, bytes: Int) {
        let record = self[index]
        precondition(bytes >= 0 && bytes <= record.pointee.sendCount)
        record.pointee.sendStart = (record.pointee.sendStart + bytes) % sendBufferBytes
        record.pointee.sendCount -= bytes
        if record.pointee.sendCount == 0 { record.pointee.sendStart = 0 }
    }
}
