// The command line's rate limits: `--rate apns=500/s,fcm=2000/s`. Parsed by hand, byte by byte,
// with errors that quote the part that is wrong.

/// Why a rate value cannot be used.
public enum RateSpecError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Nothing given (or only commas and spaces).
    case empty
    /// A part without `provider=`.
    case missingProvider(part: String)
    case unknownProvider(name: String, part: String, known: [String])
    case duplicateProvider(name: String)
    /// The number is missing or malformed.
    case invalidNumber(part: String)
    case negative(part: String)
    case zero(part: String)
    case unknownUnit(unit: String, part: String)

    public var description: String {
        switch self {
        case .empty:
            return "no rate given; write for example apns=500/s,fcm=2000/s"
        case .missingProvider(let part):
            return "'\(part)' names no provider; write provider=rate, for example fcm=\(part)"
        case .unknownProvider(let name, let part, let known):
            return "'\(part)': unknown provider '\(name)' (known: \(known.joined(separator: ", ")))"
        case .duplicateProvider(let name):
            return "provider '\(name)' is given more than once"
        case .invalidNumber(let part):
            return "'\(part)' is not a rate; write a number with an optional unit /s, /m (or /min) or /h, for example 500/s"
        case .negative(let part):
            return "'\(part)': a rate cannot be negative"
        case .zero(let part):
            return "'\(part)': a rate must be above zero"
        case .unknownUnit(let unit, let part):
            return "'\(part)': unknown unit '\(unit)' (use /s, /m, /min or /h)"
        }
    }
}

/// `--rate`: comma-separated `provider=rate` parts. A rate is a positive number with an optional
/// unit `/s`, `/m` or `/min`, or `/h` (a plain number is per second); it comes back per second.
public enum RateSpec {
    /// `providers`: the catalog's providers, the names a part may start with.
    public static func parse(_ text: String, providers: [ProviderID]) throws(RateSpecError) -> [ProviderID: Double] {
        var rates: [ProviderID: Double] = [:]
        for rawPart in text.split(separator: ",", omittingEmptySubsequences: false) {
            let part = trimmed(rawPart)
            if part.isEmpty { continue }
            guard let equals = part.firstIndex(of: "=") else { throw .missingProvider(part: part) }
            let name = trimmed(part[..<equals])
            guard let provider = providers.first(where: { $0.rawValue == name.lowercased() }) else {
                throw .unknownProvider(name: name, part: part, known: providers.map(\.rawValue))
            }
            guard rates[provider] == nil else { throw .duplicateProvider(name: provider.rawValue) }
            rates[provider] = try perSecond(trimmed(part[part.index(after: equals)...]), part: part)
        }
        if rates.isEmpty { throw .empty }
        return rates
    }

    /// One rate (`500/s`, `600000/min`, `2.5`) in permits per second.
    public static func perSecond(_ rate: String, part: String) throws(RateSpecError) -> Double {
        let pieces = rate.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        let numberText = trimmed(pieces[0])
        if numberText.hasPrefix("-") { throw .negative(part: part) }
        guard let number = DecimalNumber.parse(numberText) else { throw .invalidNumber(part: part) }
        if number == 0 { throw .zero(part: part) }
        guard pieces.count == 2 else { return number }
        switch trimmed(pieces[1]) {
        case "s", "sec": return number
        case "m", "min": return number / 60
        case "h", "hour": return number / 3600
        case let unit: throw .unknownUnit(unit: unit, part: part)
        }
    }

    static func trimmed(_ text: Substring) -> String {
        String(text.drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }.reversed())
    }

    static func trimmed(_ text: String) -> String { trimmed(Substring(text)) }
}

/// A plain decimal: digits, optionally one `.` and more digits (`5`, `2.5`, `.5`, `5.`). No
/// sign, exponent, `inf` or `nan`, which `Double(_:)` would accept.
enum DecimalNumber {
    static func parse(_ text: String) -> Double? {
        var digits = 0
        var dots = 0
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digits += 1
            case UInt8(ascii: "."): dots += 1
            default: return nil
            }
        }
        guard digits > 0, dots <= 1 else { return nil }
        let normalised = text.hasPrefix(".") ? "0" + text : text.hasSuffix(".") ? text + "0" : text
        guard let value = Double(normalised), value.isFinite else { return nil }
        return value
    }
}
