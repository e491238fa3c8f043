import PushcastCore
import PushcastProviderKit
import PushcastReactor
import PushcastSystem
import PushcastWire
import Synchronization

/// `--log FILE`: one NDJSON line per answered request, shared by all workers under a lock (only
/// when logging is on). Tokens are written here on purpose: the log is the test's evidence of what
/// the mock received, in a 0600 file. Never an access token or an assertion.
///
/// Every line carries `ts` (wall clock, ms since the epoch), `mono_ms` (CLOCK_MONOTONIC, ms),
/// `provider` (`apns`, `fcm` or `webpush`), so a test can tell from the log when each provider was
/// sent to, and `http` (`"2"` or `"1.1"`), the protocol the request's connection spoke:
/// APNs lines: `{"ts":…,"mono_ms":…,"provider":"apns","worker":0,"http":"2","method":"POST","token":"…","status":200,"apns_id":"…"[,"reason":"…"]}`
/// FCM lines: `{"ts":…,"mono_ms":…,"provider":"fcm","worker":0,"http":"2","method":"POST","path":"/v1/projects/p/messages:send","token":"…","status":200[,"error":"UNREGISTERED"]}`
/// (token-endpoint calls have `"path":"/token"` and no `token`).
public final class MockRequestLog: Sendable {
    private let file: Mutex<OutputFile>

    public init(path: String) throws(SystemError) {
        file = Mutex(try OutputFile(path: path))
    }

    /// One exchange: the members every line has, then the provider's own (its responder's
    /// `logMembers`).
    func record(provider: any ProviderResponder, worker: Int, http1: Bool, request: HTTP2ServerRequest, answer: ProviderServerAnswer) {
        let line = Self.linePrefix(provider: provider.provider.rawValue, worker: worker, http1: http1, method: request.method)
            + provider.logMembers(request, answer) + "}\n"
        file.withLock { try? $0.append(line) }
    }

    private static func linePrefix(provider: String, worker: Int, http1: Bool, method: String) -> String {
        "{\"ts\":\(Int64(SystemClock.wallClockSeconds() * 1000)),\"mono_ms\":\(Reactor.nowNanoseconds() / 1_000_000),"
            + "\"provider\":\"\(provider)\",\"worker\":\(worker),\"http\":\"\(http1 ? "1.1" : "2")\",\"method\":\"\(escaped(method))\","
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
