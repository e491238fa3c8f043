// HTTPClientSession: what a client worker drives on a connection, whichever HTTP version the
// connection speaks, so that one worker loop serves both.
//
// | call                  | HTTP2ClientSession                          | HTTP1ClientSession                               |
// |-----------------------|---------------------------------------------|--------------------------------------------------|
// | submit                | opens a stream (odd ids)                    | writes the request; ids 1, 2, 3... in order      |
// | streamsAllowed        | min(our cap, peer's MAX_CONCURRENT_STREAMS) | HTTP1Limits.pipelineDepth (default 1)            |
// | peerSettingsReceived  | the peer's first SETTINGS came              | always true (HTTP/1.1 has no settings)           |
// | .goAway event         | GOAWAY frame                                | an answer that ends the connection (`Connection: |
// |                       |                                             | close`, HTTP/1.0, body to the close); lastStreamID|
// |                       |                                             | is the id of the request it answered             |
// | .settingsChanged,     | as the peer does                            | never                                            |
// | .pingTimedOut         |                                             |                                                  |
// | tick                  | deadlines (RST_STREAM), PING                | deadlines (the connection ends: HTTP/1.1 cannot  |
// |                       |                                             | cancel one request), closing an idle connection  |
// | receiveEnd            | = connectionLost                            | ends a body that runs to the close, then as      |
// |                       |                                             | connectionLost                                   |
// | streamsBlockedBy...   | bodies behind a shut window                 | 0                                                |
//
// Failures keep RFC 9113's split (HTTP2StreamFailure.isSafeToRetry): only a request the server
// provably did not process is safe to send again.

import PushcastCore

public protocol HTTPClientSession: PlaintextSession {
    /// How many requests may be in flight at once now; 0 once going away.
    var streamsAllowed: Int { get }
    /// Requests submitted and not yet ended by an event.
    var streamsOpen: Int { get }
    /// Whether `submit` would take a request now.
    var canOpenStream: Bool { get }
    /// Whether the peer's settings came (HTTP/2), so that requests may start.
    var peerSettingsReceived: Bool { get }
    var isGoingAway: Bool { get }
    var isClosed: Bool { get }
    /// Output submitted but not yet taken by `produce`.
    var outputPendingBytes: Int { get }
    /// Requests whose bodies wait on a shut flow-control window (a diagnosis; HTTP/2 only).
    var streamsBlockedByFlowControl: Int { get }
    /// When `tick()` next has work; nil once closed.
    var nextDeadlineNanoseconds: UInt64? { get }

    /// Takes a request, read in place, with the caller's tag; its id, or nil when it cannot be
    /// taken now (`canOpenStream` false) or, for HTTP/1.1, cannot be carried at all
    /// (`HTTP1ClientSession.problem(in:)`).
    func submit(_ request: UnsafePointer<HTTP2Request>, tag: UInt64) -> Int32?
    /// Fires deadlines and liveness checks against the session's clock.
    func tick()
    /// The transport died: every request in flight fails (`.notSent` when no byte of it was
    /// handed out), then `.closed`.
    func connectionLost()
    /// The peer ended its side cleanly (TLS close_notify; a FIN on a plaintext connection).
    func receiveEnd()
    /// No new requests; `.closed` once those in flight have ended.
    func close()
    /// Hands out the recorded events in order (HTTP2ClientSession.takeEvents says how `upcoming`
    /// names the tags ahead).
    func takeEvents(upcoming: (_ tag: UInt64, _ near: Bool) -> Void, _ body: (HTTP2ClientEvent) -> Void)
}

extension HTTP2ClientSession: HTTPClientSession {
    /// HTTP/2 frames its own messages, so a clean end of input is no different from a lost one.
    public func receiveEnd() { connectionLost() }
}
