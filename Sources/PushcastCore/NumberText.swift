/// Numbers as text for summaries, reports and messages, the way C's printf writes them, without
/// Foundation: `fixed(x, places: 1)` is `%.1f` byte for byte (the exact binary value rounded half
/// to even, "-0.0", "nan", "-nan", "inf"), `grouped(n)` is 1,234,567.
public enum NumberText {
    /// `value` with `places` digits after the point (0...9), as `%.<places>f` writes it.
    public static func fixed(_ value: Double, places: Int) -> String {
        precondition((0...9).contains(places), "0 to 9 places")
        let sign = value.sign == .minus ? "-" : ""
        if value.isNaN { return sign + "nan" }
        if value.isInfinite { return sign + "inf" }
        let magnitude = value.magnitude
        // magnitude = significand × 2^exponent, exactly.
        let significand: UInt64
        let exponent: Int
        if magnitude.exponentBitPattern == 0 {
            significand = magnitude.significandBitPattern
            exponent = -1074
        } else {
            significand = magnitude.significandBitPattern | (1 << 52)
            exponent = Int(magnitude.exponentBitPattern) - 1075
        }
        let scale = power10(places)
        let digits: String
        if exponent >= 0 {
            // A whole number: its digits, then the places' zeros.
            let whole = exponent <= 40 ? String(UInt128(significand) << exponent) : wholeDigits(significand, shift: exponent)
            digits = places == 0 ? whole : whole + String(repeating: "0", count: places)
        } else {
            digits = String(roundedHalfEven(UInt128(significand) * UInt128(scale), shift: -exponent))
        }
        return sign + point(digits, places: places)
    }

    /// `value` with its thousands grouped by commas: 1,234,567 and -1,234.
    public static func grouped(_ value: Int) -> String {
        let digits = String(value.magnitude)
        var out = value < 0 ? "-" : ""
        for (index, digit) in digits.enumerated() {
            if index > 0 && (digits.count - index) % 3 == 0 { out.append(",") }
            out.append(digit)
        }
        return out
    }

    private static func power10(_ n: Int) -> UInt64 {
        var result: UInt64 = 1
        for _ in 0..<n { result *= 10 }
        return result
    }

    /// numerator / 2^shift, rounded to the nearest integer, a tie to the even one.
    private static func roundedHalfEven(_ numerator: UInt128, shift: Int) -> UInt128 {
        // numerator < 2^83 (a 53-bit significand times at most 10^9): from 2^84 on it is under a half.
        guard shift < 84 else { return 0 }
        let quotient = numerator >> shift
        let remainder = numerator & ((1 << shift) - 1)
        let half: UInt128 = 1 << (shift - 1)
        if remainder > half || (remainder == half && quotient & 1 == 1) { return quotient + 1 }
        return quotient
    }

    /// The decimal digits of significand × 2^shift, for numbers too large for UInt128.
    private static func wholeDigits(_ significand: UInt64, shift: Int) -> String {
        // Base 10^9 limbs, least significant first.
        var limbs: [UInt64] = [significand % 1_000_000_000, significand / 1_000_000_000 % 1_000_000_000,
                               significand / 1_000_000_000_000_000_000]
        for _ in 0..<shift {
            var carry: UInt64 = 0
            for index in limbs.indices {
                let doubled = limbs[index] * 2 + carry
                limbs[index] = doubled % 1_000_000_000
                carry = doubled / 1_000_000_000
            }
            if carry > 0 { limbs.append(carry) }
        }
        while limbs.count > 1 && limbs.last == 0 { limbs.removeLast() }
        var text = String(limbs.last!)
        for limb in limbs.dropLast().reversed() {
            let part = String(limb)
            text += String(repeating: "0", count: 9 - part.count) + part
        }
        return text
    }

    /// `digits` (an integer scaled by 10^places) with the point put back: at least one digit before it.
    private static func point(_ digits: String, places: Int) -> String {
        guard places > 0 else { return digits }
        let padded = digits.count <= places ? String(repeating: "0", count: places + 1 - digits.count) + digits : digits
        let cut = padded.index(padded.endIndex, offsetBy: -places)
        return padded[..<cut] + "." + padded[cut...]
    }
}
