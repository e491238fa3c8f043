import Foundation
import XCTest

/// `pushcast --version` / `pushcast version`: one paste that starts a bug report.
final class VersionTests: XCTestCase {
    override func setUpWithError() throws {
        try BinaryTests.requireBinary()
    }

    func testVersionNamesEveryComponentFromTheLibrariesThemselves() throws {
        let dashed = try runPushcast(["--version"])
        let word = try runPushcast(["version"])
        XCTAssertEqual(dashed.status, 0, dashed.stderr)
        XCTAssertEqual(word.status, 0, word.stderr)
        // The two forms print the same (the io line is probed each time, so compare all of it).
        XCTAssertEqual(dashed.stdout, word.stdout)
        let lines = dashed.stdout.split(separator: "\n").map(String.init)
        XCTAssertTrue(lines.first?.hasPrefix("pushcast ") == true, dashed.stdout)
        let json = try runPushcast(["version", "--json"])
        XCTAssertEqual(json.status, 0, json.stderr)
        let fields = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: String])
        for key in ["version", "commit", "swift", "openssl", "nghttp2", "liburing", "io", "kernel"] {
            XCTAssertNotNil(fields[key], "no \(key) in \(json.stdout)")
        }
        // The commit is this checkout's (the test binary is built inside it).
        let head = try runProgram("/usr/bin/git", ["-C", BinaryTests.root.path, "rev-parse", "HEAD"])
        if head.status == 0 {
            XCTAssertTrue(fields["commit"]?.hasPrefix(head.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) == true,
                          "commit \(fields["commit"] ?? "") is not HEAD \(head.stdout)")
        }
        XCTAssertTrue(fields["swift"]?.hasPrefix("6.") == true, fields["swift"] ?? "")
        XCTAssertTrue(fields["openssl"]?.hasPrefix("OpenSSL 3.") == true, fields["openssl"] ?? "")
        // The loaded libraries, checked against what the Debian packages installed.
        let nghttp2 = try runProgram("/usr/bin/dpkg-query", ["-W", "-f=${Version}", "libnghttp2-14"])
        XCTAssertTrue(nghttp2.stdout.hasPrefix(fields["nghttp2"] ?? "-"), "nghttp2 \(fields["nghttp2"] ?? "") vs package \(nghttp2.stdout)")
        let uring = try runProgram("/usr/bin/dpkg-query", ["-W", "-f=${Version}", "liburing2"])
        let uringVersion = fields["liburing"]?.split(separator: " ").first.map(String.init) ?? "-"
        XCTAssertTrue(uring.stdout.hasPrefix(uringVersion), "liburing \(fields["liburing"] ?? "") vs package \(uring.stdout)")
        // io_uring or epoll: the same answer a send's reactor reaches (epoll always says why).
        let io = try XCTUnwrap(fields["io"])
        XCTAssertTrue(io.hasPrefix("io_uring (") || (io.hasPrefix("epoll: ") && io.count > "epoll: ".count), io)
    }
}
