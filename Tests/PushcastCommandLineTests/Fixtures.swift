import XCTest
@testable import PushcastCommandLine

/// Specs shaped like pushcast's own commands, shared by the tests.
enum Fixtures {
    static let bench = CommandSpec(
        name: "pushcast bench",
        summary: "measure an HTTP/2 endpoint",
        options: [
            .value("endpoint", metavar: "URL", help: "server to load"),
            .value("requests", short: "n", metavar: "N", help: "requests to send", defaultDescription: "200000"),
            .value("connections", short: "c", metavar: "N", help: "connections to open", defaultDescription: "4"),
            .value("streams", short: "m", metavar: "N", help: "concurrent streams per connection", defaultDescription: "250"),
            .value("timeout", metavar: "DURATION", help: "give up after this long", defaultDescription: "10m"),
            .value("window", metavar: "SIZE", help: "HTTP/2 window"),
            .value("ratio", metavar: "X", help: "a fraction"),
            .value("io", metavar: "BACKEND", help: "uring or epoll", defaultDescription: "uring"),
            .value("header", short: "H", metavar: "NAME:VALUE", help: "extra header", isRepeatable: true),
            .value("data", short: "d", metavar: "FILE", help: "request body\nread from - for stdin"),
            .flag("json", help: "print JSON"),
            .flag("verbose", short: "v", help: "say more", isRepeatable: true),
            .flag("quiet", short: "q", help: "say less"),
        ],
        positionals: [PositionalSpec("tokens", help: "token file, or - for stdin", arity: .optional)]
    )

    static let send = CommandSpec(
        name: "pushcast send",
        summary: "send a campaign",
        options: [
            .value("connections", short: "c", metavar: "N", help: "connections per provider"),
            .flag("dry-run", help: "validate only"),
        ],
        positionals: [
            PositionalSpec("payload", help: "payload template"),
            PositionalSpec("tokens", help: "token files", arity: .variadic),
        ]
    )

    /// `bench`'s options with a single variadic positional, for `--` tests.
    static let files = CommandSpec(
        name: "pushcast bench", summary: bench.summary, options: bench.options,
        positionals: [PositionalSpec("files", help: "files", arity: .variadic)])

    enum IOBackend: String, CaseIterable { case uring, epoll }
}

/// Parses and expects arguments (not help, not an error).
func parsed(_ arguments: [String], _ spec: CommandSpec = Fixtures.bench,
            file: StaticString = #filePath, line: UInt = #line) throws -> ParsedArguments {
    switch try spec.parse(arguments) {
    case .arguments(let parsed): return parsed
    case .help:
        XCTFail("expected arguments, got help", file: file, line: line)
        throw CommandLineError(command: "test", message: "help", usage: "")
    }
}

/// Parses and expects a `CommandLineError`; returns its message ("" after a failure).
func parseError(_ arguments: [String], _ spec: CommandSpec = Fixtures.bench,
                file: StaticString = #filePath, line: UInt = #line) -> String {
    do {
        let result = try spec.parse(arguments)
        XCTFail("expected an error, got \(result)", file: file, line: line)
        return ""
    } catch {
        return error.message
    }
}

/// Runs a typed accessor and expects a `CommandLineError`; returns its message.
func accessError<T>(_ body: () throws(CommandLineError) -> T,
                    file: StaticString = #filePath, line: UInt = #line) -> String {
    do {
        let value = try body()
        XCTFail("expected an error, got \(value)", file: file, line: line)
        return ""
    } catch {
        return error.message
    }
}
