import Foundation
import PushcastCore
import PushcastReactor
import PushcastTransport
import PushcastWire

/// Where the mock's certificate comes from.
public enum MockCertificate: Sendable {
    /// Use these PEM files.
    case files(certificateChain: String, privateKey: String)
    /// Make a throw-away CA and a certificate for localhost and 127.0.0.1 in `directory`.
    case generated(directory: String)
}

public struct MockServerConfiguration: Sendable {
    public var host = "127.0.0.1"
    public var port: UInt16 = 0
    public var workers = 1
    public var certificate: MockCertificate
    public var limits = Limits()
    public var reactor = ReactorConfiguration()
    public var behavior = MockBehavior()
    /// `--log FILE`: an NDJSON line per request.
    public var logPath: String? = nil

    public init(certificate: MockCertificate) { self.certificate = certificate }
}

public struct MockServerError: Error, CustomStringConvertible {
    public let description: String
}

/// The mock server: `workers` threads, each with its own reactor, sharing one port.
public final class MockServer: @unchecked Sendable {
    public let port: UInt16
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
        var authorityPEM: String? = nil
        let tls: TLSContext
        do {
            var tlsConfiguration = TLSConfiguration()
            switch configuration.certificate {
            case .files(let chain, let key):
                tlsConfiguration.certificateChainFile = chain
                tlsConfiguration.privateKeyFile = key
            case .generated(let directory):
                let authority = try CertificateFactory.makeAuthority(commonName: "pushcast mock CA")
                let leaf = try authority.issue(commonName: "localhost", dnsNames: ["localhost"],
                                               ipAddresses: ["127.0.0.1", "::1"], serverAuth: true, clientAuth: false)
                let chainPath = directory + "/mock-cert.pem", keyPath = directory + "/mock-key.pem"
                try writeSecret(leaf.certificatePEM + authority.certificatePEM, to: chainPath)
                try writeSecret(leaf.privateKeyPEM, to: keyPath)
                tlsConfiguration.certificateChainFile = chainPath
                tlsConfiguration.privateKeyFile = keyPath
                authorityPEM = authority.certificatePEM
            }
            tls = try TLSContext(role: .server, configuration: tlsConfiguration)
        } catch let error as TLSError {
            throw MockServerError(description: "mock certificate: \(error.description)")
        } catch let error as MockServerError {
            throw error
        } catch {
            throw MockServerError(description: "mock certificate: \(error)")
        }
        authorityCertificatePEM = authorityPEM
        let workers = max(1, configuration.workers)
        board = MockStatisticsBoard(workers: workers)
        do {
            log = try configuration.logPath.map { path throws(ReactorError) in try MockRequestLog(path: path) }
        } catch {
            throw MockServerError(description: error.description)
        }
        let shared = MockSharedState()
        let limiter = configuration.behavior.rateLimitPerSecond.map { MockRateLimiter(perSecond: $0) }
        let streamsMax = configuration.limits.streamsPerConnectionMax

        // Worker 0 binds first (port 0 becomes a real port); the others share that port.
        let ready = ReadyLatch()
        var boundPort: UInt16 = 0
        var boundBackend = IOBackendKind.uring
        var serverConfiguration = ServerConfiguration(host: configuration.host, port: configuration.port, tls: tls,
                                                      limits: configuration.limits, reactor: configuration.reactor)
        for index in 0..<workers {
            let snapshot = serverConfiguration
            let (board, stop, failures, behavior, log) = (board, stopSignal, failures, configuration.behavior, log)
            threads.start(name: "mock-\(index)") {
                let worker: ServerWorker
                do throws(TransportError) {
                    worker = try ServerWorker(configuration: snapshot,
                                              responder: MockResponder(behavior: behavior, board: board, workerIndex: index,
                                                                       shared: shared, rateLimiter: limiter, log: log,
                                                                       streamsMax: streamsMax),
                                              stop: stop, workerIndex: index)
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
                serverConfiguration.port = port
                boundPort = port
                boundBackend = backend
            }
        }
        port = boundPort
        backendKind = boundBackend
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
    let created = FileManager.default.createFile(atPath: path, contents: Data(text.utf8),
                                                 attributes: [.posixPermissions: 0o600])
    guard created else { throw MockServerError(description: "cannot write \(path)") }
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
