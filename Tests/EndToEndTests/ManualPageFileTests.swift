import Foundation
import XCTest

/// docs/pushcast.1 is what `pushcast help --man` renders from the same option tables that
/// `pushcast help` prints, so the committed page cannot drift from the parser.
final class ManualPageFileTests: XCTestCase {
    override func setUpWithError() throws {
        try BinaryTests.requireBinary()
    }

    func testCommittedManualPageIsWhatTheBinaryRenders() throws {
        let run = try runPushcast(["help", "--man"])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertTrue(run.stdout.hasPrefix(".\\\" pushcast(1)"), run.stdout)
        let path = BinaryTests.root.appendingPathComponent("docs/pushcast.1").path
        let committed = try String(contentsOfFile: path, encoding: .utf8)
        XCTAssertTrue(committed == run.stdout, """
            docs/pushcast.1 is not what `pushcast help --man` prints now (an option or its help changed). \
            Regenerate it: swift build && .build/debug/pushcast help --man > docs/pushcast.1
            """)
    }

    func testEveryCommandAndOptionOfTheHelpIsOnThePage() throws {
        let page = try runPushcast(["help", "--man"]).stdout
        let overview = try runPushcast(["help"]).stdout
        let words = overview.split(separator: "\n", omittingEmptySubsequences: false).drop { !$0.hasPrefix("commands:") }.dropFirst()
            .prefix { !$0.isEmpty }.compactMap { $0.split(separator: " ").first.map(String.init) }
        XCTAssertGreaterThan(words.count, 5, overview)
        for word in words {
            XCTAssertTrue(page.contains(".SS \"pushcast \(word.replacingOccurrences(of: "-", with: "\\-"))\"\n"), word)
            let help = try runPushcast(["help", word]).stdout
            // The option column: "  -n, --requests <N>  …" or "      --json  …".
            let labels = help.split(separator: "\n").map { $0.drop { $0 == " " } }.filter { $0.hasPrefix("-") }
            XCTAssertFalse(labels.isEmpty, help)
            for label in labels {
                guard let name = label.split(separator: " ").first(where: { $0.hasPrefix("--") })?
                    .trimmingCharacters(in: CharacterSet(charactersIn: ",")) else { continue }
                let roff = "\\fB" + name.replacingOccurrences(of: "-", with: "\\-") + "\\fR"
                XCTAssertTrue(page.contains(roff), "\(word): \(name) is not on the page")
            }
        }
    }
}
