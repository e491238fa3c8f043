import Foundation
import PushcastSystem

/// Where the CLI writes: machine-readable output to stdout, everything else to stderr.
enum Console {
    static func out(_ text: String) {
        StandardStream.output.write(text + "\n")
    }

    /// A message for the person or the log pipeline (stderr, in `--log-format`).
    static func error(_ text: String) {
        log(text)
    }
}

/// Exit statuses (README.md "Exit codes"): 0 all rows reached an expected outcome, 1 the run
/// finished but some failed, 2 the run could not start or had to stop.
enum ExitStatus: Int32 {
    case success = 0
    case someFailed = 1
    case stopped = 2
    /// Stopped early (a signal, a full disk); `send --resume` with the same command line goes on.
    case interrupted = 3
}

/// A reason to stop with a message and exit status 2.
struct CommandFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
