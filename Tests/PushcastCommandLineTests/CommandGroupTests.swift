import XCTest
@testable import PushcastCommandLine

final class CommandGroupTests: XCTestCase {
    let group = CommandGroup(name: "pushcast", summary: "push campaigns over HTTP/2", commands: [
        Fixtures.send,
        Fixtures.bench,
        CommandSpec(name: "pushcast mock", summary: "run the mock server"),
    ])

    func select(_ arguments: [String]) throws(CommandLineError) -> CommandGroup.Selection {
        try group.select(arguments)
    }

    func selectError(_ arguments: [String]) -> CommandLineError? {
        do {
            let selection = try select(arguments)
            XCTFail("expected an error, got \(selection)")
            return nil
        } catch {
            return error
        }
    }

    func testSelectsCommandAndPassesTheRest() throws {
        guard case .command(let spec, let rest) = try select(["bench", "-n", "5", "--json"]) else {
            return XCTFail("expected a command")
        }
        XCTAssertEqual(spec.name, "pushcast bench")
        XCTAssertEqual(rest, ["-n", "5", "--json"])
        guard case .arguments(let arguments) = try spec.parse(rest) else { return XCTFail("expected arguments") }
        XCTAssertEqual(try arguments.int("requests"), 5)
    }

    func testHelpForms() throws {
        for arguments in [["--help"], ["-h"], ["help"]] {
            guard case .help(let text) = try select(arguments) else { return XCTFail("\(arguments)") }
            XCTAssertEqual(text, group.helpText())
        }
        guard case .help(let text) = try select(["help", "send"]) else { return XCTFail("help send") }
        XCTAssertEqual(text, Fixtures.send.helpText())
    }

    func testGroupHelpText() {
        XCTAssertEqual(group.helpText(), """
            pushcast: push campaigns over HTTP/2

            usage: pushcast <command> [options]

            commands:
              send   send a campaign
              bench  measure an HTTP/2 endpoint
              mock   run the mock server

            Run 'pushcast <command> --help' for a command's options.

            """)
    }

    func testUnknownCommandSuggests() {
        let error = selectError(["sned"])
        XCTAssertEqual(error?.message, "unknown command 'sned' (did you mean 'send'?)")
        XCTAssertEqual(error?.description,
                       "pushcast: unknown command 'sned' (did you mean 'send'?)\nusage: pushcast <command> [options]")
        XCTAssertEqual(selectError(["help", "bnech"])?.message, "unknown command 'bnech' (did you mean 'bench'?)")
        XCTAssertEqual(selectError(["frobnicate"])?.message,
                       "unknown command 'frobnicate'; expected one of send, bench, mock")
    }

    func testNoCommandIsTheOverviewAndLeadingOptionIsAnError() throws {
        // `pushcast` alone prints what `pushcast --help` prints, not an error.
        guard case .help(let text) = try select([]) else { return XCTFail("no arguments") }
        XCTAssertEqual(text, group.helpText())
        XCTAssertEqual(selectError(["--json", "bench"])?.message, "expected a command before options, got '--json'")
    }

    func testCommandWords() {
        XCTAssertEqual(group.commandWords, ["send", "bench", "mock"])
    }
}
