import PushcastCore

/// The campaign report as one self-contained HTML page: inline CSS, SVG charts drawn here, no
/// script, no fonts or images from anywhere. Every chart element carries its figure in `data-*`
/// attributes (`data-chart`, `data-provider`, `data-value`, …) and a `<title>` tooltip, so the
/// page can be checked by machine as well as read.
public enum ReportPage {
    static let outcomeColors: [OutcomeKind: String] = [.delivered: "#2e7d32", .pruned: "#f9a825", .failed: "#c62828",
                                                        .invalid: "#6d4c41", .duplicate: "#90a4ae", .unknown: "#6a1b9a"]
    static let providerColors = ["#1565c0", "#ef6c00", "#00897b", "#8e24aa"]
    /// Latency bins (milliseconds): each counts the rows up to its bound.
    static let latencyBounds: [Double] = [5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000]

    /// The page; `generatedAt` (seconds since the Unix epoch) is printed in its header.
    public static func render(_ report: CampaignReport, title: String, generatedAt: Double) -> String {
        var html = """
        <!DOCTYPE html>
        <html lang="en"><head><meta charset="utf-8"><title>\(escape(title))</title>
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <style>
        body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px auto;max-width:1100px;color:#212121;padding:0 16px}
        h1{font-size:24px;margin-bottom:4px} h2{font-size:18px;margin-top:32px;border-bottom:1px solid #ddd;padding-bottom:4px}
        .meta{color:#555;font-size:13px} .figures{display:flex;flex-wrap:wrap;gap:12px;margin:16px 0}
        .figure{border:1px solid #ddd;border-radius:6px;padding:8px 14px;min-width:120px} .figure b{display:block;font-size:22px}
        table{border-collapse:collapse;width:100%;font-size:13px} th,td{border-bottom:1px solid #eee;padding:6px;text-align:left;vertical-align:top}
        td.n{text-align:right;font-variant-numeric:tabular-nums} svg{display:block;margin:8px 0} svg text{font-size:12px;fill:#333}
        .note{color:#777;font-size:13px}
        </style></head><body>
        <h1>\(escape(title))</h1>
        <p class="meta">\(escape(metaLine(report, generatedAt)))</p>

        """
        html += figures(report)
        html += section("Outcomes per provider", outcomesChart(report))
        html += section("Pruned tokens by reason", pruneChart(report))
        html += section("Latency distribution", latencyChart(report))
        html += section("Rows finished per second over the campaign", rateChart(report, retries: false))
        html += section("Retries", retriesChart(report) + rateChart(report, retries: true))
        html += section("Top failure reasons", failureTable(report))
        return html + "</body></html>\n"
    }

    static func metaLine(_ report: CampaignReport, _ generatedAt: Double) -> String {
        var parts: [String] = []
        if let identity = report.summaryFile?.identity {
            parts.append("campaign \(identity.campaign)")
            if let shard = identity.shard { parts.append("shard \(shard.index)/\(shard.count)") }
            if let merged = identity.mergedShards { parts.append("merged from \(merged) shards") }
        }
        parts.append(report.state)
        parts.append("results: " + report.files.map(lastPathComponent).joined(separator: ", "))
        parts.append("generated \(isoTime(generatedAt))")
        return parts.joined(separator: " · ")
    }

    /// The last part of a path, as NSString's `lastPathComponent` gives it: trailing slashes
    /// dropped, "/" for the root.
    static func lastPathComponent(_ path: String) -> String {
        var trimmed = Substring(path)
        while trimmed.count > 1 && trimmed.hasSuffix("/") { trimmed = trimmed.dropLast() }
        guard trimmed != "/", let slash = trimmed.lastIndex(of: "/") else { return String(trimmed) }
        return String(trimmed[trimmed.index(after: slash)...])
    }

    /// An epoch time as ISO 8601 in UTC, to the second (`2026-12-04T19:22:57Z`).
    static func isoTime(_ epochSeconds: Double) -> String {
        guard epochSeconds.isFinite, epochSeconds.magnitude < 1e15 else { return "-" }
        return CivilTime(epochSeconds: Int64(epochSeconds.rounded(.down))).text(separator: "T") + "Z"
    }

    static func figure(_ name: String, _ key: String, _ value: String) -> String {
        "<div class=\"figure\" data-figure=\"\(key)\"><b>\(escape(value))</b>\(escape(name))</div>"
    }

    static func figures(_ report: CampaignReport) -> String {
        let c = report.counted
        var out = "<div class=\"figures\">"
        out += figure("rows with an outcome", "rows", NumberText.grouped(c.rows))
        if let input = report.summaryFile?.identity?.inputRows { out += figure("rows in the input", "input_rows", NumberText.grouped(input)) }
        for kind in OutcomeKind.allCases { out += figure(kind.rawValue, kind.rawValue, NumberText.grouped(c.outcomes[kind])) }
        let latency = c.latencyMicroseconds
        out += figure("latency p50", "p50_ms", NumberText.fixed(Double(latency.value(atQuantile: 0.5)) / 1000, places: 1) + " ms")
        out += figure("latency p99", "p99_ms", NumberText.fixed(Double(latency.value(atQuantile: 0.99)) / 1000, places: 1) + " ms")
        if let summary = report.summaryFile, summary.wallSeconds > 0 {
            out += figure("wall time", "wall_seconds", NumberText.fixed(summary.wallSeconds, places: 1) + " s")
            out += figure("notifications/s", "rate", NumberText.fixed(summary.sentPerSecond, places: 0))
            out += figure("retries", "retries", NumberText.grouped(summary.retries))
        }
        return out + "</div>\n"
    }

    static func section(_ title: String, _ body: String) -> String {
        "<h2>\(escape(title))</h2>\n" + body + "\n"
    }

    static func providers(_ report: CampaignReport) -> [ProviderID] { report.counted.providers }

    static func color(_ provider: ProviderID) -> String { providerColors[provider.position % providerColors.count] }

    static func escape(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for character in text.unicodeScalars {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.unicodeScalars.append(character)
            }
        }
        return out
    }
}
