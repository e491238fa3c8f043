/// A program with subcommands, such as `pushcast` with `send`, `check`, `mock`, `demo` and
/// `bench`. It picks the subcommand from the first argument; the chosen `CommandSpec` then
/// parses the rest.
///
/// ```swift
/// switch try group.select(Array(CommandLine.arguments.dropFirst())) {
/// case .help(let text): print(text, terminator: "")      // exit 0
/// case .command(let spec, let rest):
///     switch try spec.parse(rest) { ... }
/// }
/// ```
public struct CommandGroup: Sendable {
    /// The program name, such as `"pushcast"`.
    public var name: String
    public var summary: String
    /// The subcommands; each one's `name` is the program name, a space and the subcommand word.
    public var commands: [CommandSpec]
    /// What the manual page says beyond the command tables; with it, `help --man` prints the
    /// page (`manualPage()`) and the overview names that command.
    public var manual: ManualPage?

    /// - Precondition: every command is named `"\(name) <word>"`, with distinct words.
    public init(name: String, summary: String, commands: [CommandSpec], manual: ManualPage? = nil) {
        self.name = name
        self.summary = summary
        self.commands = commands
        self.manual = manual
        var words: Set<String> = ["help"]
        for command in commands {
            precondition(command.name.hasPrefix(name + " "), "command '\(command.name)' is not under '\(name)'")
            let word = CommandGroup.word(of: command, in: name)
            precondition(!word.isEmpty && !word.contains(" "), "command '\(command.name)' must add one word")
            precondition(words.insert(word).inserted, "command '\(word)' declared twice or reserved")
        }
    }

    /// What the first argument chose.
    public enum Selection: Sendable {
        /// `pushcast` alone, `pushcast --help`, `pushcast -h`, `pushcast help`, `pushcast help <command>`
        /// or, with a `manual`, `pushcast help --man` (roff): print this text to stdout and exit 0.
        case help(String)
        /// A subcommand, with the arguments that follow it.
        case command(CommandSpec, arguments: [String])
    }

    /// `<program> <command> [options]`.
    public var usage: String { "\(name) <command> [options]" }

    /// The subcommand words, in declaration order.
    public var commandWords: [String] { commands.map { CommandGroup.word(of: $0, in: name) } }

    /// Picks the subcommand named by `arguments[0]` (arguments exclude the program name).
    public func select(_ arguments: [String]) throws(CommandLineError) -> Selection {
        // No command at all: the overview, as `--help` prints it.
        guard let first = arguments.first else { return .help(helpText()) }
        if first == "-h" || first == "--help" { return .help(helpText()) }
        if first == "help" {
            guard let topic = arguments.dropFirst().first else { return .help(helpText()) }
            if topic == "--man", let page = manualPage() { return .help(page) }
            return .help(try command(named: topic).helpText())
        }
        if first.hasPrefix("-") {
            throw error("expected a command before options, got '\(first)'")
        }
        return .command(try command(named: first), arguments: Array(arguments.dropFirst()))
    }

    /// The text `pushcast --help` prints: the summary, usage and the commands with summaries.
    public func helpText() -> String {
        var text = "\(name): \(summary)\n\nusage: \(usage)\n\ncommands:\n"
        text += HelpColumns.render(zip(commandWords, commands).map { ($0, $1.summary) })
        text += "\nRun '\(name) <command> --help' for a command's options.\n"
        if manual != nil { text += "Run '\(name) help --man' for the manual page (roff; man -l - reads it).\n" }
        return text
    }

    func command(named word: String) throws(CommandLineError) -> CommandSpec {
        if let index = commandWords.firstIndex(of: word) { return commands[index] }
        if let suggestion = Suggestion.nearest(to: word, among: commandWords) {
            throw error("unknown command '\(word)' (did you mean '\(suggestion)'?)")
        }
        throw error("unknown command '\(word)'; expected one of \(commandWords.joined(separator: ", "))")
    }

    func error(_ message: String) -> CommandLineError {
        CommandLineError(command: name, message: message, usage: usage)
    }

    static func word(of command: CommandSpec, in program: String) -> String {
        String(command.name.dropFirst(program.count + 1))
    }
}
