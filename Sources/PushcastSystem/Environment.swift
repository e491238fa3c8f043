#if canImport(Glibc)
import Glibc
#endif

/// The process's environment, read here: settings (TMPDIR, credentials' paths, the simulator's
/// knobs) come to the rest of the code as values.
public enum Environment {
    /// The value of the variable `name`, nil when it is not set.
    public static func value(_ name: String) -> String? {
        getenv(name).map { String(cString: $0) }
    }

    /// TMPDIR, or /tmp when it is not set.
    public static var temporaryDirectory: String { value("TMPDIR") ?? "/tmp" }
}
