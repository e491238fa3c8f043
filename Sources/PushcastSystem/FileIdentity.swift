// What file a path names, so that the CLI can refuse two roles (the export and its results, the
// results and the prune file) that would land on one file. Called a few times at start-up.
#if canImport(Glibc)
import Glibc
#endif

/// The file a path names: its device and inode when it exists (links followed, so a symlink and
/// its target are one file), or the real path it would be created at when it does not.
public enum FileIdentity: Hashable, Sendable, CustomStringConvertible {
    case inode(device: UInt64, inode: UInt64)
    case future(path: String)

    /// nil when the path cannot name a file at all (its directory cannot be resolved), or names
    /// something other than a regular file (`/dev/null`, a pipe), which several roles may share
    /// without losing anything.
    public init?(path: String) {
        var info = stat()
        if stat(path, &info) == 0 {
            guard (info.st_mode & S_IFMT) == S_IFREG else { return nil }
            self = .inode(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
            return
        }
        guard let resolved = Self.futurePath(path, hops: 0) else { return nil }
        self = .future(path: resolved)
    }

    /// The file open as `descriptor` (stdin redirected from a file): its device and inode.
    public init?(descriptor: Int32) {
        var info = stat()
        guard fstat(descriptor, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return nil }
        self = .inode(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
    }

    public var description: String {
        switch self {
        case .inode(let device, let inode): return "device \(device), inode \(inode)"
        case .future(let path): return path
        }
    }

    private static func existing(_ path: String) -> FileIdentity? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return .inode(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
    }

    /// Where a file not yet there would be created: a dangling link's target (followed, at most
    /// 40 hops as the kernel does), else the real path of its directory and its own name.
    private static func futurePath(_ path: String, hops: Int) -> String? {
        guard hops < 40 else { return nil }
        let (directory, name) = split(path)
        if let target = FileSystem.linkTarget(path) {
            let next = target.hasPrefix("/") ? target : directory + "/" + target
            return existing(next) == nil ? futurePath(next, hops: hops + 1) : nil
        }
        guard let real = realpath(directory, nil) else { return nil }
        defer { free(real) }
        let base = String(cString: real)
        return (base == "/" ? "" : base) + "/" + name
    }

    private static func split(_ path: String) -> (directory: String, name: String) {
        var trimmed = Substring(path)
        while trimmed.count > 1 && trimmed.hasSuffix("/") { trimmed = trimmed.dropLast() }
        guard let slash = trimmed.lastIndex(of: "/") else { return (".", String(trimmed)) }
        let directory = trimmed[..<slash]
        return (directory.isEmpty ? "/" : String(directory), String(trimmed[trimmed.index(after: slash)...]))
    }
}
