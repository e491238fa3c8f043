import Foundation
import XCTest
@testable import PushcastCommandLine

final class ManualPageTests: XCTestCase {
    static let manual = ManualPage(
        source: "tool 1.2.3",
        description: [".starts with a dot", "a path C:\\temp and a \"quote\"", "'starts with a quote"],
        exitStatus: [ManualItem("0", "done"), ManualItem("2", "could not start")],
        environment: [ManualItem("TOOL_HOME", "where -c looks")],
        seeAlso: ["h2load(1)", "docs/USAGE.md"])

    static let group = CommandGroup(
        name: "tool",
        summary: "Do one thing well.",
        commands: [
            CommandSpec(
                name: "tool run",
                summary: "run it",
                options: [
                    .value("rate", short: "r", metavar: "N/s", help: "send rate", defaultDescription: "10"),
                    .value("header", metavar: "NAME:VALUE", help: ".dotted help\n'quoted help", isRepeatable: true),
                    .flag("dry-run", help: "check only; a back\\slash"),
                ],
                positionals: [PositionalSpec("file", help: "input, or - for stdin", arity: .optional)]),
            CommandSpec(name: "tool check", summary: "check it"),
        ],
        manual: manual)

    func page() throws -> String { try XCTUnwrap(Self.group.manualPage()) }

    func testSectionsInOrder() throws {
        let page = try page()
        let headings = page.split(separator: "\n").filter { $0.hasPrefix(".SH ") }.map(String.init)
        XCTAssertEqual(headings, [".SH NAME", ".SH SYNOPSIS", ".SH DESCRIPTION", ".SH COMMANDS", ".SH OPTIONS",
                                  ".SH \"EXIT STATUS\"", ".SH ENVIRONMENT", ".SH \"SEE ALSO\""])
        XCTAssertTrue(page.contains(".TH \"TOOL\" 1 \"\" \"tool 1.2.3\" \"User Commands\"\n"), page)
        XCTAssertTrue(page.contains(".SH NAME\ntool \\- Do one thing well\n"), page)
        XCTAssertTrue(page.contains(".SS \"tool run\"\nrun it\n.PP\nUsage: tool run [options] [<file>]\n"), page)
        XCTAssertTrue(page.contains(".SS \"tool check\"\n"), page)
        XCTAssertTrue(page.contains(".TP\n.B run\nrun it\n"), page)
        XCTAssertTrue(page.contains(".SH \"EXIT STATUS\"\n.TP\n.B 0\ndone\n.TP\n.B 2\ncould not start\n"), page)
        XCTAssertTrue(page.contains(".SH \"SEE ALSO\"\n.BR h2load (1),\ndocs/\\:USAGE.md\n"), page)
        XCTAssertTrue(page.hasSuffix("\n"))
    }

    func testOptionsCarryTheHelpTextsDefaults() throws {
        let page = try page()
        XCTAssertTrue(page.contains(".TP\n\\fB\\-r\\fR, \\fB\\-\\-rate\\fR \\fIN/\\:s\\fR\nsend rate [default: 10]\n"), page)
        XCTAssertTrue(page.contains(".TP\n\\fB\\-\\-header\\fR \\fINAME:VALUE\\fR\n"), page)
        XCTAssertTrue(page.contains("(repeatable)"), page)
        XCTAssertTrue(page.contains(".TP\n\\fB\\-\\-dry\\-run\\fR\ncheck only; a back\\eslash\n"), page)
        XCTAssertTrue(page.contains(".TP\n\\fB\\-h\\fR, \\fB\\-\\-help\\fR\nprint this help\n"), page)
        XCTAssertTrue(page.contains(".TP\n\\fIfile\\fR\ninput,\\: or \\- for stdin\n"), page)
    }

    func testEscaping() throws {
        let page = try page()
        // A line of text that starts with '.' or '\'' would be a request to troff.
        XCTAssertTrue(page.contains("\n\\&.starts with a dot\n"), page)
        XCTAssertTrue(page.contains("\n\\&'starts with a quote\n"), page)
        XCTAssertTrue(page.contains("\n\\&.dotted help\n\\&'quoted help (repeatable)\n"), page)
        for line in page.split(separator: "\n") where line.hasPrefix(".") || line.hasPrefix("'") {
            let request = line.dropFirst().prefix { $0 != " " }
            XCTAssertTrue(["\\\"", "TH", "ad", "SH", "SS", "TP", "PP", "B", "BR", "br", "sp"].contains(String(request)),
                          "unexpected request line: \(line)")
        }
        // Backslashes as \e, quotes in text as they are, hyphens as \- (no bare '-' anywhere).
        XCTAssertTrue(page.contains("a path C:\\etemp and a \"quote\""), page)
        XCTAssertTrue(page.contains("where \\-c looks"), page)
        let text = page.split(separator: "\n").filter { !$0.hasPrefix(".\\\"") }.joined(separator: "\n")
        let unescaped = text.replacingOccurrences(of: "\\-", with: "").replacingOccurrences(of: "\\e", with: "")
        XCTAssertFalse(unescaped.contains("-"), page)
        XCTAssertEqual(Roff.quoted("say \"hi\""), "\"say \\(dqhi\\(dq\"")
        XCTAssertEqual(Roff.escape("µ ≤ 1\n\nnext"), "\\[u00B5] \\[u2264] 1\n.sp\nnext")
        XCTAssertEqual(Roff.escapeLine(String(repeating: "a", count: 85)),
                       String(repeating: "a", count: 40) + "\\:" + String(repeating: "a", count: 40) + "\\:aaaaa")
    }

    func testHelpManSelectsThePageAndTheOverviewNamesIt() throws {
        guard case .help(let text) = try Self.group.select(["help", "--man"]) else { return XCTFail("help --man") }
        XCTAssertEqual(text, try page())
        XCTAssertTrue(Self.group.helpText().hasSuffix("Run 'tool help --man' for the manual page (roff; man -l - reads it).\n"))
        // Without a manual there is no page, and `help --man` is an unknown command.
        let plain = CommandGroup(name: "tool", summary: "s", commands: Self.group.commands)
        XCTAssertNil(plain.manualPage())
        XCTAssertThrowsError(try plain.select(["help", "--man"]))
        XCTAssertFalse(plain.helpText().contains("--man"))
    }
}
