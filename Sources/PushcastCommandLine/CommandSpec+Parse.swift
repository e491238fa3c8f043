extension CommandSpec {
    /// Parses `arguments` (without the program and subcommand names) against this spec.
    ///
    /// Options and positionals may be interleaved until `--`, after which everything is a
    /// positional. `-` is a positional (stdin). A value option takes the rest of its argument
    /// (`--name=value`, `-n100`) or the next argument; the next argument is refused as a value
    /// only when it looks like a long option (`--json`), so `-n -5` and `--data -` work.
    /// `-h` or `--help` anywhere before `--` returns `.help` at once.
    public func parse(_ arguments: [String]) throws(CommandLineError) -> ParseResult {
        var parser = ArgumentScanner(spec: self, arguments: arguments)
        return try parser.run()
    }
}

/// `parse(arguments, spec:)`, for callers that prefer a free function.
public func parse(_ arguments: [String], spec: CommandSpec) throws(CommandLineError) -> ParseResult {
    try spec.parse(arguments)
}

/// The single pass over an argument vector. It lives only for one `parse` call.
struct ArgumentScanner {
    let spec: CommandSpec
    let arguments: [String]
    var index = 0
    var occurrences: [String: [ParsedArguments.Occurrence]] = [:]
    var positionals: [String] = []

    init(spec: CommandSpec, arguments: [String]) {
        self.spec = spec
        self.arguments = arguments
    }

    mutating func run() throws(CommandLineError) -> ParseResult {
        var optionsEnded = false
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            if optionsEnded || argument == "-" || !argument.hasPrefix("-") || looksLikeNegativeNumber(argument) {
                positionals.append(argument)
            } else if argument == "--" {
                optionsEnded = true
            } else if argument.hasPrefix("--") {
                if try scanLong(argument) == .helpRequested { return .help(spec.helpText()) }
            } else {
                if try scanShortCluster(argument) == .helpRequested { return .help(spec.helpText()) }
            }
        }
        try checkPositionalCount()
        return .arguments(ParsedArguments(spec: spec, occurrences: occurrences, positionals: positionals))
    }

    enum Step { case continued, helpRequested }

    /// `--name`, `--name=value` or `--name value`.
    mutating func scanLong(_ argument: String) throws(CommandLineError) -> Step {
        let body = argument.dropFirst(2)
        let name: String
        let inlineValue: String?
        if let equals = body.firstIndex(of: "=") {
            name = String(body[..<equals])
            inlineValue = String(body[body.index(after: equals)...])
        } else {
            name = String(body)
            inlineValue = nil
        }
        let spelling = "--" + name
        if name == "help" {
            if let inlineValue { throw error("--help does not take a value, got '\(inlineValue)'") }
            return .helpRequested
        }
        guard let option = spec.option(named: name) else {
            throw error(unknownOptionMessage(spelling, typedName: name))
        }
        if option.takesValue {
            let value: String
            if let inlineValue { value = inlineValue } else { value = try takeNextValue(for: option, spelling: spelling) }
            try record(option, spelling: spelling, value: value)
        } else {
            if let inlineValue { throw error("\(spelling) does not take a value, got '\(inlineValue)'") }
            try record(option, spelling: spelling, value: nil)
        }
        return .continued
    }

    /// `-v`, `-vq` (bundled flags), `-n 100`, `-n100`, `-n=100`, `-vn100`.
    mutating func scanShortCluster(_ argument: String) throws(CommandLineError) -> Step {
        let longName = String(argument.dropFirst())
        if longName.count > 1, longName == "help" || spec.option(named: longName) != nil {
            throw error("unknown option '\(argument)' (did you mean '--\(longName)'?)")
        }
        var rest = Substring(longName)
        while let letter = rest.first {
            rest = rest.dropFirst()
            let spelling = "-" + String(letter)
            if letter == "h" { return .helpRequested }
            guard let option = spec.option(short: letter) else {
                let context = argument.count > 2 ? " in '\(argument)'" : ""
                throw error("unknown option '\(spelling)'\(context)")
            }
            guard option.takesValue else {
                try record(option, spelling: spelling, value: nil)
                continue
            }
            if rest.first == "=" { rest = rest.dropFirst() }
            let value = rest.isEmpty ? try takeNextValue(for: option, spelling: spelling) : String(rest)
            try record(option, spelling: spelling, value: value)
            return .continued
        }
        return .continued
    }

    mutating func takeNextValue(for option: OptionSpec, spelling: String) throws(CommandLineError) -> String {
        let expected = metavar(option)
        guard index < arguments.count else {
            throw error("\(spelling): missing value \(expected)")
        }
        let next = arguments[index]
        if next.hasPrefix("--") && next.count > 2 {
            throw error("\(spelling): missing value \(expected) before '\(next)' (write \(spelling)=\(next) if that is the value)")
        }
        index += 1
        return next
    }

    mutating func record(_ option: OptionSpec, spelling: String, value: String?) throws(CommandLineError) {
        let previous = occurrences[option.name, default: []]
        if !option.isRepeatable, let first = previous.first {
            let earlier = first.spelling == spelling ? "" : " (as '\(first.spelling)')"
            throw error("\(spelling) given more than once\(earlier); it is not repeatable")
        }
        occurrences[option.name, default: []].append(ParsedArguments.Occurrence(spelling: spelling, value: value))
    }

    func checkPositionalCount() throws(CommandLineError) {
        let required = spec.positionals.filter { $0.arity == .required }
        if positionals.count < required.count {
            let missing = required[positionals.count...].map(\.usageForm).joined(separator: " ")
            throw error("missing \(missing)")
        }
        let isVariadic = spec.positionals.last?.arity == .variadic
        if !isVariadic && positionals.count > spec.positionals.count {
            let extra = positionals[spec.positionals.count]
            throw error("unexpected argument '\(extra)'")
        }
    }

    /// `-5` or `-0.25` is a positional unless some short option is a digit.
    func looksLikeNegativeNumber(_ argument: String) -> Bool {
        guard argument.count > 1, Double(argument) != nil else { return false }
        return !spec.options.contains { $0.short?.isNumber == true }
    }

    func unknownOptionMessage(_ spelling: String, typedName: String) -> String {
        let candidates = spec.options.map(\.name) + ["help"]
        guard let suggestion = Suggestion.nearest(to: typedName, among: candidates) else {
            return "unknown option '\(spelling)'"
        }
        return "unknown option '\(spelling)' (did you mean '--\(suggestion)'?)"
    }

    func metavar(_ option: OptionSpec) -> String {
        switch option.kind {
        case .flag: return ""
        case .value(let metavar): return "<\(metavar)>"
        }
    }

    func error(_ message: String) -> CommandLineError {
        CommandLineError(message, spec: spec)
    }
}
