// What `check` says about a campaign's locales, from the rows' locale values counted.
import PushcastCore

public struct LocaleSummary: Sendable, Equatable {
    public static let maxLines = 100

    /// Rows per chosen payload tag (`default` included), sorted by tag.
    public let rowsPerPayload: [(payload: String, rows: Int)]
    /// Rows with no payload (no `default` and no match, or a refused value without `default`).
    public let unresolvedRows: Int
    /// Rows whose value was not a tag (sent `default` if there is one).
    public let invalidRows: Int
    /// `pt-PT -> pt: 12 rows`, `x! -> default (locale-language-malformed): 1 row`, sorted,
    /// at most `maxLines`.
    public let fallbackLines: [String]
    /// Fallback lines past `maxLines`.
    public let omittedLines: Int

    /// `counts`: a row's raw locale value → how many rows hold it.
    public init(catalog: LocaleCatalog, counts: [String: Int]) {
        var perPayload: [String: Int] = [:]
        var fallbacks: [String: Int] = [:]
        var unresolved = 0
        var invalid = 0
        for (raw, rows) in counts {
            let resolution = catalog.resolve(raw)
            if let payload = resolution.payload { perPayload[payload, default: 0] += rows } else { unresolved += rows }
            switch resolution {
            case .fellBack(let from, let to): fallbacks["\(from) -> \(to)", default: 0] += rows
            case .defaulted(let refusal?):
                invalid += rows
                fallbacks["\(refusal.value) -> default (\(refusal.reason))", default: 0] += rows
            case .unresolved(let reason, let from):
                if reason != "locale-no-payload" { invalid += rows }
                fallbacks["\(from ?? "(none)") -> none (\(reason))", default: 0] += rows
            case .exact, .defaulted(nil): break
            }
        }
        rowsPerPayload = perPayload.sorted { $0.key < $1.key }.map { (payload: $0.key, rows: $0.value) }
        unresolvedRows = unresolved
        invalidRows = invalid
        let lines = fallbacks.keys.sorted().map { key -> String in
            let rows = fallbacks[key]!
            let count = "\(rows) row\(rows == 1 ? "" : "s")"
            return "\(key): \(count)"
        }
        fallbackLines = Array(lines.prefix(Self.maxLines))
        omittedLines = max(0, lines.count - Self.maxLines)
    }

    /// The lines `check` prints: payloads, then fallbacks, then `... and N more`.
    public var lines: [String] {
        var out = rowsPerPayload.map { "\($0.payload).json: \($0.rows) rows" }
        if unresolvedRows > 0 { out.append("no payload: \(unresolvedRows) rows") }
        out += fallbackLines
        if omittedLines > 0 { out.append("... and \(omittedLines) more fallbacks") }
        return out
    }

    public static func == (a: LocaleSummary, b: LocaleSummary) -> Bool {
        a.lines == b.lines && a.invalidRows == b.invalidRows
    }
}

/// Placeholders a locale's payload uses that the export has no column for.
public struct MissingPlaceholders: Sendable, Equatable {
    public let locale: String
    public let names: [String]

    public init(locale: String, names: [String]) {
        self.locale = locale
        self.names = names
    }

    /// `placeholders`: payload file's locale part → its `{{name}}` placeholders; `columns`: the
    /// export's header. Sorted by locale, names sorted; locales missing nothing are left out.
    public static func list(placeholders: [String: Set<String>], columns: [String]) -> [MissingPlaceholders] {
        let have = Set(columns)
        return placeholders.keys.sorted().compactMap { locale in
            let missing = placeholders[locale]!.subtracting(have).sorted()
            return missing.isEmpty ? nil : MissingPlaceholders(locale: locale, names: missing)
        }
    }
}
