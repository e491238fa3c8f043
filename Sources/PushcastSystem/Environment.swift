#if canImport(Glibc)
import Glibc
#endif

/// The process's environment, read here: settings (TMPDIR, database passwords, `--shard auto`'s
/// array index, the simulator's knobs) come to the rest of the code as values.
public enum Environment {
    /// The value of the variable `name`, nil when it is not set.
    public static func value(_ name: String) -> String? {
        getenv(name).map { String(cString: $0) }
    }

    /// Every variable, by name (a name set twice: its last value).
    public static var all: [String: String] {
        var variables: [String: String] = [:]
        var cursor = environ
        while let entry = cursor.pointee {
            let text = String(cString: entry)
            if let equals = text.firstIndex(of: "=") {
                variables[String(text[..<equals])] = String(text[text.index(after: equals)...])
            }
            cursor += 1
        }
        return variables
    }

    /// Where temporary files go, with a trailing slash: TMPDIR, else /tmp/.
    public static var temporaryDirectory: String {
        guard let directory = value("TMPDIR") else { return "/tmp/" }
        return directory.hasSuffix("/") ? directory : directory + "/"
    }
}
