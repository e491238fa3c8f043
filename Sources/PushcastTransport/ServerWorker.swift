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
    let session: HTTP2ServerSession
    public private(set) var goingAway = false

    init(id: UInt64, session: HTTP2ServerSession) {
        self.id = id
        self.session = session
    }

    public var streamsOpen: Int { session.streamsOpen }

    /// Sends GOAWAY with the highest stream id seen so far: streams up to it are still answered.
    public func goAway(errorCode: UInt32 = 0, debugData: String = "") {
        guard !goingAway else { return }
        goingAway = true
        session.goAway(lastStreamID: nil, errorCode: errorCode, debugData: debugData)
    }

    public func setMaxConcurrentStreams(_ n: Int) { session.setMaxConcurrentStreams(n) }
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
}

public struct ServerConfiguration: Sendable {
    public var host: String
    public var port: UInt16
    public var tls: TLSContext
    public var limits: Limits
    public var reactor: ReactorConfiguration
    public init(host: String, port: UInt16, tls: TLSContext, limits: Limits, reactor: ReactorConfiguration) {
        self.host = host
        self.port = port
        self.tls = tls
        self.limits = limits
        self.reactor = reactor
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

/// One thread's share of a server: a reactor listening on a shared port (SO_REUSEPORT spreads
/// connections over the workers), the connections it accepted, and a responder.
public final class ServerWorker {
    private final class Connection {
        let slot: Slot
        let channel: ServerConnection
        let control: ServerConnectionControl
        var dirty = false
        /// Close once the staged bytes (a GOAWAY, an answer) are on the wire.
        var closing = false
        init(slot: Slot, channel: ServerConnection, control: ServerConnectionControl) {
            self.slot = slot
            self.channel = channel
            self.control = control
        }
    }

    private struct Delayed {
        enum Headers {
            case list([HTTP2Header])
            case inline(HTTP2InlineHeader?)
        }
        var dueNanoseconds: UInt64
        var sequence: UInt64
        var slot: Slot
        var streamID: Int32
        var status: Int
        var headers: Headers
        var body: [UInt8]
    }

    private let configuration: ServerConfiguration
    private let reactor: Reactor
    private let responder: ServerResponder
    private let stopSignal: ServerStopSignal
    /// Indexed by the reactor slot's index; a slot's generation tells a reused slot apart.
    private var connections: [Connection?] = []
    private var dirty: [Connection] = []
    private var flushing: [Connection] = []
    private var delayed: MinHeap<Delayed>
    private var sequence: UInt64 = 0
    private var nextConnectionID: UInt64
    public let port: UInt16

    /// Binds the listening socket now, so that port 0 resolves to a real port before `run`.
    public init(configuration: ServerConfiguration, responder: ServerResponder, stop: ServerStopSignal, workerIndex: Int) throws(TransportError) {
        self.configuration = configuration
        self.responder = responder
        self.stopSignal = stop
        self.nextConnectionID = UInt64(workerIndex) << 48
        delayed = MinHeap(capacity: 1024) { a, b in
            a.dueNanoseconds != b.dueNanoseconds ? a.dueNanoseconds < b.dueNanoseconds : a.sequence < b.sequence
        }
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
            if let head = delayed.first {
                let now = Reactor.nowNanoseconds()
                timeout = head.dueNanoseconds > now ? head.dueNanoseconds - now : 0
            }
            do {
                try reactor.poll(timeoutNanoseconds: timeout) { event in self.handle(event) }
            } catch {
                throw TransportError("server I/O failed: \(error)")
            }
            releaseDue()
            flushDirty()
            responder.turnEnded()
        }
        for case let c? in connections { reactor.close(c.slot) }
        connections.removeAll()
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
            do {
                let channel = try ServerConnection(context: configuration.tls, limits: configuration.limits)
                nextConnectionID += 1
                let c = Connection(slot: slot, channel: channel,
                                   control: ServerConnectionControl(id: nextConnectionID, session: channel.session))
                register(c)
                responder.connectionOpened(c.control)
                markDirty(c)
            } catch {
                reactor.close(slot)
            }
        case .received(let slot, let bytes):
            guard let c = connection(slot) else { return }
            do {
                try c.channel.receivedCiphertext(bytes)
            } catch {
                // A peer that breaks TLS or HTTP/2 loses its connection (after its alert or GOAWAY
                // goes out); the server carries on.
                closeAfterFlush(c)
                return
            }
            drainEvents(c)
            markDirty(c)
        case .closed(let slot, _):
            guard let c = connection(slot) else { return }
            drop(c, alreadyClosed: true)
        case .writable(let slot):
            guard let c = connection(slot) else { return }
            if c.closing && !c.channel.wantsWrite { drop(c) } else { markDirty(c) }
        case .connected, .connectFailed, .timer, .fileWritten:
            break
        }
    }

    private func drainEvents(_ c: Connection) {
        let session = c.channel.session
        var closed = false
        session.takeEvents { event in
            switch event {
            case .request(let request):
                c.control.requestCount += 1
                let open = session.streamsOpen
                if open > c.control.streamsOpenMax { c.control.streamsOpenMax = open }
                switch responder.handle(request, on: c.control) {
                case .respond(let status, let headers, let body, let delay):
                    answer(c, request.streamID, status: status, headers: .list(headers), body: body, after: delay)
                case .respondInline(let status, let header, let body, let delay):
                    answer(c, request.streamID, status: status, headers: .inline(header), body: body, after: delay)
                case .refuse:
                    session.refuse(streamID: request.streamID)
                }
            case .streamCancelled:
                break
            case .closed:
                closed = true
            }
        }
        if closed { closeAfterFlush(c) }
    }

    /// Answers now, or queues the answer for `delay` nanoseconds (the mock's latency).
    private func answer(_ c: Connection, _ streamID: Int32, status: Int, headers: Delayed.Headers, body: [UInt8], after delay: UInt64) {
        guard delay > 0 else {
            send(c.channel.session, streamID, status: status, headers: headers, body: body)
            return
        }
        sequence += 1
        delayed.push(Delayed(dueNanoseconds: Reactor.nowNanoseconds() + delay, sequence: sequence, slot: c.slot,
                             streamID: streamID, status: status, headers: headers, body: body))
    }

    private func send(_ session: HTTP2ServerSession, _ streamID: Int32, status: Int, headers: Delayed.Headers, body: [UInt8]) {
        switch headers {
        case .list(let list): session.respond(streamID: streamID, status: status, headers: list, body: body)
        case .inline(let header): session.respond(streamID: streamID, status: status, header: header, body: body)
        }
    }

    private func releaseDue() {
        guard !delayed.isEmpty else { return }
        let now = Reactor.nowNanoseconds()
        while let head = delayed.first, head.dueNanoseconds <= now {
            delayed.pop()
            guard let c = connection(head.slot) else { continue }
            send(c.channel.session, head.streamID, status: head.status, headers: head.headers, body: head.body)
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
            if c.channel.session.isClosed { closeAfterFlush(c) }
        }
        flushing.removeAll(keepingCapacity: true)
    }

    private func closeAfterFlush(_ c: Connection) {
        c.closing = true
        flush(c)
        if !c.channel.wantsWrite && reactor.stagedBytes(c.slot) == 0 { drop(c) }
    }

    private func flush(_ c: Connection) {
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
