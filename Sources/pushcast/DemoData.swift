import Foundation
import PushcastCore
import PushcastSystem
import PushcastWebPush

/// The demo's token file: a `push_devices` export of 100,000 rows, about 50 % iOS (64 hex digits,
/// sent to APNs), 40 % Android (opaque FCM registration tokens, sent to FCM) and 10 % web (a
/// browser's push subscription: endpoint, p256dh and auth, sent by Web Push to four push
/// services), routed by the `platform` column. Web rows' keys are the ones the mock derives from
/// each endpoint's path; about 3 % of them are gone (410) and 1 % not found (404), a few are
/// answered 429 or 503 once. In iOS and Android rows: about 3 % dead tokens (the mock answers APNs 410 / FCM 404
/// UNREGISTERED to tokens starting `dead`), 1 % malformed tokens, 1 % duplicates, a few tokens the
/// mock answers 503 once or 429 once, a few it refuses as bad tokens (`bad0`, and on Android
/// `mism`, a sender-ID mismatch), and first names in several scripts (Latin, Arabic, Chinese,
/// Cyrillic; some with commas and quotes, so the CSV quoting is exercised). Deterministic: the
/// same seed gives the same file.
enum DemoData {
    static let header = "device_id,token,platform,user_id,locale,first_name,endpoint,p256dh,auth"
    /// Android rows per mille.
    static let androidPerMille: UInt64 = 400
    /// Web rows per mille.
    static let webPerMille: UInt64 = 100
    /// The push services the web rows' endpoints name (the demo connects each to the mock).
    static let webOrigins = ["https://fcm.googleapis.com", "https://updates.push.services.mozilla.com", "https://web.push.apple.com",
                             "https://wns2-par02p.notify.windows.com"]
    static var webHosts: [String] { webOrigins.map { String($0.dropFirst("https://".count)) } }

    static let names = [
        "Alice", "Bob", "\u{645}\u{62D}\u{645}\u{62F}", "\u{641}\u{627}\u{637}\u{645}\u{629}",  // Muhammad, Fatima
        "\u{674E}\u{5A1C}", "\u{738B}\u{4F1F}", "\u{0410}\u{043D}\u{043D}\u{0430}", "\u{0418}\u{0432}\u{0430}\u{043D}",  // Li Na, Wang Wei, Anna, Ivan
        "Zo\u{00EB}", "O'Brien, Pat", "\"Ace\" Ng", "Jos\u{00E9}",
    ]
    static let locales = ["en", "ar", "zh-Hans", "ru", "fr", "es"]

    private static let hex = Array("0123456789abcdef")
    /// The alphabet of FCM registration tokens (base64url).
    private static let base64URL = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")

    static func generate(rows: Int, seed: UInt64) -> String? {
        let random = SplitMix64(seed: seed)
        var lines = [header]
        lines.reserveCapacity(rows + 1)
        // Earlier (platform, token) pairs that later rows may repeat (a reinstall under a new device_id).
        var issued: [(platform: String, token: String)] = []
        for i in 0..<rows {
            let roll = random.next(below: 1000)
            if roll < webPerMille {
                guard let line = webRow(i, random) else { return nil }
                lines.append(line)
                continue
            }
            let android = roll < webPerMille + androidPerMille
            var platform = android ? "android" : "ios"
            var token = android ? fcmToken(random) : iosToken(random)
            let draw = random.next(below: 1000)
            switch draw {
            case 0..<30:
                token = "dead" + token.dropFirst(4)                                            // 3 % unregistered
            case 30..<40:                                                                      // 1 % malformed
                if android {
                    // A line break turned into a space by a copy and paste, or a spreadsheet's "…".
                    let cut = 20 + Int(random.next(below: 100))
                    token = String(token.prefix(cut)) + (random.next(below: 2) == 0 ? " " + token.dropFirst(cut) : "\u{2026}")
                } else {
                    token = String(token.prefix(Int(10 + random.next(below: 40))))             // too short
                }
            case 40..<45:
                // Still valid once normalised: the old iOS description format, or FCM spaces around.
                token = android ? " " + token + " " : "<" + token.uppercased() + ">"
            case 45..<48:
                token = "5030" + token.dropFirst(4)                                            // 503 once, then delivered
            case 48..<51:
                // 429 once, then delivered. APNs's 429 concerns that one device token; FCM's is the
                // project's quota, which halves the whole FCM rate and pauses it for the retry-after
                // (1 s), so Android gets only about one in thirty of these (a handful per run).
                if !android || random.next(below: 30) == 0 { token = "4290" + token.dropFirst(4) }
            case 51..<53:
                token = (android && draw == 51 ? "mism" : "bad0") + token.dropFirst(4)         // refused for good: pruned
            case 53..<63:
                if let earlier = issued.randomElement(using: random) { (platform, token) = earlier }  // 1 % duplicates
            default:
                break
            }
            if issued.count < 5000 { issued.append((platform, token)) }
            let name = names[Int(random.next(below: UInt64(names.count)))]
            let locale = locales[Int(random.next(below: UInt64(locales.count)))]
            lines.append("dev-\(i + 1),\(csvField(token)),\(platform),u\(100_000 + i),\(locale),\(csvField(name)),,,")
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// Row `i` as a web subscription on one of `webOrigins` (no 413 kind: every web row ends
    /// delivered or pruned).
    static func webRow(_ i: Int, _ random: SplitMix64) -> String? {
        guard let (endpoint, keys) = WebPushDemoRows.subscription(origins: webOrigins, number: i + 1, random: random,
                                                                   kinds: WebPushDemoRows.kindsThatNeverFail) else { return nil }
        let name = names[Int(random.next(below: UInt64(names.count)))]
        let locale = locales[Int(random.next(below: UInt64(locales.count)))]
        return "dev-\(i + 1),,web,u\(100_000 + i),\(locale),\(csvField(name)),\(endpoint),\(keys.p256dh),\(keys.auth)"
    }

    /// A Web Push file: `rows` subscriptions spread over `origins` (`https://host:port`, the
    /// mock's Web Push listener), mixed kinds the mock answers 201, 410, 404, 413, 429 once and
    /// 503 once (WebPushDemoRows; `kinds` empty: all 201), keys the mock derives from each
    /// endpoint's path (`demo --write-web-rows`, for benchmarks).
    static func generateWeb(origins: [String], rows: Int, seed: UInt64, kinds: [(prefix: String, perMille: UInt64)] = WebPushDemoRows.kinds) -> String? {
        guard let lines = WebPushDemoRows.generate(origins: origins, count: rows, seed: seed, kinds: kinds) else { return nil }
        return ([WebPushDemoRows.header] + lines).joined(separator: "\n") + "\n"
    }

    /// 64 hex digits, as APNs issues them.
    static func iosToken(_ random: SplitMix64) -> String {
        String((0..<64).map { _ in hex[Int(random.next(below: 16))] })
    }

    /// The shape of an FCM registration token: a 22-character instance ID, `:APA91b`, then about
    /// 134 characters of base64url (163 in all; FCM documents no fixed length).
    static func fcmToken(_ random: SplitMix64) -> String {
        func chars(_ count: Int) -> String { String((0..<count).map { _ in base64URL[Int(random.next(below: 64))] }) }
        return chars(22) + ":APA91b" + chars(130 + Int(random.next(below: 9)))
    }

    /// Whether `path` holds a token file this generator would write today: the same header, and
    /// Android and web rows. A file left by an older demo has another header, and the demo
    /// regenerates it rather than quietly running without a provider. (A content check rather
    /// than a version marker: the file is gitignored and CSV has no room for comments.)
    static func isCurrent(path: String) -> Bool {
        guard let bytes = (try? readWholeFile(path)) ?? nil else { return false }
        let data = Data(bytes)
        let headerLine = Data((header + "\n").utf8)
        guard data.starts(with: headerLine) else { return false }
        return data.range(of: Data(",android,".utf8), in: headerLine.count..<data.count) != nil
            && data.range(of: Data(",web,".utf8), in: headerLine.count..<data.count) != nil
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
