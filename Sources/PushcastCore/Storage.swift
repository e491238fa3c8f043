// What the layers above the system modules see of the machine: files through these protocols,
// clocks through MonotonicClock and a wall-clock reading. PushcastSystem implements them over
// real files and clocks (`Machine.real`); a test or the simulator may pass its own.

/// A file read from its start in large chunks: a token file, results, a prune file, or stdin.
public protocol ReadableFile: AnyObject {
    var path: String { get }
    /// Reads up to `buffer.count` bytes; 0 at the end of the file.
    func read(into buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> Int
}

extension ReadableFile {
    /// Reads up to `buffer.count` bytes into an array's storage; 0 at the end of the file.
    public func read(into buffer: inout [UInt8]) throws(SystemError) -> Int {
        var failure: SystemError? = nil
        let count = buffer.withUnsafeMutableBytes { raw in
            do throws(SystemError) { return try read(into: raw) } catch { failure = error; return 0 }
        }
        if let failure { throw failure }
        return count
    }
}

/// An append-only file with a buffer of its own (results, prune files, summaries, merged files),
/// created private to its owner. Appends are whole batches: the buffer takes them until it is full.
public protocol AppendableFile: AnyObject {
    var path: String { get }
    /// The buffer's size: an append larger than this is written straight through.
    var bufferBytes: Int { get }
    /// Bytes in the file, written or buffered.
    var size: Int { get }
    /// Bytes free on the file's file system, nil when unknown.
    var freeBytes: Int? { get }
    func append(_ bytes: UnsafeRawBufferPointer) throws(SystemError)
    func append(_ bytes: [UInt8]) throws(SystemError)
    func append(_ text: String) throws(SystemError)
    /// Writes everything buffered.
    func flush() throws(SystemError)
    /// Makes what was written durable.
    func sync() throws(SystemError)
    /// Makes sure the next `headroom` bytes will find disk space, reserving in steps of at least
    /// `step` bytes and never past `ceiling` more; false when the disk is full.
    func reserve(headroom: Int, step: Int, ceiling: Int?) -> Bool
    /// Gives back the space reserved past what was written.
    func releaseReservation()
    /// Forgets what is buffered, as the death of the process would.
    func dropBuffered()
}

/// A temporary file with no name, gone with the process: appended to, read back at offsets.
public protocol ScratchStorage: AnyObject {
    var size: Int { get }
    func append(_ bytes: UnsafeRawBufferPointer) throws(SystemError)
    /// Reads up to `buffer.count` bytes at `offset`; fewer only at the end of the file.
    func read(at offset: Int, into buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> Int
}

/// A campaign's journal: append-only, held under an exclusive lock while it is open, its appends
/// safe from several threads at once.
public protocol JournalStorage: AnyObject, Sendable {
    var path: String { get }
    /// Everything the journal holds now.
    func readAll() throws(SystemError) -> [UInt8]
    /// Empties the journal.
    func truncate() throws(SystemError)
    func append(_ text: String) throws(SystemError)
    /// Appends `bytes`, unsynced; whole, even with other threads appending.
    func append(bytes: UnsafeRawBufferPointer) throws(SystemError)
    func sync() throws(SystemError)
}

/// Where files are opened, and what can be asked about a path.
public protocol FileStorage: Sendable {
    /// Opens `path` ("-": standard input) for reading.
    func openForReading(_ path: String) throws(SystemError) -> any ReadableFile
    /// Creates (or truncates, or with `append` extends) `path` for appending.
    func createForAppending(_ path: String, bufferBytes: Int, append: Bool, dropsSyncedPages: Bool) throws(SystemError)
        -> any AppendableFile
    /// Opens (creating) a journal and takes its lock; a lock held elsewhere throws.
    func openJournal(_ path: String) throws(SystemError) -> any JournalStorage
    /// A new scratch file in `directory`.
    func makeScratch(in directory: String) throws(SystemError) -> any ScratchStorage
    /// What the file at `path` holds, read whole; nil when there is no such file.
    func readWholeFile(_ path: String) throws(SystemError) -> [UInt8]?
    /// The size of the file at `path`, nil when it cannot be seen.
    func size(_ path: String) -> Int?
    /// Whether anything is at `path`.
    func exists(_ path: String) -> Bool
    /// Cuts the file at `path` to `size` bytes.
    func truncate(_ path: String, to size: Int) throws(SystemError)
}

extension FileStorage {
    /// A new file (truncating one that is there) with a 64 KiB buffer.
    public func createForAppending(_ path: String, bufferBytes: Int = 64 * 1024) throws(SystemError) -> any AppendableFile {
        try createForAppending(path, bufferBytes: bufferBytes, append: false, dropsSyncedPages: false)
    }
}

/// The machine a campaign runs on: its files and its clocks.
public struct Machine: Sendable {
    public var files: any FileStorage
    /// A monotonic clock for one thread (each worker wraps its own in a TurnClock).
    public var monotonicClock: @Sendable () -> any MonotonicClock
    /// Seconds since the Unix epoch, with fractions.
    public var wallClockSeconds: @Sendable () -> Double

    public init(files: any FileStorage, monotonicClock: @escaping @Sendable () -> any MonotonicClock,
                wallClockSeconds: @escaping @Sendable () -> Double) {
        self.files = files
        self.monotonicClock = monotonicClock
        self.wallClockSeconds = wallClockSeconds
    }
}
