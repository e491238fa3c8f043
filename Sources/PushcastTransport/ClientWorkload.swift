import PushcastWire

/// What a client worker sends, and who hears the answers. One instance per worker, used only on
/// that worker's thread. Every request handed out ends in exactly one `received` or `failed`
/// call; a workload that wants to retry hands the request out again later.
public protocol ClientWorkload: AnyObject {
    /// The next request to send now, or nil when none is ready (more may come later).
    func nextRequest() -> (request: HTTP2Request, tag: UInt64)?
    /// Hands the next request that may go now to `submit`, in place (valid only during the call);
    /// false when none is ready. The worker calls this; the default wraps `nextRequest()`, and a
    /// workload that keeps one request and changes it between sends passes it without a copy.
    func submitNext(_ submit: (UnsafePointer<HTTP2Request>, UInt64) -> Void) -> Bool
    /// A hint: the response or failure of the request with this tag is a few events away (and
    /// `near`: half as many, the second hint for the same tag). A workload may start loading what
    /// it keeps for that request (written when the request went out, and out of cache by now);
    /// it must not change anything.
    func willReceive(tag: UInt64, near: Bool)
    /// A complete response for the request with this tag.
    func received(tag: UInt64, response: HTTP2Response)
    /// The request with this tag ended without a response; `failure.isSafeToRetry` says whether the
    /// server never processed it.
    func failed(tag: UInt64, failure: HTTP2StreamFailure)
    /// True when no request will ever come again and none is waiting for a retry.
    var isExhausted: Bool { get }
    /// True when a request is ready now or waits for a retry: a connection the server let go
    /// while idle (an HTTP/1.1 idle close) opens again only then. The default, `!isExhausted`,
    /// reopens it at once whenever more may come.
    var hasWork: Bool { get }
    /// The earliest time (monotonic ns) at which a request not ready now becomes ready (a retry
    /// back-off, a rate limit), so the worker can sleep until then. Nil when nothing waits.
    var nextReadyNanoseconds: UInt64? { get }
    /// Called once per loop turn, after the worker handed out requests and before their bytes can
    /// reach a socket: a place to record what goes out. `shouldAbandon` is asked right after.
    func willWrite()
    /// Called once per loop turn, after the turn's events: a place to publish results in a batch.
    func turnEnded()
    /// Stream slots to keep free, as if their streams were open: answers received whose outcomes
    /// are not yet recorded, so that a crash never leaves more than the stream limits unsettled.
    var streamSlotsHeld: Int { get }
    /// True when the worker must drop its connections now, in-flight requests and all (a
    /// graceful stop whose drain ran out). Each in-flight request then ends in `failed`.
    var shouldAbandon: Bool { get }
}

/// Why a client run stopped early.
public struct TransportError: Error, CustomStringConvertible {
    public let description: String
    /// A server that had answered this run turned bad (a breaker tripped after answers): the
    /// run stops, and `send --resume` can go on once the server works again.
    public let serverTurnedBad: Bool
    public init(_ description: String, serverTurnedBad: Bool = false) {
        self.description = description
        self.serverTurnedBad = serverTurnedBad
    }
}

extension ClientWorkload {
    /// Default: whenever more may come.
    public var hasWork: Bool { !isExhausted }
    /// Default: none held.
    public var streamSlotsHeld: Int { 0 }

    /// Default: nothing to record.
    public func willWrite() {}

    /// Default: nothing to do at the end of a loop turn.
    public func turnEnded() {}

    /// Default: never abandon.
    public var shouldAbandon: Bool { false }

    /// Default: no hint taken.
    public func willReceive(tag: UInt64, near: Bool) {}

    public func submitNext(_ submit: (UnsafePointer<HTTP2Request>, UInt64) -> Void) -> Bool {
        guard let next = nextRequest() else { return false }
        withUnsafePointer(to: next.request) { submit($0, next.tag) }
        return true
    }
}
