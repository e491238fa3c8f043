import PushcastCore
import PushcastReactor
import PushcastSystem
import PushcastWire
import Synchronization

/// `--log FILE`: one NDJSON line per answered request, shared by all workers under a lock (only
/// when logging is on). Tokens are written here on purpose: the log is the test's evidence of what
/// the mock received, in a 0600 file. Never an access token or an assertion.
///
/// Every line carries `ts` (wall clock, ms since the epoch), `mono_ms` (CLOCK_MONOTONIC, ms) and
/// `provider` (`apns` or `fcm`), so a test can tell from the log when each provider was sent to:
/// APNs lines: `{"ts":…,"mono_ms":…,"provider":"apns","worker":0,"method":"POST","token":"…","status":200,"apns_id":"…"[,"reason":"…"]}`
/// FCM lines: `{"ts":…,"mono_ms":…,"provider":"fcm","worker":0,"method":"POST","path":"/v1/projects/p/messages:send","token":"…","status":200[,"error":"UNREGISTERED"]}`
/// (token-endpoint calls have `"path":"/token"` and no `token`).
public final class MockRequestLog: Sendable {
    private let file: Mutex<OutputFile>

    public init(path: String) throws(SystemError) {
        file = Mutex(try OutputFile(path: path))
    }

    func record(worker: Int, request: HTTP2ServerRequest, answer: MockAPNsAnswer, apnsID: String) {
        let token = request.path.hasPrefix("/3/device/") ? String(request.path.dropFirst(10)) : ""
        var line = Self.linePrefix(provider: "apns", worker: worker, method: request.method)
        line += "\"token\":\"\(Self.escaped(token))\",\"status\":\(answer.status),\"apns_id\":\"\(Self.escaped(apnsID))\""
        if let reason = answer.reason { line += ",\"reason\":\"\(reason)\"" }
        line += "}\n"
        file.withLock { try? $0.append(line) }
    }

    /// One FCM request: `token` is the message's target (nil for the token endpoint), `error` the
    /// FcmError code or canonical status of a refusal.
    func recordFCM(worker: Int, request: HTTP2ServerRequest, token: String?, status: Int, error: String?) {
        var line = Self.linePrefix(provider: "fcm", worker: worker, method: request.method)
        line += "\"path\":\"\(Self.escaped(String(request.path.prefix(256))))\""
        if let token { line += ",\"token\":\"\(Self.escaped(token))\"" }
        line += ",\"status\":\(status)"
        if let error { line += ",\"error\":\"\(Self.escaped(error))\"" }
        line += "}\n"
        file.withLock { try? $0.append(line) }
    }

    private static func linePrefix(provider: String, worker: Int, method: String) -> String {
        "{\"ts\":\(Int64(SystemClock.wallClockSeconds() * 1000)),\"mono_ms\":\(Reactor.nowNanoseconds() / 1_000_000),"
            + "\"provider\":\"\(provider)\",\"worker\":\(worker),\"method\":\"\(escaped(method))\","
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
