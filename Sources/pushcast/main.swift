// pushcast: the command-line front end. It parses options, wires the modules together and
// reports; the work happens in PushcastTransport, PushcastMock and the modules below them.
import Foundation
import PushcastCommandLine
import PushcastSystem

let group = CommandGroup(
    name: "pushcast",
    summary: "Send one push campaign to millions of devices over HTTP/2, and record every outcome.",
    commands: [SendCommand.spec, SendCommand.checkSpec, MockCommand.spec, BenchCommand.spec, DemoCommand.spec, SimulateCommand.spec, MergeCommand.spec,
               ReportCommand.spec, VersionCommand.spec,
               PruneApplyCommand.spec, SnapshotCommand.spec],
    manual: ManualText.page)

func runMain(_ arguments: [String]) -> Int32 {
    // A reader of stdout or stderr that goes away never kills a run (StandardStream notes it).
    StopSignals.ignoreBrokenPipes()
    Console.use(LogFormat.scan(arguments))
    do {
        // `pushcast --version` is `pushcast version`.
        switch try group.select(arguments.first == "--version" ? ["version"] + arguments.dropFirst() : arguments) {
        case .help(let text):
            Console.out(text.hasSuffix("\n") ? String(text.dropLast()) : text)
            return ExitStatus.success.rawValue
        case .command(let spec, let rest):
            switch try spec.parse(rest) {
            case .help(let text):
                Console.out(text.hasSuffix("\n") ? String(text.dropLast()) : text)
                return ExitStatus.success.rawValue
            case .arguments(let parsed):
                switch spec.name {
                case SendCommand.spec.name: return try SendCommand.run(parsed, checkOnly: false).rawValue
                case SendCommand.checkSpec.name: return try SendCommand.run(parsed, checkOnly: true).rawValue
                case MockCommand.spec.name: return try MockCommand.run(parsed).rawValue
                case BenchCommand.spec.name: return try BenchCommand.run(parsed).rawValue
                case DemoCommand.spec.name: return try DemoCommand.run(parsed).rawValue
                case SimulateCommand.spec.name: return try SimulateCommand.run(parsed).rawValue
                case MergeCommand.spec.name: return try MergeCommand.run(parsed).rawValue
                case VersionCommand.spec.name: return try VersionCommand.run(parsed).rawValue
                case ReportCommand.spec.name: return try ReportCommand.run(parsed).rawValue
                case PruneApplyCommand.spec.name: return try PruneApplyCommand.run(parsed).rawValue
                case SnapshotCommand.spec.name: return try SnapshotCommand.run(parsed).rawValue
                default: preconditionFailure("unhandled command \(spec.name)")
                }
            }
        }
    } catch let error as CommandLineError {
        Console.log(error.description, level: "error")
        return error.exitCode
    } catch let error as CommandFailure {
        Console.log("pushcast: \(error.description)", level: "error")
        return ExitStatus.stopped.rawValue
    } catch {
        Console.log("pushcast: \(error)", level: "error")
        return ExitStatus.stopped.rawValue
    }
}

exit(runMain(Array(CommandLine.arguments.dropFirst())))
