import PushcastCore
import PushcastProviderKit

extension ReportPage {
    static let chartWidth = 1000.0
    static let labelWidth = 170.0

    /// One stacked bar per provider, a segment per outcome (zero-width when there are none).
    static func outcomesChart(_ report: CampaignReport) -> String {
        let counted = report.counted
        var rows: [(String, String, OutcomeCounts)] = providers(report).map { ($0.rawValue, $0.rawValue, counted.byProvider[$0]!.outcomes) }
        var withProvider = OutcomeCounts()
        for (_, _, counts) in rows { for kind in OutcomeKind.allCases { withProvider[kind] += counts[kind] } }
        var none = OutcomeCounts()
        for kind in OutcomeKind.allCases { none[kind] = counted.outcomes[kind] - withProvider[kind] }
        if none.contains(where: { $0.value > 0 }) { rows.append(("none", "no provider (malformed rows)", none)) }
        let maxRows = max(1, rows.map { row in OutcomeKind.allCases.reduce(0) { $0 + row.2[$1] } }.max() ?? 1)
        let barWidth = chartWidth - labelWidth - 90
        var svg = svgOpen("outcomes", height: Double(rows.count) * 34 + 40)
        for (index, (key, label, counts)) in rows.enumerated() {
            let y = Double(index) * 34 + 6
            svg += "<text x=\"0\" y=\"\(y + 17)\">\(escape(label))</text>"
            var x = labelWidth
            var total = 0
            for kind in OutcomeKind.allCases {
                let value = counts[kind]
                total += value
                let width = barWidth * Double(value) / Double(maxRows)
                svg += "<rect data-chart=\"outcomes\" data-provider=\"\(key)\" data-outcome=\"\(kind.rawValue)\" data-value=\"\(value)\" "
                    + "x=\"\(fmt(x))\" y=\"\(fmt(y))\" width=\"\(fmt(width))\" height=\"24\" fill=\"\(outcomeColors[kind]!)\">"
                    + "<title>\(escape(label)) \(kind.rawValue): \(value)</title></rect>"
                x += width
            }
            svg += "<text x=\"\(fmt(x + 6))\" y=\"\(y + 17)\">\(total)</text>"
        }
        svg += legend(OutcomeKind.allCases.map { ($0.rawValue, outcomeColors[$0]!) }, y: Double(rows.count) * 34 + 20)
        return svg + "</svg>"
    }

    /// One bar per (provider, reason) of the pruned rows, largest first.
    static func pruneChart(_ report: CampaignReport) -> String {
        var bars: [(ProviderID, String, Int)] = []
        for (provider, reasons) in report.pruneReasons { for (reason, count) in reasons { bars.append((provider, reason, count)) } }
        bars.sort { $0.2 != $1.2 ? $0.2 > $1.2 : ($0.0.rawValue, $0.1) < ($1.0.rawValue, $1.1) }
        guard !bars.isEmpty else { return "<p class=\"note\" data-chart=\"prune\" data-empty=\"true\">No token was pruned.</p>" }
        let maxCount = Double(bars.first!.2)
        var svg = svgOpen("prune", height: Double(bars.count) * 26 + 10)
        for (index, (provider, reason, count)) in bars.enumerated() {
            let y = Double(index) * 26 + 4
            let width = (chartWidth - labelWidth - 120) * Double(count) / maxCount
            svg += "<text x=\"0\" y=\"\(y + 14)\">\(escape(provider.rawValue)) \(escape(reason))</text>"
            svg += "<rect data-chart=\"prune\" data-provider=\"\(provider.rawValue)\" data-reason=\"\(escape(reason))\" data-value=\"\(count)\" "
                + "x=\"\(fmt(labelWidth + 40))\" y=\"\(fmt(y))\" width=\"\(fmt(width))\" height=\"18\" fill=\"\(color(provider))\">"
                + "<title>\(escape(provider.rawValue)) \(escape(reason)): \(count)</title></rect>"
            svg += "<text x=\"\(fmt(labelWidth + 46 + width))\" y=\"\(y + 14)\">\(count)</text>"
        }
        return svg + "</svg>"
    }

    /// Answered notifications by latency bin, a bar per provider in each bin; p50 and p99 below.
    static func latencyChart(_ report: CampaignReport) -> String {
        let list = providers(report).filter { report.counted.byProvider[$0]!.latencyMicroseconds.count > 0 }
        guard !list.isEmpty else { return "<p class=\"note\" data-chart=\"latency\" data-empty=\"true\">No answers yet.</p>" }
        // Each bin is labelled with its upper bound.
        let labels = latencyBounds.map { "≤ " + fmtMs($0) } + ["more"]
        var counts: [ProviderID: [UInt64]] = [:]
        for provider in list {
            let histogram = report.counted.byProvider[provider]!.latencyMicroseconds
            var cumulative = latencyBounds.map { bound in histogram.buckets.reduce(UInt64(0)) { $0 + ($1.lowerBound <= UInt64(bound * 1000) ? $1.count : 0) } }
            cumulative.append(histogram.count)
            counts[provider] = cumulative.enumerated().map { i, c in i == 0 ? c : c - cumulative[i - 1] }
        }
        let top = Double(max(1, counts.values.flatMap { $0 }.max() ?? 1))
        let height = 220.0, left = 60.0
        let group = (chartWidth - left) / Double(labels.count)
        let bar = (group - 8) / Double(list.count)
        var svg = svgOpen("latency", height: height + 70)
        svg += axis(left: left, height: height, top: top, unit: "rows")
        for (bin, label) in labels.enumerated() {
            let x0 = left + Double(bin) * group + 4
            for (p, provider) in list.enumerated() {
                let value = counts[provider]![bin]
                let h = height * Double(value) / top
                svg += "<rect data-chart=\"latency\" data-provider=\"\(provider.rawValue)\" data-bin=\"\(bin)\" data-value=\"\(value)\" "
                    + "x=\"\(fmt(x0 + Double(p) * bar))\" y=\"\(fmt(10 + height - h))\" width=\"\(fmt(bar - 1))\" height=\"\(fmt(h))\" fill=\"\(color(provider))\">"
                    + "<title>\(provider.rawValue) \(label): \(value)</title></rect>"
            }
            svg += "<text x=\"\(fmt(x0))\" y=\"\(fmt(height + 28))\">\(label)</text>"
        }
        var y = height + 48
        for provider in list {
            let h = report.counted.byProvider[provider]!.latencyMicroseconds
            let p50 = Double(h.value(atQuantile: 0.5)) / 1000, p99 = Double(h.value(atQuantile: 0.99)) / 1000
            svg += "<text data-chart=\"latency-quantiles\" data-provider=\"\(provider.rawValue)\" data-count=\"\(h.count)\" data-p50=\"\(fmt(p50))\" "
                + "data-p99=\"\(fmt(p99))\" x=\"\(left)\" y=\"\(fmt(y))\" fill=\"\(color(provider))\">\(provider.rawValue): \(h.count) answers, "
                + "p50 \(fmt(p50)) ms, p99 \(fmt(p99)) ms</text>"
            y += 16
        }
        return svg.replacing("height=\"\(fmt(height + 70))\"", with: "height=\"\(fmt(y + 4))\"") + "</svg>"
    }

    /// Rows (or retries) per second over wall-clock time, a line per provider, from the timeline.
    static func rateChart(_ report: CampaignReport, retries: Bool) -> String {
        let name = retries ? "retry-rate" : "rate"
        let (start, binSeconds, series) = report.timeline.rates(retries: retries)
        guard !series.isEmpty else {
            return "<p class=\"note\" data-chart=\"\(name)\" data-empty=\"true\">No timeline: pushcast send writes one beside the results "
                + "(&lt;results&gt;.timeline); for merged shards, give the shards' results files.</p>"
        }
        let height = 200.0, left = 60.0
        let top = max(1, series.values.flatMap { $0 }.max() ?? 1)
        let count = series.values.first!.count
        let step = (chartWidth - left - 10) / Double(max(1, count - 1))
        var svg = svgOpen(name, height: height + 60)
        svg += axis(left: left, height: height, top: top, unit: retries ? "retries/s" : "rows/s")
        for provider in series.keys.sorted(by: { $0.position < $1.position }) {
            let values = series[provider]!
            let points = values.enumerated().map { "\(fmt(left + Double($0) * step)),\(fmt(10 + height - height * $1 / top))" }.joined(separator: " ")
            let total = values.reduce(0) { $0 + $1 * binSeconds }
            svg += "<polyline data-chart=\"\(name)\" data-provider=\"\(provider.rawValue)\" data-points=\"\(values.count)\" "
                + "data-total=\"\(Int(total.rounded()))\" data-peak=\"\(fmt(values.max() ?? 0))\" points=\"\(points)\" fill=\"none\" "
                + "stroke=\"\(color(provider))\" stroke-width=\"2\"><title>\(provider.rawValue): peak \(fmt(values.max() ?? 0))/s</title></polyline>"
        }
        let span = binSeconds * Double(count - 1)
        svg += "<text x=\"\(left)\" y=\"\(fmt(height + 28))\">\(isoTime(start))</text>"
        svg += "<text x=\"\(fmt(chartWidth - 150))\" y=\"\(fmt(height + 28))\">+\(fmt(span)) s (\(fmt(binSeconds)) s per point)</text>"
        svg += legend(series.keys.sorted { $0.position < $1.position }.map { ($0.rawValue, color($0)) }, y: height + 48)
        return svg + "</svg>"
    }

    /// Rows by attempts per provider (how many needed a retry), and each provider's retries.
    static func retriesChart(_ report: CampaignReport) -> String {
        let list = providers(report).filter { report.attempts[$0] != nil }
        guard !list.isEmpty else { return "" }
        let labels = ["not sent", "1 attempt", "2", "3", "4", "5 or more"]
        let top = Double(max(1, report.attempts.values.flatMap { $0.dropFirst() }.max() ?? 1))
        let throttleLines = list.filter { report.summaryFile?.throttles[$0] != nil }.count
        var svg = svgOpen("attempts", height: Double(list.count * labels.count) * 20 + 16 + Double(list.count + throttleLines) * 20)
        var y = 4.0
        for provider in list {
            let retries = report.summaryFile?.retriesByProvider[provider]
            svg += "<text data-chart=\"retries\" data-provider=\"\(provider.rawValue)\" data-value=\"\(retries.map(String.init) ?? "")\" x=\"0\" y=\"\(fmt(y + 13))\">"
                + "\(provider.rawValue): \(retries.map { "\($0) retries (summary)" } ?? "retries: no summary file")</text>"
            y += 20
            if let throttled = report.summaryFile?.throttles[provider] {
                svg += "<text data-chart=\"throttles\" data-provider=\"\(provider.rawValue)\" data-device=\"\(throttled.device)\" "
                    + "data-provider-wide=\"\(throttled.provider)\" x=\"20\" y=\"\(fmt(y + 13))\">throttled: \(throttled.device) 429s about one "
                    + "device (that row waited), \(throttled.provider) about the provider (every send paused)</text>"
                y += 20
            }
            for (index, label) in labels.enumerated() {
                let value = report.attempts[provider]![index]
                let width = (chartWidth - labelWidth - 120) * min(1, Double(value) / top)
                svg += "<text x=\"20\" y=\"\(fmt(y + 13))\">\(label)</text>"
                svg += "<rect data-chart=\"attempts\" data-provider=\"\(provider.rawValue)\" data-attempts=\"\(index)\" data-value=\"\(value)\" "
                    + "x=\"\(fmt(labelWidth))\" y=\"\(fmt(y))\" width=\"\(fmt(width))\" height=\"16\" fill=\"\(color(provider))\">"
                    + "<title>\(provider.rawValue) \(label): \(value) rows</title></rect><text x=\"\(fmt(labelWidth + width + 6))\" y=\"\(fmt(y + 13))\">\(value)</text>"
                y += 20
            }
        }
        return svg + "</svg>"
    }

    static func failureTable(_ report: CampaignReport) -> String {
        let top = report.topFailures(20)
        guard !top.isEmpty else { return "<p class=\"note\" data-table=\"failures\" data-empty=\"true\">No row failed, stayed unknown or was invalid.</p>" }
        var html = "<table data-table=\"failures\"><tr><th>reason</th><th>provider</th><th>outcome</th><th>rows</th><th>what it means</th><th>what to do</th><th>see</th></tr>"
        for (key, count) in top {
            let entry: ReasonCatalog.Entry? = report.reasons.entry(key.reason)
            html += "<tr data-chart=\"failures\" data-reason=\"\(escape(key.reason))\" data-provider=\"\(key.provider?.rawValue ?? "none")\" data-outcome=\"\(key.outcome.rawValue)\" "
                + "data-value=\"\(count)\"><td>\(escape(key.reason))</td><td>\(key.provider?.rawValue ?? "—")</td><td>\(key.outcome.rawValue)</td>"
                + "<td class=\"n\">\(count)</td><td>\(escape(entry?.meaning ?? "not in pushcast's reason table"))</td>"
                + "<td>\(escape(entry?.action ?? "look at the results' status and error columns"))</td><td>\(escape(entry?.reference ?? "—"))</td></tr>"
        }
        return html + "</table>"
    }

    static func svgOpen(_ name: String, height: Double) -> String {
        "<svg xmlns=\"http://www.w3.org/2000/svg\" data-svg=\"\(name)\" width=\"\(fmt(chartWidth))\" height=\"\(fmt(height))\" "
            + "viewBox=\"0 0 \(fmt(chartWidth)) \(fmt(height))\" role=\"img\">"
    }

    static func axis(left: Double, height: Double, top: Double, unit: String) -> String {
        "<line x1=\"\(left)\" y1=\"10\" x2=\"\(left)\" y2=\"\(fmt(10 + height))\" stroke=\"#999\"/>"
            + "<line x1=\"\(left)\" y1=\"\(fmt(10 + height))\" x2=\"\(fmt(chartWidth))\" y2=\"\(fmt(10 + height))\" stroke=\"#999\"/>"
            + "<text x=\"0\" y=\"20\">\(fmt(top))</text><text x=\"0\" y=\"\(fmt(10 + height))\">0</text>"
            + "<text x=\"0\" y=\"\(fmt(10 + height / 2))\">\(unit)</text>"
    }

    static func legend(_ items: [(String, String)], y: Double) -> String {
        var x = labelWidth
        var out = ""
        for (name, fill) in items {
            out += "<rect x=\"\(fmt(x))\" y=\"\(fmt(y - 10))\" width=\"12\" height=\"12\" fill=\"\(fill)\"/><text x=\"\(fmt(x + 16))\" y=\"\(fmt(y))\">\(escape(name))</text>"
            x += 30 + Double(name.count) * 7
        }
        return out
    }

    static func fmt(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e12 ? String(Int(value)) : NumberText.fixed(value, places: 1)
    }

    static func fmtMs(_ ms: Double) -> String { ms >= 1000 ? fmt(ms / 1000) + " s" : fmt(ms) + " ms" }
}
