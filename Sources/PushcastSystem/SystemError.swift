// PushcastSystem: the blocking calls of the process that are not the network. Files (inputs,
// results, journals, scratch files, credentials), whole-file and directory calls, signals, the
// process itself, resource usage, the environment and the clocks. Everything here is a plain
// blocking syscall, made at start-up, at the end, or in batches on a thread of its own; the
// ring, epoll, sockets and timers are PushcastReactor's (docs/ARCHITECTURE.md, "The I/O line").
#if canImport(Glibc)
import Glibc
#endif

/// A failed file, process or environment call, named together with strerror of its errno.
public struct SystemError: Error, CustomStringConvertible {
    public let description: String

    public init(_ description: String) {
        self.description = description
    }
}

