import PushcastCore
import PushcastTransport
import PushcastWire
import Synchronization

/// The server's end of one simulated connection: the real server side of TLS and HTTP/2
/// (`ServerConnection`: `HTTP2ServerSession` under a TLS server session), with the seed's faults
/// deciding how each stream ends (`SimulatedServer.arrive`). What the server was sent it
/// processes, even when the client has gone.
final class SimulatedServerConnection {
    private let link: SimulatedLink
    private let server: SimulatedServer
    private let network: SimulatedNetwork
    private let channel: ServerConnection
    private let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 16 * 1024, alignment: 16)
    /// A request the server holds, and the token it is addressed to.
    private typealias Held = (request: HTTP2ServerRequest, token: String)
    /// Streams whose answer is not yet due, by id.
    private var pending: [Int32: Held] = [:]
    /// Streams the server never answers, by id: whether it processed one is a coin toss made when
    /// the client gives up on it (its deadline, or the connection's end). A GOAWAY below one says
    /// it was not processed, and then it was not.
    private var silent: [Int32: Held] = [:]
    /// The client went away (its answers go nowhere) or the connection broke.
    private var peerGone = false

    private let closesAfterHandshake: Bool

    init(link: SimulatedLink, server: SimulatedServer, network: SimulatedNetwork, channel: ServerConnection, closesAfterHandshake: Bool) {
        self.closesAfterHandshake = closesAfterHandshake
        self.link = link
        self.server = server
        self.network = network
        self.channel = channel
    }

    deinit { buffer.deallocate() }

    func receive(_ bytes: [UInt8]) {
        guard !peerGone else { return }
        let failed = bytes.withUnsafeBytes { raw -> Bool in
            do { try channel.receivedCiphertext(raw) } catch { return true }
            return false
        }
        if failed {
            flush()
            peerGone = true
            link.serverClosed()
            return
        }
        if closesAfterHandshake && channel.isHandshakeComplete {
            flush()
            peerGone = true
            link.serverClosed()
            return
        }
        var closed = false
        channel.session.takeEvents { event in
            switch event {
            case .request(let request): arrived(request)
            case .streamCancelled(let id): if let held = silent.removeValue(forKey: id) { server.maybeProcess(held.request, token: held.token) }
            case .closed: closed = true
            }
        }
        flush()
        if closed {
            peerGone = true
            link.serverClosed()
        }
    }

    private func arrived(_ request: HTTP2ServerRequest) {
        let id = request.streamID
        let token = server.responder.token(of: request)
        let (fate, latency) = server.arrive(token: token)
        if case .silent = fate {
            silent[id] = (request, token)
            return
        }
        pending[id] = (request, token)
        network.schedule(at: network.now + latency) { [self] in act(id, fate) }
    }

    /// A stream's answer falls due: the server carries out its fate.
    private func act(_ id: Int32, _ fate: StreamFate) {
        guard let (request, token) = pending.removeValue(forKey: id) else { return }
        let session = channel.session
        func answer(_ response: HTTP2Response) {
            session.respond(streamID: id, status: response.status, headers: response.headers, body: response.body)
        }
        switch fate {
        case .answer: answer(server.process(request, token: token))
        case .status(let status): answer(server.transient(status: status, to: request, token: token))
        case .refused: session.refuse(streamID: id)
        case .reset:
            server.maybeProcess(request, token: token)
            session.reset(streamID: id, errorCode: HTTP2ServerSession.internalErrorCode)
        case .silent: break
        case .answerThenGoAway:
            answer(server.process(request, token: token))
            session.goAway(lastStreamID: id, errorCode: HTTP2ServerSession.noErrorCode, debugData: "simulated")
            // Streams above the last one were not processed, and never will be.
            for later in pending.keys.sorted() where later > id { pending[later] = nil }
            for later in silent.keys.sorted() where later > id { silent[later] = nil }
        case .answerThenDrop, .answerThenOutage:
            answer(server.process(request, token: token))
            flush()
            if case .answerThenOutage = fate {
                server.startOutage(at: network.now)
                network.resetEveryLink(to: server)
            } else {
                link.reset()
            }
            return
        case .statusThenRefused:
            _ = server.process(request, token: token)
            session.sendStatusOnly(streamID: id, status: 200, thenReset: HTTP2ServerSession.refusedStreamErrorCode)
        case .statusThenGoAwayZero:
            _ = server.process(request, token: token)
            session.sendStatusOnly(streamID: id, status: 200, thenReset: nil)
            session.goAwayZeroAfterStatus(errorCode: HTTP2ServerSession.noErrorCode, debugData: "simulated")
            pending.removeAll()
            silent.removeAll()
        case .answerHugeBody:
            let response = server.process(request, token: token)
            session.respond(streamID: id, status: response.status, headers: response.headers, repeatingBodyForever: ServerMisbehavior.hugeBodyChunk)
        case .answerHugeHeaders:
            let response = server.process(request, token: token)
            session.respond(streamID: id, status: response.status, headers: response.headers + ServerMisbehavior.hugeHeaderList, body: response.body)
        case .pingsThenAnswer:
            session.floodPings(ServerMisbehavior.pingFloodCount)
            answer(server.process(request, token: token))
        }
        flush()
    }

    /// The client read what held the server back: it writes on.
    func writable() { flush() }

    private func flush() {
        guard !peerGone else { return }
        while channel.wantsWrite && link.serverMayWrite {
            let n = channel.produceCiphertext(into: buffer)
            if n == 0 { break }
            link.serverSend(Array(buffer[0..<n]))
        }
    }

    /// The connection was reset under the server: streams it had not finished may or may not
    /// have been processed.
    func lost() {
        peerGone = true
        for id in pending.keys.sorted() { server.maybeProcess(pending[id]!.request, token: pending[id]!.token) }
        pending.removeAll()
        settleSilent()
    }

    /// The client closed the connection: the server still processes what it was sent.
    func peerClosed() {
        peerGone = true
        settleSilent()
    }

    private func settleSilent() {
        for id in silent.keys.sorted() { server.maybeProcess(silent[id]!.request, token: silent[id]!.token) }
        silent.removeAll()
    }
}

/// The simulator's certificates: one authority, a server certificate per host name, and the
/// client context every simulated lane uses, which trusts that authority only.
enum SimulatedTLS {
    private static let authority = Result { () throws(TLSError) in try CertificateFactory.makeAuthority(commonName: "pushcast simulator CA") }
    private static let contexts = Mutex<[String: TLSContext]>([:])

    /// A reader of the in-memory PEM files the contexts are built from.
    private static func files(_ texts: [String: String]) -> SecretFileReader {
        { path, _ throws(SecretFileError) in
            guard let text = texts[path] else { throw .cannotOpen(reason: "no such simulated file") }
            return Array(text.utf8).withUnsafeBytes { SecretBytes(copying: $0) }
        }
    }

    static func client() throws -> TLSContext {
        try context("(client)") { () throws(TLSError) in
            var configuration = TLSConfiguration()
            configuration.trustsSystemStore = false
            configuration.additionalCAFile = "ca.pem"
            return try TLSContext(role: .client, configuration: configuration, files: files(["ca.pem": try authority.get().certificatePEM]))
        }
    }

    static func server(host: String) throws -> TLSContext {
        try context(host) { () throws(TLSError) in
            let issued = try authority.get().issueServer(hosts: [host])
            var configuration = TLSConfiguration()
            configuration.certificateChainFile = "cert.pem"
            configuration.privateKeyFile = "key.pem"
            return try TLSContext(role: .server, configuration: configuration,
                                  files: files(["cert.pem": issued.certificatePEM, "key.pem": issued.privateKeyPEM]))
        }
    }

    private static func context(_ key: String, _ make: () throws(TLSError) -> TLSContext) throws(TLSError) -> TLSContext {
        if let made = contexts.withLock({ $0[key] }) { return made }
        let made = try make()
        contexts.withLock { $0[key] = $0[key] ?? made }
        return contexts.withLock { $0[key]! }
    }
}
