import PushcastCore

/// Disk faults a seed plants in `SimulatedStorage`, each firing once.
public struct StorageFaults: Sendable, CustomStringConvertible {
    /// The write (counted from the storage's first, 1-based) that fails with EIO, writing nothing.
    public var failingWrite: Int?
    /// The sync that fails with EIO: what it should have made durable stays volatile.
    public var failingSync: Int?
    /// After this many writes another tenant fills the disk, leaving `slackBytes` free: what is
    /// reserved can still be written, anything past it fails with ENOSPC after a short write.
    public var diskFullAfterWrites: Int?
    public var slackBytes = 0

    public init() {}

    public var isEmpty: Bool { failingWrite == nil && failingSync == nil && diskFullAfterWrites == nil }

    public var description: String {
        var parts: [String] = []
        if let failingWrite { parts.append("EIO on write \(failingWrite)") }
        if let failingSync { parts.append("EIO on sync \(failingSync)") }
        if let diskFullAfterWrites { parts.append("the disk fills after write \(diskFullAfterWrites) (\(slackBytes) bytes left)") }
        return parts.isEmpty ? "none" : parts.joined(separator: ", ")
    }
}

/// An in-memory disk behind PushcastCore's storage protocols, for the simulator: each file keeps
/// its durable bytes (synced) and its pending bytes (written, not yet synced). A process death
/// (`endProcess`) loses only what the process itself buffered (the sinks drop that) and its
/// journal locks; a power loss (`powerLoss`) loses every pending byte, except that a seeded
/// prefix of each file's pending tail may survive, torn anywhere. Truncation is durable at
/// once. The seed decides the faults (`StorageFaults`); nothing reads a clock. One thread.
public final class SimulatedStorage: FileStorage, @unchecked Sendable {
    final class Node {
        var durable: [UInt8] = []
        var pending: [UInt8] = []
        /// Where the space allocated to the file ends (`reserve`): at least its size.
        var reservedEnd = 0
        var locked = false
        var size: Int { durable.count + pending.count }
        var bytes: [UInt8] { durable + pending }
        var allocated: Int { max(size, reservedEnd) }
    }

    private var nodes: [String: Node] = [:]
    private let random: SplitMix64
    public var faults: StorageFaults
    /// The disk's size; nil: as large as needed.
    public var diskBytes: Int?
    public private(set) var writes = 0
    public private(set) var syncs = 0
    /// Each planted fault that fired, in words.
    public private(set) var fired: [String] = []
    /// Which life of the process: handles opened in an earlier one refuse to write.
    private(set) var life = 0

    public init(seed: UInt64, faults: StorageFaults = StorageFaults()) {
        random = SplitMix64(seed: seed)
        self.faults = faults
    }

    // MARK: - The machine's events

    /// The process ended (exited or was killed): its locks go, and its open files write no more.
    /// Everything it handed the kernel stays.
    public func endProcess() {
        life += 1
        for node in nodes.values { node.locked = false }
    }

    /// The machine lost power: the process ends, and of each file's pending bytes only a seeded
    /// prefix survives (none, all, or a torn part). Returns, per file, the pending bytes lost.
    @discardableResult
    public func powerLoss() -> [String: Int] {
        endProcess()
        var lost: [String: Int] = [:]
        for path in nodes.keys.sorted() {
            let node = nodes[path]!
            guard !node.pending.isEmpty else { continue }
            let kept: Int
            switch random.next(below: 3) {
            case 0: kept = 0
            case 1: kept = node.pending.count
            default: kept = Int(random.next(below: UInt64(node.pending.count)))
            }
            node.durable += node.pending[0..<kept]
            lost[path] = node.pending.count - kept
            node.pending = []
            node.reservedEnd = node.durable.count
        }
        return lost
    }

    /// The operator made room and the disk works again: no fault fires from now on.
    public func repair() {
        faults = StorageFaults()
        diskBytes = nil
    }

    /// What the file at `path` holds now (durable and pending), nil when there is none.
    public func contents(_ path: String) -> [UInt8]? { nodes[path]?.bytes }

    /// The bytes of `path` that would survive a power loss now.
    public func durableContents(_ path: String) -> [UInt8]? { nodes[path]?.durable }

    /// Whether a journal lock is held on `path`.
    public func isLocked(_ path: String) -> Bool { nodes[path]?.locked == true }

    // MARK: - The disk's operations, for the handles

    var freeBytes: Int? { diskBytes.map { max(0, $0 - nodes.values.reduce(0) { $0 + $1.allocated }) } }

    func checkAlive(_ life: Int, _ path: String) throws(SystemError) {
        guard life == self.life else { throw SystemError("cannot write \(path): the process that opened it is gone") }
    }

    /// Appends `bytes` to the node's pending tail: EIO when the seed says so (nothing written),
    /// ENOSPC after the part that fits when the disk is full.
    func write(_ bytes: UnsafeRawBufferPointer, to node: Node, path: String) throws(SystemError) {
        writes += 1
        if writes == faults.failingWrite {
            fired.append("EIO on write \(writes) (\(path))")
            throw SystemError("cannot write \(path): Input/output error")
        }
        if let after = faults.diskFullAfterWrites, writes >= after, diskBytes == nil {
            diskBytes = nodes.values.reduce(0) { $0 + $1.allocated } + faults.slackBytes
            fired.append("the disk filled at write \(writes)")
        }
        let room = freeBytes.map { $0 + node.allocated - node.size } ?? bytes.count
        let fits = min(bytes.count, max(0, room))
        node.pending += UnsafeRawBufferPointer(rebasing: bytes[0..<fits])
        if fits < bytes.count { throw SystemError("cannot write \(path): No space left on device") }
    }

    func sync(_ node: Node, path: String) throws(SystemError) {
        syncs += 1
        if syncs == faults.failingSync {
            fired.append("EIO on sync \(syncs) (\(path))")
            throw SystemError("cannot sync \(path): Input/output error")
        }
        node.durable += node.pending
        node.pending = []
    }

    /// Allocates the node up to `end`; false when the disk has no room for it.
    func allocate(_ node: Node, to end: Int) -> Bool {
        guard end > node.allocated else { return true }
        if let free = freeBytes, end - node.allocated > free { return false }
        node.reservedEnd = end
        return true
    }

    func cut(_ node: Node, to size: Int) {
        if size <= node.durable.count {
            node.durable.removeSubrange(size...)
            node.pending = []
        } else if size < node.size {
            node.pending.removeSubrange((size - node.durable.count)...)
        }
        node.reservedEnd = min(node.reservedEnd, max(size, node.durable.count))
    }

    private func node(_ path: String, creating: Bool) -> Node? {
        if let node = nodes[path] { return node }
        guard creating else { return nil }
        let node = Node()
        nodes[path] = node
        return node
    }

    // MARK: - FileStorage

    public func openForReading(_ path: String) throws(SystemError) -> any ReadableFile {
        guard let node = nodes[path] else { throw SystemError("cannot open \(path): No such file or directory") }
        return SimulatedReadableFile(path: path, bytes: node.bytes)
    }

    public func createForAppending(_ path: String, bufferBytes: Int, append: Bool, dropsSyncedPages: Bool) throws(SystemError)
        -> any AppendableFile
    {
        let node = node(path, creating: true)!
        if !append { cut(node, to: 0) }
        return SimulatedAppendableFile(path: path, node: node, storage: self, bufferBytes: max(4096, bufferBytes))
    }

    public func openJournal(_ path: String) throws(SystemError) -> any JournalStorage {
        let node = node(path, creating: true)!
        guard !node.locked else { throw SystemError("another pushcast is writing this campaign: \(path) is locked") }
        node.locked = true
        return SimulatedJournalFile(path: path, node: node, storage: self)
    }

    public func makeScratch(in directory: String) throws(SystemError) -> any ScratchStorage {
        SimulatedScratchFile(node: Node(), storage: self)
    }

    public func readWholeFile(_ path: String) throws(SystemError) -> [UInt8]? { nodes[path]?.bytes }

    public func size(_ path: String) -> Int? { nodes[path]?.size }

    public func exists(_ path: String) -> Bool { nodes[path] != nil }

    public func truncate(_ path: String, to size: Int) throws(SystemError) {
        guard let node = nodes[path] else { throw SystemError("cannot truncate \(path): No such file or directory") }
        cut(node, to: size)
    }
}

/// A file's bytes as they were when it was opened, read from the start.
final class SimulatedReadableFile: ReadableFile {
    let path: String
    private let bytes: [UInt8]
    private var offset = 0

    init(path: String, bytes: [UInt8]) {
        self.path = path
        self.bytes = bytes
    }

    func read(into buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> Int {
        let count = min(buffer.count, bytes.count - offset)
        guard count > 0 else { return 0 }
        bytes.withUnsafeBytes { raw in
            buffer.baseAddress!.copyMemory(from: raw.baseAddress! + offset, byteCount: count)
        }
        offset += count
        return count
    }
}

/// An appendable file with a buffer of its own in the process, as PushcastSystem's `OutputFile`:
/// appends fill the buffer, `flush` hands it to the disk, `sync` makes the disk's copy durable.
final class SimulatedAppendableFile: AppendableFile {
    let path: String
    let bufferBytes: Int
    private let node: SimulatedStorage.Node
    private let storage: SimulatedStorage
    private let life: Int
    private var buffer: [UInt8] = []

    init(path: String, node: SimulatedStorage.Node, storage: SimulatedStorage, bufferBytes: Int) {
        self.path = path
        self.node = node
        self.storage = storage
        self.bufferBytes = bufferBytes
        life = storage.life
    }

    var size: Int { node.size + buffer.count }
    var freeBytes: Int? { storage.freeBytes }

    func append(_ bytes: UnsafeRawBufferPointer) throws(SystemError) {
        if buffer.count + bytes.count > bufferBytes { try flush() }
        if bytes.count > bufferBytes {
            try storage.checkAlive(life, path)
            try storage.write(bytes, to: node, path: path)
        } else {
            buffer += bytes
        }
    }

    func append(_ bytes: [UInt8]) throws(SystemError) {
        var failure: SystemError? = nil
        bytes.withUnsafeBytes { raw in
            do throws(SystemError) { try append(raw) } catch { failure = error }
        }
        if let failure { throw failure }
    }

    func append(_ text: String) throws(SystemError) { try append(Array(text.utf8)) }

    func flush() throws(SystemError) {
        guard !buffer.isEmpty else { return }
        try storage.checkAlive(life, path)
        let pending = buffer
        buffer.removeAll(keepingCapacity: true)
        var failure: SystemError? = nil
        pending.withUnsafeBytes { raw in
            do throws(SystemError) { try storage.write(raw, to: node, path: path) } catch { failure = error }
        }
        if let failure { throw failure }
    }

    func sync() throws(SystemError) {
        try storage.checkAlive(life, path)
        try storage.sync(node, path: path)
    }

    func reserve(headroom: Int, step: Int, ceiling: Int?) -> Bool {
        let needed = size + headroom
        guard needed > node.allocated else { return true }
        var length = max(step, needed - node.allocated)
        if let ceiling { length = min(length, max(needed, size + ceiling) - node.allocated) }
        return storage.allocate(node, to: node.allocated + length)
    }

    func releaseReservation() { node.reservedEnd = node.size }

    func dropBuffered() { buffer.removeAll() }
}

/// A journal: appends go to the disk at once (unsynced), `sync` makes them durable; the lock is
/// held until the process ends (`SimulatedStorage.endProcess`) or the journal is released.
final class SimulatedJournalFile: JournalStorage, @unchecked Sendable {
    let path: String
    private let node: SimulatedStorage.Node
    private let storage: SimulatedStorage
    private let life: Int

    init(path: String, node: SimulatedStorage.Node, storage: SimulatedStorage) {
        self.path = path
        self.node = node
        self.storage = storage
        life = storage.life
    }

    deinit { if life == storage.life { node.locked = false } }

    func readAll() throws(SystemError) -> [UInt8] { node.bytes }

    func truncate() throws(SystemError) {
        try storage.checkAlive(life, path)
        storage.cut(node, to: 0)
    }

    func append(_ text: String) throws(SystemError) {
        var failure: SystemError? = nil
        Array(text.utf8).withUnsafeBytes { raw in
            do throws(SystemError) { try append(bytes: raw) } catch { failure = error }
        }
        if let failure { throw failure }
    }

    func append(bytes: UnsafeRawBufferPointer) throws(SystemError) {
        try storage.checkAlive(life, path)
        try storage.write(bytes, to: node, path: path)
    }

    func sync() throws(SystemError) {
        try storage.checkAlive(life, path)
        try storage.sync(node, path: path)
    }
}

/// A scratch file: appended to, read back at offsets; it takes disk space like any file.
final class SimulatedScratchFile: ScratchStorage {
    private let node: SimulatedStorage.Node
    private let storage: SimulatedStorage

    init(node: SimulatedStorage.Node, storage: SimulatedStorage) {
        self.node = node
        self.storage = storage
    }

    var size: Int { node.size }

    func append(_ bytes: UnsafeRawBufferPointer) throws(SystemError) {
        try storage.write(bytes, to: node, path: "a scratch file")
    }

    func read(at offset: Int, into buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> Int {
        let bytes = node.bytes
        let count = max(0, min(buffer.count, bytes.count - offset))
        guard count > 0 else { return 0 }
        bytes.withUnsafeBytes { raw in buffer.baseAddress!.copyMemory(from: raw.baseAddress! + offset, byteCount: count) }
        return count
    }
}
