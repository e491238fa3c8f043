// The few calls about the process itself that the CLI and the engine need: the process id, a
// signal to itself, the standard streams.
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The running process.
public enum CurrentProcess {
    /// getpid(2).
    public static var id: Int32 { getpid() }

    /// Sends `signal` to this process (the mock's `--duration` ends the way SIGTERM does).
    public static func send(signal: Int32) {
        kill(getpid(), signal)
    }
}

/// Standard output and standard error: machine-readable output and messages.
public enum StandardStream: Int32, Sendable {
    case output = 1
    case error = 2

    /// Writes all of `text` (short writes and EINTR retried). A stream that stops taking writes
    /// (its reader gone: EPIPE with SIGPIPE ignored; a hung-up terminal: EIO) loses the text and
    /// never stops the caller; its first error is kept for `failureNotes`.
    public func write(_ text: String) {
        var text = text
        text.withUTF8 { utf8 in
            var offset = 0
            while offset < utf8.count {
                let n = Glibc.write(rawValue, utf8.baseAddress! + offset, utf8.count - offset)
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else {
                    noteFailure(n < 0 ? errno : EIO)
                    return
                }
                offset += n
            }
        }
    }

    private static let outputFailure = Atomic<Int32>(0)
    private static let errorFailure = Atomic<Int32>(0)

    private func noteFailure(_ code: Int32) {
        if self == .output {
            _ = Self.outputFailure.compareExchange(expected: 0, desired: code, ordering: .relaxed)
        } else {
            _ = Self.errorFailure.compareExchange(expected: 0, desired: code, ordering: .relaxed)
        }
    }

    /// The first write error of this stream, if any (an errno value).
    public var firstFailure: Int32? {
        let code = self == .output ? Self.outputFailure.load(ordering: .relaxed) : Self.errorFailure.load(ordering: .relaxed)
        return code == 0 ? nil : code
    }

    /// One line per stream that lost writes, for a summary: what happened, and that the campaign
    /// went on.
    public static var failureNotes: [String] {
        [StandardStream.output, .error].compactMap { stream in
            stream.firstFailure.map { code in
                "\(stream == .output ? "stdout" : "stderr") stopped taking writes (\(String(cString: strerror(code)))); "
                    + "the campaign went on and its later lines there were lost"
            }
        }
    }

    /// Whether the stream is a terminal (isatty): progress is drawn only for a person watching.
    public var isTerminal: Bool { isatty(rawValue) != 0 }
}
