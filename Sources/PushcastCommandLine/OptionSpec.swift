/// One option of a command: `--name` (and optionally `-s`), either a boolean flag or an option
/// that takes a value.
public struct OptionSpec: Sendable, Hashable {
    /// Whether the option stands alone or takes a value.
    public enum Kind: Sendable, Hashable {
        /// A boolean flag: `--json`. It takes no value; `--json=yes` is an error.
        case flag
        /// An option with a value: `--connections 4` or `--connections=4`. The metavariable
        /// names the value in help text (`--connections <N>`).
        case value(metavar: String)
    }

    /// The long name without the leading dashes, in kebab-case: `"connections"`.
    public var name: String
    /// The short name, if any: `"c"` for `-c`.
    public var short: Character?
    public var kind: Kind
    /// One line (or a few, separated by newlines) for `--help`.
    public var help: String
    /// What the program uses when the option is absent, shown in help as `[default: …]`.
    /// It is a description only; the default value itself is passed to the typed accessor.
    public var defaultDescription: String?
    /// Whether the option may be given more than once (`--header a --header b`).
    /// A non-repeatable option given twice is an error.
    public var isRepeatable: Bool

    public init(
        _ name: String,
        short: Character? = nil,
        kind: Kind,
        help: String,
        defaultDescription: String? = nil,
        isRepeatable: Bool = false
    ) {
        self.name = name
        self.short = short
        self.kind = kind
        self.help = help
        self.defaultDescription = defaultDescription
        self.isRepeatable = isRepeatable
    }

    /// A boolean flag, such as `--json`.
    public static func flag(
        _ name: String, short: Character? = nil, help: String, isRepeatable: Bool = false
    ) -> OptionSpec {
        OptionSpec(name, short: short, kind: .flag, help: help, isRepeatable: isRepeatable)
    }

    /// An option that takes a value, such as `--connections <N>`.
    public static func value(
        _ name: String,
        short: Character? = nil,
        metavar: String,
        help: String,
        defaultDescription: String? = nil,
        isRepeatable: Bool = false
    ) -> OptionSpec {
        OptionSpec(
            name, short: short, kind: .value(metavar: metavar), help: help,
            defaultDescription: defaultDescription, isRepeatable: isRepeatable)
    }

    /// `--name`, the spelling used in messages.
    public var longForm: String { "--" + name }

    /// Whether the option takes a value.
    public var takesValue: Bool {
        switch kind {
        case .flag: return false
        case .value: return true
        }
    }
}
