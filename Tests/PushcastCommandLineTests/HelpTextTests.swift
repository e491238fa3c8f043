import XCTest
@testable import PushcastCommandLine

final class HelpTextTests: XCTestCase {
    func testHelpFlagsReturnHelp() throws {
        for arguments in [["--help"], ["-h"], ["--json", "-h"], ["-vh"], ["-c", "4", "--help", "--bogus"]] {
            guard case .help(let text) = try Fixtures.bench.parse(arguments) else {
                XCTFail("expected help for \(arguments)")
                continue
            }
            XCTAssertEqual(text, Fixtures.bench.helpText())
        }
    }

    func testHelpAfterDoubleDashIsAPositional() throws {
        XCTAssertEqual(try parsed(["--", "--help"]).positionals, ["--help"])
    }

    func testHelpWithValueIsAnError() {
        XCTAssertEqual(parseError(["--help=yes"]), "--help does not take a value, got 'yes'")
    }

    func testHelpTextLayout() {
        let spec = CommandSpec(
            name: "pushcast bench",
            summary: "measure an HTTP/2 endpoint",
            options: [
                .value("requests", short: "n", metavar: "N", help: "requests to send", defaultDescription: "200000"),
                .value("header", short: "H", metavar: "NAME:VALUE", help: "extra header", isRepeatable: true),
                .flag("json", help: "print one JSON object\non stdout"),
            ],
            positionals: [PositionalSpec("tokens", help: "token file, or - for stdin", arity: .optional)]
        )
        XCTAssertEqual(spec.helpText(), """
            pushcast bench: measure an HTTP/2 endpoint

            usage: pushcast bench [options] [<tokens>]

            arguments:
              <tokens>  token file, or - for stdin

            options:
              -n, --requests <N>         requests to send [default: 200000]
              -H, --header <NAME:VALUE>  extra header (repeatable)
                  --json                 print one JSON object
                                         on stdout
              -h, --help                 print this help

            """)
    }

    func testLongLabelsWrapHelpToNextLine() {
        let spec = CommandSpec(name: "x y", summary: "s", usage: "x y [flags]", options: [
            .value("a-very-long-option-name", metavar: "SOMETHING", help: "long one"),
            .flag("b", help: "short one"),
        ])
        XCTAssertEqual(spec.helpText(), """
            x y: s

            usage: x y [flags]

            options:
                  --a-very-long-option-name <SOMETHING>
                          long one
                  --b     short one
              -h, --help  print this help

            """)
    }

    func testDefaultUsageLine() {
        XCTAssertEqual(Fixtures.send.usage, "pushcast send [options] <payload> [<tokens>...]")
        XCTAssertEqual(CommandSpec(name: "pushcast demo", summary: "s").usage, "pushcast demo [options]")
        XCTAssertEqual(CommandSpec(name: "p q", summary: "s", usage: "p q FILE").usage, "p q FILE")
    }

    func testHelpMentionsEveryOption() {
        let text = Fixtures.bench.helpText()
        for option in Fixtures.bench.options {
            XCTAssertTrue(text.contains(option.longForm), option.name)
            if let short = option.short { XCTAssertTrue(text.contains("-\(short), \(option.longForm)"), option.name) }
            if let note = option.defaultDescription { XCTAssertTrue(text.contains("[default: \(note)]"), option.name) }
        }
        let verbose = text.split(separator: "\n").first { $0.contains("-v, --verbose") }
        XCTAssertEqual(verbose.map { $0.split(separator: " ", omittingEmptySubsequences: true).joined(separator: " ") },
                       "-v, --verbose say more (repeatable)")
    }

    func testOptionHelpStartsInOneColumn() {
        let text = Fixtures.bench.helpText()
        let options = text.components(separatedBy: "options:\n")[1].split(separator: "\n")
        let first = String(options[0])
        let column = first.distance(from: first.startIndex, to: first.range(of: "server to load")!.lowerBound)
        XCTAssertGreaterThan(options.count, Fixtures.bench.options.count)
        for line in options.map(Array.init) {
            XCTAssertEqual(line[column - 1], " ", String(line))
            XCTAssertNotEqual(line[column], " ", String(line))
        }
    }
}
