import PushcastCore
import PushcastWire

/// Decides when a server is broken rather than busy, for one client worker: a sans-I/O value fed
/// what happened to connections and streams, on an injected clock.
///
/// A polite server (GOAWAY after many requests, 503 storms, slow answers) never trips it: each of
/// those comes with answers. It trips on what a broken or hostile server does forever:
/// - `deadConnectionsMax` connections in a row that die before any answer (closed during or right
///   after the TLS handshake, GOAWAY with last-stream-id 0, a protocol error);
/// - `failedStreamsMax` streams in a row that fail with no answer in between: reset, timed out
///   (`--request-timeout`) or answered over the response limits (`Limits.responseBodyBytesAccepted`,
///   `Limits.responseHeaderBytesAccepted`) at once; refused, or stuck behind a flow-control
///   window the server never opens, once that has lasted at least 2 s (or a quarter of the stall
///   timeout, when that is shorter);
/// - nothing answered for the stall timeout while requests were outstanding or connections opening.
/// Between dead connections it backs off exponentially with full jitter, so a server that closes
/// every connection is not hammered while the breaker counts.
public struct ConnectionBreaker {
    /// How a connection ended without ever answering a stream.
    public enum Death: Equatable {
        case closedDuringHandshake
        case closedAfterHandshake
        case failedDuringHandshake(String)
        case failedAfterHandshake(String)
        case goAwayZero

        /// What the server did, for the diagnosis.
        func diagnosis(_ count: Int) -> String {
            switch self {
            case .closedDuringHandshake: return "every connection closed during the TLS handshake (\(count) in a row)"
            case .closedAfterHandshake: return "every connection closed right after the TLS handshake (\(count) in a row)"
            case .failedDuringHandshake(let reason): return "every connection failed during the TLS handshake (\(count) in a row; last: \(reason))"
            case .failedAfterHandshake(let reason):
                return reason.contains("HTTP/2") || reason.contains("http2") || reason.contains("protocol")
                    ? "protocol error from the server: \(reason) (\(count) connections in a row, none answered)"
                    : "every connection died before any answer (\(count) in a row; last: \(reason))"
            case .goAwayZero: return "GOAWAY with last-stream-id 0 on every connection (\(count) in a row)"
            }
        }
    }

    private let deadConnectionsMax: Int
    private let failedStreamsMax: Int
    private let stallNanoseconds: UInt64
    private let reconnectBaseNanoseconds: UInt64
    private let endpoint: String
    private let limits: Limits
    private let random: SplitMix64

    public private(set) var deadInRow = 0
    public private(set) var failedStreamsInRow = 0
    private var lastFailure: HTTP2StreamFailure? = nil
    /// When the first unanswered activity (a request, a connection opening) since the last
    /// answer happened; nil when nothing is waiting for an answer.
    private var waitingSince: UInt64? = nil

    public init(configuration: ClientConfiguration, endpoint: String, nowNanoseconds: UInt64) {
        self.init(deadConnectionsMax: configuration.deadConnectionsMax, failedStreamsMax: configuration.failedStreamsMax,
                  stallNanoseconds: configuration.stallNanoseconds, reconnectBaseNanoseconds: configuration.reconnectDelayNanoseconds,
                  endpoint: endpoint, nowNanoseconds: nowNanoseconds, limits: configuration.limits)
    }

    /// `limits` gives the request timeout and the response limits the diagnoses name.
    public init(deadConnectionsMax: Int, failedStreamsMax: Int, stallNanoseconds: UInt64, reconnectBaseNanoseconds: UInt64,
                endpoint: String, nowNanoseconds: UInt64, limits: Limits = Limits()) {
        precondition(deadConnectionsMax >= 1 && failedStreamsMax >= 1 && stallNanoseconds > 0 && reconnectBaseNanoseconds > 0)
        self.deadConnectionsMax = deadConnectionsMax
        self.failedStreamsMax = failedStreamsMax
        self.stallNanoseconds = stallNanoseconds
        self.reconnectBaseNanoseconds = reconnectBaseNanoseconds
        self.endpoint = endpoint
        self.limits = limits
        random = SplitMix64(seed: nowNanoseconds ^ 0x9E37_79B9_7F4A_7C15)
    }

    /// A request went out or a connection started opening: something now waits for an answer.
    public mutating func activity(nowNanoseconds: UInt64) {
        if waitingSince == nil { waitingSince = nowNanoseconds }
    }

    /// Nothing is in flight and every connection is up: nothing waits for an answer, unless a
    /// streak of failures is under way (refused streams leave nothing in flight between tries,
    /// and the streak's length is what trips the breaker).
    public mutating func idle() {
        guard failedStreamsInRow == 0 && deadInRow == 0 else { return }
        waitingSince = nil
    }

    /// A stream was answered (any status): the server works.
    public mutating func answered() {
        deadInRow = 0
        failedStreamsInRow = 0
        waitingSince = nil
    }

    /// A connection that had answered streams ended: it does not count against the server.
    public mutating func connectionAnswered() { deadInRow = 0 }

    /// A connection died before answering anything. Returns the diagnosis when the breaker trips.
    public mutating func connectionDied(_ death: Death) -> String? {
        deadInRow += 1
        guard deadInRow >= deadConnectionsMax else { return nil }
        return "\(endpoint): \(death.diagnosis(deadInRow))"
    }

    /// How long to wait before the next connection after `deadInRow` dead ones: uniform in
    /// 0...min(base × 2^(n−1), 30 s), at least 1 ms.
    public mutating func reconnectDelay(nowNanoseconds: UInt64) -> UInt64 {
        let shift = UInt64(min(max(deadInRow - 1, 0), 8))
        let ceiling = min(reconnectBaseNanoseconds << shift, 30_000_000_000)
        return max(1_000_000, random.next().multipliedFullWidth(by: ceiling + 1).high)
    }

    /// A stream failed. Refusals, resets, timeouts, oversized answers and bodies stuck behind a
    /// closed window count toward the streak; connection-level failures (GOAWAY-unprocessed,
    /// never sent, lost) are judged through `connectionDied`.
    public mutating func streamFailed(_ failure: HTTP2StreamFailure, nowNanoseconds: UInt64) -> String? {
        let lasting: Bool
        switch failure {
        case .refusedStream, .flowControlBlocked: lasting = true
        case .reset, .deadlineExceeded, .responseBodyTooLarge, .responseHeadersTooLarge, .cutAfterResponse: lasting = false
        case .goAwayUnprocessed, .notSent, .connectionLost, .unsendable: return nil
        }
        failedStreamsInRow += 1
        lastFailure = failure
        // A failure the server cannot have acted on (a refusal, a body that could not go out)
        // must go on for a while: a burst at a connection's start is normal. One that ends a
        // row's chances (a reset, a timeout, a broken answer) trips at the count.
        guard failedStreamsInRow >= failedStreamsMax,
              !lasting || nowNanoseconds &- (waitingSince ?? nowNanoseconds) >= streakNanoseconds else { return nil }
        let what: String
        switch failure {
        case .refusedStream: what = "every stream refused (RST_STREAM REFUSED_STREAM)"
        case .reset(let code): what = "every stream reset (RST_STREAM error code \(code))"
        case .deadlineExceeded:
            what = "every response took longer than --request-timeout (\(Self.seconds(limits.requestTimeoutNanoseconds)))"
        case .responseBodyTooLarge:
            what = "every response body over \(Self.kibibytes(limits.responseBodyBytesAccepted)) (Limits.responseBodyBytesAccepted; streams reset)"
        case .responseHeadersTooLarge:
            what = "every response header block over \(Self.kibibytes(limits.responseHeaderBytesAccepted)) "
                + "(Limits.responseHeaderBytesAccepted; streams reset)"
        case .flowControlBlocked: what = Self.windowNeverOpened + ": no request body could be sent"
        case .cutAfterResponse: what = "every stream answered, then reset or dropped before the answer ended"
        default: what = "every stream failed"
        }
        return "\(endpoint): \(what), \(failedStreamsInRow) in a row with no answer"
    }

    /// The diagnosis of a server whose flow-control window stays shut.
    public static let windowNeverOpened = "the server never opened its flow-control window (SETTINGS_INITIAL_WINDOW_SIZE 0, no WINDOW_UPDATE)"

    static func kibibytes(_ bytes: Int) -> String { bytes % 1024 == 0 ? "\(bytes / 1024) KiB" : "\(bytes) bytes" }

    static func seconds(_ nanoseconds: UInt64) -> String {
        nanoseconds % 1_000_000_000 == 0 ? "\(nanoseconds / 1_000_000_000) s" : "\(Double(nanoseconds) / 1e9) s"
    }

    /// How long refusals or resets must go on with no answer before they trip the breaker: a
    /// burst at a connection's start (streams over a limit the client had not yet heard) is
    /// answered within milliseconds; two seconds of nothing but refusals is a broken server.
    private var streakNanoseconds: UInt64 { min(stallNanoseconds / 4, 2_000_000_000) }

    /// When the stall timeout will pass, if something is waiting.
    public var stallDeadline: UInt64? { waitingSince.map { $0 &+ stallNanoseconds } }

    /// The diagnosis when nothing has been answered for the stall timeout.
    public func stalled(nowNanoseconds: UInt64) -> String? {
        guard let since = waitingSince, nowNanoseconds &- since >= stallNanoseconds else { return nil }
        let seconds = Double(nowNanoseconds &- since) / 1e9
        var text = "\(endpoint): no answer for \(Int(seconds.rounded())) s (--stall-timeout)"
        if deadInRow > 0 { text += "; \(deadInRow) connections in a row died before answering" }
        if failedStreamsInRow > 0 { text += "; \(failedStreamsInRow) streams in a row refused, reset, timed out or answered over the limits" }
        return text
    }
}
