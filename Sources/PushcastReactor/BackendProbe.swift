// What `pushcast version` says about the I/O backend: whether io_uring can be set up here (the
// same setup a run does, in a small ring), and the liburing the binary is linked with.

import CURing
import Glibc

/// The backend a run with the default `--io` would get on this machine, and why.
public struct IOBackendReport: Sendable, Equatable {
    public var kind: IOBackendKind
    /// For io_uring: how receives work (multishot needs kernel 6.0). For epoll: why io_uring
    /// cannot be used.
    public var detail: String

    /// Sets up a small io_uring ring exactly as a run does (queue init, probe of the opcodes,
    /// provided-buffer ring), then tears it down. `simulatedInitError` is a test hook (a
    /// negative errno for io_uring_queue_init, as `ReactorConfiguration` has).
    public static func probe(simulatedInitError: Int32? = nil) -> IOBackendReport {
        var configuration = ReactorConfiguration()
        configuration.slotsMax = 4
        configuration.receiveBufferCount = 8
        configuration.receiveBufferBytes = 4096
        configuration.sendBufferBytes = 4096
        configuration.ringEntries = 8
        configuration.simulatedURingInitError = simulatedInitError
        let slots: SlotTable
        do { slots = try SlotTable(capacity: configuration.slotsMax, sendBufferBytes: configuration.sendBufferBytes) } catch {
            return IOBackendReport(kind: .epoll, detail: "cannot reserve memory to try io_uring: \(error.description)")
        }
        do {
            let backend = try URingBackend(configuration: configuration, slots: slots)
            let mode = backend.receiveMode
            backend.shutdown()
            return IOBackendReport(kind: .uring, detail: mode == .multishotProvidedBuffers
                                   ? "multishot receive with provided buffers" : "single-shot receive with provided buffers (kernel before 6.0)")
        } catch {
            var detail = error.description
            if let result = error.queueInitResult,
               case .useEpoll(let notice) = Reactor.fallbackAfterURingInitFailure(result: result, requested: nil) {
                detail = notice.replacingPrefix("pushcast: ", with: "")
            } else {
                detail += " (a run without --io stops with this error; --io epoll works)"
            }
            if let disabled = sysctlIOURingDisabled(), disabled != "0" { detail += "; kernel.io_uring_disabled = \(disabled)" }
            return IOBackendReport(kind: .epoll, detail: detail)
        }
    }

    /// /proc/sys/kernel/io_uring_disabled (Linux 6.6+): 1 or 2 block unprivileged or all rings.
    static func sysctlIOURingDisabled() -> String? {
        guard let file = fopen("/proc/sys/kernel/io_uring_disabled", "r") else { return nil }
        defer { fclose(file) }
        var buffer = [CChar](repeating: 0, count: 16)
        guard fgets(&buffer, Int32(buffer.count), file) != nil else { return nil }
        let text = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return text.trimmingTrailingWhitespace
    }
}

/// The liburing the process loaded, from its file name (liburing 2.3 has no version call).
public enum LinkedURing {
    /// "2.3 (/usr/lib/x86_64-linux-gnu/liburing.so.2.3)", or nil when it is linked statically.
    public static var version: String? {
        var buffer = [CChar](repeating: 0, count: 4096)
        guard curing_library_path(&buffer, buffer.count) == 0 else { return nil }
        let path = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return "\(versionFromFileName(path) ?? "unknown") (\(path))"
    }

    /// The version in a shared object's name: liburing.so.2.3 -> 2.3.
    public static func versionFromFileName(_ path: String) -> String? {
        let name = path.split(separator: "/").last.map(String.init) ?? path
        guard let marker = name.utf8.indices.last(where: { name.utf8[$0...].starts(with: ".so.".utf8) }) else { return nil }
        let version = name.utf8[name.utf8.index(marker, offsetBy: 4)...]
        return version.isEmpty || !version.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2E }) ? nil : String(decoding: version, as: UTF8.self)
    }
}

private extension String {
    func replacingPrefix(_ prefix: String, with replacement: String) -> String {
        hasPrefix(prefix) ? replacement + dropFirst(prefix.count) : self
    }

    var trimmingTrailingWhitespace: String {
        var text = Substring(self)
        while let last = text.last, last.isWhitespace { text = text.dropLast() }
        return String(text)
    }
}
