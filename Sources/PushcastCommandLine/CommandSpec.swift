/// A command (or subcommand) of the CLI: its name, what it does, its options and positionals.
///
/// `name` is the full invocation, `"pushcast send"`, so that messages read
/// `pushcast send: unknown option '--conections' (did you mean '--connections'?)`.
/// Every command accepts `-h` / `--help`; those names are reserved.
public struct CommandSpec: Sendable {
    /// The full invocation, such as `"pushcast send"`.
    public var name: String
    /// One line saying what the command does.
    public var summary: String
    /// The usage line, without the leading `usage: `.
    public var usage: String
    public var options: [OptionSpec]
    public var positionals: [PositionalSpec]

    /// - Parameter usage: the usage line without `usage: `; when nil it is built from the
    ///   positionals: `pushcast send [options] <tokens>`.
    /// - Precondition: option names are unique kebab-case words, short names are unique
    ///   letters or digits, `help` and `h` are not declared, and only the last positional is
    ///   variadic, with no required positional after an optional one.
    public init(
        name: String,
        summary: String,
        usage: String? = nil,
        options: [OptionSpec] = [],
        positionals: [PositionalSpec] = []
    ) {
        self.name = name
        self.summary = summary
        self.options = options
        self.positionals = positionals
        self.usage = usage ?? CommandSpec.defaultUsage(name: name, options: options, positionals: positionals)
        CommandSpec.validate(options: options, positionals: positionals)
    }

    /// The option whose long name is `name`, if declared.
    public func option(named name: String) -> OptionSpec? {
        options.first { $0.name == name }
    }

    /// The option whose short name is `short`, if declared.
    public func option(short: Character) -> OptionSpec? {
        options.first { $0.short == short }
    }

    static func defaultUsage(name: String, options: [OptionSpec], positionals: [PositionalSpec]) -> String {
        var parts = [name, "[options]"]
        parts += positionals.map(\.usageForm)
        return parts.joined(separator: " ")
    }

    static func validate(options: [OptionSpec], positionals: [PositionalSpec]) {
        var longNames: Set<String> = ["help"]
        var shortNames: Set<Character> = ["h"]
        for option in options {
            precondition(isKebabCase(option.name), "option name '\(option.name)' is not kebab-case")
            precondition(longNames.insert(option.name).inserted, "option '--\(option.name)' declared twice or reserved")
            if let short = option.short {
                precondition(short.isASCII && (short.isLetter || short.isNumber), "short option '-\(short)' is not a letter or digit")
                precondition(shortNames.insert(short).inserted, "short option '-\(short)' declared twice or reserved")
            }
        }
        var seenOptional = false
        for (index, positional) in positionals.enumerated() {
            switch positional.arity {
            case .required:
                precondition(!seenOptional, "required positional '\(positional.name)' follows an optional one")
            case .optional:
                seenOptional = true
            case .variadic:
                precondition(index == positionals.count - 1, "only the last positional may be variadic")
                seenOptional = true
            }
        }
    }

    static func isKebabCase(_ name: String) -> Bool {
        guard let first = name.unicodeScalars.first, let last = name.unicodeScalars.last,
              first != "-", last != "-", !name.contains("--") else { return false }
        return name.unicodeScalars.allSatisfy { ("a"..."z").contains($0) || ("0"..."9").contains($0) || $0 == "-" }
    }
}
