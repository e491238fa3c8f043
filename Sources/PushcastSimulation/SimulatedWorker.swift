import PushcastCore
import PushcastEngine
import PushcastWire

/// One worker of a simulated lane: what `ClientWorker` is over real sockets, stepped by the
/// simulator on its thread. It keeps its connections full from the workload, and ends each
/// request in exactly one `received` or `failed` with the failure semantics of RFC 9113 that
/// docs/ARCHITECTURE.md tabulates (GOAWAY above the last stream and REFUSED_STREAM are safe to
/// resend; a reset, a lost connection or a timeout leave the fate unknown).
final class SimulatedWorker {
    private struct Stream {
        let tag: UInt64
        let id: Int
        let token: String
        var dueAt: UInt64
        var fate: StreamFate
    }

    private final class Connection {
        var up = false
        var draining = false
        var reconnectAt: UInt64 = 0
        var failures = 0
        var nextStreamID = 1
        var streams: [Stream] = []
    }

    let workload: CampaignWorkload
    private let server: SimulatedServer
    private let clock: TurnClock
    private let streamsMax: Int
    private let requestTimeout: UInt64
    private var connections: [Connection]
    private var epochSeen: Int
    private(set) var finished = false

    init(workload: CampaignWorkload, server: SimulatedServer, clock: TurnClock, connections: Int, streamsMax: Int,
         requestTimeout: UInt64) {
        self.workload = workload
        self.server = server
        self.clock = clock
        self.streamsMax = streamsMax
        self.requestTimeout = requestTimeout
        self.connections = (0..<connections).map { _ in Connection() }
        epochSeen = server.epoch
    }

    var inFlight: Int { connections.reduce(0) { $0 + $1.streams.count } }

    /// The earliest time something happens here: an answer falls due, a connection may reopen,
    /// or the workload has a request ready (a retry's back-off, a rate limit).
    var nextEventNanoseconds: UInt64? {
        guard !finished else { return nil }
        // A request that is ready only matters when a connection can take it (a real worker that
        // woke for it with every connection full would spin).
        let canSend = connections.contains { $0.up && !$0.draining && $0.streams.count < streamsMax }
        var next = canSend ? workload.nextReadyNanoseconds : nil
        for c in connections {
            for s in c.streams { next = min(next ?? .max, s.dueAt) }
            if !c.up { next = min(next ?? .max, c.reconnectAt) }
        }
        return next
    }

    /// One loop turn at the clock's current time, as `ClientWorker.run` does one.
    func step() {
        guard !finished else { return }
        let now = clock.refresh()
        if workload.shouldAbandon {
            for c in connections { lose(c, now: now) }
            workload.turnEnded()
            finished = true
            return
        }
        if server.epoch != epochSeen {
            epochSeen = server.epoch
            for c in connections where c.up { lose(c, now: now) }
        }
        for c in connections { settle(c, now: now) }
        for c in connections { fill(c, now: now) }
        workload.willWrite()
        if workload.isExhausted && inFlight == 0 {
            finished = true
        }
        workload.turnEnded()
    }

    /// The process died: every request it had sent is lost with it (the server may have
    /// processed any of them).
    func crash() {
        for c in connections {
            for s in c.streams { server.maybeProcess(token: s.token) }
            c.streams.removeAll()
        }
        finished = true
    }

    // MARK: - Connections

    private func settle(_ c: Connection, now: UInt64) {
        if !c.up {
            guard now >= c.reconnectAt, !(workload.isExhausted && inFlight == 0) else { return }
            if server.isUp(at: now) {
                c.up = true
                c.draining = false
                c.nextStreamID = 1
                c.failures = 0
            } else {
                c.failures += 1
                c.reconnectAt = now + (100_000_000 << UInt64(min(c.failures, 4)))
            }
            return
        }
        let due = c.streams.filter { $0.dueAt <= now }.sorted { ($0.dueAt, $0.id) < ($1.dueAt, $1.id) }.map(\.id)
        for id in due {
            // An earlier answer's GOAWAY or drop may have ended this stream already.
            guard c.up, let index = c.streams.firstIndex(where: { $0.id == id }) else { continue }
            end(c.streams.remove(at: index), on: c, now: now)
        }
        if c.draining && c.streams.isEmpty {
            c.up = false
            c.reconnectAt = now
        }
    }

    private func fill(_ c: Connection, now: UInt64) {
        guard c.up && !c.draining && server.isUp(at: now) else { return }
        while c.streams.count < streamsMax {
            let submitted = workload.submitNext { request, tag in
                let token = server.provider.token(of: request)
                let (fate, latency) = server.arrive(token: token)
                let due = fate.isSilent ? now + requestTimeout : now + latency
                c.streams.append(Stream(tag: tag, id: c.nextStreamID, token: token, dueAt: due, fate: fate))
                c.nextStreamID += 2
            }
            if !submitted { return }
        }
    }

    /// A stream's answer falls due: the server carries out its fate.
    private func end(_ s: Stream, on c: Connection, now: UInt64) {
        switch s.fate {
        case .answer:
            workload.received(tag: s.tag, response: server.process(token: s.token))
        case .status(let status):
            workload.received(tag: s.tag, response: server.provider.transient(status: status))
        case .refused:
            workload.failed(tag: s.tag, failure: .refusedStream)
        case .reset:
            server.maybeProcess(token: s.token)
            workload.failed(tag: s.tag, failure: .reset(errorCode: 2))
        case .silent:
            server.maybeProcess(token: s.token)
            workload.failed(tag: s.tag, failure: .deadlineExceeded)
        case .answerThenGoAway:
            workload.received(tag: s.tag, response: server.process(token: s.token))
            goAway(c, lastStreamID: s.id)
        case .answerThenDrop:
            workload.received(tag: s.tag, response: server.process(token: s.token))
            lose(c, now: now)
        case .statusThenRefused:
            // HTTP2ClientSession reports a stream that got its :status as cut, whatever follows.
            _ = server.process(token: s.token)
            workload.failed(tag: s.tag, failure: .cutAfterResponse(status: 200))
        case .statusThenGoAwayZero:
            _ = server.process(token: s.token)
            workload.failed(tag: s.tag, failure: .cutAfterResponse(status: 200))
            goAway(c, lastStreamID: 0)
        case .answerThenOutage:
            workload.received(tag: s.tag, response: server.process(token: s.token))
            server.startOutage(at: now)
            epochSeen = server.epoch
            for other in connections where other.up { lose(other, now: now) }
        }
    }

    /// GOAWAY: streams above the last one were never processed; the rest finish, then the
    /// connection closes and a new one opens.
    private func goAway(_ c: Connection, lastStreamID: Int) {
        c.draining = true
        let unprocessed = c.streams.filter { $0.id > lastStreamID }
        c.streams.removeAll { $0.id > lastStreamID }
        for s in unprocessed { workload.failed(tag: s.tag, failure: .goAwayUnprocessed) }
    }

    /// The connection died: each request on it may or may not have been processed.
    private func lose(_ c: Connection, now: UInt64) {
        let lost = c.streams
        c.streams.removeAll()
        c.up = false
        c.reconnectAt = now + 100_000_000
        for s in lost {
            server.maybeProcess(token: s.token)
            workload.failed(tag: s.tag, failure: .connectionLost)
        }
    }
}

extension StreamFate {
    var isSilent: Bool {
        if case .silent = self { return true }
        return false
    }
}
