// PushcastTransport: where the sans-I/O wire sessions meet the reactor. A worker owns one
// reactor (one thread, one ring) and the connections on it; it moves bytes between sockets and
// sessions and hands the session's events, as values, to a workload or a responder. No locks on
// the hot path: workers share nothing but their start-up configuration.

import PushcastCore
import PushcastReactor
import PushcastWire
import Synchronization

/// Settings shared by every client worker of one run.
public struct ClientConfiguration: Sendable {
    public var endpoint: Endpoint
    /// The IP literal to connect to (the endpoint's host, resolved at start-up).
    public var address: String
    /// The port to connect to when it is not the endpoint's (`--connect-to`); the endpoint's
    /// host and port still go in SNI, certificate checks and :authority.
    public var connectPort: UInt16? = nil
    /// Its ALPN list says which protocols the client offers (`TLSContext.alpnProtocols`; "h2"
    /// alone by default). With "http/1.1" among them, a server that selects it, or selects
    /// nothing, is spoken to in HTTP/1.1 (`http1`).
    public var tls: TLSContext
    public var limits: Limits
    /// HTTP/1.1 connections: `pipelineDepth` requests in flight each (1 by default, so a lane
    /// that may meet HTTP/1.1 wants more connections), the idle close, the parser's bounds.
    public var http1 = HTTP1Limits()
    public var reactor: ReactorConfiguration
    /// A connection that fails this many times in a row, never having worked, ends the run.
    public var connectAttemptsMax: Int = 5
    public var reconnectDelayNanoseconds: UInt64 = 100_000_000
    /// The breaker: this many connections in a row that die before any answer (closed during or
    /// right after the TLS handshake, GOAWAY with last-stream-id 0, a protocol error) end the run.
    public var deadConnectionsMax: Int = 8
    /// The breaker: this many streams in a row failed with no answer in between end the run:
    /// reset, timed out or answered over the response limits at once; refused or stuck behind
    /// a shut flow-control window over at least 2 s (or a quarter of `stallNanoseconds`).
    public var failedStreamsMax: Int = 64
    /// The breaker: requests outstanding (or connections opening) with no answer at all for this
    /// long end the run (`--stall-timeout`).
    public var stallNanoseconds: UInt64 = 30_000_000_000
    /// Whether any worker of this configuration (one provider's lane) has had an answer: a
    /// breaker that trips after that says the server turned bad mid-run. Copies share it.
    public let answers = ServerAnswers()
    /// Connections dropped (not closed gracefully), by reason, over every worker of the lane.
    /// Copies share it.
    public let drops = ConnectionDrops()
    /// A bug planted for a simulation test (nil everywhere else).
    public var mutation: ClientWorkerMutation? = nil

    public init(endpoint: Endpoint, address: String, tls: TLSContext, limits: Limits, reactor: ReactorConfiguration) {
        self.endpoint = endpoint
        self.address = address
        self.tls = tls
        self.limits = limits
        self.reactor = reactor
    }
}

/// Bugs a simulation test plants in `ClientWorker`, to show that the simulator's sweep catches
/// them. Never set outside tests.
public enum ClientWorkerMutation: String, Sendable, CaseIterable {
    /// A stream that fails with its fate unknown on a connection going away (after a GOAWAY) is
    /// taken as unprocessed, safe to send again, though its id is at or below the last-stream-id.
    case retriesStreamsAtOrBelowGoAway
    /// The breaker never trips: a dead server is retried for ever.
    case breakerNeverTrips
}

/// Whether a server has answered anything, shared by the workers of one lane.
public final class ServerAnswers: Sendable {
    private let answered = Atomic<Bool>(false)
    public init() {}
    public var any: Bool { answered.load(ordering: .relaxed) }
    func record() { answered.store(true, ordering: .relaxed) }
}

/// Connections that ended other than gracefully (closed by the server, a protocol or TLS error
/// from it, no answer to PING), by reason: the summary and the metrics show them, so that a run
/// that ends with rows unknown says what the server did. At most `reasonsMax` reasons are told
/// apart; the rest count as "other".
public final class ConnectionDrops: Sendable {
    private let counts = Mutex<[String: Int]>([:])
    public static let reasonsMax = 16

    public init() {}

    public func count(_ reason: String) {
        counts.withLock { counts in
            let key = counts[reason] != nil || counts.count < Self.reasonsMax ? reason : "other"
            counts[key, default: 0] += 1
        }
    }

    public var byReason: [String: Int] { counts.withLock { $0 } }
}

/// Counters a client worker keeps about its own connections.
public struct ClientWorkerStatistics: Sendable {
    public var connectionsOpened = 0
    public var goAwaysReceived = 0
    public var connectionsLost = 0
    public var streamsInFlightMax = 0
    public init() {}
}

/// One thread's share of a client run: a reactor and `connectionCount` connections to one
/// endpoint, kept full from a workload up to each connection's stream allowance.
public final class ClientWorker {
    private final class Connection {
        let index: Int
        var slot: Slot?
        var channel: ClientConnection?
        var draining = false
        var failuresInRow = 0
        var everWorked = false
        var reconnectAtNanoseconds: UInt64? = nil
        /// This connection's life: whether any stream was answered on it, and how it ended.
        var answered = false
        var goAwayLastStreamID: Int32? = nil
        /// Closed gracefully with nothing in flight (an HTTP/1.1 idle close): it opens again
        /// only when there is work (`ClientWorkload.hasWork`), not on a timer.
        var parked = false
        init(index: Int) { self.index = index }
    }

    /// Connections by reactor slot index. Slot indices are small and dense (the reactor's slot
    /// table hands out the lowest free one), so an array replaces a hash lookup per completion.
    private struct ConnectionsBySlot {
        private var table: [Connection?] = []

        subscript(index: UInt32) -> Connection? {
            get { Int(index) < table.count ? table[Int(index)] : nil }
            set {
                let i = Int(index)
                if i >= table.count {
                    guard newValue != nil else { return }
                    table.append(contentsOf: repeatElement(nil, count: i + 1 - table.count))
                }
                table[i] = newValue
            }
        }
    }

    private let configuration: ClientConfiguration
    private let reactor: Reactor
    private let workload: ClientWorkload
    private let clock: TurnClock
    private var connections: [Connection]
    private var bySlot = ConnectionsBySlot()
    private var inFlight = 0
    private var fatal: TransportError?
    /// The last fill left stream slots free for answers not yet recorded.
    private var slotsHeldBack = false
    private var breaker: ConnectionBreaker
    /// This worker has recorded an answer in `configuration.answers` (so it does so once).
    private var answeredOnce = false
    /// Bytes received on connections past their handshake since the last answer, and when the
    /// last came: a server that keeps sending without completing an answer trickles.
    private var bytesSinceAnswer = 0
    private var lastBytesNanoseconds: UInt64 = 0
    public private(set) var statistics = ClientWorkerStatistics()

    public convenience init(configuration: ClientConfiguration, connectionCount: Int, workload: ClientWorkload, clock: TurnClock) throws(TransportError) {
        let reactor: Reactor
        do { reactor = try Reactor(configuration: configuration.reactor) } catch {
            throw TransportError("cannot start the I/O reactor: \(error)")
        }
        self.init(configuration: configuration, connectionCount: connectionCount, workload: workload, clock: clock, reactor: reactor)
    }

    /// A worker over simulated sockets (the simulator's network) instead of the kernel's; the
    /// simulator steps it with `start()` and `turn()` on a virtual clock.
    public convenience init(configuration: ClientConfiguration, connectionCount: Int, workload: ClientWorkload, clock: TurnClock,
                            sockets: any SimulatedSockets) throws(TransportError) {
        let reactor: Reactor
        do { reactor = try Reactor(configuration: configuration.reactor, sockets: sockets) } catch {
            throw TransportError("cannot start the I/O reactor: \(error)")
        }
        self.init(configuration: configuration, connectionCount: connectionCount, workload: workload, clock: clock, reactor: reactor)
    }

    private init(configuration: ClientConfiguration, connectionCount: Int, workload: ClientWorkload, clock: TurnClock, reactor: Reactor) {
        precondition(connectionCount >= 1)
        self.configuration = configuration
        self.workload = workload
        self.clock = clock
        self.reactor = reactor
        connections = (0..<connectionCount).map { Connection(index: $0) }
        breaker = ConnectionBreaker(configuration: configuration, endpoint: configuration.endpoint.description,
                                    nowNanoseconds: clock.nowNanoseconds())
    }

    public var backendKind: IOBackendKind { reactor.backendKind }

    /// A waker another thread uses to interrupt this worker's wait (new work arrived).
    public func makeWaker() throws(TransportError) -> ReactorWaker {
        do { return try reactor.makeWaker() } catch { throw TransportError("cannot make a waker: \(error)") }
    }

    /// Runs until the workload is exhausted and every request has its answer, or a fatal error.
    public func run() throws(TransportError) {
        start()
        while try !turn() {}
    }

    /// Opens the connections: what `run` does before its first turn.
    public func start() {
        for c in connections { open(c) }
    }

    /// One loop turn of `run`: true when the worker is done (the workload exhausted and every
    /// request answered, or abandoned). A fatal error ends the worker.
    public func turn() throws(TransportError) -> Bool {
        if fatal == nil, configuration.mutation != .breakerNeverTrips, let trip = breaker.stalled(nowNanoseconds: clock.nowNanoseconds()) {
            fatal = tripped(trip + stallDetail())
        }
        if let fatal { abandonAll(); throw fatal }
        if workload.shouldAbandon {
            abandonAll()
            workload.turnEnded()
            return true
        }
        fill()
        workload.willWrite()
        if workload.shouldAbandon {
            abandonAll()
            workload.turnEnded()
            return true
        }
        flush()
        if workload.isExhausted && inFlight == 0 {
            closeAll()
            workload.turnEnded()
            return true
        }
        let timeout = pollTimeout()
        var clockRefreshed = false
        do {
            try reactor.poll(timeoutNanoseconds: timeout) { event in
                if !clockRefreshed {
                    clock.refresh()
                    clockRefreshed = true
                }
                self.handle(event)
            }
        } catch {
            throw TransportError("I/O failed: \(error)")
        }
        if !clockRefreshed { clock.refresh() }
        tick()
        workload.turnEnded()
        return false
    }

    /// The process dies here (a simulated crash): every connection is dropped at once, and the
    /// workload hears nothing more.
    public func abandonSilently() {
        for c in connections {
            if let slot = c.slot { reactor.close(slot) }
            c.slot = nil
            c.channel = nil
        }
    }

    // MARK: - Connections

    private func open(_ c: Connection) {
        c.reconnectAtNanoseconds = nil
        c.parked = false
        c.draining = false
        c.answered = false
        c.goAwayLastStreamID = nil
        breaker.activity(nowNanoseconds: clock.nowNanoseconds())
        do {
            let slot = try reactor.connect(host: configuration.address, port: configuration.connectPort ?? configuration.endpoint.port)
            c.slot = slot
            bySlot[slot.index] = c
        } catch {
            connectionFailed(c, reason: "connect to \(configuration.endpoint): \(error)")
        }
    }

    private func connectionFailed(_ c: Connection, reason: String) {
        c.failuresInRow += 1
        if !c.everWorked && c.failuresInRow >= configuration.connectAttemptsMax {
            fatal = TransportError(reason)
            return
        }
        let backoff = configuration.reconnectDelayNanoseconds << UInt64(min(c.failuresInRow - 1, 6))
        c.reconnectAtNanoseconds = clock.nowNanoseconds() + backoff
    }

    /// The socket under `c` is gone (closed by either side, or failed).
    private func detach(_ c: Connection, reason: String?, closedByPeer: Bool = false) {
        if let slot = c.slot { bySlot[slot.index] = nil }
        c.slot = nil
        var handshakeDone = false
        var idle = false
        if let channel = c.channel {
            handshakeDone = channel.isHandshakeComplete
            let inFlightOn = channel.session.streamsOpen
            idle = inFlightOn == 0
            channel.session.connectionLost()
            drainEvents(c, channel)
            c.channel = nil
            if let reason {
                statistics.connectionsLost += 1
                configuration.drops.count(Self.dropReason(reason, closedByPeer: closedByPeer, inFlight: inFlightOn))
            }
        }
        guard !(workload.isExhausted && inFlight == 0) else { return }
        if let reason, !c.everWorked {
            connectionFailed(c, reason: reason)
            return
        }
        let now = clock.nowNanoseconds()
        if c.answered {
            breaker.connectionAnswered()
            if reason == nil && idle {
                c.parked = true
                return
            }
            c.reconnectAtNanoseconds = now + (reason == nil ? 0 : configuration.reconnectDelayNanoseconds)
            return
        }
        // Died before any answer: back off (exponential, jittered), and trip after enough in a row.
        let death: ConnectionBreaker.Death
        if c.goAwayLastStreamID == 0 {
            death = .goAwayZero
        } else if let reason, !closedByPeer {
            death = handshakeDone ? .failedAfterHandshake(reason) : .failedDuringHandshake(reason)
        } else {
            death = handshakeDone ? .closedAfterHandshake : .closedDuringHandshake
        }
        if let trip = breaker.connectionDied(death), configuration.mutation != .breakerNeverTrips {
            fatal = tripped(trip)
            return
        }
        c.reconnectAtNanoseconds = now + breaker.reconnectDelay(nowNanoseconds: now)
    }

    /// A dropped connection's reason, in few words (the error's text cut to a bounded length).
    static func dropReason(_ reason: String, closedByPeer: Bool, inFlight: Int) -> String {
        if closedByPeer { return inFlight > 0 ? "closed by the server with requests in flight" : "closed by the server" }
        if reason.hasPrefix(Self.pingTimeout) { return reason }
        let text = reason.count > 120 ? String(reason.prefix(120)) + "…" : reason
        return "error from the server: " + text
    }

    static let pingTimeout = "no answer to PING"

    /// The breaker's diagnosis as the run's fatal error: a server that answered before (any
    /// worker of the lane) turned bad mid-run, which a later `send --resume` can go on from.
    private func tripped(_ diagnosis: String) -> TransportError {
        guard configuration.answers.any else { return TransportError(diagnosis) }
        return TransportError(diagnosis + "; it had answered before, so it turned bad mid-run: resumable with send --resume",
                              serverTurnedBad: true)
    }

    /// What a stall diagnosis adds: requests whose bodies wait on a window the server never
    /// opened, or a server still sending (in the last second) without completing an answer.
    private func stallDetail() -> String {
        var detail = ""
        let blocked = connections.reduce(0) { $0 + ($1.channel?.session.streamsBlockedByFlowControl ?? 0) }
        if blocked > 0 { detail += "; \(ConnectionBreaker.windowNeverOpened): request bodies that could not be sent: \(blocked)" }
        let quiet = clock.nowNanoseconds() &- lastBytesNanoseconds
        if bytesSinceAnswer > 0 && quiet < 1_000_000_000 {
            detail += "; the server kept sending (\(bytesSinceAnswer) bytes since the last answer, the last \(quiet / 1_000_000) ms ago) "
                + "but completed no answer: it trickles its answers, slower than --request-timeout"
        }
        return detail
    }

    private func closeAll() {
        for c in connections {
            guard let slot = c.slot else { continue }
            if let channel = c.channel {
                channel.shutdown()
                _ = reactor.stage(slot) { channel.produceCiphertext(into: $0) }
            }
            // Give the close_notify one turn to go out; then close.
            try? reactor.poll(timeoutNanoseconds: 0) { _ in }
            reactor.close(slot)
            bySlot[slot.index] = nil
            c.slot = nil
            c.channel = nil
        }
    }

    private func abandonAll() {
        for c in connections {
            if let slot = c.slot { reactor.close(slot) }
            c.slot = nil
            if let channel = c.channel {
                channel.session.connectionLost()
                drainEvents(c, channel)
            }
            c.channel = nil
        }
    }

    // MARK: - The loop

    /// Opens streams for the requests the workload has ready. The slots it holds (answers not yet
    /// recorded) count as open streams: requests on the wire plus answers in the process stay
    /// within the connections' stream limits.
    private func fill() {
        var held = workload.streamSlotsHeld
        slotsHeldBack = false
        var refused: (tag: UInt64, reason: String)? = nil
        for c in connections {
            if c.parked {
                if workload.hasWork { open(c) }
                continue
            }
            guard let channel = c.channel, channel.isHandshakeComplete, !c.draining else { continue }
            let session = channel.session
            let skipped = min(max(0, session.streamsAllowed - session.streamsOpen), held)
            held -= skipped
            if skipped > 0 { slotsHeldBack = true }
            while session.streamsOpen + skipped < session.streamsAllowed, session.canOpenStream, workload.submitNext({ request, tag in
                guard session.submit(request, tag: tag) == nil else { return }
                // canOpenStream said yes: only a request this version cannot carry is refused
                // (HTTP/1.1: bytes that would inject lines); anything else is a broken invariant.
                guard let problem = session.problem(in: request) else {
                    preconditionFailure("the client session refused a stream it said it could open")
                }
                refused = (tag, problem)
            }) {
                inFlight += 1
                breaker.activity(nowNanoseconds: clock.nowNanoseconds())
                if let (tag, reason) = refused {
                    // Never written: it fails as unsendable (not retried), not as a lost request.
                    refused = nil
                    inFlight -= 1
                    workload.failed(tag: tag, failure: .unsendable(reason: reason))
                }
            }
            let open = session.streamsOpen
            if open > statistics.streamsInFlightMax { statistics.streamsInFlightMax = open }
        }
    }

    private func flush() {
        for c in connections {
            guard let slot = c.slot, let channel = c.channel else { continue }
            while channel.wantsWrite && reactor.stageCapacity(slot) > 0 {
                let n = reactor.stage(slot) { channel.produceCiphertext(into: $0) }
                if n == 0 { break }
            }
        }
    }

    private func pollTimeout() -> UInt64? {
        // A request that is ready only matters while a connection can take it: waking for it with
        // every connection full, or none open, would spin until an answer or a reconnect.
        let canSend = connections.contains { c in
            guard let channel = c.channel, channel.isHandshakeComplete, !c.draining else { return false }
            return channel.session.canOpenStream
        }
        var earliest: UInt64? = canSend ? workload.nextReadyNanoseconds : nil
        // Slots held for unrecorded answers free up without an event here: look again soon.
        if slotsHeldBack { earliest = min(earliest ?? .max, clock.nowNanoseconds() + 1_000_000) }
        if let t = breaker.stallDeadline { earliest = min(earliest ?? t, t) }
        for c in connections {
            if let t = c.reconnectAtNanoseconds { earliest = min(earliest ?? t, t) }
            if let t = c.channel?.session.nextDeadlineNanoseconds { earliest = min(earliest ?? t, t) }
        }
        guard let earliest else { return nil }
        let now = clock.nowNanoseconds()
        return earliest > now ? earliest - now : 0
    }

    private func tick() {
        let now = clock.nowNanoseconds()
        // Nothing in flight and every connection up (its SETTINGS came): nothing waits for the
        // server (a lane with nothing to send yet is not a stalled one).
        if inFlight == 0 && connections.allSatisfy({ c in
            guard let channel = c.channel else { return false }
            return channel.isHandshakeComplete && channel.session.peerSettingsReceived && !channel.session.isGoingAway
        }) { breaker.idle() }
        for c in connections {
            if let at = c.reconnectAtNanoseconds, at <= now, c.slot == nil {
                if workload.isExhausted && inFlight == 0 { c.reconnectAtNanoseconds = nil } else { open(c) }
            }
            if let channel = c.channel {
                channel.session.tick()
                drainEvents(c, channel)
            }
        }
    }

    private func handle(_ event: ReactorEvent) {
        switch event {
        case .connected(let slot):
            guard let c = bySlot[slot.index], c.slot == slot else { return }
            do {
                c.channel = try ClientConnection(
                    context: configuration.tls, serverName: configuration.endpoint.host,
                    limits: configuration.limits, http1: configuration.http1, clock: clock)
                statistics.connectionsOpened += 1
            } catch {
                fatal = TransportError("cannot set up a connection: \(error)")
            }
        case .connectFailed(let slot, let errno):
            guard let c = bySlot[slot.index], c.slot == slot else { return }
            bySlot[slot.index] = nil
            c.slot = nil
            connectionFailed(c, reason: "cannot connect to \(configuration.endpoint): \(describeErrno(errno))")
        case .received(let slot, let bytes):
            guard let c = bySlot[slot.index], c.slot == slot, let channel = c.channel else { return }
            let wasComplete = channel.isHandshakeComplete
            if wasComplete {
                bytesSinceAnswer &+= bytes.count
                lastBytesNanoseconds = clock.nowNanoseconds()
            }
            do {
                try channel.receivedCiphertext(bytes)
            } catch {
                if channel.peerClosedCleanly {
                    closedCleanly(c, channel)
                    return
                }
                if case .tls(let tlsError) = error, !wasComplete {
                    // A handshake that fails on verification or ALPN will fail the same way again.
                    fatal = TransportError("TLS handshake with \(configuration.endpoint) failed: \(tlsError.description)")
                }
                reactor.close(slot)
                detach(c, reason: error.description)
                return
            }
            if channel.isHandshakeComplete && !c.everWorked {
                c.everWorked = true
                c.failuresInRow = 0
            }
            drainEvents(c, channel)
        case .writable:
            break  // flush() runs every turn
        case .closed(let slot, let errno):
            guard let c = bySlot[slot.index], c.slot == slot else { return }
            detach(c, reason: errno == 0 && c.draining ? nil : "connection closed: \(describeErrno(errno))", closedByPeer: true)
        case .accepted, .timer:
            break
        }
    }

    /// The server's close_notify: its side ended cleanly. An HTTP/1.1 body that runs to the close
    /// is complete; whatever else is in flight fails as on a lost connection. With nothing in
    /// flight it is a graceful close (an idle keep-alive connection the server let go).
    private func closedCleanly(_ c: Connection, _ channel: ClientConnection) {
        guard let slot = c.slot else { return }
        let open = channel.session.streamsOpen
        channel.session.receiveEnd()
        reactor.close(slot)
        c.draining = true
        // detach hands out what receiveEnd recorded (the answer, the failures, .closed).
        detach(c, reason: open > 0 ? "the server closed the TLS session (close_notify) with requests in flight" : nil,
               closedByPeer: true)
    }

    private func drainEvents(_ c: Connection, _ channel: ClientConnection) {
        var closeNow = false
        var dropped: String? = nil
        channel.session.takeEvents(upcoming: { workload.willReceive(tag: $0, near: $1) }) { event in
            switch event {
            case .response(let tag, let response):
                inFlight -= 1
                c.answered = true
                breaker.answered()
                bytesSinceAnswer = 0
                if !answeredOnce {
                    answeredOnce = true
                    configuration.answers.record()
                }
                workload.received(tag: tag, response: response)
            case .failed(let tag, var failure):
                inFlight -= 1
                if configuration.mutation == .retriesStreamsAtOrBelowGoAway && c.draining && !failure.isSafeToRetry { failure = .goAwayUnprocessed }
                if let trip = breaker.streamFailed(failure, nowNanoseconds: clock.nowNanoseconds()), fatal == nil,
                   configuration.mutation != .breakerNeverTrips {
                    fatal = tripped(trip)
                }
                workload.failed(tag: tag, failure: failure)
            case .goAway(let lastStreamID, _, _):
                statistics.goAwaysReceived += 1
                if !c.answered { c.goAwayLastStreamID = lastStreamID }
                c.draining = true
            case .settingsChanged:
                break
            case .pingTimedOut:
                closeNow = true
                dropped = Self.pingTimeout
            case .closed:
                closeNow = true
            }
        }
        if c.draining && channel.session.streamsOpen == 0 { closeNow = true }
        if closeNow, let slot = c.slot, c.channel === channel {
            // Send what is queued (GOAWAY, close_notify) and go; the next connection starts fresh.
            channel.shutdown()
            _ = reactor.stage(slot) { channel.produceCiphertext(into: $0) }
            reactor.close(slot)
            c.draining = true
            detach(c, reason: dropped)
        }
    }
}
