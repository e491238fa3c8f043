import PushcastCore
import PushcastReactor
import PushcastWire
import Synchronization

/// What a server responder may do to the connection a request came on.
public final class ServerConnectionControl {
    public let id: UInt64
    /// Requests received on this connection so far, including the current one.
    public internal(set) var requestCount = 0
    /// The most streams seen open at once on this connection.
    public internal(set) var streamsOpenMax = 0
    /// The connection's session: HTTP/2, or HTTP/1.1 (`http1`, then this is nil).
    let session: HTTP2ServerSession?
    let http1: HTTP1ServerSession?
    public private(set) var goingAway = false
    /// The client's certificate, once the handshake has completed, when the server's TLS context
    /// verifies clients (`TLSConfiguration.clientCAFile`); nil otherwise. The mock takes the APNs
    /// identity (topic, environment) of a certificate connection from it.
    public internal(set) var clientCertificate: TLSClientCertificate?

    init(id: UInt64, session: HTTP2ServerSession) {
        self.id = id
        self.session = session
        self.http1 = nil
    }

    init(id: UInt64, http1: HTTP1ServerSession) {
        self.id = id
        self.session = nil
        self.http1 = http1
    }

    public var streamsOpen: Int { session?.streamsOpen ?? http1?.streamsOpen ?? 0 }

    /// True when the connection speaks HTTP/1.1, false when HTTP/2.
    public var speaksHTTP1: Bool { http1 != nil }

    /// Sends GOAWAY with the highest stream id seen so far: streams up to it are still answered.
    /// Over HTTP/1.1: the next answer says `Connection: close` and the connection ends after it.
    public func goAway(errorCode: UInt32 = 0, debugData: String = "") {
        guard !goingAway else { return }
        goingAway = true
        session?.goAway(lastStreamID: nil, errorCode: errorCode, debugData: debugData)
        http1?.closeAfterNextAnswer()
    }

    /// HTTP/2 only (HTTP/1.1 answers one request at a time).
    public func setMaxConcurrentStreams(_ n: Int) { session?.setMaxConcurrentStreams(n) }

    /// GOAWAY with last-stream-id 0, before any stream: no request of this connection will be
    /// processed (`ServerMisbehavior.goAwayZero`).
    func goAwayBeforeAnyStream(debugData: String) {
        goingAway = true
        session?.goAway(lastStreamID: 0, errorCode: HTTP2ServerSession.noErrorCode, debugData: debugData)
    }
}

/// A responder's answer to one request.
public enum ServerReply {
    case respond(status: Int, headers: [HTTP2Header], body: [UInt8], delayNanoseconds: UInt64)
    /// The same with at most one header, held inline: answering allocates nothing (the mock's
    /// `apns-id` answers go this way).
    case respondInline(status: Int, header: HTTP2InlineHeader?, body: [UInt8], delayNanoseconds: UInt64)
    /// RST_STREAM REFUSED_STREAM: the client may retry it.
    case refuse
}

/// Decides the answers. One instance per server worker, used only on that worker's thread.
public protocol ServerResponder: AnyObject {
    func handle(_ request: HTTP2ServerRequest, on connection: ServerConnectionControl) -> ServerReply
    func connectionOpened(_ connection: ServerConnectionControl)
    func connectionClosed(_ connection: ServerConnectionControl)
    /// Called once per loop turn, after a batch of events: a place to publish counters without
    /// taking a lock per request.
    func turnEnded()
    /// The worker misbehaved on purpose (`ServerConfiguration.misbehavior`) instead of asking
    /// `handle`. For counters; the default does nothing.
    func misbehaved(_ action: ServerMisbehaviorAction, on connection: ServerConnectionControl)
}

extension ServerResponder {
    public func misbehaved(_ action: ServerMisbehaviorAction, on connection: ServerConnectionControl) {}
}

/// A hostile server, for tests of a client's bounded behaviour (`pushcast mock --misbehave MODE`).
/// The worker applies it to every connection and request; a misbehaving worker never passes a
/// request to its responder.
public enum ServerMisbehavior: String, Sendable, CaseIterable {
    /// A well-behaved server: the responder answers.
    case none
    /// Every request stream gets RST_STREAM(REFUSED_STREAM) (safe for the client to retry).
    case refuseAll = "refuse-all"
    /// Every request stream gets RST_STREAM(INTERNAL_ERROR) (fate unknown to the client).
    case resetAll = "reset-all"
    /// GOAWAY(last-stream-id 0) right after the server's opening SETTINGS, then the connection
    /// closes; no request is answered.
    case goAwayZero = "goaway-zero"
    /// The TCP connection closes right after the TLS handshake, before any HTTP/2 frame.
    case closeAfterHandshake = "close-after-handshake"
    /// Requests are taken and never answered; the connection stays open.
    case silent
    /// After the server's SETTINGS, 64 bytes of 0xFF (not an HTTP/2 frame) inside TLS; then
    /// nothing is answered and the connection stays open.
    case garbageAfterPreface = "garbage-after-preface"
    /// Every request is answered 200 with a body that never ends (DATA frames of
    /// `hugeBodyChunk` over and over, as fast as flow control lets them go).
    case hugeBody = "huge-body"
    /// Every request is answered 200 with a header block of `hugeHeaderCount` headers of
    /// `hugeHeaderValueBytes` bytes each (128 KiB: HEADERS and several CONTINUATION frames,
    /// fewer than the 8 CONTINUATIONs after which nghttp2 drops the connection by itself).
    case hugeHeaders = "huge-headers"
    /// Requests get their normal answers, but from a connection's first request on, everything
    /// the server writes on it goes out one byte every `trickleIntervalNanoseconds` (a
    /// slowloris server): an answer takes over half a minute.
    case trickle
    /// SETTINGS_INITIAL_WINDOW_SIZE 0 and never a WINDOW_UPDATE: request HEADERS arrive, their
    /// bodies can never follow, so no request completes and none is answered.
    case windowZero = "window-zero"
    /// Every request gets response HEADERS `:status 200`, then RST_STREAM(REFUSED_STREAM): a
    /// contradiction (a stream that got its status was processed) that proxies can produce.
    case answerThenRefuse = "answer-then-refuse"
    /// Every request gets response HEADERS `:status 200`; after each read's requests, GOAWAY with
    /// last-stream-id 0 (claiming none was processed) and the connection closes.
    case answerThenGoAway = "answer-then-goaway"
    /// Each read's requests: the first half answered normally, then the connection closes with
    /// the rest unanswered (a server that crashes or is killed mid-batch).
    case closeHalfAnswered = "close-half-answered"
    /// Each request is answered normally, after a burst of `pingFloodCount` PING frames (more
    /// than a client should queue acknowledgements for).
    case pingFlood = "ping-flood"

    /// The names `--misbehave` takes: every mode but `none`.
    public static var modeNames: [String] { allCases.filter { $0 != .none }.map(\.rawValue) }

    /// Whether the mode acts on each request (a server that turns bad mid-run switches an open
    /// connection to it); the others act when a connection starts, so an open connection that
    /// meets `--misbehave-after` is closed instead.
    var actsPerRequest: Bool {
        switch self {
        case .refuseAll, .resetAll, .silent, .hugeBody, .hugeHeaders, .trickle, .answerThenRefuse, .answerThenGoAway, .closeHalfAnswered,
             .pingFlood: return true
        case .none, .goAwayZero, .closeAfterHandshake, .garbageAfterPreface, .windowZero: return false
        }
    }

    /// huge-body: the chunk repeated forever.
    public static let hugeBodyChunk = [UInt8](repeating: UInt8(ascii: "x"), count: 16 * 1024)
    /// huge-headers: 8 headers of 16 KiB (under nghttp2's 64 KiB limit on one field).
    public static let hugeHeaderCount = 8
    public static let hugeHeaderValueBytes = 16 * 1024
    public static let hugeHeaderList: [HTTP2Header] = (0..<hugeHeaderCount).map {
        HTTP2Header("x-hostile-\($0)", String(repeating: "h", count: hugeHeaderValueBytes))
    }
    /// ping-flood: PINGs per request (nghttp2 drops a peer after 1,000 unacknowledged).
    public static let pingFloodCount = 2_000
    /// trickle: one byte per half second per connection.
    public static let trickleIntervalNanoseconds: UInt64 = 500_000_000
}

/// `--misbehave-after N`: the first N requests (over every listener and worker sharing it) are
/// answered normally; the server misbehaves from then on.
public final class ServerMisbehaviorGate: Sendable {
    public let wellBehavedRequests: Int
    private let seen = Atomic<Int>(0)

    public init(wellBehavedRequests: Int) { self.wellBehavedRequests = wellBehavedRequests }

    /// Counts a request; true while it is one of the first N.
    func admitsNormally() -> Bool { seen.wrappingAdd(1, ordering: .relaxed).newValue <= wellBehavedRequests }

    /// Whether the server has turned bad (new connections misbehave from their start).
    var hasTurned: Bool { seen.load(ordering: .relaxed) >= wellBehavedRequests }
}

/// What a misbehaving worker did, as reported to `ServerResponder.misbehaved`.
public enum ServerMisbehaviorAction: Sendable, Equatable {
    /// A request stream reset with REFUSED_STREAM (refuse-all).
    case streamRefused
    /// A request stream reset with INTERNAL_ERROR (reset-all).
    case streamReset
    /// A request left unanswered (silent, garbage-after-preface, goaway-zero).
    case requestIgnored
    /// GOAWAY(last-stream-id 0) queued on a new connection (goaway-zero).
    case goAwaySent
    /// A connection closed on purpose right after its handshake (goaway-zero, close-after-handshake).
    case connectionClosed
    /// Bytes that are not HTTP/2 sent on a connection (garbage-after-preface).
    case garbageSent
    /// A request answered with a body that never ends (huge-body).
    case hugeBodySent
    /// A request answered with a huge header block (huge-headers).
    case hugeHeadersSent
    /// A connection that from now on writes one byte at a time (trickle).
    case trickleStarted
    /// A connection opened with a flow-control window of 0 (window-zero).
    case windowWithheld
    /// A request answered `:status 200` and then cut (answer-then-refuse, answer-then-goaway).
    case answerCut
    /// A connection closed with half of a read's requests answered (close-half-answered).
    case closedHalfAnswered
    /// A burst of PINGs sent (ping-flood).
    case pingsFlooded
    /// An open connection closed unanswered when the server turned bad (`--misbehave-after`
    /// with a mode that acts when a connection starts).
    case connectionDropped
}

public struct ServerConfiguration: Sendable {
    public var host: String
    public var port: UInt16
    /// Its ALPN list says which protocols the server offers. A list with "http/1.1" and without
    /// "h2" makes an HTTP/1.1 server (`speaksHTTP1`); otherwise it speaks HTTP/2, and a connection
    /// that settles on anything else is closed.
    public var tls: TLSContext
    public var limits: Limits
    public var reactor: ReactorConfiguration
    /// `.none` unless a test or `pushcast mock --misbehave` asks for a hostile server.
    public var misbehavior: ServerMisbehavior
    /// With `misbehavior`: behave for the gate's first requests, then turn bad (nil: bad from
    /// the start).
    public var misbehaviorGate: ServerMisbehaviorGate?
    /// Connections speak HTTP/1.1 (`HTTP1ServerSession`): the server offers http/1.1 and not h2.
    public var speaksHTTP1: Bool { tls.offersHTTP1 && !tls.alpnProtocols.contains(TLSContext.h2) }

    public init(host: String, port: UInt16, tls: TLSContext, limits: Limits, reactor: ReactorConfiguration,
                misbehavior: ServerMisbehavior = .none, misbehaviorGate: ServerMisbehaviorGate? = nil) {
        self.host = host
        self.port = port
        self.tls = tls
        self.limits = limits
        self.reactor = reactor
        self.misbehavior = misbehavior
        self.misbehaviorGate = misbehaviorGate
    }
}

/// Tells a running server worker to stop, from any thread.
public final class ServerStopSignal: Sendable {
    let stopped = Atomic<Bool>(false)
    let wakers = Mutex<[ReactorWaker]>([])
    public init() {}
    public var isStopped: Bool { stopped.load(ordering: .acquiring) }
    public func stop() {
        stopped.store(true, ordering: .releasing)
        for w in wakers.withLock({ $0 }) { w.wake() }
    }
    func register(_ waker: ReactorWaker) {
        wakers.withLock { $0.append(waker) }
        if isStopped { waker.wake() }
    }
}

/// What a server connection reads and writes through, whichever session its TLS carries.
protocol ServerChannel: AnyObject {
    var wantsWrite: Bool { get }
    var isHandshakeComplete: Bool { get }
    var applicationProtocol: String? { get }
    var peerClosedCleanly: Bool { get }
    func receivedCiphertext(_ bytes: UnsafeRawBufferPointer) throws(WireError)
    func produceCiphertext(into buffer: UnsafeMutableRawBufferPointer) -> Int
    func takeTLSCiphertext(into buffer: UnsafeMutableRawBufferPointer) -> Int
    func injectPlaintext(_ bytes: [UInt8]) -> Bool
}

extension SecureChannel: ServerChannel {}

/// One thread's share of a server: a reactor listening on a shared port (SO_REUSEPORT spreads
/// connections over the workers), the connections it accepted, and a responder.
public final class ServerWorker {
    private final class Connection {
        let slot: Slot
        let channel: any ServerChannel
        /// The session the channel carries: HTTP/2, or HTTP/1.1 (`http1`, then this is nil).
        let http2: HTTP2ServerSession?
        let http1: HTTP1ServerSession?
        let control: ServerConnectionControl
        var dirty = false
        /// Close once the staged bytes (a GOAWAY, an answer) are on the wire.
        var closing = false
        /// Misbehaviour only: the TLS handshake has completed and been acted on.
        var handshakeSeen = false
        /// Misbehaviour only (close-after-handshake): input is ignored and only what TLS itself
        /// queued goes out (never an HTTP/2 frame) before the close.
        var muted = false
        /// How this connection misbehaves: the server's mode, or `.none` while a
        /// `--misbehave-after` gate still admits requests (a per-request mode takes over when it
        /// closes).
        var mode: ServerMisbehavior
        /// Misbehaviour only (trickle): ciphertext waiting to go out one byte at a time.
        var trickling = false
        var trickleBacklog: [UInt8] = []
        var trickleSent = 0
        init(slot: Slot, channel: ServerConnection, control: ServerConnectionControl, mode: ServerMisbehavior) {
            self.slot = slot
            self.channel = channel
            self.http2 = channel.session
            self.http1 = nil
            self.control = control
            self.mode = mode
        }

        init(slot: Slot, http1 channel: SecureChannel<HTTP1ServerSession>, control: ServerConnectionControl) {
            self.slot = slot
            self.channel = channel
            self.http2 = nil
            self.http1 = channel.session
            self.control = control
            self.mode = .none
        }

        var isClosed: Bool { http2?.isClosed ?? http1?.isClosed ?? true }
    }

    private struct Delayed {
        enum Headers {
            case list([HTTP2Header])
            case inline(HTTP2InlineHeader?)
        }
        var slot: Slot
        var streamID: Int32
        var slotHint: Int32
        var status: Int
        var headers: Headers
        var body: [UInt8]
    }

    private let configuration: ServerConfiguration
    private let misbehavior: ServerMisbehavior
    private let reactor: Reactor
    private let responder: ServerResponder
    private let stopSignal: ServerStopSignal
    /// Indexed by the reactor slot's index; a slot's generation tells a reused slot apart.
    private var connections: [Connection?] = []
    private var dirty: [Connection] = []
    private var flushing: [Connection] = []
    private var delayed = DeadlineQueue<Delayed>(capacity: 1024)
    private var nextConnectionID: UInt64
    /// trickle: the connections that write one byte at a time, and when the next byte goes.
    private var trickling: [Connection] = []
    private var nextTrickleNanoseconds: UInt64? = nil
    private var trickleScratch = [UInt8](repeating: 0, count: 16 * 1024)
    public let port: UInt16

    /// Binds the listening socket now, so that port 0 resolves to a real port before `run`.
    public init(configuration: ServerConfiguration, responder: ServerResponder, stop: ServerStopSignal, workerIndex: Int) throws(TransportError) {
        self.configuration = configuration
        self.misbehavior = configuration.misbehavior
        self.responder = responder
        self.stopSignal = stop
        self.nextConnectionID = UInt64(workerIndex) << 48
        do {
            reactor = try Reactor(configuration: configuration.reactor)
            let bound = try reactor.listen(host: configuration.host, port: configuration.port, backlog: 4096, reusePort: true)
            port = bound.port
            stop.register(try reactor.makeWaker())
        } catch {
            throw TransportError("cannot listen on \(configuration.host):\(configuration.port): \(error)")
        }
    }

    public var backendKind: IOBackendKind { reactor.backendKind }

    public func run() throws(TransportError) {
        while !stopSignal.isStopped {
            var timeout: UInt64? = nil
            if let due = [delayed.firstDue, nextTrickleNanoseconds].compactMap({ $0 }).min() {
                let now = Reactor.nowNanoseconds()
                timeout = due > now ? due - now : 0
            }
            do {
                try reactor.poll(timeoutNanoseconds: timeout) { event in self.handle(event) }
            } catch {
                throw TransportError("server I/O failed: \(error)")
            }
            releaseDue()
            flushDirty()
            trickleDue()
            responder.turnEnded()
        }
        // Connections still open at the stop are closed here: the responder counts them as closed
        // ones (a client that has just hung up may not have been seen yet), so that the final
        // statistics hold every connection.
        for case let c? in connections { drop(c) }
        connections.removeAll()
        responder.turnEnded()
    }

    /// The live connection on `slot`, if the slot still belongs to it.
    @inline(__always)
    private func connection(_ slot: Slot) -> Connection? {
        let index = Int(slot.index)
        guard index < connections.count, let c = connections[index], c.slot == slot else { return nil }
        return c
    }

    private func register(_ c: Connection) {
        let index = Int(c.slot.index)
        if index >= connections.count {
            connections.append(contentsOf: repeatElement(nil, count: index + 1 - connections.count))
        }
        connections[index] = c
    }

    private func handle(_ event: ReactorEvent) {
        switch event {
        case .accepted(_, let slot):
            accepted(slot)
        case .received(let slot, let bytes):
            guard let c = connection(slot) else { return }
            received(c, bytes)
        case .closed(let slot, _):
            guard let c = connection(slot) else { return }
            drop(c, alreadyClosed: true)
        case .writable(let slot):
            guard let c = connection(slot) else { return }
            if c.muted {
                closeAfterFlush(c)
            } else if c.closing && !c.channel.wantsWrite {
                drop(c)
            } else {
                markDirty(c)
            }
        case .connected, .connectFailed, .timer:
            break
        }
    }

    private func accepted(_ slot: Slot) {
        if configuration.speaksHTTP1 {
            acceptedHTTP1(slot)
            return
        }
        let c: Connection
        let mode = configuration.misbehaviorGate.map { $0.hasTurned ? misbehavior : .none } ?? misbehavior
        do {
            var limits = configuration.limits
            if mode == .windowZero { limits.windowBytes = 0 }
            let channel = try ServerConnection(context: configuration.tls, limits: limits)
            nextConnectionID += 1
            c = Connection(slot: slot, channel: channel, control: ServerConnectionControl(id: nextConnectionID, session: channel.session),
                           mode: mode)
        } catch {
            reactor.close(slot)
            return
        }
        register(c)
        responder.connectionOpened(c.control)
        if mode == .windowZero { responder.misbehaved(.windowWithheld, on: c.control) }
        if mode == .goAwayZero {
            // Queued behind the SETTINGS; nothing of the session goes out before the handshake ends.
            c.control.goAwayBeforeAnyStream(debugData: "pushcast mock --misbehave goaway-zero")
            responder.misbehaved(.goAwaySent, on: c.control)
        }
        markDirty(c)
    }

    /// An HTTP/1.1 connection: no misbehaviour (the modes are HTTP/2's), one request answered at a
    /// time (so that an answer that closes never leaves a request the responder saw unanswered).
    private func acceptedHTTP1(_ slot: Slot) {
        let channel: SecureChannel<HTTP1ServerSession>
        do {
            let tls = try TLSSession(context: configuration.tls, serverName: nil)
            channel = SecureChannel(tls: tls, session: HTTP1ServerSession(limits: configuration.limits, requestsPendingMax: 1),
                                    limits: configuration.limits)
        } catch {
            reactor.close(slot)
            return
        }
        nextConnectionID += 1
        let c = Connection(slot: slot, http1: channel, control: ServerConnectionControl(id: nextConnectionID, http1: channel.session))
        register(c)
        responder.connectionOpened(c.control)
        markDirty(c)
    }

    private func received(_ c: Connection, _ bytes: UnsafeRawBufferPointer) {
        guard !c.muted else { return }
        do {
            try c.channel.receivedCiphertext(bytes)
        } catch {
            // A peer that breaks TLS or HTTP/2 loses its connection (after its alert or GOAWAY
            // goes out); the server carries on.
            if c.http1 != nil && c.channel.peerClosedCleanly { c.http1?.receiveEnd() }
            closeAfterFlush(c)
            return
        }
        if c.http2 != nil && c.channel.isHandshakeComplete && c.channel.applicationProtocol == TLSContext.http1 {
            // A server that offers both settles on HTTP/2 sessions: it cannot serve this client.
            closeAfterFlush(c)
            return
        }
        if configuration.tls.verifiesClientCertificates && c.control.clientCertificate == nil && c.channel.isHandshakeComplete {
            // Right after the call that completed the handshake, before any request is handed on.
            c.control.clientCertificate = configuration.tls.takeClientCertificate()
                ?? TLSClientCertificate(subjectUID: nil, commonName: nil, verificationError: "no client certificate was recorded")
        }
        if c.mode != .none && !c.handshakeSeen && c.channel.isHandshakeComplete {
            c.handshakeSeen = true
            guard handshakeCompleted(c) else { return }
        }
        drainEvents(c)
        markDirty(c)
    }

    /// The misbehaviours that act once per connection, when its TLS handshake completes. Returns
    /// false when the connection is closing and needs nothing more now.
    private func handshakeCompleted(_ c: Connection) -> Bool {
        switch c.mode {
        case .closeAfterHandshake:
            c.muted = true
            responder.misbehaved(.connectionClosed, on: c.control)
            closeAfterFlush(c)
            return false
        case .goAwayZero:
            responder.misbehaved(.connectionClosed, on: c.control)
            drainEvents(c)  // requests that came with the handshake go unanswered
            closeAfterFlush(c)
            return false
        case .garbageAfterPreface:
            guard c.channel.injectPlaintext(Self.garbage) else {
                closeAfterFlush(c)
                return false
            }
            responder.misbehaved(.garbageSent, on: c.control)
            return true
        case .none, .refuseAll, .resetAll, .silent, .hugeBody, .hugeHeaders, .trickle, .windowZero, .answerThenRefuse, .answerThenGoAway,
             .closeHalfAnswered, .pingFlood:
            return true
        }
    }

    /// garbage-after-preface: read as a frame header, a 16 MiB frame of type 0xFF on stream
    /// 0x7FFFFFFF, far over any SETTINGS_MAX_FRAME_SIZE (RFC 9113 §4.2).
    private static let garbage = [UInt8](repeating: 0xFF, count: 64)

    private func drainEvents(_ c: Connection) {
        guard let session = c.http2 else { return drainHTTP1Events(c) }
        var closed = false
        var cutThisTurn = false
        var halfBatch: [HTTP2ServerRequest] = []
        session.takeEvents { event in
            switch event {
            case .request(let request):
                c.control.requestCount += 1
                let open = session.streamsOpen
                if open > c.control.streamsOpenMax { c.control.streamsOpenMax = open }
                if c.mode == .none, misbehavior != .none, let gate = configuration.misbehaviorGate, !gate.admitsNormally() {
                    // The server turns bad now. A mode that acts when a connection starts cannot
                    // start on this one: it goes, unanswered, and the next meets the mode.
                    guard misbehavior.actsPerRequest else {
                        if !closed { responder.misbehaved(.connectionDropped, on: c.control) }
                        closed = true
                        return
                    }
                    c.mode = misbehavior
                }
                switch c.mode {
                case .none:
                    reply(c, to: request)
                case .closeHalfAnswered:
                    halfBatch.append(request)
                case .pingFlood:
                    session.floodPings(ServerMisbehavior.pingFloodCount)
                    responder.misbehaved(.pingsFlooded, on: c.control)
                    reply(c, to: request)
                case .trickle:
                    if !c.trickling { startTrickling(c) }
                    reply(c, to: request)
                default:
                    misbehave(c, streamID: request.streamID)
                    cutThisTurn = cutThisTurn || c.mode == .answerThenGoAway
                }
            case .streamCancelled:
                break
            case .closed:
                closed = true
            }
        }
        if !closed && !halfBatch.isEmpty {
            // Answered at once (no latency), so that the answers go out before the close.
            for request in halfBatch.prefix((halfBatch.count + 1) / 2) {
                session.respond(streamID: request.streamID, status: 200, headers: [], body: [])
            }
            responder.misbehaved(.closedHalfAnswered, on: c.control)
            closed = true
        }
        if !closed && c.mode == .answerThenGoAway && cutThisTurn {
            // Every stream above 0 "unprocessed", although each got its :status.
            session.goAwayZeroAfterStatus(errorCode: HTTP2ServerSession.noErrorCode, debugData: "answer-then-goaway")
            closed = true
        }
        if closed { closeAfterFlush(c) }
    }

    private func drainHTTP1Events(_ c: Connection) {
        guard let session = c.http1 else { return }
        var closed = false
        session.takeEvents { event in
            switch event {
            case .request(let request):
                c.control.requestCount += 1
                c.control.streamsOpenMax = max(c.control.streamsOpenMax, session.streamsOpen)
                reply(c, to: request)
            case .streamCancelled:
                break
            case .closed:
                closed = true
            }
        }
        if closed { closeAfterFlush(c) }
    }

    /// Asks the responder, and answers, refuses or queues the answer as it says.
    @inline(__always)
    private func reply(_ c: Connection, to request: HTTP2ServerRequest) {
        switch responder.handle(request, on: c.control) {
        case .respond(let status, let headers, let body, let delay):
            answer(c, request, status: status, headers: .list(headers), body: body, after: delay)
        case .respondInline(let status, let header, let body, let delay):
            answer(c, request, status: status, headers: .inline(header), body: body, after: delay)
        case .refuse:
            // HTTP/1.1 has no refusal: a 503 that closes, so that nothing behind it is processed.
            c.http2?.refuse(streamID: request.streamID)
            c.http1?.respond(streamID: request.streamID, status: 503, headers: [], body: [], closeAfterAnswer: true)
        }
    }

    /// A misbehaving worker's treatment of a request: a reset, or nothing at all.
    private func misbehave(_ c: Connection, streamID: Int32) {
        guard let session = c.http2 else { return }
        switch c.mode {
        case .refuseAll:
            session.refuse(streamID: streamID)
            responder.misbehaved(.streamRefused, on: c.control)
        case .resetAll:
            session.reset(streamID: streamID, errorCode: HTTP2ServerSession.internalErrorCode)
            responder.misbehaved(.streamReset, on: c.control)
        case .hugeBody:
            session.respond(streamID: streamID, status: 200, headers: [], repeatingBodyForever: ServerMisbehavior.hugeBodyChunk)
            responder.misbehaved(.hugeBodySent, on: c.control)
        case .hugeHeaders:
            session.respond(streamID: streamID, status: 200, headers: ServerMisbehavior.hugeHeaderList, body: [])
            responder.misbehaved(.hugeHeadersSent, on: c.control)
        case .answerThenRefuse:
            session.sendStatusOnly(streamID: streamID, status: 200, thenReset: HTTP2ServerSession.refusedStreamErrorCode)
            responder.misbehaved(.answerCut, on: c.control)
        case .answerThenGoAway:
            session.sendStatusOnly(streamID: streamID, status: 200, thenReset: nil)
            responder.misbehaved(.answerCut, on: c.control)
        case .none, .silent, .goAwayZero, .closeAfterHandshake, .garbageAfterPreface, .trickle, .windowZero, .closeHalfAnswered, .pingFlood:
            responder.misbehaved(.requestIgnored, on: c.control)
        }
    }

    // MARK: trickle

    private func startTrickling(_ c: Connection) {
        c.trickling = true
        trickling.append(c)
        responder.misbehaved(.trickleStarted, on: c.control)
        if nextTrickleNanoseconds == nil { nextTrickleNanoseconds = Reactor.nowNanoseconds() + ServerMisbehavior.trickleIntervalNanoseconds }
    }

    /// A trickling connection's flush: its output is taken into the backlog (up to 1 MiB held),
    /// never staged whole.
    private func takeIntoBacklog(_ c: Connection) {
        if c.trickleSent >= 64 * 1024 {
            c.trickleBacklog.removeFirst(c.trickleSent)
            c.trickleSent = 0
        }
        while c.channel.wantsWrite && c.trickleBacklog.count - c.trickleSent < 1 << 20 {
            let n = trickleScratch.withUnsafeMutableBytes { c.channel.produceCiphertext(into: $0) }
            if n == 0 { break }
            c.trickleBacklog.append(contentsOf: trickleScratch[0..<n])
        }
    }

    /// One byte of each trickling connection's backlog, once per interval.
    private func trickleDue() {
        guard let due = nextTrickleNanoseconds else { return }
        let now = Reactor.nowNanoseconds()
        guard now >= due else { return }
        trickling.removeAll { connection($0.slot) !== $0 }
        for c in trickling where c.trickleSent < c.trickleBacklog.count && reactor.stageCapacity(c.slot) > 0 {
            let byte = c.trickleBacklog[c.trickleSent]
            if reactor.stage(c.slot, { buffer in
                buffer[0] = byte
                return 1
            }) == 1 {
                c.trickleSent += 1
            }
        }
        nextTrickleNanoseconds = trickling.isEmpty ? nil : now + ServerMisbehavior.trickleIntervalNanoseconds
    }

    /// Answers now, or queues the answer for `delay` nanoseconds (the mock's latency).
    private func answer(_ c: Connection, _ request: HTTP2ServerRequest, status: Int, headers: Delayed.Headers, body: [UInt8],
                        after delay: UInt64) {
        guard delay > 0 else {
            send(c, request.streamID, request.slotHint, status: status, headers: headers, body: body)
            return
        }
        delayed.push(Delayed(slot: c.slot, streamID: request.streamID, slotHint: request.slotHint, status: status,
                             headers: headers, body: body),
                     due: Reactor.nowNanoseconds() + delay)
    }

    private func send(_ c: Connection, _ streamID: Int32, _ slotHint: Int32, status: Int, headers: Delayed.Headers,
                      body: [UInt8]) {
        guard let session = c.http2 else {
            let list: [HTTP2Header]
            switch headers {
            case .list(let headers): list = headers
            case .inline(let header): list = header.map { [$0.header] } ?? []
            }
            c.http1?.respond(streamID: streamID, status: status, headers: list, body: body)
            return
        }
        switch headers {
        case .list(let list): session.respond(streamID: streamID, slotHint: slotHint, status: status, headers: list, body: body)
        case .inline(let header): session.respond(streamID: streamID, slotHint: slotHint, status: status, header: header, body: body)
        }
    }

    private func releaseDue() {
        guard !delayed.isEmpty else { return }
        let now = Reactor.nowNanoseconds()
        while let head = delayed.popDue(now: now) {
            guard let c = connection(head.slot) else { continue }
            send(c, head.streamID, head.slotHint, status: head.status, headers: head.headers, body: head.body)
            markDirty(c)
        }
    }

    private func markDirty(_ c: Connection) {
        guard !c.dirty else { return }
        c.dirty = true
        dirty.append(c)
    }

    private func flushDirty() {
        // Two lists swapped, so neither is copied: a connection marked dirty while flushing
        // (closeAfterFlush may not, but be safe) lands in the fresh list for the next turn.
        swap(&dirty, &flushing)
        for c in flushing {
            c.dirty = false
            guard connection(c.slot) === c else { continue }
            flush(c)
            if c.isClosed { closeAfterFlush(c) }
        }
        flushing.removeAll(keepingCapacity: true)
    }

    private func closeAfterFlush(_ c: Connection) {
        c.closing = true
        flush(c)
        // A muted connection's flush took all the TLS bytes that fit; the rest, if any, goes on
        // the next `.writable`, which only comes while bytes are staged.
        if (c.muted || !c.channel.wantsWrite) && reactor.stagedBytes(c.slot) == 0 { drop(c) }
    }

    private func flush(_ c: Connection) {
        if c.trickling {
            takeIntoBacklog(c)
            return
        }
        if c.muted {
            while reactor.stageCapacity(c.slot) > 0 && reactor.stage(c.slot, { c.channel.takeTLSCiphertext(into: $0) }) > 0 {}
            return
        }
        while c.channel.wantsWrite && reactor.stageCapacity(c.slot) > 0 {
            let n = reactor.stage(c.slot) { c.channel.produceCiphertext(into: $0) }
            if n == 0 { break }
        }
        // Staging full: .writable brings us back.
    }

    private func drop(_ c: Connection, alreadyClosed: Bool = false) {
        guard connection(c.slot) === c else { return }
        connections[Int(c.slot.index)] = nil
        if !alreadyClosed { reactor.close(c.slot) }
        responder.connectionClosed(c.control)
    }
}
