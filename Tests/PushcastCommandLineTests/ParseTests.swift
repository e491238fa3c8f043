import XCTest
@testable import PushcastCommandLine

final class ParseTests: XCTestCase {
    func testEmptyArgumentsGiveNothing() throws {
        let arguments = try parsed([])
        XCTAssertFalse(arguments.flag("json"))
        XCTAssertNil(arguments.value("endpoint"))
        XCTAssertEqual(arguments.values("header"), [])
        XCTAssertEqual(arguments.positionals, [])
        XCTAssertFalse(arguments.contains("requests"))
    }

    func testLongValueSeparateAndWithEquals() throws {
        let arguments = try parsed(["--endpoint", "https://127.0.0.1:8443", "--requests=100"])
        XCTAssertEqual(arguments.value("endpoint"), "https://127.0.0.1:8443")
        XCTAssertEqual(arguments.value("requests"), "100")
        XCTAssertTrue(arguments.contains("requests"))
    }

    func testEqualsValueMayContainEqualsAndBeEmpty() throws {
        let arguments = try parsed(["--header=authorization=bearer x=y", "--endpoint="])
        XCTAssertEqual(arguments.value("header"), "authorization=bearer x=y")
        XCTAssertEqual(arguments.value("endpoint"), "")
    }

    func testShortValueSeparateAttachedAndWithEquals() throws {
        let arguments = try parsed(["-n", "100", "-c4", "-m=250"])
        XCTAssertEqual(arguments.value("requests"), "100")
        XCTAssertEqual(arguments.value("connections"), "4")
        XCTAssertEqual(arguments.value("streams"), "250")
    }

    func testBundledShortFlagsAndTrailingValueOption() throws {
        let arguments = try parsed(["-vqn", "5"])
        XCTAssertEqual(arguments.flagCount("verbose"), 1)
        XCTAssertTrue(arguments.flag("quiet"))
        XCTAssertEqual(arguments.value("requests"), "5")

        let attached = try parsed(["-vn7"])
        XCTAssertTrue(attached.flag("verbose"))
        XCTAssertEqual(attached.value("requests"), "7")
    }

    func testBooleanFlags() throws {
        let arguments = try parsed(["--json", "-q"])
        XCTAssertTrue(arguments.flag("json"))
        XCTAssertTrue(arguments.flag("quiet"))
        XCTAssertFalse(arguments.flag("verbose"))
        XCTAssertTrue(arguments.contains("json"))
    }

    func testRepeatedFlagCounts() throws {
        let arguments = try parsed(["-vv", "--verbose"])
        XCTAssertEqual(arguments.flagCount("verbose"), 3)
        XCTAssertTrue(arguments.flag("verbose"))
    }

    func testRepeatedOptionKeepsOrderAndValueIsLast() throws {
        let arguments = try parsed(["--header", "a: 1", "-H", "b: 2", "--header=c: 3"])
        XCTAssertEqual(arguments.values("header"), ["a: 1", "b: 2", "c: 3"])
        XCTAssertEqual(arguments.value("header"), "c: 3")
    }

    func testNonRepeatableOptionGivenTwiceIsAnError() {
        XCTAssertEqual(parseError(["-c", "1", "--connections", "2"]),
                       "--connections given more than once (as '-c'); it is not repeatable")
        XCTAssertEqual(parseError(["--json", "--json"]), "--json given more than once; it is not repeatable")
    }

    func testDashIsAPositional() throws {
        let arguments = try parsed(["-", "--json"])
        XCTAssertEqual(arguments.positionals, ["-"])
        XCTAssertEqual(arguments.positional("tokens"), "-")
        XCTAssertTrue(arguments.flag("json"))
    }

    func testDashAsAnOptionValue() throws {
        let long = try parsed(["--data", "-"])
        XCTAssertEqual(long.value("data"), "-")
        XCTAssertEqual(long.positionals, [])
        let short = try parsed(["-d", "-", "-"])
        XCTAssertEqual(short.value("data"), "-")
        XCTAssertEqual(short.positionals, ["-"])
    }

    func testDoubleDashEndsOptions() throws {
        let arguments = try parsed(["--json", "--", "--requests", "-n", "-", "--help"], Fixtures.files)
        XCTAssertTrue(arguments.flag("json"))
        XCTAssertEqual(arguments.positionals, ["--requests", "-n", "-", "--help"])
        XCTAssertFalse(arguments.contains("requests"))
    }

    func testOnlyTheFirstDoubleDashIsSpecial() throws {
        let arguments = try parsed(["--", "--"], Fixtures.files)
        XCTAssertEqual(arguments.positionals, ["--"])
    }

    func testOptionsAndPositionalsInterleave() throws {
        let arguments = try parsed(["payload.json", "-c", "8", "a.csv", "--dry-run", "b.csv"], Fixtures.send)
        XCTAssertEqual(arguments.positionals, ["payload.json", "a.csv", "b.csv"])
        XCTAssertEqual(arguments.positional("payload"), "payload.json")
        XCTAssertEqual(arguments.positionalValues("tokens"), ["a.csv", "b.csv"])
        XCTAssertEqual(arguments.value("connections"), "8")
        XCTAssertTrue(arguments.flag("dry-run"))
    }

    func testVariadicMayBeEmptyAndOptionalMayBeAbsent() throws {
        let send = try parsed(["payload.json"], Fixtures.send)
        XCTAssertEqual(send.positionalValues("tokens"), [])
        let bench = try parsed([])
        XCTAssertNil(bench.positional("tokens"))
    }

    func testMissingRequiredPositional() {
        XCTAssertEqual(parseError(["--dry-run"], Fixtures.send), "missing <payload>")
    }

    func testTooManyPositionals() {
        XCTAssertEqual(parseError(["a.csv", "b.csv"]), "unexpected argument 'b.csv'")
    }

    func testNegativeNumberIsAValueAndAPositional() throws {
        let arguments = try parsed(["-n", "-5", "-3"])
        XCTAssertEqual(arguments.value("requests"), "-5")
        XCTAssertEqual(arguments.positionals, ["-3"])
    }

    func testMissingValueAtEnd() {
        XCTAssertEqual(parseError(["--endpoint"]), "--endpoint: missing value <URL>")
        XCTAssertEqual(parseError(["-n"]), "-n: missing value <N>")
    }

    func testLongOptionIsNotTakenAsAValue() {
        XCTAssertEqual(parseError(["--endpoint", "--json"]),
                       "--endpoint: missing value <URL> before '--json' (write --endpoint=--json if that is the value)")
    }

    func testFlagWithValueIsAnError() {
        XCTAssertEqual(parseError(["--json=yes"]), "--json does not take a value, got 'yes'")
    }

    func testUnknownLongOptionWithSuggestion() {
        XCTAssertEqual(parseError(["--conections", "4"]),
                       "unknown option '--conections' (did you mean '--connections'?)")
        XCTAssertEqual(parseError(["--stremas=4"]), "unknown option '--stremas' (did you mean '--streams'?)")
        XCTAssertEqual(parseError(["--hlep"]), "unknown option '--hlep' (did you mean '--help'?)")
    }

    func testUnknownLongOptionPrefixSuggestion() {
        XCTAssertEqual(parseError(["--conn"]), "unknown option '--conn' (did you mean '--connections'?)")
    }

    func testUnknownLongOptionWithoutSuggestion() {
        XCTAssertEqual(parseError(["--zebra"]), "unknown option '--zebra'")
    }

    func testUnknownShortOption() {
        XCTAssertEqual(parseError(["-x"]), "unknown option '-x'")
        XCTAssertEqual(parseError(["-vx"]), "unknown option '-x' in '-vx'")
    }

    func testSingleDashLongNameSuggestsDoubleDash() {
        XCTAssertEqual(parseError(["-connections", "4"]),
                       "unknown option '-connections' (did you mean '--connections'?)")
        XCTAssertEqual(parseError(["-help"]), "unknown option '-help' (did you mean '--help'?)")
    }

    func testErrorCarriesCommandAndUsage() {
        do {
            _ = try Fixtures.bench.parse(["--conections", "4"])
            XCTFail("expected an error")
        } catch {
            XCTAssertEqual(error.command, "pushcast bench")
            XCTAssertEqual(error.usage, "pushcast bench [options] [<tokens>]")
            XCTAssertEqual(error.description, """
                pushcast bench: unknown option '--conections' (did you mean '--connections'?)
                usage: pushcast bench [options] [<tokens>]
                """)
            XCTAssertEqual(error.exitCode, 2)
        }
    }

    func testFreeFunctionParses() throws {
        guard case .arguments(let arguments) = try parse(["--json"], spec: Fixtures.bench) else {
            return XCTFail("expected arguments")
        }
        XCTAssertTrue(arguments.flag("json"))
    }
}
