import Foundation
import PushcastCommandLine
import PushcastCore
import PushcastEngine
import PushcastJSON
import PushcastReactor
import PushcastSystem

/// How pushcast writes to stderr (`--log-format`): text for a person, or one JSON object per
/// line for a log pipeline (every line: progress, notes, warnings, errors and the summary).
enum LogFormat: String {
    case text
    case json

    /// `--log-format json` (or `--log-format=json`) anywhere on the command line. Read before the
    /// command line is parsed, so that even a parse error comes out in the chosen format.
    static func scan(_ arguments: [String]) -> LogFormat {
        var format = LogFormat.text
        for (index, argument) in arguments.enumerated() {
            if argument == "--" { break }
            if argument == "--log-format", index + 1 < arguments.count { format = LogFormat(rawValue: arguments[index + 1]) ?? format }
            if argument.hasPrefix("--log-format=") { format = LogFormat(rawValue: String(argument.dropFirst(13))) ?? format }
        }
        return format
    }
}

extension Console {
    /// Set once by main before any thread starts; read by every writer after.
    nonisolated(unsafe) static var format = LogFormat.text

    /// Makes the format the process's: Console, and the reactor's own notices (the io_uring
    /// fallback line), which then go through Console too.
    static func use(_ format: LogFormat) {
        self.format = format
        if format == .json { ReactorNotices.write = { Console.error($0) } }
    }

    /// One stderr message in the current format. JSON: `{"ts":…,"level":…,"msg":…}` and the
    /// given extra fields (already encoded); text: the message as it is.
    static func log(_ text: String, level: String? = nil, fields: [(String, String)] = []) {
        switch format {
        case .text: StandardStream.error.write(text + "\n")
        case .json: StandardStream.error.write(jsonLine(level: level ?? Self.level(of: text), message: text, fields: fields) + "\n")
        }
    }

    /// A message's level, from the way pushcast words them.
    static func level(of text: String) -> String {
        if text.contains("warning:") { return "warning" }
        if text.hasPrefix("pushcast: stopped") || text.contains("error:") { return "error" }
        return "info"
    }

    static func jsonLine(level: String, message: String?, fields: [(String, String)] = []) -> String {
        var line = "{\"ts\":\"\(timestamp())\",\"level\":\"\(level)\""
        if let message {
            // Carriage returns and the newlines around a message are layout for a terminal.
            let trimmed = message.replacingOccurrences(of: "\r", with: "").trimmingCharacters(in: .newlines)
            line += ",\"msg\":" + JSONWriter.quoted(trimmed)
        }
        for (key, value) in fields { line += ",\(JSONWriter.quoted(key)):\(value)" }
        return line + "}"
    }

    /// UTC, ISO 8601 with milliseconds (gmtime_r: safe from any thread).
    static func timestamp(_ epochSeconds: Double = Machine.real.wallClockSeconds()) -> String {
        var seconds = time_t(epochSeconds.rounded(.down))
        var parts = tm()
        gmtime_r(&seconds, &parts)
        let milliseconds = Int((epochSeconds - Double(seconds)) * 1000)
        return String(format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1, Int(parts.tm_mday),
                      Int(parts.tm_hour), Int(parts.tm_min), Int(parts.tm_sec), min(999, milliseconds))
    }

    /// The engine's log lines (signals, drains, a summary that cannot be written). On a terminal
    /// with the redrawn progress line they go as they are (their newlines end that line);
    /// otherwise each becomes one whole line, or one JSON object.
    static func engineLog(redrawnLine: Bool) -> (String) -> Void {
        if redrawnLine && format == .text { return { StandardStream.error.write($0) } }
        return { text in
            for line in text.replacingOccurrences(of: "\r", with: "\n").split(separator: "\n") where !line.allSatisfy(\.isWhitespace) {
                log(String(line))
            }
        }
    }

    /// The end-of-run summary: its text, or in JSON one object holding the summary file's fields.
    static func summary(_ summary: CampaignSummary) {
        switch format {
        case .text: log(summary.text)
        case .json:
            let object = summary.json.trimmingCharacters(in: .newlines)
            StandardStream.error.write(jsonLine(level: summary.stoppedBecause == nil ? "info" : "error", message: "summary",
                                                fields: [("event", "\"summary\""), ("summary", object)]) + "\n")
        }
    }
}
