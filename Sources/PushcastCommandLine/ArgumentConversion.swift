/// The text forms the parser accepts for typed values, usable on their own (for example for a
/// value read from a config file).
public enum ArgumentConversion {
    /// A decimal integer with an optional sign: `42`, `-3`, `+7`. No spaces, no separators.
    public static func integer(_ text: String) -> Int? {
        Int(text)
    }

    /// A finite decimal number: `0.5`, `-2`, `1e3`. Hexadecimal, `inf` and `nan` are refused.
    public static func number(_ text: String) -> Double? {
        guard !text.isEmpty, text.unicodeScalars.allSatisfy({ "0123456789+-.eE".unicodeScalars.contains($0) }),
              let value = Double(text), value.isFinite else { return nil }
        return value
    }

    /// A non-negative duration written as one or more `<number><unit>` parts:
    /// `500ms`, `30s`, `10m`, `2h`, `1.5s`, `1m30s`, `250us` (or `250µs`), `100ns`.
    /// A bare `0` is zero; any other number needs a unit. Nil if malformed or beyond
    /// `Int64.max` nanoseconds (about 292 years).
    public static func duration(_ text: String) -> Duration? {
        if text == "0" { return .zero }
        var scalars = Substring(text).unicodeScalars[...]
        var totalNanoseconds: Int64 = 0
        guard !scalars.isEmpty else { return nil }
        while !scalars.isEmpty {
            let whole = scalars.prefix { isDigit($0) }
            scalars = scalars.dropFirst(whole.count)
            var fraction = Substring.UnicodeScalarView.SubSequence()
            if scalars.first == "." {
                scalars = scalars.dropFirst()
                fraction = scalars.prefix { isDigit($0) }
                scalars = scalars.dropFirst(fraction.count)
                guard !fraction.isEmpty else { return nil }
            }
            guard !whole.isEmpty || !fraction.isEmpty else { return nil }
            guard let (unit, unitLength) = durationUnit(at: scalars) else { return nil }
            scalars = scalars.dropFirst(unitLength)
            guard let part = nanoseconds(whole: whole, fraction: fraction, unit: unit) else { return nil }
            let (sum, overflow) = totalNanoseconds.addingReportingOverflow(part)
            guard !overflow else { return nil }
            totalNanoseconds = sum
        }
        return .nanoseconds(totalNanoseconds)
    }

    /// A byte count: a non-negative integer with an optional binary suffix, case-insensitive:
    /// `4096`, `512B`, `64K` / `64KiB`, `16M` / `16MiB`, `1G` / `1GiB`. As in ripgrep's
    /// `--max-filesize`, K, M and G are powers of 1024. Nil if malformed or too large for `Int`.
    public static func byteCount(_ text: String) -> Int? {
        let digits = text.prefix { $0.isASCII && $0.isNumber }
        guard !digits.isEmpty, let number = Int(digits) else { return nil }
        let multipliers: [String: Int] = [
            "": 1, "b": 1,
            "k": 1 << 10, "kib": 1 << 10,
            "m": 1 << 20, "mib": 1 << 20,
            "g": 1 << 30, "gib": 1 << 30,
        ]
        guard let multiplier = multipliers[text.dropFirst(digits.count).lowercased()] else { return nil }
        let (bytes, overflow) = number.multipliedReportingOverflow(by: multiplier)
        return overflow ? nil : bytes
    }

    /// The shortest exact form of a duration in one unit: `2h`, `10m`, `30s`, `500ms`,
    /// `250us`, `7ns`; the inverse of `duration(_:)` for such values.
    public static func describe(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        let nanoseconds = Int128(seconds) * 1_000_000_000 + Int128(attoseconds / 1_000_000_000)
        if nanoseconds == 0 { return "0" }
        for (unit, size) in durationUnits.reversed() where nanoseconds % Int128(size) == 0 {
            return "\(nanoseconds / Int128(size))\(unit)"
        }
        return "\(nanoseconds)ns"
    }

    /// Units by size, smallest first.
    static let durationUnits: [(String, Int64)] = [
        ("ns", 1), ("us", 1_000), ("ms", 1_000_000), ("s", 1_000_000_000),
        ("m", 60_000_000_000), ("h", 3_600_000_000_000),
    ]

    static func isDigit(_ scalar: Unicode.Scalar) -> Bool {
        ("0"..."9").contains(scalar)
    }

    /// The unit at the start of `scalars` and how many scalars it spans. Two-letter units are
    /// tried first so that `ms` is not read as `m`.
    static func durationUnit(at scalars: Substring.UnicodeScalarView.SubSequence) -> (Int64, Int)? {
        let spellings: [(String, Int64)] = [
            ("ns", 1), ("us", 1_000), ("µs", 1_000), ("ms", 1_000_000),
            ("s", 1_000_000_000), ("m", 60_000_000_000), ("h", 3_600_000_000_000),
        ]
        for (spelling, size) in spellings {
            let unit = spelling.unicodeScalars
            guard scalars.starts(with: unit) else { continue }
            let after = scalars.dropFirst(unit.count)
            // `m` followed by `s` is `ms`, tried above; a letter after a unit is malformed.
            if let next = after.first, !isDigit(next), next != "." { continue }
            return (size, unit.count)
        }
        return nil
    }

    /// `whole.fraction` units in nanoseconds; the fraction is rounded to the nearest nanosecond.
    static func nanoseconds(
        whole: Substring.UnicodeScalarView.SubSequence,
        fraction: Substring.UnicodeScalarView.SubSequence,
        unit: Int64
    ) -> Int64? {
        var result: Int64 = 0
        if !whole.isEmpty {
            guard let wholeValue = Int64(String(String.UnicodeScalarView(whole))) else { return nil }
            let (product, overflow) = wholeValue.multipliedReportingOverflow(by: unit)
            guard !overflow else { return nil }
            result = product
        }
        if !fraction.isEmpty {
            guard let fractionValue = Double("0." + String(String.UnicodeScalarView(fraction))) else { return nil }
            let (sum, overflow) = result.addingReportingOverflow(Int64((fractionValue * Double(unit)).rounded()))
            guard !overflow else { return nil }
            result = sum
        }
        return result
    }
}
