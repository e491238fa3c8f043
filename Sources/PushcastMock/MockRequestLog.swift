import PushcastReactor
import PushcastWire
import Synchronization

/// `--log FILE`: one NDJSON line per answered request, shared by all workers under a lock (only
/// when logging is on). Tokens are written here on purpose: the log is the test's evidence of what
/// the mock received, in a 0600 file.
public final class MockRequestLog: Sendable {
    private let file: Mutex<OutputFile>

    public init(path: String) throws(ReactorError) {
        file = Mutex(try OutputFile(path: path))
    }

    func record(worker: Int, request: HTTP2ServerRequest, answer: MockAPNsAnswer, apnsID: String) {
        let token = request.path.hasPrefix("/3/device/") ? String(request.path.dropFirst(10)) : ""
        var line = "{\"ts\":\(Int64(Reactor.wallClockSeconds() * 1000)),\"worker\":\(worker),\"method\":\"\(request.method)\","
        line += "\"token\":\"\(Self.escaped(token))\",\"status\":\(answer.status),\"apns_id\":\"\(Self.escaped(apnsID))\""
        if let reason = answer.reason { line += ",\"reason\":\"\(reason)\"" }
        line += "}\n"
        file.withLock { try? $0.append(line) }
    }

    public func flush() {
        file.withLock { try? $0.flush() }
    }

    /// Minimal JSON string escaping for values that came off the wire.
    static func escaped(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case _ where scalar.value < 0x20: out += "\\u" + String(repeating: "0", count: 4 - String(scalar.value, radix: 16).count) + String(scalar.value, radix: 16)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}
