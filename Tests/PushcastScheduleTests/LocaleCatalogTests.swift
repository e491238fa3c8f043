import PushcastSchedule
import XCTest

final class LocaleCatalogTests: XCTestCase {
    // MARK: Normalisation

    func testGoodTagsNormalise() {
        let table: [(String, String)] = [
            ("pt_br", "pt-BR"), ("PT-BR", "pt-BR"), ("pt-BR", "pt-BR"), ("  en_US.UTF-8 ", "en-US"),
            ("de_DE@euro", "de-DE"), ("ZH_hant_tw", "zh-Hant-TW"), ("es-419", "es-419"), ("EN", "en"),
            ("sr-LATN", "sr-Latn"), ("de-CH-1996", "de-CH-1996"), ("yue", "yue"),
            ("DE-u-CO-phonebk", "de-u-co-phonebk"), ("en-x-US", "en-x-us"),
        ]
        for (raw, tag) in table { XCTAssertEqual(LocaleTag.normalize(raw), .tag(tag), raw) }
    }

    func testNoLocaleValues() {
        for raw in ["", "   ", "C", "POSIX", "C.UTF-8"] { XCTAssertEqual(LocaleTag.normalize(raw), .none, raw) }
    }

    func testBadTagsAreRefusedWithAReason() {
        let table: [(String, String)] = [
            ("12", "locale-language-malformed"), ("e", "locale-language-malformed"), ("en--US", "locale-subtag-empty"),
            ("en-", "locale-subtag-empty"), ("português", "locale-not-ascii"), ("en-US-abcdefghi", "locale-subtag-malformed"),
            ("en-U$", "locale-subtag-malformed"), ("default", "locale-language-malformed"),
            (String(repeating: "a", count: 2) + String(repeating: "-abcd", count: 7), "locale-too-long"),
        ]
        for (raw, reason) in table {
            guard case .refused(let refusal) = LocaleTag.normalize(raw) else { return XCTFail("\(raw) accepted") }
            XCTAssertEqual(refusal.reason, reason, raw)
            XCTAssertLessThanOrEqual(refusal.value.utf8.count, LocaleTag.maxBytes)
        }
    }

    func testTheLengthBoundIsThirtyFiveBytes() {
        let at = "EN" + String(repeating: "-abcdefgh", count: 3) + "-ABCDE"
        XCTAssertEqual(at.utf8.count, 35)
        XCTAssertEqual(LocaleTag.normalize(at), .tag("en" + String(repeating: "-abcdefgh", count: 3) + "-abcde"))
        guard case .refused(let r) = LocaleTag.normalize(at + "x") else { return XCTFail("36 bytes accepted") }
        XCTAssertEqual(r.reason, "locale-too-long")
    }

    // MARK: The catalog

    func testTwoFilesForOneTagAreRefusedNamingBoth() {
        XCTAssertThrowsError(try LocaleCatalog(available: ["default", "pt_BR", "pt-br"])) { error in
            let text = String(describing: error)
            XCTAssertTrue(text.contains("pt_BR.json") && text.contains("pt-br.json") && text.contains("pt-BR"), text)
        }
        XCTAssertThrowsError(try LocaleCatalog(available: ["default", "Default"]))
        XCTAssertThrowsError(try LocaleCatalog(available: ["en", "e!"])) { error in
            XCTAssertTrue(String(describing: error).contains("e!.json"))
        }
    }

    func testEveryFallbackStep() throws {
        let catalog = try LocaleCatalog(available: ["default", "pt", "pt_BR", "zh", "zh-Hant"])
        XCTAssertEqual(catalog.resolve("pt-BR"), .exact("pt-BR"))
        XCTAssertEqual(catalog.resolve("pt_br"), .exact("pt-BR"))
        XCTAssertEqual(catalog.resolve(" PT-BR.UTF-8"), .exact("pt-BR"))
        XCTAssertEqual(catalog.resolve("pt-PT"), .fellBack(from: "pt-PT", to: "pt"))
        XCTAssertEqual(catalog.resolve("fr_FR"), .fellBack(from: "fr-FR", to: "default"))
        XCTAssertEqual(catalog.resolve("zh_hant_tw"), .fellBack(from: "zh-Hant-TW", to: "zh-Hant"))
        XCTAssertEqual(catalog.resolve("zh-Hans-CN"), .fellBack(from: "zh-Hans-CN", to: "zh"))
        XCTAssertEqual(catalog.resolve(nil), .defaulted(refusal: nil))
        XCTAssertEqual(catalog.resolve("C"), .defaulted(refusal: nil))
        let bad = catalog.resolve("12")
        guard case .defaulted(let refusal?) = bad else { return XCTFail("\(bad)") }
        XCTAssertEqual([refusal.reason, refusal.value], ["locale-language-malformed", "12"])
        XCTAssertEqual(bad.payload, "default")
    }

    func testWithoutADefaultNothingMatchingIsUnresolved() throws {
        let catalog = try LocaleCatalog(available: ["pt"])
        XCTAssertEqual(catalog.resolve("pt-BR"), .fellBack(from: "pt-BR", to: "pt"))
        XCTAssertEqual(catalog.resolve("fr"), .unresolved(reason: "locale-no-payload", from: "fr"))
        XCTAssertEqual(catalog.resolve(""), .unresolved(reason: "locale-no-payload", from: nil))
        XCTAssertEqual(catalog.resolve("e"), .unresolved(reason: "locale-language-malformed", from: "e"))
        XCTAssertNil(catalog.resolve("fr").payload)
    }

    func testPerVariantResolution() throws {
        let payloads = try LocalizedPayloads(variants: ["a": ["default", "pt"], "b": ["default", "pt-BR"]])
        XCTAssertEqual(payloads.resolve(variant: "a", locale: "pt_BR"), .fellBack(from: "pt-BR", to: "pt"))
        XCTAssertEqual(payloads.resolve(variant: "b", locale: "pt_BR"), .exact("pt-BR"))
        XCTAssertEqual(payloads.resolve(variant: "b", locale: "pt"), .fellBack(from: "pt", to: "default"))
        XCTAssertEqual(payloads.resolve(variant: "c", locale: "pt"), .unresolved(reason: "variant-no-payloads", from: "c"))
        XCTAssertThrowsError(try LocalizedPayloads(variants: ["b": ["pt_BR", "PT-br"]])) { error in
            XCTAssertTrue(String(describing: error).hasPrefix("b/: "), String(describing: error))
        }
    }

    // MARK: The check summary

    func testSummaryCountsRowsPerPayloadAndListsFallbacks() throws {
        let catalog = try LocaleCatalog(available: ["default", "pt", "pt-BR"])
        let summary = LocaleSummary(catalog: catalog, counts: ["pt_BR": 5, "pt-br": 2, "pt-PT": 3, "fr": 1, "": 4, "e": 2])
        XCTAssertEqual(summary.rowsPerPayload.map(\.payload), ["default", "pt", "pt-BR"])
        XCTAssertEqual(summary.rowsPerPayload.map(\.rows), [7, 3, 7])
        XCTAssertEqual(summary.invalidRows, 2)
        XCTAssertEqual(summary.unresolvedRows, 0)
        XCTAssertEqual(summary.fallbackLines, [
            "e -> default (locale-language-malformed): 2 rows", "fr -> default: 1 row", "pt-PT -> pt: 3 rows",
        ])
        XCTAssertEqual(summary.lines.first, "default.json: 7 rows")
    }

    func testSummaryWithoutDefaultCountsUnresolvedRows() throws {
        let summary = LocaleSummary(catalog: try LocaleCatalog(available: ["en"]), counts: ["fr": 3, "en-GB": 1])
        XCTAssertEqual(summary.unresolvedRows, 3)
        XCTAssertEqual(summary.fallbackLines, ["en-GB -> en: 1 row", "fr -> none (locale-no-payload): 3 rows"])
        XCTAssertTrue(summary.lines.contains("no payload: 3 rows"))
    }

    func testSummaryIsBoundedToAHundredFallbackLines() throws {
        var counts: [String: Int] = [:]
        for n in 0..<130 { counts["en-x\(1000 + n)"] = 1 }
        let summary = LocaleSummary(catalog: try LocaleCatalog(available: ["default"]), counts: counts)
        XCTAssertEqual(summary.fallbackLines.count, 100)
        XCTAssertEqual(summary.omittedLines, 30)
        XCTAssertEqual(summary.fallbackLines.first, "en-x1000 -> default: 1 row")
        XCTAssertEqual(summary.fallbackLines.last, "en-x1099 -> default: 1 row")
        XCTAssertEqual(summary.lines.last, "... and 30 more fallbacks")
    }

    // MARK: Placeholders

    func testMissingPlaceholdersPerLocale() {
        let listed = MissingPlaceholders.list(
            placeholders: ["pt": ["name", "city"], "default": ["name"], "de": ["vorname", "city", "name"]],
            columns: ["token", "name"])
        XCTAssertEqual(listed, [
            MissingPlaceholders(locale: "de", names: ["city", "vorname"]),
            MissingPlaceholders(locale: "pt", names: ["city"]),
        ])
    }
}
