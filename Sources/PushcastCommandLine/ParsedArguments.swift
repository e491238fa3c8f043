/// The options and positionals of one successful parse, with typed access.
///
/// Accessors take the option's long name without dashes (`"connections"`). Asking for a name
/// the spec does not declare, or asking `flag` of a value option (or `value` of a flag), is a
/// programmer error and traps. Conversion and range errors are `CommandLineError`s that name
/// the option as the user spelled it (`-c` or `--connections`).
public struct ParsedArguments: Sendable {
    /// One appearance of an option on the command line.
    struct Occurrence: Sendable, Hashable {
        /// `--connections` or `-c`, as typed.
        var spelling: String
        /// The value, for a value option; nil for a flag.
        var value: String?
    }

    /// The spec these arguments were parsed against.
    public let spec: CommandSpec
    let occurrences: [String: [Occurrence]]
    /// The positional arguments in order, including those after `--`.
    public let positionals: [String]

    init(spec: CommandSpec, occurrences: [String: [Occurrence]], positionals: [String]) {
        self.spec = spec
        self.occurrences = occurrences
        self.positionals = positionals
    }

    /// Whether the flag was given.
    public func flag(_ name: String) -> Bool {
        flagCount(name) > 0
    }

    /// How many times the flag was given (`-vvv` is 3); more than 1 only for repeatable flags.
    public func flagCount(_ name: String) -> Int {
        let option = declared(name)
        precondition(!option.takesValue, "'--\(name)' takes a value; use value(_:) or a typed accessor")
        return occurrences[name]?.count ?? 0
    }

    /// Whether the option (flag or value) was given at all.
    public func contains(_ name: String) -> Bool {
        _ = declared(name)
        return occurrences[name] != nil
    }

    /// The option's value, or nil if it was not given. For a repeatable option, the last one.
    public func value(_ name: String) -> String? {
        values(name).last
    }

    /// Every value of a (repeatable) option, in command-line order.
    public func values(_ name: String) -> [String] {
        let option = declared(name)
        precondition(option.takesValue, "'--\(name)' is a flag; use flag(_:)")
        return occurrences[name]?.compactMap(\.value) ?? []
    }

    /// The option's value; an error names the option if it is missing.
    public func requiredValue(_ name: String) throws(CommandLineError) -> String {
        guard let value = value(name) else {
            throw error("missing required option \(declared(name).longForm) \(metavarForm(name))")
        }
        return value
    }

    /// The value of the named positional, for a `.required` or `.optional` positional.
    public func positional(_ name: String) -> String? {
        positionalValues(name).first
    }

    /// The values that fell to the named positional: one for required, zero or one for
    /// optional, the rest for variadic.
    public func positionalValues(_ name: String) -> [String] {
        var remaining = positionals[...]
        for positional in spec.positionals {
            let taken: ArraySlice<String>
            switch positional.arity {
            case .required, .optional: taken = remaining.prefix(1)
            case .variadic: taken = remaining
            }
            if positional.name == name { return Array(taken) }
            remaining = remaining.dropFirst(taken.count)
        }
        preconditionFailure("'\(spec.name)' declares no positional '\(name)'")
    }

    /// An error about these arguments, carrying the command's name and usage line, for checks
    /// the caller makes itself: `throw arguments.error("--json and --quiet exclude each other")`.
    public func error(_ message: String) -> CommandLineError {
        CommandLineError(message, spec: spec)
    }

    /// How the user spelled the option's last appearance (`-c` or `--connections`).
    func spelling(_ name: String) -> String {
        occurrences[name]?.last?.spelling ?? declared(name).longForm
    }

    func declared(_ name: String) -> OptionSpec {
        guard let option = spec.option(named: name) else {
            preconditionFailure("'\(spec.name)' declares no option '--\(name)'")
        }
        return option
    }

    func metavarForm(_ name: String) -> String {
        switch declared(name).kind {
        case .flag: return ""
        case .value(let metavar): return "<\(metavar)>"
        }
    }
}
