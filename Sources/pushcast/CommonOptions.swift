import Foundation
import PushcastCommandLine
import PushcastReactor
import PushcastSystem
import PushcastWire

/// Options several commands share.
enum CommonOptions {
    static let io = OptionSpec.value(
        "io", metavar: "uring|epoll",
        help: "I/O backend; io_uring falls back to epoll by itself when the kernel blocks it",
        defaultDescription: "uring")
    static let caFile = OptionSpec.value(
        "ca-file", metavar: "FILE", help: "extra CA certificate(s) to trust, in PEM (for mocks); the system store stays trusted")
    static let workers = OptionSpec.value(
        "workers", metavar: "N", help: "worker threads, each with its own ring and connections",
        defaultDescription: "one per core")

    static func reactorConfiguration(_ parsed: ParsedArguments) throws -> ReactorConfiguration {
        var configuration = ReactorConfiguration()
        if let io = try parsed.choice("io", from: ["uring", "epoll"]) {
            configuration.backend = IOBackendKind(rawValue: io)
        }
        return configuration
    }

    static func workers(_ parsed: ParsedArguments) throws -> Int {
        try parsed.int("workers", default: ResourceUsage.processorCount, range: 1...256)
    }

    static func clientTLS(caFile: String?) throws -> TLSContext {
        var configuration = TLSConfiguration()
        configuration.additionalCAFile = caFile
        do {
            return try TLSContext(role: .client, configuration: configuration, files: SecretFile.read)
        } catch {
            throw CommandFailure(error.description)
        }
    }

    /// Writes `text` to `path` (mode 0600 when `secret`), or stops the command naming the path.
    static func write(_ text: String, to path: String, secret: Bool = false) throws {
        do { try FileSystem.write(text, to: path, secret: secret) } catch { throw CommandFailure(error.description) }
    }

    /// A duration in whole nanoseconds (what limits and timers take).
    static func nanoseconds(_ duration: Duration) -> UInt64 {
        UInt64(duration.components.seconds) * 1_000_000_000 + UInt64(duration.components.attoseconds / 1_000_000_000)
    }

    /// A private temporary directory (0700) for throw-away keys and certificates.
    static func makeTemporaryDirectory(prefix: String) throws -> String {
        do { return try FileSystem.makeTemporaryDirectory(in: Environment.temporaryDirectory, prefix: prefix) } catch {
            throw CommandFailure(error.description)
        }
    }
}
