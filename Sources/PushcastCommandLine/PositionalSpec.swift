/// One positional argument of a command, such as `<tokens>`.
public struct PositionalSpec: Sendable, Hashable {
    /// How many values the positional takes.
    public enum Arity: Sendable, Hashable {
        /// Exactly one value; missing it is an error.
        case required
        /// Zero or one value.
        case optional
        /// Zero or more values; only the last positional may be variadic.
        case variadic
    }

    /// The name shown in usage and help: `tokens` appears as `<tokens>`.
    public var name: String
    public var help: String
    public var arity: Arity

    public init(_ name: String, help: String, arity: Arity = .required) {
        self.name = name
        self.help = help
        self.arity = arity
    }

    /// How the positional appears in a usage line: `<tokens>`, `[<tokens>]`, `[<tokens>...]`.
    public var usageForm: String {
        switch arity {
        case .required: return "<\(name)>"
        case .optional: return "[<\(name)>]"
        case .variadic: return "[<\(name)>...]"
        }
    }
}
