import Foundation
import XCTest

/// docs/deploy: the Kubernetes manifests (validated offline, then the Job's own command line run
/// once per index against the mock, by Tests/Deploy/kubernetes_job.py) and the Containerfile's
/// runtime packages against what the binary links. The Slurm array runs in SlurmTests.
final class DeployTests: XCTestCase {
    static let deploy = BinaryTests.root.appendingPathComponent("docs/deploy")

    override func setUpWithError() throws {
        try BinaryTests.requireBinary()
    }

    /// The Python of .venv (scripts/venv.sh), or $PUSHCAST_PYTHON.
    static func venvPython() throws -> String {
        if let explicit = ProcessInfo.processInfo.environment["PUSHCAST_PYTHON"] { return explicit }
        let path = BinaryTests.root.appendingPathComponent(".venv/bin/python").path
        guard FileManager.default.isExecutableFile(atPath: path) else {
            XCTFail("no \(path): run `make venv` (make test does) to install scripts/requirements-test.txt")
            throw CocoaError(.fileNoSuchFile)
        }
        return path
    }

    /// Runs a program to completion (killed at `seconds`); stdout and stderr together.
    static func execute(_ executable: String, _ arguments: [String], environment: [String: String]? = nil,
                        seconds: Double = 300) throws -> (status: Int32, output: String) {
        let run = try runProgram(executable, arguments, environment: environment, seconds: seconds)
        return (run.status, run.stdout + run.stderr)
    }

    /// The manifests validate against Kubernetes 1.33 (strict), the Indexed Job keeps its failure
    /// rules, and its container's command line sends every row once across the indexes; the merge
    /// Job's command line then reports every row exactly once.
    func testKubernetesManifestsValidateAndTheIndexedJobSendsEveryRowOnce() throws {
        let script = BinaryTests.root.appendingPathComponent("Tests/Deploy/kubernetes_job.py").path
        let started = Date()
        let run = try Self.execute(try Self.venvPython(), [script, "--pushcast", BinaryTests.binary])
        print(run.output)
        print("kubernetes_job.py: \(String(format: "%.1f", Date().timeIntervalSince(started))) s")
        XCTAssertEqual(run.status, 0, run.output)
        XCTAssertTrue(run.output.contains("PASS"), run.output)
    }

    /// The runtime stage of the Containerfile installs exactly the Debian packages that own the
    /// shared libraries `ldd` finds in the binary (plus ca-certificates, the trust store). Swift's
    /// own runtime libraries, which belong to no package, must be linked in statically: the build
    /// stage passes --static-swift-stdlib, and the toolchain has a static archive of each.
    func testContainerfileInstallsWhatTheBinaryLinks() throws {
        let containerfile = try String(contentsOf: Self.deploy.appendingPathComponent("kubernetes/Containerfile"), encoding: .utf8)
        let stages = Self.stages(of: containerfile)
        XCTAssertEqual(stages.count, 2, "a build stage and a runtime stage")
        let (build, runtime) = (stages.first ?? "", stages.last ?? "")
        XCTAssertTrue(build.hasPrefix("FROM docker.io/library/swift:6.") && build.contains("-bookworm AS build"), build)
        XCTAssertTrue(runtime.hasPrefix("FROM docker.io/library/debian:bookworm-slim"), runtime)
        let installed = Set(Self.aptInstallPackages(runtime))
        XCTAssertFalse(installed.isEmpty, "no apt-get install in the runtime stage")

        let ldd = try Self.execute("/usr/bin/ldd", [BinaryTests.binary])
        XCTAssertEqual(ldd.status, 0, ldd.output)
        var needed: [String: String] = [:]   // package -> a library that needs it
        var swiftRuntime: [String] = []
        let libraries = Self.libraries(fromLDD: ldd.output)
        let owners = try Self.debianPackages(owning: libraries)
        for library in libraries {
            if let package = owners[library] {
                needed[package] = library
            } else if library.contains("/swift/linux/") {
                swiftRuntime.append(library)
            } else {
                XCTFail("\(library) belongs to no Debian package and is not Swift's runtime: the image would lack it")
            }
        }
        XCTAssertTrue(needed.keys.contains("libssl3"), "ldd found no libssl3: \(ldd.output)")
        for (package, library) in needed.sorted(by: { $0.key < $1.key }) {
            XCTAssertTrue(installed.contains(package), "the binary links \(library) (package \(package)), which the runtime stage does not install")
        }
        for extra in installed.subtracting(needed.keys).subtracting(["ca-certificates"]).sorted() {
            XCTFail("the runtime stage installs \(extra), which no library of the binary needs")
        }
        if !swiftRuntime.isEmpty {
            XCTAssertTrue(build.contains("swift build -c release --static-swift-stdlib"),
                          "the binary links Swift's runtime (\(swiftRuntime.count) libraries) and the build stage does not link it statically")
            for library in swiftRuntime {
                let name = URL(fileURLWithPath: library).lastPathComponent.replacingOccurrences(of: ".so", with: ".a")
                let archive = URL(fileURLWithPath: library).deletingLastPathComponent().deletingLastPathComponent()
                    .deletingLastPathComponent().appendingPathComponent("swift_static/linux/\(name)").path
                XCTAssertTrue(FileManager.default.fileExists(atPath: archive), "no static archive \(archive) for \(library)")
            }
        }
        print("Containerfile runtime packages \(installed.sorted()) cover \(needed.count) packages of \(BinaryTests.binary)'s libraries;"
              + " \(swiftRuntime.count) Swift runtime libraries linked statically")
    }

    /// The Containerfile's stages, each from its FROM line, with continuation lines joined.
    static func stages(of text: String) -> [String] {
        let joined = text.replacingOccurrences(of: "\\\n", with: " ")
        var stages: [String] = []
        for line in joined.split(separator: "\n") where !line.hasPrefix("#") {
            if line.hasPrefix("FROM ") { stages.append("") }
            if !stages.isEmpty { stages[stages.count - 1] += line + "\n" }
        }
        return stages
    }

    /// The packages named by `apt-get install` in a stage (options and shell words dropped).
    static func aptInstallPackages(_ stage: String) -> [String] {
        var packages: [String] = []
        for command in stage.components(separatedBy: "&&") {
            let words = command.split(whereSeparator: { $0 == " " || $0 == "\n" }).map(String.init)
            guard let install = words.firstIndex(of: "install"), words[..<install].contains("apt-get") else { continue }
            packages += words[(install + 1)...].filter { !$0.hasPrefix("-") }
        }
        return packages
    }

    /// The resolved paths of `ldd`'s lines (`name => /path (0x…)` and `/lib64/ld-linux… (0x…)`).
    static func libraries(fromLDD output: String) -> [String] {
        output.split(separator: "\n").compactMap { line in
            let words = line.split(separator: " ").map(String.init)
            if let arrow = words.firstIndex(of: "=>") {
                return words.count > arrow + 1 && words[arrow + 1].hasPrefix("/") ? words[arrow + 1] : nil
            }
            return words.first.flatMap { $0.hasPrefix("/") ? $0.trimmingCharacters(in: .whitespaces) : nil }
        }
    }

    /// The Debian package owning each library, by one `dpkg -S` over every path, its /usr twin
    /// (merged-/usr systems register one of the two) and its resolved target; names without the
    /// architecture. A library no package owns is absent.
    static func debianPackages(owning libraries: [String]) throws -> [String: String] {
        var candidates: [String: String] = [:]   // path asked -> library
        for library in libraries {
            candidates[library] = library
            candidates[library.hasPrefix("/usr/") ? String(library.dropFirst(4)) : "/usr" + library] = library
            candidates[URL(fileURLWithPath: library).resolvingSymlinksInPath().path] = library
        }
        // Exit 1 when some path has no owner; the lines of those that do are still printed.
        let query = try execute("/usr/bin/dpkg", ["-S"] + candidates.keys.sorted(), seconds: 60)
        var owners: [String: String] = [:]
        for line in query.output.split(separator: "\n") {
            guard let separator = line.range(of: ": /") else { continue }
            let path = String(line[line.index(before: separator.upperBound)...])
            guard let library = candidates[path], let package = line[..<separator.lowerBound].split(separator: ":").first else { continue }
            owners[library] = String(package)
        }
        return owners
    }
}
