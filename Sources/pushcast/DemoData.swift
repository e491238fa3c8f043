import Foundation
import PushcastCore

/// The demo's token file: a `push_devices` export of 100,000 rows with about 3 % dead tokens
/// (the mock answers 410 to tokens starting `dead`), 1 % malformed tokens, some duplicates, a few
/// tokens the mock answers 503 or 429 once, and first names in several scripts (some with commas
/// and quotes, so the CSV quoting is exercised). Deterministic: the same seed gives the same file.
enum DemoData {
    static let names = [
        "Alice", "Bob", "\u{645}\u{62D}\u{645}\u{62F}", "\u{641}\u{627}\u{637}\u{645}\u{629}",  // Muhammad, Fatima
        "\u{674E}\u{5A1C}", "\u{738B}\u{4F1F}", "\u{0410}\u{043D}\u{043D}\u{0430}", "\u{0418}\u{0432}\u{0430}\u{043D}",  // Li Na, Wang Wei, Anna, Ivan
        "Zo\u{00EB}", "O'Brien, Pat", "\"Ace\" Ng", "Jos\u{00E9}",
    ]
    static let locales = ["en", "ar", "zh-Hans", "ru", "fr", "es"]

    static func generate(rows: Int, seed: UInt64) -> String {
        let random = SplitMix64(seed: seed)
        var lines = ["device_id,token,platform,user_id,locale,first_name"]
        lines.reserveCapacity(rows + 1)
        var issued: [String] = []
        let hex = Array("0123456789abcdef")
        for i in 0..<rows {
            var token = String((0..<64).map { _ in hex[Int(random.next(below: 16))] })
            let draw = random.next(below: 1000)
            switch draw {
            case 0..<30: token = "dead" + token.dropFirst(4)                       // 3 % unregistered
            case 30..<40: token = String(token.prefix(Int(10 + random.next(below: 40))))  // 1 % malformed: too short
            case 40..<45: token = "<" + token.uppercased() + ">"                   // old iOS description format: still valid
            case 45..<48: token = "5030" + token.dropFirst(4)                      // 503 once, then delivered
            case 48..<51: token = "4290" + token.dropFirst(4)                      // 429 once, then delivered
            case 51..<53: token = "bad0" + token.dropFirst(4)                      // 400 BadDeviceToken
            case 53..<63: if let earlier = issued.randomElement(using: random) { token = earlier }  // 1 % duplicates
            default: break
            }
            if issued.count < 5000 { issued.append(token) }
            let name = names[Int(random.next(below: UInt64(names.count)))]
            let locale = locales[Int(random.next(below: UInt64(locales.count)))]
            lines.append("dev-\(i + 1),\(token),ios,u\(100_000 + i),\(locale),\(csvField(name))")
        }
        return lines.joined(separator: "\n") + "\n"
    }

    static func csvField(_ value: String) -> String {
        guard value.contains(",") || value.contains("\"") else { return value }
        return "\"" + value.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }
}

extension Array {
    func randomElement(using random: SplitMix64) -> Element? {
        isEmpty ? nil : self[Int(random.next(below: UInt64(count)))]
    }
}
