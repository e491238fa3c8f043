// Time zones as local-time delivery sees them: the UTC offset in force at an instant, and a
// lookup of zones by name. The zone data itself is the operating system's (PushcastSystem's
// `SystemZoneDirectory`); nothing here reads a file.

/// The rules of one time zone: the UTC offset in force at an instant. Everything local-time
/// delivery computes (local dates, gaps, repeated hours) is derived from this one function.
public protocol ZoneRules: Sendable {
    /// Seconds east of UTC in force at `atEpochSeconds` (Tokyo: 32_400; New York in winter: -18_000).
    func offsetSeconds(atEpochSeconds: Int64) -> Int32
}

/// Finds zones by IANA name (`Asia/Tokyo`, `UTC`, `Etc/GMT+12`). Returns nil for a name it does
/// not know.
public protocol ZoneDirectory: Sendable {
    func zone(named: String) -> (any ZoneRules)?
}

/// A zone whose offset never changes: `+05:30`, `-0800`, `UTC+5`, `Z`.
public struct FixedOffsetZone: ZoneRules, Equatable {
    public let seconds: Int32

    public init(seconds: Int32) { self.seconds = seconds }

    public func offsetSeconds(atEpochSeconds: Int64) -> Int32 { seconds }
}

/// A zone value as an export holds it, parsed: a fixed offset (resolved without a directory) or
/// an IANA name (for a `ZoneDirectory`).
public enum ZoneValue: Sendable, Equatable {
    case fixed(FixedOffsetZone)
    case named(String)

    /// The longest value accepted, in bytes. The longest IANA name is 32 bytes
    /// (`America/Argentina/ComodRivadavia`); anything much longer is not a zone.
    public static let lengthMax = 64
    /// Fixed offsets lie within what some place on earth has used: UTC−12:00 to UTC+14:00.
    public static let offsetRange: ClosedRange<Int32> = -12 * 3600...14 * 3600

    /// Parses `text` (surrounding spaces and tabs ignored). Never guesses: anything that is not
    /// plainly a fixed offset or an IANA-shaped name is refused with the reason.
    public static func parse(_ text: String) -> Result<ZoneValue, ZoneRefusal> {
        // Spaces around the value are allowed, but not without end: the bytes are copied after this.
        guard text.utf8.count <= lengthMax * 4 else { return .failure(.tooLong(bytes: text.utf8.count)) }
        let bytes = Array(text.utf8)
        var lower = 0, upper = bytes.count
        while lower < upper, bytes[lower] == 0x20 || bytes[lower] == 0x09 { lower += 1 }
        while upper > lower, bytes[upper - 1] == 0x20 || bytes[upper - 1] == 0x09 { upper -= 1 }
        let value = Array(bytes[lower..<upper])
        if value.isEmpty { return .failure(.empty) }
        if value.count > lengthMax { return .failure(.tooLong(bytes: value.count)) }
        if value == [0x5A] || value == [0x7A] { return .success(.fixed(FixedOffsetZone(seconds: 0))) }  // Z, z
        if value[0] == 0x2B || value[0] == 0x2D { return parseOffset(value[...]).map { .fixed($0) } }
        if value.count > 3, [0x2B, 0x2D].contains(value[3]), isPrefix(value, "UTC") || isPrefix(value, "GMT") {
            return parseOffset(value[3...]).map { .fixed($0) }
        }
        return parseName(value)
    }

    /// `text` parsed and looked up: a fixed offset as it is, a name in `directory`.
    public static func resolve(_ text: String, in directory: any ZoneDirectory) -> Result<any ZoneRules, ZoneRefusal> {
        switch parse(text) {
        case .failure(let refusal): return .failure(refusal)
        case .success(.fixed(let zone)): return .success(zone)
        case .success(.named(let name)):
            guard let zone = directory.zone(named: name) else { return .failure(.unknownZone) }
            return .success(zone)
        }
    }

    private static func isPrefix(_ value: [UInt8], _ prefix: String) -> Bool {
        value.count >= prefix.utf8.count && zip(value, prefix.utf8).allSatisfy { $0 | 0x20 == $1 | 0x20 }
    }

    /// `+HH`, `+H`, `+HHMM`, `+HH:MM`, `+H:MM` (and `-`): a sign, one or two hour digits, then
    /// optionally two minute digits with or without a colon.
    private static func parseOffset(_ text: ArraySlice<UInt8>) -> Result<FixedOffsetZone, ZoneRefusal> {
        let negative = text.first == 0x2D
        let body = Array(text.dropFirst())
        let colon = body.firstIndex(of: 0x3A)
        let hourDigits: [UInt8], minuteDigits: [UInt8]
        if let colon {
            hourDigits = Array(body[..<colon]); minuteDigits = Array(body[(colon + 1)...])
            guard minuteDigits.count == 2 else { return .failure(.malformedOffset) }
        } else if body.count == 4 {
            hourDigits = Array(body[..<2]); minuteDigits = Array(body[2...])
        } else {
            hourDigits = body; minuteDigits = []
        }
        guard (1...2).contains(hourDigits.count), let hours = decimal(hourDigits),
              let minutes = minuteDigits.isEmpty ? 0 : decimal(minuteDigits) else { return .failure(.malformedOffset) }
        guard minutes < 60 else { return .failure(.malformedOffset) }
        let seconds = Int32(hours * 3600 + minutes * 60) * (negative ? -1 : 1)
        guard offsetRange.contains(seconds) else { return .failure(.offsetOutOfRange) }
        return .success(FixedOffsetZone(seconds: seconds))
    }

    private static func decimal(_ digits: [UInt8]) -> Int? {
        var value = 0
        for digit in digits {
            guard (0x30...0x39).contains(digit) else { return nil }
            value = value * 10 + Int(digit - 0x30)
        }
        return digits.isEmpty ? nil : value
    }

    /// An IANA-shaped name: segments of ASCII letters, digits, `_`, `-`, `+` between single
    /// slashes, each starting with a letter (so no `..`, no absolute path, nothing a file
    /// lookup could be led astray by).
    private static func parseName(_ value: [UInt8]) -> Result<ZoneValue, ZoneRefusal> {
        var segmentStart = true
        for byte in value {
            let letter = (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
            if segmentStart {
                guard letter else { return .failure(.malformedName) }
                segmentStart = false
            } else if byte == 0x2F {
                segmentStart = true
            } else if !(letter || (0x30...0x39).contains(byte) || byte == 0x5F || byte == 0x2D || byte == 0x2B) {
                return .failure(.malformedName)
            }
        }
        guard !segmentStart else { return .failure(.malformedName) }
        let name = String(decoding: value, as: UTF8.self)
        if value.count <= 5, value.allSatisfy({ (0x41...0x5A).contains($0) }), !unambiguousCapitals.contains(name) {
            return .failure(.abbreviation)
        }
        return .success(.named(name))
    }

    /// Names in capitals that tzdata defines and that mean one thing. Other short capitals are
    /// abbreviations: Foundation takes IST for India (not Israel or Ireland), BST for Bangladesh
    /// (not British summer time), CST for Chicago; tzdata's EST and MST never observe daylight
    /// saving time, which is not what an export that says EST means in July.
    static let unambiguousCapitals: Set<String> = ["UTC", "UCT", "GMT", "PRC", "ROC", "ROK", "NZ", "GB"]
}

/// Why a zone value was refused. `reason` is the short text a row's `invalid` outcome carries.
public enum ZoneRefusal: Error, Sendable, Equatable {
    /// Nothing but spaces.
    case empty
    /// Longer than `ZoneValue.lengthMax` bytes.
    case tooLong(bytes: Int)
    /// Starts like an offset (`+`, `-`, `UTC+`, `GMT-`) but is not `±H[H][[:]MM]`.
    case malformedOffset
    /// An offset beyond UTC−12:00 ... UTC+14:00.
    case offsetOutOfRange
    /// Not shaped like an IANA name (a character outside letters, digits, `_ - + /`, an empty
    /// segment, a segment not starting with a letter).
    case malformedName
    /// A time-zone abbreviation (`IST`, `BST`, `EST`, `CET`), which names different zones in
    /// different places: an IANA name or an offset says which.
    case abbreviation
    /// Shaped like a name, but the directory does not know it.
    case unknownZone

    public var reason: String {
        switch self {
        case .empty: return "zone-empty"
        case .tooLong: return "zone-too-long"
        case .malformedOffset: return "zone-offset-malformed"
        case .offsetOutOfRange: return "zone-offset-out-of-range"
        case .malformedName: return "zone-name-malformed"
        case .abbreviation: return "zone-abbreviation"
        case .unknownZone: return "zone-unknown"
        }
    }
}
