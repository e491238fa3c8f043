/// A mistake in the user's arguments: an unknown option, a missing or malformed value, too many
/// positionals. It carries the command name and usage line so the CLI can print
/// `description` to stderr and exit with `exitCode`.
///
/// ```
/// pushcast send: unknown option '--conections' (did you mean '--connections'?)
/// usage: pushcast send [options] <tokens>
/// ```
public struct CommandLineError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The full command name, such as `"pushcast send"`.
    public var command: String
    /// What went wrong, naming the option or value: `--connections: expected an integer, got 'x'`.
    public var message: String
    /// The usage line without `usage: `.
    public var usage: String

    public init(command: String, message: String, usage: String) {
        self.command = command
        self.message = message
        self.usage = usage
    }

    /// An error about `spec`'s arguments, for checks the parser cannot make itself
    /// (for example two options that exclude each other).
    public init(_ message: String, spec: CommandSpec) {
        self.init(command: spec.name, message: message, usage: spec.usage)
    }

    /// `<command>: <message>` then `usage: <usage>` on a second line, with no trailing newline.
    public var description: String {
        "\(command): \(message)\nusage: \(usage)"
    }

    /// The process exit status for bad options: 2, as ripgrep uses for "could not start".
    public var exitCode: Int32 { 2 }
}
