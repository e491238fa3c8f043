import Foundation
import PushcastCommandLine
import PushcastReactor
import PushcastSystem
import PushcastWire

/// `pushcast version` (and `pushcast --version`): what a bug report starts with. pushcast's
/// version, the commit it was built from, the Swift compiler, the C libraries as loaded, and
/// which I/O backend a run would use here (and why, when it is epoll).
enum VersionCommand {
    /// pushcast's own version (bumped by hand with each release).
    static let version = "0.10.0"

    static let spec = CommandSpec(
        name: "pushcast version",
        summary: "Print the version, git commit, Swift, OpenSSL, nghttp2 and liburing versions, and whether io_uring or epoll would be used.",
        options: [.flag("json", help: "print the same as one JSON object")])

    static func run(_ parsed: ParsedArguments) throws -> ExitStatus {
        let fields = report()
        if parsed.flag("json") {
            var object: [String: String] = [:]
            for (key, value) in fields { object[key] = value }
            let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
            Console.out(String(decoding: data, as: UTF8.self))
        } else {
            Console.out("pushcast \(version)")
            for (key, value) in fields.dropFirst() { Console.out((key + ":").padding(toLength: 10, withPad: " ", startingAt: 0) + value) }
        }
        return .success
    }

    /// (field, value) pairs, in print order; the first is the version.
    static func report() -> [(String, String)] {
        let backend = IOBackendReport.probe()
        var uname = utsname()
        Glibc.uname(&uname)
        let kernel = [uname.sysname, uname.release, uname.machine].map { field in
            withUnsafeBytes(of: field) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        }.joined(separator: " ")
        return [
            ("version", version),
            ("commit", GitCommit.describe()),
            ("swift", swiftCompilerVersion),
            ("openssl", LinkedLibraries.openSSL),
            ("nghttp2", LinkedLibraries.nghttp2),
            ("liburing", LinkedURing.version ?? "linked statically (no version to read)"),
            ("io", backend.kind == .uring ? "io_uring (\(backend.detail))" : "epoll: \(backend.detail)"),
            ("kernel", kernel),
        ]
    }

    /// The compiler that built this binary (`#if compiler` is the only way to ask at compile time).
    static var swiftCompilerVersion: String {
        #if compiler(>=6.5)
        return "6.5 or later"
        #elseif compiler(>=6.4)
        return "6.4"
        #elseif compiler(>=6.3.2)
        return "6.3.2"
        #elseif compiler(>=6.3.1)
        return "6.3.1"
        #elseif compiler(>=6.3)
        return "6.3"
        #elseif compiler(>=6.2)
        return "6.2"
        #elseif compiler(>=6.1)
        return "6.1"
        #else
        return "6.0"
        #endif
    }
}

/// The git commit of the checkout the binary sits in (`.build/<config>/pushcast` under it), read
/// from `.git` without running git: HEAD, the ref it names (loose, or in packed-refs; a worktree's
/// refs live in its common directory). Says so when the ref moved after the binary was built, and
/// "unknown" for a binary installed outside a checkout.
enum GitCommit {
    static func describe(executable: String = CommandLine.executablePath) -> String {
        var directory = (executable as NSString).deletingLastPathComponent
        for _ in 0..<8 {
            let dotGit = directory + "/.git"
            if FileSystem.exists(dotGit), let found = read(dotGit: dotGit) {
                let built = modificationDate(executable)
                let moved = built != nil && found.changed.map { $0 > built! } == true
                return found.commit + (moved ? " (the checkout's HEAD; it moved after this binary was built)" : "")
            }
            let parent = (directory as NSString).deletingLastPathComponent
            if parent == directory { break }
            directory = parent
        }
        return "unknown (the binary is not inside a git checkout)"
    }

    /// The commit HEAD names, and when that ref last changed.
    static func read(dotGit: String) -> (commit: String, changed: Double?)? {
        var gitDirectory = dotGit
        if !FileSystem.isDirectory(dotGit) {
            // A worktree or submodule: ".git" is a file saying "gitdir: PATH".
            guard let text = text(dotGit), text.hasPrefix("gitdir: ") else { return nil }
            let path = String(text.dropFirst("gitdir: ".count))
            gitDirectory = path.hasPrefix("/") ? path : (dotGit as NSString).deletingLastPathComponent + "/" + path
        }
        guard let head = text(gitDirectory + "/HEAD") else { return nil }
        guard head.hasPrefix("ref: ") else { return isCommit(head) ? (head, modificationDate(gitDirectory + "/HEAD")) : nil }
        let ref = String(head.dropFirst("ref: ".count))
        let common = text(gitDirectory + "/commondir").map { $0.hasPrefix("/") ? $0 : gitDirectory + "/" + $0 } ?? gitDirectory
        for directory in [gitDirectory, common] {
            if let commit = text(directory + "/" + ref), isCommit(commit) { return (commit, modificationDate(directory + "/" + ref)) }
        }
        // packed-refs: "<sha> <ref>" lines.
        for line in (text(common + "/packed-refs") ?? "").split(separator: "\n") where line.hasSuffix(" " + ref) {
            let commit = String(line.prefix { $0 != " " })
            if isCommit(commit) { return (commit, modificationDate(common + "/packed-refs")) }
        }
        return nil
    }

    private static func text(_ path: String) -> String? {
        guard let data = (try? readWholeFile(path)) ?? nil, data.count < 1 << 20 else { return nil }
        let text = String(decoding: data, as: UTF8.self)
        return String(text.drop { $0.isWhitespace }.reversed().drop { $0.isWhitespace }.reversed())
    }

    private static func isCommit(_ text: String) -> Bool {
        (text.count == 40 || text.count == 64) && text.allSatisfy(\.isHexDigit)
    }

    /// When the file last changed, in seconds since the Unix epoch.
    private static func modificationDate(_ path: String) -> Double? {
        FileSystem.modificationSeconds(path)
    }
}

extension CommandLine {
    /// The running binary's path (/proc/self/exe), else argv[0].
    static var executablePath: String {
        FileSystem.linkTarget("/proc/self/exe") ?? CommandLine.arguments[0]
    }
}
