import Foundation
import PushcastCore
import PushcastProviderKit
import PushcastReactor
import PushcastSystem
import PushcastTransport
import PushcastWire

/// Where the mock's certificate comes from.
public enum MockCertificate: Sendable {
    /// Use these PEM files.
    case files(certificateChain: String, privateKey: String)
    /// Make a throw-away CA and a certificate for `MockServerConfiguration.certificateHosts` in
    /// `directory`.
    case generated(directory: String)
}

public struct MockServerConfiguration: Sendable {
    public var host = "127.0.0.1"
    public var port: UInt16 = 0
    public var workers = 1
    public var certificate: MockCertificate
    /// The names and addresses a generated certificate is good for (`--hosts`): by default the
    /// hosts that real APNs and FCM clients verify, and loopback, so an unmodified client can be
    /// pointed at the mock with its CA file and a name-resolution override (docs/USAGE.md: pointing any client at the mock).
    public var certificateHosts = MockServerConfiguration.defaultCertificateHosts
    public var limits = Limits()
    public var reactor = ReactorConfiguration()
    public var behavior = MockBehavior()
    /// `--misbehave MODE`: a hostile server on every listener (APNs and FCM alike); the
    /// behaviour above then never gets a request.
    public var misbehavior: ServerMisbehavior = .none
    /// `--http1-only`: every listener offers ALPN "http/1.1" alone and speaks HTTP/1.1
    /// (ServerConfiguration.speaksHTTP1), answering through the same responders.
    public var http1Only = false
    /// `--misbehave-after N`: with `misbehavior`, the first N requests (both listeners together)
    /// are answered normally; the server turns bad after them.
    public var misbehaveAfter: Int? = nil
    /// `--log FILE`: an NDJSON line per request.
    public var logPath: String? = nil
    /// `--client-ca FILE`: the APNs listener requires a client certificate and verifies it against
    /// these CAs (certificate auth: pair it with `MockAuthentication.certificate`). The FCM
    /// listener is unaffected.
    public var clientCAFile: String? = nil
    /// `--client-cert-403`: with `clientCAFile`, a client certificate that does not verify
    /// (expired, another CA) completes the handshake, and its requests are answered 403
    /// BadCertificate instead.
    public var admitsUnverifiedClientCertificates = false
    /// `--fcm`: an FCM listener (token endpoint and sends) on a second port, with `workers`
    /// threads of its own.
    public var fcm: MockFCMConfiguration? = nil
    /// `--webpush`: a Web Push listener on a port of its own, with `workers` threads of its own.
    public var webpush: MockWebPushConfiguration? = nil

    public init(certificate: MockCertificate) { self.certificate = certificate }

    public static let defaultCertificateHosts = [
        "api.push.apple.com", "api.sandbox.push.apple.com", "api.development.push.apple.com",
        "fcm.googleapis.com", "oauth2.googleapis.com", "localhost", "127.0.0.1", "::1",
    ]
}

public struct MockServerError: Error, CustomStringConvertible {
    public let description: String
}

/// The mock server: `workers` threads, each with its own reactor, sharing one port; with FCM,
/// as many again sharing a second port.
public final class MockServer: @unchecked Sendable {
    public let port: UInt16
    /// The FCM listener, when configured.
    public let fcm: MockFCMEndpoint?
    /// The Web Push listener, when configured.
    public private(set) var webpush: MockWebPushEndpoint?
    /// PEM of the CA that signed the server certificate, when the mock made it.
    public let authorityCertificatePEM: String?
    public let board: MockStatisticsBoard
    public let backendKind: IOBackendKind
    private let stopSignal = ServerStopSignal()
    private let threads = WorkerThreads()
    private let failures = FailureList()
    private let log: MockRequestLog?

    /// Starts every worker; returns once all of them listen.
    public init(configuration: MockServerConfiguration) throws(MockServerError) {
        let contexts = try Self.makeTLSContexts(configuration)
        let (tls, apnsTLS) = (contexts.plain, contexts.apns)
        authorityCertificatePEM = contexts.authorityPEM
        let workers = max(1, configuration.workers)
        // Board slots: APNs workers, then FCM's, then Web Push's, then the HTTP/1.1-only Web Push
        // listener's (each listener's block of `workers`).
        let blocks = configuration.webpush.map { $0.http1Port == nil ? 3 : 4 } ?? (configuration.fcm == nil ? 1 : 2)
        board = MockStatisticsBoard(workers: blocks * workers)
        do {
            log = try configuration.logPath.map { path throws(SystemError) in try MockRequestLog(path: path) }
        } catch {
            throw MockServerError(description: error.description)
        }
        let providers = try MockProviders(configuration)
        let once = FirstTimeSet()
        let streamsMax = configuration.limits.streamsPerConnectionMax
        let gate = configuration.misbehaveAfter.map { ServerMisbehaviorGate(wellBehavedRequests: $0) }
        let behavior = configuration.behavior
        let apnsWall = SystemWallClock()
        let first = MockListenerShared(provider: providers.first, listener: .first, board: board, once: once,
                                       rateLimiter: behavior.rateLimitPerSecond.map { MockRateLimiter(perSecond: $0) }, quota: nil,
                                       retryAfterSeconds: 1, log: log, wallMilliseconds: { apnsWall.secondsSinceEpoch() * 1000 })

        let serverConfiguration = ServerConfiguration(host: configuration.host, port: configuration.port, tls: apnsTLS,
                                                      limits: configuration.limits, reactor: configuration.reactor,
                                                      misbehavior: configuration.misbehavior, misbehaviorGate: gate)
        let workerGroup = (threads, stopSignal, failures)
        let (apnsPort, apnsBackend) = try Self.startWorkers(count: workers, name: "mock", configuration: serverConfiguration, group: workerGroup) { index in
            MockResponder(behavior: behavior, shared: first, slot: index, workerIndex: index, streamsMax: streamsMax)
        }
        port = apnsPort
        backendKind = apnsBackend
        guard let fcmConfiguration = configuration.fcm, let secondProvider = providers.second else {
            fcm = nil
            webpush = try startWebPush(configuration, providers: providers, once: once, gate: gate, tls: (tls, contexts.http1), wall: apnsWall)
            return
        }
        // FCM: its own port, stream limit, body limit, rate-limit bucket and responders.
        let second = MockListenerShared(provider: secondProvider, listener: .second, board: board, once: once,
                                        rateLimiter: behavior.rateLimitPerSecond.map { MockRateLimiter(perSecond: $0) },
                                        quota: fcmConfiguration.quotaPerMinute.map(MockProjectQuota.init(perMinute:)),
                                        retryAfterSeconds: fcmConfiguration.retryAfterSeconds, log: log,
                                        wallMilliseconds: fcmConfiguration.wallMilliseconds)
        let fcmServerConfiguration = Self.listenerConfiguration(configuration, port: fcmConfiguration.port, tls: tls, gate: gate,
                                                                streamsMax: fcmConfiguration.streamsPerConnectionMax,
                                                                bodyBytesMax: MockFCMConfiguration.requestBodyBytesMax)
        do {
            let (fcmPort, _) = try Self.startWorkers(count: workers, name: "mock-fcm", configuration: fcmServerConfiguration, group: workerGroup) { index in
                MockResponder(behavior: behavior, shared: second, slot: workers + index, workerIndex: index,
                              streamsMax: fcmConfiguration.streamsPerConnectionMax)
            }
            fcm = try providers.secondBound(fcmConfiguration, host: configuration.host, port: fcmPort)
            webpush = try startWebPush(configuration, providers: providers, once: once, gate: gate, tls: (tls, contexts.http1), wall: apnsWall)
        } catch {
            stopSignal.stop()
            threads.join()
            throw error
        }
    }

    /// A listener after the first: its own port and stream limit, and a body limit of at least
    /// `bodyBytesMax`; the rest as the APNs listener's.
    private static func listenerConfiguration(_ configuration: MockServerConfiguration, port: UInt16, tls: TLSContext,
                                              gate: ServerMisbehaviorGate?, streamsMax: Int, bodyBytesMax: Int) -> ServerConfiguration {
        var limits = configuration.limits
        limits.streamsPerConnectionMax = streamsMax
        limits.requestBodyBytesMax = max(limits.requestBodyBytesMax, bodyBytesMax)
        return ServerConfiguration(host: configuration.host, port: port, tls: tls, limits: limits, reactor: configuration.reactor,
                                   misbehavior: configuration.misbehavior, misbehaviorGate: gate)
    }

    /// Starts the Web Push listener when configured: its own port, stream limit, body limit and
    /// rate-limit bucket; and with `http1Port`, a second one on its own port whose TLS offers
    /// http/1.1 alone (`tls.http1`), answering through the same responder, bucket and log, counted
    /// in the same statistics from board slots of its own. Stops every worker if it cannot.
    private func startWebPush(_ configuration: MockServerConfiguration, providers: MockProviders, once: FirstTimeSet, gate: ServerMisbehaviorGate?,
                              tls: (main: TLSContext, http1: TLSContext?), wall: SystemWallClock) throws(MockServerError) -> MockWebPushEndpoint? {
        guard let webpushConfiguration = configuration.webpush, let provider = providers.third else { return nil }
        let behavior = configuration.behavior
        let workers = max(1, configuration.workers)
        let shared = MockListenerShared(provider: provider, listener: .third, board: board, once: once,
                                        rateLimiter: behavior.rateLimitPerSecond.map { MockRateLimiter(perSecond: $0) }, quota: nil,
                                        retryAfterSeconds: 1, log: log,
                                        wallMilliseconds: webpushConfiguration.wallMilliseconds ?? { wall.secondsSinceEpoch() * 1000 })
        let streamsMax = webpushConfiguration.streamsPerConnectionMax
        func start(port: UInt16, tls: TLSContext, name: String, firstSlot: Int) throws(MockServerError) -> UInt16 {
            let serverConfiguration = Self.listenerConfiguration(configuration, port: port, tls: tls, gate: gate, streamsMax: streamsMax,
                                                                 bodyBytesMax: MockWebPushConfiguration.requestBodyBytesMax)
            return try Self.startWorkers(count: workers, name: name, configuration: serverConfiguration, group: (threads, stopSignal, failures)) { index in
                MockResponder(behavior: behavior, shared: shared, slot: firstSlot + index, workerIndex: index, streamsMax: streamsMax)
            }.0
        }
        do {
            let port = try start(port: webpushConfiguration.port, tls: tls.main, name: "mock-webpush", firstSlot: 2 * workers)
            let host = Self.advertisedHost(configuration.host)
            guard let http1Port = webpushConfiguration.http1Port, let http1TLS = tls.http1 else {
                return MockWebPushEndpoint(port: port, origin: "https://\(host):\(port)")
            }
            let second = try start(port: http1Port, tls: http1TLS, name: "mock-webpush-h1", firstSlot: 3 * workers)
            return MockWebPushEndpoint(port: port, origin: "https://\(host):\(port)", http1Port: second, http1Origin: "https://\(host):\(second)")
        } catch {
            stopSignal.stop()
            threads.join()
            throw error
        }
    }

    /// The server's TLS contexts: a plain one (FCM, Web Push, and APNs without `clientCAFile`), the
    /// APNs one, which requires client certificates when `clientCAFile` is set, and with an
    /// HTTP/1.1-only Web Push listener one that offers ALPN http/1.1 alone; plus the PEM of the CA
    /// the mock made, if it made its certificate.
    private static func makeTLSContexts(_ configuration: MockServerConfiguration) throws(MockServerError) -> MockTLSContexts {
        var authorityPEM: String? = nil
        do {
            var tlsConfiguration = TLSConfiguration()
            // As APNs: a client that offers no ALPN (aioapns) speaks HTTP/2 by prior knowledge.
            tlsConfiguration.acceptsClientsWithoutALPN = true
            if configuration.http1Only { tlsConfiguration.alpnProtocols = [TLSContext.http1] }
            switch configuration.certificate {
            case .files(let chain, let key):
                tlsConfiguration.certificateChainFile = chain
                tlsConfiguration.privateKeyFile = key
            case .generated(let directory):
                let authority = try CertificateFactory.makeAuthority(commonName: "pushcast mock CA")
                let leaf = try authority.issueServer(hosts: configuration.certificateHosts)
                let chainPath = directory + "/mock-cert.pem", keyPath = directory + "/mock-key.pem"
                try writeSecret(leaf.certificatePEM + authority.certificatePEM, to: chainPath)
                try writeSecret(leaf.privateKeyPEM, to: keyPath)
                tlsConfiguration.certificateChainFile = chainPath
                tlsConfiguration.privateKeyFile = keyPath
                authorityPEM = authority.certificatePEM
            }
            let plain = try TLSContext(role: .server, configuration: tlsConfiguration, files: SecretFile.read)
            var http1: TLSContext? = nil
            if configuration.webpush?.http1Port != nil {
                var http1Configuration = tlsConfiguration
                http1Configuration.alpnProtocols = [TLSContext.http1]
                http1 = try TLSContext(role: .server, configuration: http1Configuration, files: SecretFile.read)
            }
            guard let clientCA = configuration.clientCAFile else { return MockTLSContexts(plain: plain, apns: plain, http1: http1, authorityPEM: authorityPEM) }
            tlsConfiguration.clientCAFile = clientCA
            tlsConfiguration.admitsUnverifiedClientCertificates = configuration.admitsUnverifiedClientCertificates
            let apns = try TLSContext(role: .server, configuration: tlsConfiguration, files: SecretFile.read)
            return MockTLSContexts(plain: plain, apns: apns, http1: http1, authorityPEM: authorityPEM)
        } catch let error as TLSError {
            throw MockServerError(description: "mock certificate: \(error.description)")
        } catch let error as MockServerError {
            throw error
        } catch {
            throw MockServerError(description: "mock certificate: \(error)")
        }
    }

    /// Starts `count` workers on one port: the first binds (port 0 becomes a real port), the others
    /// share it. Returns the port and the I/O backend the first one got.
    private static func startWorkers(count: Int, name: String, configuration: ServerConfiguration,
                                     group: (WorkerThreads, ServerStopSignal, FailureList),
                                     makeResponder: @escaping @Sendable (Int) -> ServerResponder) throws(MockServerError) -> (UInt16, IOBackendKind) {
        let (threads, stopSignal, failures) = group
        let ready = ReadyLatch()
        var configuration = configuration
        var bound: (UInt16, IOBackendKind)? = nil
        for index in 0..<count {
            let (snapshot, stop, failures) = (configuration, stopSignal, failures)
            threads.start(name: "\(name)-\(index)") {
                let worker: ServerWorker
                do throws(TransportError) {
                    worker = try ServerWorker(configuration: snapshot, responder: makeResponder(index), stop: stop, workerIndex: index)
                } catch {
                    failures.add(error.description)
                    ready.signal(port: nil, backend: nil)
                    return
                }
                ready.signal(port: worker.port, backend: worker.backendKind)
                do throws(TransportError) { try worker.run() } catch { failures.add(error.description) }
            }
            let (port, backend) = ready.wait()
            guard let port, let backend else {
                stopSignal.stop()
                threads.join()
                throw MockServerError(description: failures.all().joined(separator: "; "))
            }
            if index == 0 {
                configuration.port = port
                bound = (port, backend)
            }
        }
        return bound!
    }

    /// The address clients use: loopback for a wildcard listener, brackets around IPv6.
    static func advertisedHost(_ host: String) -> String {
        switch host {
        case "0.0.0.0", "::", "": return "127.0.0.1"
        default: return host.contains(":") ? "[\(host)]" : host
        }
    }

    /// Stops every worker and waits for them; returns the final counters.
    @discardableResult
    public func stop() -> MockStatistics {
        stopSignal.stop()
        threads.join()
        log?.flush()
        return board.total()
    }

    /// Errors the workers hit while running.
    public var workerFailures: [String] { failures.all() }
}

/// Writes a file readable by the owner only (0600).
func writeSecret(_ text: String, to path: String) throws(MockServerError) {
    do { try FileSystem.write(text, to: path, secret: true) } catch { throw MockServerError(description: "cannot write \(path)") }
}

/// The mock's TLS contexts, all over one certificate (`MockServer.makeTLSContexts`).
private struct MockTLSContexts {
    let plain: TLSContext
    let apns: TLSContext
    /// ALPN http/1.1 alone: the HTTP/1.1-only Web Push listener's; nil without one.
    let http1: TLSContext?
    let authorityPEM: String?
}

private final class ReadyLatch: @unchecked Sendable {
    private let condition = NSCondition()
    private var value: (UInt16?, IOBackendKind?)? = nil

    func signal(port: UInt16?, backend: IOBackendKind?) {
        condition.lock()
        value = (port, backend)
        condition.signal()
        condition.unlock()
    }

    func wait() -> (UInt16?, IOBackendKind?) {
        condition.lock()
        while value == nil { condition.wait() }
        let v = value!
        value = nil
        condition.unlock()
        return v
    }
}

private final class FailureList: @unchecked Sendable {
    private let lock = NSLock()
    private var items: [String] = []
    func add(_ s: String) { lock.lock(); items.append(s); lock.unlock() }
    func all() -> [String] { lock.lock(); defer { lock.unlock() }; return items }
}
