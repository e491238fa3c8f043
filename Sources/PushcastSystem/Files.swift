// PushcastSystem: the blocking calls of the process that are not the network. Files (inputs,
// results, journals, scratch files, credentials), whole-file and directory calls, signals, the
// process itself, resource usage, the environment and the clocks. Everything here is a plain
// blocking syscall, made at start-up, at the end, or in batches on a thread of its own; the
// ring, epoll, sockets and timers are PushcastReactor's (docs/ARCHITECTURE.md, "The I/O line").
#if canImport(Glibc)
import Glibc
#endif
import CSystem
import PushcastCore

/// A file opened for reading in large sequential chunks (token files), or stdin for "-".
/// Plain blocking read(2): files are always "ready", and the reader runs on its own thread.
public final class InputFile: ReadableFile {
    public let path: String
    private let fd: Int32
    private let ownsDescriptor: Bool

    public init(path: String) throws(SystemError) {
        self.path = path
        if path == "-" {
            fd = 0
            ownsDescriptor = false
        } else {
            let opened = open(path, O_RDONLY | O_CLOEXEC)
            guard opened >= 0 else { throw SystemError("cannot open \(path): \(String(cString: strerror(errno)))") }
            fd = opened
            ownsDescriptor = true
            posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL)
        }
    }

    deinit { if ownsDescriptor { close(fd) } }

    /// Reads up to `buffer.count` bytes; 0 at end of file.
    public func read(into buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> Int {
        while true {
            let n = Glibc.read(fd, buffer.baseAddress, buffer.count)
            if n >= 0 { return n }
            if errno == EINTR { continue }
            throw SystemError("cannot read \(path): \(String(cString: strerror(errno)))")
        }
    }

    /// Reads up to `buffer.count` bytes into an array's storage; 0 at end of file.
    public func read(into buffer: inout [UInt8]) throws(SystemError) -> Int {
        let fd = self.fd
        while true {
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n >= 0 { return n }
            if errno == EINTR { continue }
            throw SystemError("cannot read \(path): \(String(cString: strerror(errno)))")
        }
    }

    /// The file's device and inode, and its size, when it is a regular file: a second open of
    /// the same path compares them, to tell a file replaced or rewritten in between.
    public var identity: (file: FileIdentity, size: Int)? {
        var st = stat()
        guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { return nil }
        return (.inode(device: UInt64(st.st_dev), inode: UInt64(st.st_ino)), Int(st.st_size))
    }

    /// True for a regular file (so a fast line count makes sense), false for stdin or a pipe.
    public var isRegularFile: Bool {
        var st = stat()
        return fstat(fd, &st) == 0 && (st.st_mode & S_IFMT) == S_IFREG
    }
}

/// An append-only output file with a fixed buffer, created with mode 0600 (results, prune files
/// and logs hold device tokens). Lines are written as whole buffers; `flush` writes the rest.
public final class OutputFile: AppendableFile {
    public let path: String
    private let fd: Int32
    private let buffer: UnsafeMutableRawBufferPointer
    private var used = 0
    /// Bytes handed to the kernel so far, and where the space reserved for the file ends.
    private var written = 0
    private var reservedEnd = 0
    /// False once the file system said it cannot reserve at all (no fallocate support).
    private var canReserve = true
    /// Whether `sync` gives the page cache back what it made durable (`init(dropsSyncedPages:)`).
    private let dropsSyncedPages: Bool
    /// The file's pages before this offset were given back to the kernel.
    private var droppedEnd = 0
    /// `written` at the last sync that succeeded; -1 before the first and after a truncation, so
    /// that the next sync always reaches the disk.
    private var syncedEnd = -1
    /// fdatasync calls made so far.
    public private(set) var syncCount = 0

    /// The buffer's size: an append larger than this is written straight through, uncopied.
    public var bufferBytes: Int { buffer.count }

    /// Bytes in the file, written or buffered.
    public var size: Int { written + used }

    /// Forgets what is buffered, as the death of the process would (the simulator's crash).
    public func dropBuffered() { used = 0 }

    /// Creates (or truncates) `path` with mode 0600; with `append`, keeps what it holds and
    /// writes after it (a resumed campaign's results are never truncated behind its back).
    ///
    /// `dropsSyncedPages`: after each `sync`, the kernel is told it may drop the cached pages of
    /// what is now durable (POSIX_FADV_DONTNEED). For a large file written once and not read
    /// back by this process (the results): its page cache stays a few megabytes instead of the
    /// whole file, the freed pages are reused for the next writes, and the file does not push
    /// other files' pages out of memory or fill a container's memory limit.
    public init(path: String, bufferBytes: Int = 64 * 1024, append: Bool = false, dropsSyncedPages: Bool = false) throws(SystemError) {
        self.path = path
        self.dropsSyncedPages = dropsSyncedPages
        let opened = open(path, O_WRONLY | O_CREAT | (append ? O_APPEND : O_TRUNC) | O_CLOEXEC, 0o600)
        guard opened >= 0 else { throw SystemError("cannot create \(path): \(String(cString: strerror(errno)))") }
        // An existing file keeps its old mode through O_CREAT; tighten it.
        FileSystem.tightenIfRegular(opened)
        fd = opened
        buffer = .allocate(byteCount: max(4096, bufferBytes), alignment: 16)
        if append {
            var st = stat()
            if fstat(opened, &st) == 0 { written = Int(st.st_size) }
            reservedEnd = written
        }
    }

    /// Makes what was written so far durable (fdatasync): it survives power loss. A file that
    /// was handed nothing since its last sync is not synced again: an idle prune file, synced
    /// with the results ten times a second, made a third of a slow campaign's fdatasync calls,
    /// each a wait for the disk (about 40 µs on the development machine's virtual disk).
    public func sync() throws(SystemError) {
        guard written != syncedEnd else { return }
        // EINVAL: a special file that has nothing to sync (`--prune /dev/null`).
        guard fdatasync(fd) == 0 || errno == EINVAL else { throw SystemError("cannot sync \(path): \(String(cString: strerror(errno)))") }
        syncedEnd = written
        syncCount += 1
        if dropsSyncedPages && written - droppedEnd >= Self.dropStepBytes { dropCachedPages() }
    }

    /// The least newly durable data worth a DONTNEED call (a syscall per sync is wasted on a
    /// few pages).
    public static let dropStepBytes = 1 << 20

    /// Gives back the cached pages of everything written so far (clean after `fdatasync`). The
    /// range starts at the page holding `droppedEnd`: the kernel drops only whole pages, so the
    /// page the last call ended in is offered again.
    private func dropCachedPages() {
        let start = droppedEnd & ~(Self.pageBytes - 1)
        _ = posix_fadvise(fd, off_t(start), off_t(written - start), POSIX_FADV_DONTNEED)
        droppedEnd = written
    }

    private static let pageBytes = max(4096, Int(sysconf(Int32(_SC_PAGESIZE))))

    deinit {
        try? flush()
        close(fd)
        buffer.deallocate()
    }

    /// Appends bytes, writing out full buffers.
    public func append(_ bytes: UnsafeRawBufferPointer) throws(SystemError) {
        if used + bytes.count > buffer.count { try flush() }
        if bytes.count > buffer.count {
            try writeAll(bytes)
            return
        }
        (buffer.baseAddress! + used).copyMemory(from: bytes.baseAddress!, byteCount: bytes.count)
        used += bytes.count
    }

    public func append(_ bytes: [UInt8]) throws(SystemError) {
        var failure: SystemError? = nil
        bytes.withUnsafeBytes { raw in
            do throws(SystemError) { try append(raw) } catch { failure = error }
        }
        if let failure { throw failure }
    }

    public func append(_ text: String) throws(SystemError) {
        var copy = text
        var failure: SystemError? = nil
        copy.withUTF8 { utf8 in
            do throws(SystemError) { try append(UnsafeRawBufferPointer(utf8)) } catch { failure = error }
        }
        if let failure { throw failure }
    }

    /// Makes sure the next `headroom` bytes appended will find disk space: blocks are allocated
    /// ahead (fallocate, the file's size unchanged) in steps of at least `step` bytes. False when
    /// the file system is full: what is already reserved can still be written, so a caller that
    /// stops producing new work here loses none of the work in flight. A file system without
    /// fallocate reserves nothing and always answers true (the write itself reports a full disk).
    /// `ceiling`: the most bytes the writer can still append; no step reaches past it.
    public func reserve(headroom: Int, step: Int = 16 << 20, ceiling: Int? = nil) -> Bool {
        let needed = written + used + headroom
        guard canReserve, needed > reservedEnd else { return true }
        var length = max(step, needed - reservedEnd)
        if let ceiling { length = min(length, max(needed, written + used + ceiling) - reservedEnd) }
        if csystem_reserve_space(fd, Int64(reservedEnd), Int64(length)) == 0 {
            reservedEnd += length
            return true
        }
        // A file system without fallocate, or no file system at all (/dev/null: ENODEV; a pipe: ESPIPE).
        if errno == EOPNOTSUPP || errno == ENOSYS || errno == EINVAL || errno == ENODEV || errno == ESPIPE {
            canReserve = false
            return true
        }
        return false
    }

    /// Bytes free to this process on the file's file system (fstatvfs), nil when unknown.
    public var freeBytes: Int? {
        var info = statvfs()
        guard fstatvfs(fd, &info) == 0 else { return nil }
        return Int(info.f_bavail) * Int(info.f_frsize)
    }

    /// Gives back the blocks reserved past the end of what was written (at the end of a run).
    public func releaseReservation() {
        guard reservedEnd > written else { return }
        _ = ftruncate(fd, off_t(written))
        reservedEnd = written
        syncedEnd = -1
    }

    /// Writes everything buffered so far.
    public func flush() throws(SystemError) {
        guard used > 0 else { return }
        let pending = UnsafeRawBufferPointer(rebasing: buffer[0..<used])
        used = 0
        try writeAll(pending)
    }

    private func writeAll(_ bytes: UnsafeRawBufferPointer) throws(SystemError) {
        try writeFully(fd, bytes, at: nil, what: path)
        written += bytes.count
    }
}

/// Writes all of `bytes` to `fd`, at its position (`at: nil`) or at a file offset, retrying short
/// writes and EINTR.
func writeFully(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, at position: Int?, what: String) throws(SystemError) {
    var offset = 0
    while offset < bytes.count {
        let n = position.map { pwrite(fd, bytes.baseAddress! + offset, bytes.count - offset, off_t($0 + offset)) }
            ?? write(fd, bytes.baseAddress! + offset, bytes.count - offset)
        if n < 0 {
            if errno == EINTR { continue }
            throw SystemError("cannot write \(what): \(String(cString: strerror(errno)))")
        }
        offset += n
    }
}

/// A temporary file with no name: created in `directory` and unlinked at once, so it vanishes
/// with the process however that ends. Appended to in whole buffers, read back at offsets.
public final class ScratchFile: ScratchStorage {
    private let fd: Int32
    public private(set) var size = 0

    public init(directory: String) throws(SystemError) {
        var template = Array((directory.hasSuffix("/") ? directory : directory + "/").utf8CString.dropLast()) + Array("pushcast-scratch-XXXXXX".utf8CString)
        let opened = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard opened >= 0 else { throw SystemError("cannot create a scratch file in \(directory): \(String(cString: strerror(errno)))") }
        template.withUnsafeBufferPointer { _ = unlink($0.baseAddress!) }
        fd = opened
    }

    deinit { close(fd) }

    public func append(_ bytes: UnsafeRawBufferPointer) throws(SystemError) {
        try writeFully(fd, bytes, at: size, what: "a scratch file")
        size += bytes.count
    }

    /// Reads up to `buffer.count` bytes at `offset`; fewer only at the end of the file.
    public func read(at offset: Int, into buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> Int {
        var done = 0
        while done < buffer.count {
            let n = pread(fd, buffer.baseAddress! + done, buffer.count - done, off_t(offset + done))
            if n < 0 {
                if errno == EINTR { continue }
                throw SystemError("cannot read a scratch file: \(String(cString: strerror(errno)))")
            }
            if n == 0 { break }
            done += n
        }
        return done
    }
}

/// What a file holds, read whole (results and journals on resume; they are read once).
public func readWholeFile(_ path: String) throws(SystemError) -> [UInt8]? {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    if fd < 0 {
        if errno == ENOENT { return nil }
        throw SystemError("cannot open \(path): \(String(cString: strerror(errno)))")
    }
    defer { close(fd) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 1 << 20)
    while true {
        let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
        if n < 0 {
            if errno == EINTR { continue }
            throw SystemError("cannot read \(path): \(String(cString: strerror(errno)))")
        }
        if n == 0 { return bytes }
        bytes.append(contentsOf: chunk[0..<n])
    }
}

/// Credential files (keys, certificates, service accounts), read whole at start-up by the one call
/// that does it, straight into `SecretBytes` (wiped when released). Works for pipes too
/// (`--key <(vault read …)`).
public enum SecretFile {
    /// The bytes of the file at `path`, at most `bytesMax`. A `SecretFileReader`.
    public static func read(_ path: String, bytesMax: Int) throws(SecretFileError) -> SecretBytes {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw .cannotOpen(reason: String(cString: strerror(errno))) }
        defer { close(fd) }
        var info = stat()
        let isRegular = fstat(fd, &info) == 0 && (info.st_mode & S_IFMT) == S_IFREG
        if isRegular && Int(info.st_size) > bytesMax { throw .tooLarge(bytesMax: bytesMax) }
        let secret = SecretBytes(capacity: isRegular ? Int(info.st_size) + 1 : 4096)
        while true {
            let room = secret.spareCapacity(minimum: 1)
            let n = Glibc.read(fd, room.baseAddress, min(room.count, bytesMax + 1 - secret.count))
            if n < 0 {
                if errno == EINTR { continue }
                throw .cannotRead(reason: String(cString: strerror(errno)))
            }
            if n == 0 { return secret }
            secret.didAppend(n)
            if secret.count > bytesMax { throw .tooLarge(bytesMax: bytesMax) }
        }
    }
}

/// Cuts a file to `size` bytes (a torn last line, dropped before a resume appends).
public func truncateFile(_ path: String, to size: Int) throws(SystemError) {
    guard truncate(path, off_t(size)) == 0 else {
        throw SystemError("cannot truncate \(path): \(String(cString: strerror(errno)))")
    }
}

/// An append-only journal (0600) held under an exclusive lock for the life of the object, so two
/// writers of one campaign cannot run at once; appends go to the kernel at once and `sync` makes
/// them durable.
public final class JournalFile: JournalStorage, @unchecked Sendable {
    public let path: String
    private let fd: Int32

    /// Opens (creating) `path` and takes its write lock. A lock held by another process throws,
    /// naming that process.
    public init(path: String) throws(SystemError) {
        self.path = path
        let opened = open(path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        guard opened >= 0 else { throw SystemError("cannot open \(path): \(String(cString: strerror(errno)))") }
        FileSystem.tightenIfRegular(opened)
        var lock = flock()
        lock.l_type = Int16(F_WRLCK)
        lock.l_whence = Int16(SEEK_SET)
        if fcntl(opened, F_SETLK, &lock) != 0 {
            var holder = flock()
            holder.l_type = Int16(F_WRLCK)
            holder.l_whence = Int16(SEEK_SET)
            let pid = fcntl(opened, F_GETLK, &holder) == 0 && holder.l_type != Int16(F_UNLCK) ? " (pid \(holder.l_pid))" : ""
            close(opened)
            throw SystemError("another pushcast\(pid) is writing this campaign: \(path) is locked")
        }
        fd = opened
    }

    deinit { close(fd) }

    /// Everything the journal holds now.
    public func readAll() throws(SystemError) -> [UInt8] {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        var offset = 0
        while true {
            let n = chunk.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, off_t(offset)) }
            if n < 0 {
                if errno == EINTR { continue }
                throw SystemError("cannot read \(path): \(String(cString: strerror(errno)))")
            }
            if n == 0 { return bytes }
            bytes.append(contentsOf: chunk[0..<n])
            offset += n
        }
    }

    /// Empties the journal (a campaign started over).
    public func truncate() throws(SystemError) {
        guard ftruncate(fd, 0) == 0 else { throw SystemError("cannot truncate \(path): \(String(cString: strerror(errno)))") }
    }

    public func append(_ text: String) throws(SystemError) {
        var copy = text
        var failure: SystemError? = nil
        copy.withUTF8 { utf8 in
            do throws(SystemError) { try writeFully(fd, UnsafeRawBufferPointer(utf8), at: nil, what: path) } catch { failure = error }
        }
        if let failure { throw failure }
    }

    /// Appends `bytes`, unsynced. Safe from several threads at once: the file is open with
    /// O_APPEND, so each write lands whole at the end (the fd and the path never change).
    public func append(bytes: UnsafeRawBufferPointer) throws(SystemError) {
        try writeFully(fd, bytes, at: nil, what: path)
    }

    public func sync() throws(SystemError) {
        guard fdatasync(fd) == 0 else { throw SystemError("cannot sync \(path): \(String(cString: strerror(errno)))") }
    }
}
