import PushcastCore

/// Linux's errno values the simulated kernel reports.
enum SimulatedErrno {
    static let connectionReset: Int32 = 104
    static let connectionRefused: Int32 = 111
}

/// The sockets of one simulated client worker: its reactor's kernel. Events wait here until the
/// worker's next turn takes them.
final class SimulatedHost: SimulatedSockets {
    let network: SimulatedNetwork
    let server: SimulatedServer
    private var ready: [SimulatedSocketEvent] = []
    private var links: [Int: SimulatedLink] = [:]
    /// When the worker's reactor wants its next turn (nil: only when something happens).
    private(set) var wakeAt: UInt64?

    init(network: SimulatedNetwork, server: SimulatedServer) {
        self.network = network
        self.server = server
    }

    func connect() -> Int {
        let link = network.open(from: self, to: server)
        links[link.id] = link
        link.connect()
        return link.id
    }

    func send(_ connection: Int, _ bytes: UnsafeRawBufferPointer) -> Int {
        links[connection]?.clientSend(bytes) ?? bytes.count
    }

    func close(_ connection: Int) {
        links.removeValue(forKey: connection)?.clientClosed()
    }

    var hasDueEvents: Bool { !ready.isEmpty }

    func turn(waitNanoseconds: UInt64?, _ body: (SimulatedSocketEvent) -> Void) {
        wakeAt = waitNanoseconds.map { network.now + $0 }
        guard !ready.isEmpty else { return }
        let events = ready
        ready.removeAll()
        for event in events {
            body(event)
            // The worker has read the bytes: the window toward it opens again.
            if case .received(let id, let bytes) = event { links[id]?.clientRead(bytes.count) }
        }
    }

    func deliver(_ event: SimulatedSocketEvent) { ready.append(event) }
}

/// One TCP connection between a simulated client and a simulated server: segments in order each
/// way after the connection's latency, a window the server reads slowly through, and the ways a
/// connection ends (closed by either side, reset, half-closed).
final class SimulatedLink {
    let id: Int
    let latency: UInt64
    let server: SimulatedServer
    private unowned let network: SimulatedNetwork
    private weak var host: SimulatedHost?
    private var serverSide: SimulatedServerConnection?
    /// The client's socket still exists.
    private var clientOpen = true
    /// Bytes may still reach the client (no reset, no half-close, no close by the server).
    private var clientReads = true
    private var lastToServer: UInt64 = 0
    private var lastToClient: UInt64 = 0
    private var inFlightToServer = 0
    /// Bytes sent by the server that the client has not read yet (its socket buffer).
    private var unreadByClient = 0

    init(id: Int, network: SimulatedNetwork, host: SimulatedHost, server: SimulatedServer, latency: UInt64) {
        self.id = id
        self.network = network
        self.host = host
        self.server = server
        self.latency = latency
    }

    func connect() {
        let at = network.arrival(on: self, after: 0)
        lastToServer = at
        network.schedule(at: at) { [self] in
            guard clientOpen else { return }
            if server.isUp(at: network.now) {
                serverSide = server.accept(self)
                toClient(.connected(id))
            } else {
                clientReads = false
                toClient(.connectFailed(id, errno: SimulatedErrno.connectionRefused))
            }
        }
    }

    /// The client writes: the network takes what its window allows.
    func clientSend(_ bytes: UnsafeRawBufferPointer) -> Int {
        guard serverSide != nil else { return bytes.count }
        let taken = min(bytes.count, network.model.windowBytes - inFlightToServer)
        guard taken > 0 else { return 0 }
        let segment = Array(bytes.prefix(taken))
        inFlightToServer += taken
        let at = network.arrival(on: self, after: lastToServer)
        lastToServer = at
        network.schedule(at: at) { [self] in
            inFlightToServer -= taken
            if network.chance(network.model.reset) {
                reset()
                return
            }
            serverSide?.receive(segment)
        }
        return taken
    }

    /// Whether the server may write more: what the client has not read stays under the window,
    /// as a socket's buffers hold it (a server writing an endless body is held back here).
    var serverMayWrite: Bool { unreadByClient < network.model.windowBytes }

    /// The server writes.
    func serverSend(_ bytes: [UInt8]) {
        guard clientReads else { return }
        if network.chance(network.model.halfClose) {
            clientReads = false
            toClient(.closed(id, errno: 0))
            return
        }
        unreadByClient += bytes.count
        toClient(.received(id, bytes))
    }

    /// The client's worker read `count` bytes; a server held back by the window writes again once
    /// the client's window update reaches it.
    func clientRead(_ count: Int) {
        let wasFull = !serverMayWrite
        unreadByClient = max(0, unreadByClient - count)
        guard wasFull, serverMayWrite else { return }
        network.schedule(at: network.now + latency) { [self] in serverSide?.writable() }
    }

    /// The run ended: the server's end lets go of this link.
    func detach() { serverSide = nil }

    /// The server closed the connection in order (after its GOAWAY, or on a protocol error).
    func serverClosed() {
        serverSide = nil
        guard clientReads else { return }
        clientReads = false
        toClient(.closed(id, errno: 0))
    }

    /// Reset under both sides (a middlebox, a crashed server): the client reads ECONNRESET.
    func reset() {
        serverSide?.lost()
        serverSide = nil
        guard clientReads else { return }
        clientReads = false
        toClient(.closed(id, errno: SimulatedErrno.connectionReset))
    }

    /// The client closed its socket: the server sees the close once what was sent before it
    /// arrived.
    func clientClosed() {
        guard clientOpen else { return }
        clientOpen = false
        let at = network.arrival(on: self, after: lastToServer)
        network.schedule(at: at) { [self] in
            serverSide?.peerClosed()
            serverSide = nil
            network.forget(self)
        }
    }

    private func toClient(_ event: SimulatedSocketEvent) {
        let at = network.arrival(on: self, after: lastToClient)
        lastToClient = at
        network.schedule(at: at) { [self] in
            guard clientOpen else { return }
            host?.deliver(event)
        }
    }
}
