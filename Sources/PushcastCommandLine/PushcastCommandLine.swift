// PushcastCommandLine: a small, dependency-free argument parser for the pushcast CLI.
//
// swift-argument-parser cannot be fetched here, so this module keeps its conventions with far
// less machinery (docs/DESIGN.md §4):
//   - subcommands (`CommandGroup`), each with `--help` / `-h`;
//   - long options written `--kebab-case`, values as `--name value` or `--name=value`;
//   - short options `-n 100`, `-n100`, and bundled boolean flags `-vq`;
//   - repeatable options; `-` is a positional (stdin); `--` ends the options;
//   - errors name the bad option or value, suggest the nearest option for a typo, and carry the
//     usage line (`CommandLineError`).
//
// Everything is a value: a `CommandSpec` describes a command, `CommandSpec.parse` turns an
// argument vector into a `ParseResult`, and `ParsedArguments` offers typed access (integers with
// range checks, doubles, durations such as "500ms" or "10m", byte sizes such as "64KiB").
// There is no global state; nothing here reads `CommandLine.arguments` or writes to a stream.
//
// A spec that contradicts itself (two options with one name, a reserved name, an accessor asking
// for an option the spec does not declare) is a programmer error and traps. A user's mistake is
// a `CommandLineError`, whose `exitCode` is 2 in the spirit of ripgrep.
