// Typed access to option values. Each accessor comes in two forms: one returning nil when the
// option is absent, and one taking the default to use then. Range checks apply to given values;
// a default outside its own range is a programmer error and traps.

extension ParsedArguments {
    /// The option's value as an integer, checked against `range` when one is given.
    /// Errors read `--connections: expected an integer, got 'x'`.
    public func int(_ name: String, range: ClosedRange<Int>? = nil) throws(CommandLineError) -> Int? {
        guard let text = value(name) else { return nil }
        guard let number = ArgumentConversion.integer(text) else {
            throw error("\(spelling(name)): expected an integer, got '\(text)'")
        }
        if let range, !range.contains(number) {
            throw error("\(spelling(name)): expected \(RangeWording.integer(range)), got \(number)")
        }
        return number
    }

    public func int(_ name: String, default defaultValue: Int, range: ClosedRange<Int>? = nil) throws(CommandLineError) -> Int {
        precondition(range?.contains(defaultValue) ?? true, "default of '--\(name)' is outside its range")
        return try int(name, range: range) ?? defaultValue
    }

    /// The option's value as a finite number, checked against `range` when one is given.
    public func double(_ name: String, range: ClosedRange<Double>? = nil) throws(CommandLineError) -> Double? {
        guard let text = value(name) else { return nil }
        guard let number = ArgumentConversion.number(text) else {
            throw error("\(spelling(name)): expected a number, got '\(text)'")
        }
        if let range, !range.contains(number) {
            throw error("\(spelling(name)): expected \(RangeWording.number(range)), got \(text)")
        }
        return number
    }

    public func double(_ name: String, default defaultValue: Double, range: ClosedRange<Double>? = nil) throws(CommandLineError) -> Double {
        precondition(range?.contains(defaultValue) ?? true, "default of '--\(name)' is outside its range")
        return try double(name, range: range) ?? defaultValue
    }

    /// The option's value as a duration: `500ms`, `30s`, `10m`, `2h`, `1.5s`, `1m30s`
    /// (see `ArgumentConversion.duration`).
    public func duration(_ name: String, range: ClosedRange<Duration>? = nil) throws(CommandLineError) -> Duration? {
        guard let text = value(name) else { return nil }
        guard let duration = ArgumentConversion.duration(text) else {
            throw error("\(spelling(name)): expected a duration such as 500ms, 30s, 10m or 2h, got '\(text)'")
        }
        if let range, !range.contains(duration) {
            throw error("\(spelling(name)): expected a duration \(RangeWording.duration(range)), got \(text)")
        }
        return duration
    }

    public func duration(_ name: String, default defaultValue: Duration, range: ClosedRange<Duration>? = nil) throws(CommandLineError) -> Duration {
        precondition(range?.contains(defaultValue) ?? true, "default of '--\(name)' is outside its range")
        return try duration(name, range: range) ?? defaultValue
    }

    /// The option's value as a byte count: `4096`, `512B`, `64K`, `64KiB`, `16M`, `1G`
    /// (binary multiples; see `ArgumentConversion.byteCount`).
    public func byteCount(_ name: String, range: ClosedRange<Int>? = nil) throws(CommandLineError) -> Int? {
        guard let text = value(name) else { return nil }
        guard let bytes = ArgumentConversion.byteCount(text) else {
            throw error("\(spelling(name)): expected a size such as 4096, 64K or 16MiB, got '\(text)'")
        }
        if let range, !range.contains(bytes) {
            throw error("\(spelling(name)): expected a size \(RangeWording.bytes(range)), got \(text)")
        }
        return bytes
    }

    public func byteCount(_ name: String, default defaultValue: Int, range: ClosedRange<Int>? = nil) throws(CommandLineError) -> Int {
        precondition(range?.contains(defaultValue) ?? true, "default of '--\(name)' is outside its range")
        return try byteCount(name, range: range) ?? defaultValue
    }

    /// The option's value as one of `choices`: `--io: expected one of uring, epoll, got 'x'`.
    public func choice(_ name: String, from choices: [String]) throws(CommandLineError) -> String? {
        guard let text = value(name) else { return nil }
        guard choices.contains(text) else {
            throw error("\(spelling(name)): expected one of \(choices.joined(separator: ", ")), got '\(text)'")
        }
        return text
    }

    /// The option's value as a case of a string-backed enum, by raw value.
    public func choice<Choice>(_ name: String, as type: Choice.Type) throws(CommandLineError) -> Choice?
    where Choice: RawRepresentable & CaseIterable, Choice.RawValue == String {
        guard let text = try choice(name, from: Choice.allCases.map(\.rawValue)) else { return nil }
        return Choice(rawValue: text)
    }

    public func choice<Choice>(_ name: String, default defaultValue: Choice) throws(CommandLineError) -> Choice
    where Choice: RawRepresentable & CaseIterable, Choice.RawValue == String {
        try choice(name, as: Choice.self) ?? defaultValue
    }
}

/// How a range reads in an error message: `in 1...1024`, `of at least 1`.
enum RangeWording {
    static func integer(_ range: ClosedRange<Int>) -> String {
        if range.upperBound == Int.max { return "an integer of at least \(range.lowerBound)" }
        if range.lowerBound == Int.min { return "an integer of at most \(range.upperBound)" }
        return "an integer in \(range.lowerBound)...\(range.upperBound)"
    }

    static func number(_ range: ClosedRange<Double>) -> String {
        if range.upperBound == .greatestFiniteMagnitude || range.upperBound == .infinity {
            return "a number of at least \(range.lowerBound)"
        }
        if range.lowerBound == -.greatestFiniteMagnitude || range.lowerBound == -.infinity {
            return "a number of at most \(range.upperBound)"
        }
        return "a number in \(range.lowerBound)...\(range.upperBound)"
    }

    static func duration(_ range: ClosedRange<Duration>) -> String {
        "in \(ArgumentConversion.describe(range.lowerBound))...\(ArgumentConversion.describe(range.upperBound))"
    }

    static func bytes(_ range: ClosedRange<Int>) -> String {
        if range.upperBound == Int.max { return "of at least \(range.lowerBound) bytes" }
        return "in \(range.lowerBound)...\(range.upperBound) bytes"
    }
}
