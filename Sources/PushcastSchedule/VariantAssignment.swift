// A/B variants with a holdout, sans-I/O: which payload a row's recipient gets, or none.
// `send --variant NAME=FILE[,FCM_FILE][:WEIGHT]` (repeatable) and `--holdout PERCENT` read into a
// `VariantPlan`; the plan assigns each normalised token by a keyed hash, so the same token in the
// same campaign always lands in the same group, on any machine and in any process.
import PushcastCore

/// One `--variant` value: `NAME=FILE[,FCM_FILE][:WEIGHT]`.
///
/// The weight is the part after the last `:` only when that part is all ASCII digits; otherwise
/// the `:` belongs to the path (`promo=dir:v2/a.json` is the file `dir:v2/a.json`, weight 1).
/// The first `,` after the `=` separates the FCM payload file, so a path cannot hold a comma.
public struct VariantSpec: Sendable, Equatable {
    public static let nameLengthMax = 32
    public static let weightMax = 1_000_000

    public let name: String
    public let payloadFile: String
    public let fcmPayloadFile: String?
    public let weight: Int

    public init(name: String, payloadFile: String, fcmPayloadFile: String? = nil, weight: Int = 1) {
        self.name = name
        self.payloadFile = payloadFile
        self.fcmPayloadFile = fcmPayloadFile
        self.weight = weight
    }

    /// Reads one option value; the error's message names the value and what is wrong with it.
    public static func parse(_ value: String) throws(VariantRefusal) -> VariantSpec {
        func refuse(_ what: String) -> VariantRefusal { VariantRefusal(message: "--variant \(value): \(what)") }
        guard let equals = value.firstIndex(of: "=") else { throw refuse("expected NAME=FILE[,FCM_FILE][:WEIGHT]") }
        let name = String(value[..<equals])
        guard isValidName(name) else {
            throw refuse("the name must be 1 to \(nameLengthMax) letters, digits, '_' or '-'")
        }
        var files = Substring(value[value.index(after: equals)...])
        var weight = 1
        if let colon = files.lastIndex(of: ":") {
            let tail = files[files.index(after: colon)...]
            if !tail.isEmpty, tail.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) {
                guard tail.count <= 7, let parsed = Int(tail), (1...weightMax).contains(parsed) else {
                    throw refuse("the weight must be 1 to \(weightMax)")
                }
                weight = parsed
                files = files[..<colon]
            }
        }
        let parts = files.split(separator: ",", maxSplits: 1, omittingEmptySubsequences: false)
        guard let first = parts.first, !first.isEmpty else { throw refuse("the payload file is missing") }
        if parts.count == 2, parts[1].isEmpty { throw refuse("the FCM payload file after ',' is missing") }
        if parts.count == 2, parts[1].contains(",") { throw refuse("at most two files, separated by one ','") }
        return VariantSpec(name: name, payloadFile: String(first), fcmPayloadFile: parts.count == 2 ? String(parts[1]) : nil,
                           weight: weight)
    }

    static func isValidName(_ name: String) -> Bool {
        guard (1...nameLengthMax).contains(name.utf8.count) else { return false }
        return name.utf8.allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                || byte == 0x5F || byte == 0x2D
        }
    }
}

/// Why a variant value or a plan was refused; `message` is meant for the command line.
public struct VariantRefusal: Error, Sendable, Equatable, CustomStringConvertible {
    public let message: String
    public var description: String { message }
}

/// Where a recipient lands.
public enum VariantAssignment: Sendable, Equatable {
    /// In the holdout: sent nothing, counted as the control group.
    case heldOut
    /// Sent the plan's variant at this index.
    case variant(Int)
}

/// The variants of a campaign and its holdout.
///
/// With no variants the plan has one implicit variant named `default`, weight 1, no files: the
/// campaign's own payload. A holdout alone is therefore valid: the control group against the
/// single default payload.
public struct VariantPlan: Sendable {
    public static let holdoutPercentMax = 50.0
    public static let defaultName = "default"
    /// The most variants a plan holds.
    public static let variantsMax = 64

    public let variants: [VariantSpec]
    public let holdoutPercent: Double
    /// Cumulative weights: variant i takes [cumulative[i-1], cumulative[i]) of `totalWeight`.
    let cumulative: [UInt64]
    let holdoutFraction: Double

    public init(variants: [VariantSpec], holdoutPercent: Double) throws(VariantRefusal) {
        guard holdoutPercent.isFinite, holdoutPercent >= 0, holdoutPercent <= Self.holdoutPercentMax else {
            throw VariantRefusal(message: "--holdout \(holdoutPercent): the holdout must be 0 to 50 percent")
        }
        guard variants.count <= Self.variantsMax else {
            throw VariantRefusal(message: "--variant: at most \(Self.variantsMax) variants")
        }
        var seen = Set<String>()
        for spec in variants {
            guard seen.insert(spec.name).inserted else {
                throw VariantRefusal(message: "--variant \(spec.name): the name is given twice")
            }
            guard VariantSpec.isValidName(spec.name), (1...VariantSpec.weightMax).contains(spec.weight) else {
                throw VariantRefusal(message: "--variant \(spec.name): the name or the weight is out of range")
            }
        }
        self.variants = variants.isEmpty ? [VariantSpec(name: Self.defaultName, payloadFile: "")] : variants
        self.holdoutPercent = holdoutPercent
        var running: UInt64 = 0
        self.cumulative = self.variants.map { spec in
            running += UInt64(spec.weight)
            return running
        }
        self.holdoutFraction = holdoutPercent / 100
    }

    public var totalWeight: UInt64 { cumulative[cumulative.count - 1] }

    /// The recipient's group: the lowest `holdoutPercent` % of the hash's range is held out, the
    /// rest is split among the variants by cumulative weight.
    public func assign(campaignID: String, normalizedToken: [UInt8]) -> VariantAssignment {
        let hash = Self.hash(campaignID: campaignID, normalizedToken: normalizedToken)
        let unit = Double(hash >> 11) * 0x1p-53  // [0, 1) in steps of 2^-53
        if unit < holdoutFraction { return .heldOut }
        let rest = (unit - holdoutFraction) / (1 - holdoutFraction)
        let point = min(UInt64(rest * Double(totalWeight)), totalWeight - 1)
        var low = 0
        var high = cumulative.count - 1
        while low < high {  // the first variant whose cumulative weight exceeds `point`
            let middle = (low + high) / 2
            if cumulative[middle] > point { high = middle } else { low = middle + 1 }
        }
        return .variant(low)
    }

    /// The assignment hash: XXH64 of the normalised token, seeded with XXH64 (seed
    /// `campaignSeed`) of the campaign id in UTF-8. XXH64 is fixed by its specification, so the
    /// value is the same in every process and on every machine (Swift's `Hasher` is seeded per
    /// process); another campaign id reshuffles every token.
    public static func hash(campaignID: String, normalizedToken: [UInt8]) -> UInt64 {
        var id = campaignID
        let seed = id.withUTF8 { XXH64.hash(UnsafeRawBufferPointer($0), seed: campaignSeed) }
        return normalizedToken.withUnsafeBytes { XXH64.hash($0, seed: seed) }
    }

    /// Keeps the assignment hash apart from the `--shard` hash of the same token.
    static let campaignSeed: UInt64 = 0x7661_7269_616E_7473  // "variants" in ASCII
}
