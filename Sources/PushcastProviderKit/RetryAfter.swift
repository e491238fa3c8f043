// The Retry-After header, as every provider's answers carry it (FCM's 429 and 503, Web Push
// services' 429).

/// The Retry-After header (RFC 9110 §10.2.3): delta-seconds, or an IMF-fixdate HTTP-date
/// (`Sun, 06 Nov 1994 08:49:37 GMT`) when a wall clock is given. The obsolete RFC 850 and asctime
/// date forms, negative or fractional numbers and junk are treated as absent.
public enum RetryAfter {
    /// A longer wait is capped here: a hostile or mistaken header must not park a provider for
    /// days. One day is far beyond what any provider asks for (minutes at most).
    public static let secondsMax: Double = 86_400

    public static func seconds(_ text: String, nowEpochSeconds: Int64?) -> Double? {
        let bytes = Array(text.utf8)
        var start = 0, end = bytes.count
        while start < end && (bytes[start] == 0x20 || bytes[start] == 0x09) { start += 1 }
        while end > start && (bytes[end - 1] == 0x20 || bytes[end - 1] == 0x09) { end -= 1 }
        guard start < end else { return nil }
        let field = bytes[start..<end]
        if field.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) {
            // More than 9 digits is beyond the cap anyway; do not overflow on 40 of them.
            guard field.count <= 9 else { return secondsMax }
            let value = field.reduce(0) { $0 * 10 + Int($1 - 0x30) }
            return min(Double(value), secondsMax)
        }
        guard let nowEpochSeconds, let date = epochSeconds(httpDate: Array(field)) else { return nil }
        return min(Double(max(0, date - nowEpochSeconds)), secondsMax)
    }

    /// Seconds since the Unix epoch of an IMF-fixdate, or nil.
    static func epochSeconds(httpDate bytes: [UInt8]) -> Int64? {
        // "Sun, 06 Nov 1994 08:49:37 GMT": fixed layout, 29 bytes.
        guard bytes.count == 29, bytes[3] == UInt8(ascii: ","), bytes[4] == 0x20, bytes[7] == 0x20, bytes[11] == 0x20,
              bytes[16] == 0x20, bytes[19] == UInt8(ascii: ":"), bytes[22] == UInt8(ascii: ":"), bytes[25] == 0x20,
              Array(bytes[26..<29]) == Array("GMT".utf8)
        else { return nil }
        func number(_ range: Range<Int>) -> Int64? {
            var value: Int64 = 0
            for byte in bytes[range] {
                guard byte >= 0x30 && byte <= 0x39 else { return nil }
                value = value * 10 + Int64(byte - 0x30)
            }
            return value
        }
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        guard let monthIndex = months.firstIndex(of: String(decoding: bytes[8..<11], as: UTF8.self)),
              let day = number(5..<7), let year = number(12..<16), let hour = number(17..<19),
              let minute = number(20..<22), let second = number(23..<25),
              (1...31).contains(day), hour < 24, minute < 60, second < 61
        else { return nil }
        return daysFromCivil(year: year, month: Int64(monthIndex + 1), day: day) * 86_400 + hour * 3600 + minute * 60 + second
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil).
    static func daysFromCivil(year: Int64, month: Int64, day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }
}
