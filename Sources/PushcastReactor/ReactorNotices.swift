/// Where the reactor's own notices go (the io_uring-to-epoll fallback line): stderr as it is,
/// unless the program routes them through its log format (set once, before any reactor starts).
public enum ReactorNotices {
    nonisolated(unsafe) public static var write: (String) -> Void = { writeStandardError($0) }
}
