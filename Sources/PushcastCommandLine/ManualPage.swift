/// What a program's manual page says beyond its command and option tables: the header's source
/// line, a description, the exit codes, the environment and where to read more. The commands,
/// their usage lines and every option come from the `CommandGroup` itself
/// (`CommandGroup.manualPage()`), the same tables `--help` prints, so the page cannot drift from
/// the parser.
public struct ManualPage: Sendable, Hashable {
    /// The manual section, 1 for user commands.
    public var section: Int
    /// The `.TH` source field, such as `"pushcast 0.10.0"`.
    public var source: String
    /// Paragraphs of the DESCRIPTION section, in order.
    public var description: [String]
    /// The EXIT STATUS section: each code and what it means.
    public var exitStatus: [ManualItem]
    /// The ENVIRONMENT section: each variable and what reads it; omitted when empty.
    public var environment: [ManualItem]
    /// The SEE ALSO section: other pages (`h2load(1)`) and documents, in order.
    public var seeAlso: [String]

    public init(
        section: Int = 1,
        source: String,
        description: [String],
        exitStatus: [ManualItem],
        environment: [ManualItem] = [],
        seeAlso: [String] = []
    ) {
        self.section = section
        self.source = source
        self.description = description
        self.exitStatus = exitStatus
        self.environment = environment
        self.seeAlso = seeAlso
    }
}

/// One tagged paragraph of a manual page: `0` and what it means, or a variable and its use.
public struct ManualItem: Sendable, Hashable {
    public var tag: String
    public var text: String

    public init(_ tag: String, _ text: String) {
        self.tag = tag
        self.text = text
    }
}

/// roff(7) text for man(7) pages: what a line of plain text must become so that troff prints it
/// as written.
enum Roff {
    /// `text` as roff input: a backslash becomes `\e`, a hyphen `\-` (a minus sign, so options
    /// copied from the page work), a character outside ASCII `\[uXXXX]`, a comma or slash is
    /// followed by `\:` (a break point inside long lists and paths), and a line that starts
    /// with `.` or `'` (a request to troff) is guarded with `\&`. Newlines are kept; each line
    /// of the result is a text line, and an empty line becomes `.sp`, not a blank input line.
    static func escape(_ text: String) -> String {
        text.split(separator: "\n", omittingEmptySubsequences: false)
            .map { line in line.isEmpty ? ".sp" : escapeLine(line) }
            .joined(separator: "\n")
    }

    /// One line of text, escaped as `escape` does. `startsLine` false leaves out the guard of a
    /// leading `.`, `'` or space, for text placed after other text on its line.
    static func escapeLine<S: StringProtocol>(_ line: S, startsLine: Bool = true) -> String {
        var out = ""
        var unbroken = 0
        for scalar in line.unicodeScalars {
            switch scalar {
            case "\\": out += "\\e"
            case "-": out += "\\-"
            case "\t": out += " "
            case _ where scalar.isASCII: out.unicodeScalars.append(scalar)
            default:
                let hex = String(scalar.value, radix: 16, uppercase: true)
                out += "\\[u" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex + "]"
            }
            // A break point after a comma or slash, and inside a word too long for a line.
            unbroken = scalar == " " || scalar == "-" ? 0 : unbroken + 1
            if scalar == "," || scalar == "/" || unbroken == breakAfter {
                out += "\\:"
                unbroken = 0
            }
        }
        if startsLine && (out.hasPrefix(".") || out.hasPrefix("'") || out.hasPrefix(" ")) { out = "\\&" + out }
        return out
    }

    /// The longest run of characters without a break point (`\:`) in escaped text.
    static let breakAfter = 40

    /// `text` in bold, escaped, for inline use.
    static func bold(_ text: String) -> String { "\\fB" + escapeLine(text, startsLine: false) + "\\fR" }

    /// `text` in italics, escaped, for inline use.
    static func italic(_ text: String) -> String { "\\fI" + escapeLine(text, startsLine: false) + "\\fR" }

    /// A macro argument in double quotes (`.TH`, `.SS`): escaped, with `"` written `\(dq`.
    static func quoted(_ text: String) -> String {
        "\"" + escapeLine(text, startsLine: false).split(separator: "\"", omittingEmptySubsequences: false)
            .joined(separator: "\\(dq") + "\""
    }
}
