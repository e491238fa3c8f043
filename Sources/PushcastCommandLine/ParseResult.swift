/// What parsing an argument vector produced: arguments to run with, or a request for help.
///
/// Help is not an error: the CLI prints the text to stdout and exits 0.
public enum ParseResult: Sendable {
    /// The arguments were valid; run the command with them.
    case arguments(ParsedArguments)
    /// `-h` or `--help` was given; print this text to stdout and exit 0.
    case help(String)
}
