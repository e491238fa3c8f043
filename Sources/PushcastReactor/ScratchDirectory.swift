import Glibc

/// A private directory (0700) under $TMPDIR (or /tmp) for files a run throws away: the
/// simulator's results and journals. `remove()` deletes its plain files and the directory.
public final class ScratchDirectory {
    public let path: String

    public init(name: String) throws(ReactorError) {
        let base = getenv("TMPDIR").map { String(cString: $0) } ?? "/tmp"
        var template = Array("\(base)/\(name)-XXXXXX".utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw ReactorError("cannot create a directory under \(base): \(String(cString: strerror(errno)))")
        }
        path = String(cString: made)
    }

    /// Deletes the files directly inside, then the directory.
    public func remove() {
        guard let directory = opendir(path) else { return }
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
            if name != "." && name != ".." { unlink(path + "/" + name) }
        }
        closedir(directory)
        rmdir(path)
    }
}
