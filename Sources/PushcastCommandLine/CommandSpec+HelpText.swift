extension CommandSpec {
    /// The text `--help` prints, ending in a newline:
    ///
    /// ```
    /// pushcast bench: measure requests per second against an HTTP/2 endpoint
    ///
    /// usage: pushcast bench [options]
    ///
    /// options:
    ///   -n, --requests <N>      requests to send [default: 200000]
    ///       --json              print one JSON object on stdout
    ///   -h, --help              print this help
    /// ```
    ///
    /// Option and argument help is aligned in one column; a multi-line help string continues in
    /// that column. Defaults appear as `[default: …]` and repeatable options say so.
    public func helpText() -> String {
        var text = "\(name): \(summary)\n\nusage: \(usage)\n"
        if !positionals.isEmpty {
            text += "\narguments:\n"
            text += HelpColumns.render(positionals.map { ("<\($0.name)>", $0.help) })
        }
        let builtIn = OptionSpec.flag("help", short: "h", help: "print this help")
        text += "\noptions:\n"
        text += HelpColumns.render((options + [builtIn]).map { (optionLabel($0), optionHelp($0)) })
        return text
    }

    func optionLabel(_ option: OptionSpec) -> String {
        var label = option.short.map { "-\($0), " } ?? "    "
        label += option.longForm
        if case .value(let metavar) = option.kind { label += " <\(metavar)>" }
        return label
    }

    func optionHelp(_ option: OptionSpec) -> String {
        var notes: [String] = []
        if let defaultDescription = option.defaultDescription { notes.append("[default: \(defaultDescription)]") }
        if option.isRepeatable { notes.append("(repeatable)") }
        return ([option.help] + notes).filter { !$0.isEmpty }.joined(separator: " ")
    }
}

/// Two aligned columns, indented by two spaces: labels on the left, help on the right.
enum HelpColumns {
    /// Labels wider than this put their help on the next line instead of widening the column.
    static let labelWidthMax = 30

    static func render(_ rows: [(label: String, help: String)]) -> String {
        let fitting = rows.map(\.label.count).filter { $0 <= labelWidthMax }
        let column = 2 + (fitting.max() ?? 0) + 2
        let indent = String(repeating: " ", count: column)
        var text = ""
        for (label, help) in rows {
            let lines = help.split(separator: "\n", omittingEmptySubsequences: false)
            var line = "  " + label
            if label.count > labelWidthMax {
                text += line + "\n"
                line = indent
            } else {
                line += String(repeating: " ", count: column - line.count)
            }
            text += line + (lines.first.map(String.init) ?? "") + "\n"
            for continuation in lines.dropFirst() {
                text += indent + continuation + "\n"
            }
        }
        return text
    }
}
