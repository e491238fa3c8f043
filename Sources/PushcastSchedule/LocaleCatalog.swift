// Localized payloads, sans-I/O: which `<locale>.json` a row gets. Locale values are read as
// exports hold them (BCP 47 in any case, `_` for `-`, POSIX suffixes), normalised, and resolved
// against the files there are along a fallback chain: the full tag, then the tag with subtags
// dropped from the right (`zh-Hant-TW`, `zh-Hant`, `zh`), then `default`.
import PushcastCore

/// Why a locale value is not a tag. `reason` is meant for counts and a row's outcome.
public struct LocaleRefusal: Error, Sendable, Equatable {
    /// `locale-too-long`, `locale-not-ascii`, `locale-subtag-empty`, `locale-language-malformed`,
    /// `locale-subtag-malformed`.
    public let reason: String
    /// The value as given, trimmed and cut to `LocaleTag.maxBytes` bytes.
    public let value: String
}

/// What a locale value normalises to.
public enum LocaleTagValue: Sendable, Equatable {
    case tag(String)
    /// Empty, `C` or `POSIX` (suffixes included, `C.UTF-8`): no locale; the row gets `default`.
    case none
    case refused(LocaleRefusal)
}

public enum LocaleTag {
    /// BCP 47's practical limit (RFC 5646 §4.4.1), bytes after trimming.
    public static let maxBytes = 35

    /// Normalises a value: spaces trimmed, a POSIX suffix (`.UTF-8`, `@euro`) dropped, `_` read as
    /// `-`, language lower-case (2 or 3 letters), script title-case (4 letters), region upper-case
    /// (2 letters or 3 digits), other subtags (1 to 8 letters or digits) lower-case, as is all after a singleton (`-u-`, `-x-`).
    public static func normalize(_ raw: String) -> LocaleTagValue {
        let trimmed = raw.trimmingSpaces()
        if trimmed.utf8.count > maxBytes { return refuse("locale-too-long", trimmed) }
        guard trimmed.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) else { return refuse("locale-not-ascii", trimmed) }
        let base = trimmed.split(separator: "@", maxSplits: 1, omittingEmptySubsequences: false)[0]
            .split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)[0]
        if base.isEmpty || base == "C" || base == "POSIX" { return .none }
        let parts = base.split(separator: "-", omittingEmptySubsequences: false)
            .flatMap { $0.split(separator: "_", omittingEmptySubsequences: false) }
        if parts.contains(where: \.isEmpty) { return refuse("locale-subtag-empty", trimmed) }
        let language = parts[0]
        guard (2...3).contains(language.count), language.allSatisfy(\.isLetter) else {
            return refuse("locale-language-malformed", trimmed)
        }
        var out = [language.lowercased()]
        var afterSingleton = false  // extensions and private use (`-u-`, `-x-`) are lower-case
        for part in parts.dropFirst() {
            guard let subtag = normalizeSubtag(part) else { return refuse("locale-subtag-malformed", trimmed) }
            afterSingleton = afterSingleton || part.count == 1
            out.append(afterSingleton ? subtag.lowercased() : subtag)
        }
        return .tag(out.joined(separator: "-"))
    }

    private static func normalizeSubtag(_ part: Substring) -> String? {
        guard (1...8).contains(part.count), part.allSatisfy({ $0.isLetter || $0.isNumber }) else { return nil }
        let letters = part.allSatisfy(\.isLetter)
        if letters && part.count == 4 { return part.prefix(1).uppercased() + part.dropFirst().lowercased() }
        if letters && part.count == 2 { return part.uppercased() }
        return part.lowercased()
    }

    private static func refuse(_ reason: String, _ value: String) -> LocaleTagValue {
        .refused(LocaleRefusal(reason: reason, value: String(decoding: value.utf8.prefix(maxBytes), as: UTF8.self)))
    }

    /// The fallback chain of a normalised tag, longest first: `zh-Hant-TW`, `zh-Hant`, `zh`.
    public static func chain(_ tag: String) -> [String] {
        let parts = tag.split(separator: "-")
        return (1...max(parts.count, 1)).reversed().map { parts.prefix($0).joined(separator: "-") }
    }
}

extension String {
    func trimmingSpaces() -> String {
        let scalars = unicodeScalars
        guard let first = scalars.firstIndex(where: { !$0.properties.isWhitespace }) else { return "" }
        let last = scalars.lastIndex(where: { !$0.properties.isWhitespace })!
        return String(scalars[first...last])
    }
}

/// A catalog that cannot be built: two files for one tag, a file name that is not a tag, too many.
public struct LocaleCatalogError: Error, Sendable, Equatable, CustomStringConvertible {
    public let description: String
}

/// Where a row's locale leads.
public enum LocaleResolution: Sendable, Equatable {
    /// The row's tag has a file of its own.
    case exact(String)
    /// The row's tag (normalised) has none; a shorter tag or `default` does.
    case fellBack(from: String, to: String)
    /// The row has no locale (empty, `C`, `POSIX`), or one that is not a tag (`refusal`): `default`.
    case defaulted(refusal: LocaleRefusal?)
    /// Nothing applies and there is no `default`: the row is `invalid` with `reason`
    /// (`locale-no-payload`, or the refusal's reason).
    case unresolved(reason: String, from: String?)

    /// The chosen payload's tag (`default` included), nil when unresolved.
    public var payload: String? {
        switch self {
        case .exact(let tag), .fellBack(_, let tag): return tag
        case .defaulted: return LocaleCatalog.defaultName
        case .unresolved: return nil
        }
    }
}

/// The payload files there are, by normalised tag, and how a row's locale resolves against them.
public struct LocaleCatalog: Sendable, Equatable {
    public static let defaultName = "default"
    public static let maxFiles = 4096

    /// Normalised tags of the files there are, without `default`.
    public let tags: Set<String>
    public let hasDefault: Bool
    /// Normalised tag → the file name's locale part as found (`pt_BR`), for messages.
    public let sources: [String: String]

    /// `available`: the locale parts of the `<locale>.json` names found, `default` included.
    public init(available: [String]) throws(LocaleCatalogError) {
        guard available.count <= Self.maxFiles else {
            throw LocaleCatalogError(description: "\(available.count) locale files, more than \(Self.maxFiles)")
        }
        var sources: [String: String] = [:]
        for name in available {
            let key: String
            if name.lowercased() == Self.defaultName {
                key = Self.defaultName
            } else {
                switch LocaleTag.normalize(name) {
                case .tag(let tag): key = tag
                case .none: throw LocaleCatalogError(description: "\(name).json: not a locale tag (no locale)")
                case .refused(let r): throw LocaleCatalogError(description: "\(name).json: not a locale tag (\(r.reason))")
                }
            }
            if let other = sources[key] {
                throw LocaleCatalogError(description: "\(other).json and \(name).json are both the locale \(key)")
            }
            sources[key] = name
        }
        hasDefault = sources[Self.defaultName] != nil
        self.tags = Set(sources.keys).subtracting([Self.defaultName])
        self.sources = sources
    }

    /// Walks the chain: the full tag, subtags dropped from the right, then `default`.
    public func resolve(_ rowLocale: String?) -> LocaleResolution {
        switch LocaleTag.normalize(rowLocale ?? "") {
        case .none:
            return hasDefault ? .defaulted(refusal: nil) : .unresolved(reason: "locale-no-payload", from: nil)
        case .refused(let refusal):
            return hasDefault ? .defaulted(refusal: refusal) : .unresolved(reason: refusal.reason, from: refusal.value)
        case .tag(let tag):
            if tags.contains(tag) { return .exact(tag) }
            if let shorter = LocaleTag.chain(tag).first(where: tags.contains) { return .fellBack(from: tag, to: shorter) }
            if hasDefault { return .fellBack(from: tag, to: Self.defaultName) }
            return .unresolved(reason: "locale-no-payload", from: tag)
        }
    }
}

/// One catalog per variant directory (`DIR/<variant>/`), each with the catalog's rules.
public struct LocalizedPayloads: Sendable, Equatable {
    public let catalogs: [String: LocaleCatalog]

    /// `variants`: variant name → the locale parts of the files found in its directory.
    public init(variants: [String: [String]]) throws(LocaleCatalogError) {
        var catalogs: [String: LocaleCatalog] = [:]
        for (variant, files) in variants {
            do {
                catalogs[variant] = try LocaleCatalog(available: files)
            } catch {
                throw LocaleCatalogError(description: "\(variant)/: \(error.description)")
            }
        }
        self.catalogs = catalogs
    }

    /// A variant with no directory is `.unresolved(reason: "variant-no-payloads")`.
    public func resolve(variant: String, locale: String?) -> LocaleResolution {
        guard let catalog = catalogs[variant] else { return .unresolved(reason: "variant-no-payloads", from: variant) }
        return catalog.resolve(locale)
    }
}
