// Whole-file and directory calls for the CLI and the mock (demo data, generated keys and
// certificates, scratch directories): small, at start-up or at the end, never on a hot path.
#if canImport(Glibc)
import Glibc
#endif
import PushcastCore

public enum FileSystem {
    /// Creates (or replaces) `path` holding `text`, mode 0600 when `secret` (keys), else 0644.
    public static func write(_ text: String, to path: String, secret: Bool = false) throws(SystemError) {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, secret ? 0o600 : 0o644)
        guard fd >= 0 else { throw SystemError("cannot write \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        // An existing file keeps its old mode through O_CREAT; a secret one is tightened.
        if secret { tightenIfRegular(fd) }
        var text = text
        var failure: SystemError? = nil
        text.withUTF8 { utf8 in
            do throws(SystemError) { try writeFully(fd, UnsafeRawBufferPointer(utf8), at: nil, what: path) } catch { failure = error }
        }
        if let failure { throw failure }
    }

    /// Mode 0600 for a regular file open as `fd`. Never for a device or a pipe: an output path
    /// of `/dev/null` run as root would otherwise take every other user's /dev/null away.
    public static func tightenIfRegular(_ fd: Int32) {
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return }
        fchmod(fd, 0o600)
    }

    /// Whether `path` names something other than a regular file (a device such as /dev/null, a
    /// pipe): such a target is written in place, never replaced by a rename.
    public static func isSpecial(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0 && (info.st_mode & S_IFMT) != S_IFREG
    }

    /// This boot of the kernel's id (`/proc/sys/kernel/random/boot_id`), nil where there is none.
    /// Pages written but not synced survive a process crash and are lost only when the kernel
    /// goes (power loss, a kernel crash): the boot id then changes.
    public static func bootID() -> String? {
        let fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: 64)
        let n = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard n > 0 else { return nil }
        let text = String(decoding: bytes[0..<n], as: UTF8.self).filter { $0.isHexDigit || $0 == "-" }
        return text.isEmpty ? nil : text
    }

    /// Whether anything is at `path` (a link is followed).
    public static func exists(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0
    }

    /// The size of the file at `path`, or nil when it cannot be seen.
    public static func size(_ path: String) -> Int? {
        var info = stat()
        return stat(path, &info) == 0 ? Int(info.st_size) : nil
    }

    /// Whether `path` is a directory (a link is followed).
    public static func isDirectory(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR
    }

    /// Whether this process may write in (or to) `path` (access(2), W_OK).
    public static func isWritable(_ path: String) -> Bool {
        access(path, W_OK) == 0
    }

    /// When the file at `path` last changed, in seconds since the Unix epoch; nil when it cannot be seen.
    public static func modificationSeconds(_ path: String) -> Double? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return Double(info.st_mtim.tv_sec) + Double(info.st_mtim.tv_nsec) / 1e9
    }

    /// Where the symbolic link at `path` points, nil when it is not one.
    public static func linkTarget(_ path: String) -> String? {
        var buffer = [CChar](repeating: 0, count: 4097)
        let count = readlink(path, &buffer, 4096)
        guard count > 0 else { return nil }
        return String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Moves `from` to `to` in one step (rename(2)), replacing what `to` named. Throws the
    /// kernel's reason alone ("No such file or directory"), for the caller's message.
    public static func rename(_ from: String, to: String) throws(SystemError) {
        guard Glibc.rename(from, to) == 0 else { throw SystemError(String(cString: strerror(errno))) }
    }

    /// Removes the file (not a directory) at `path`; best effort.
    public static func removeFile(_ path: String) {
        unlink(path)
    }

    /// Creates `path` and any missing parents (mode 0777 less the umask); one that exists is fine.
    public static func createDirectories(_ path: String) throws(SystemError) {
        var prefix = path.hasPrefix("/") ? "/" : ""
        for component in path.split(separator: "/") {
            prefix += component
            if mkdir(prefix, 0o777) != 0 && errno != EEXIST {
                throw SystemError("cannot create \(prefix): \(String(cString: strerror(errno)))")
            }
            prefix += "/"
        }
    }

    /// A new private directory (0700) `prefix-XXXXXX` inside `parent`.
    public static func makeTemporaryDirectory(in parent: String, prefix: String) throws(SystemError) -> String {
        var template = Array(((parent.hasSuffix("/") ? parent : parent + "/") + prefix + "-XXXXXX").utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw SystemError("cannot create a temporary directory: \(String(cString: strerror(errno)))")
        }
        return String(cString: made)
    }

    /// Removes `path` and, when it is a directory, everything below it (links are removed, not
    /// followed). Best effort: what cannot be removed stays.
    public static func removeTree(_ path: String) {
        var info = stat()
        guard lstat(path, &info) == 0 else { return }
        if (info.st_mode & S_IFMT) == S_IFDIR, let directory = opendir(path) {
            var names: [String] = []
            while let entry = readdir(directory) {
                let name = withUnsafeBytes(of: entry.pointee.d_name) { String(cString: $0.baseAddress!.assumingMemoryBound(to: CChar.self)) }
                if name != "." && name != ".." { names.append(name) }
            }
            closedir(directory)
            for name in names { removeTree(path + "/" + name) }
        }
        remove(path)
    }
}
