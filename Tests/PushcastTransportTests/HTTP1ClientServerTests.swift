// Our client against our server over HTTP/1.1, real sockets and TLS, for both I/O backends: the
// mock serving HTTP/1.1 only (`--http1-only`), a client offering h2 and http/1.1.

import Foundation
import PushcastCore
import PushcastMock
import PushcastReactor
import PushcastSystem
import PushcastTransport
import PushcastWire
import Synchronization
import XCTest

final class HTTP1ClientServerTests: XCTestCase {
    private func startMock(_ pki: TestPKI, backend: IOBackendKind, http1Only: Bool = true,
                           _ adjust: (inout MockServerConfiguration) -> Void = { _ in }) throws -> MockServer {
        var configuration = MockServerConfiguration(certificate: .files(certificateChain: pki.certFile, privateKey: pki.keyFile))
        configuration.workers = 1
        configuration.reactor.backend = backend
        configuration.http1Only = http1Only
        adjust(&configuration)
        return try MockServer(configuration: configuration)
    }

    private func clientTLS(_ pki: TestPKI, offering protocols: [String] = ["h2", "http/1.1"]) throws -> TLSContext {
        var configuration = TLSConfiguration()
        configuration.trustsSystemStore = false
        configuration.additionalCAFile = pki.caFile
        configuration.alpnProtocols = protocols
        return try TLSContext(role: .client, configuration: configuration, files: SecretFile.read)
    }

    private func clientConfiguration(port: UInt16, tls: TLSContext, backend: IOBackendKind) -> ClientConfiguration {
        var reactor = ReactorConfiguration()
        reactor.backend = backend
        var client = ClientConfiguration(endpoint: Endpoint(host: "127.0.0.1", port: port), address: "127.0.0.1", tls: tls,
                                         limits: Limits(), reactor: reactor)
        client.reconnectDelayNanoseconds = 10_000_000
        return client
    }

    private func load(port: UInt16, tls: TLSContext, backend: IOBackendKind, requests: Int, connections: Int) throws -> LoadReport {
        let client = clientConfiguration(port: port, tls: tls, backend: backend)
        let request = HTTP2Request(authority: client.endpoint.authority, path: devicePath, body: Array("{}".utf8))
        return try LoadGenerator.run(LoadConfiguration(client: client, requests: requests, connections: connections,
                                                       streams: 100, workers: 1, request: request))
    }

    func testFiveThousandRequestsOverFourKeepAliveConnectionsAllAnswered() throws {
        for backend in [IOBackendKind.uring, .epoll] {
            let pki = try TestPKI()
            let server = try startMock(pki, backend: backend)
            let report = try load(port: server.port, tls: try clientTLS(pki), backend: backend, requests: 5000, connections: 4)
            let statistics = server.stop()
            XCTAssertEqual(report.succeeded, 5000, "\(backend): \(report.failureCounts)")
            XCTAssertEqual(statistics.statusCounts[200], 5000, "\(backend)")
            XCTAssertEqual(statistics.requests, 5000, "\(backend): every request reached the server once")
            // Keep-alive: four connections carried everything, one request at a time each.
            XCTAssertEqual(statistics.connectionsAccepted, 4, "\(backend)")
            XCTAssertEqual(statistics.streamsOpenMax, 1, "\(backend)")
            XCTAssertLessThanOrEqual(report.streamsInFlightMax, 1, "\(backend)")
        }
    }

    func testServerClosingAfterNAnswersLosesNothingAndSendsNothingTwice() throws {
        for backend in [IOBackendKind.uring, .epoll] {
            let pki = try TestPKI()
            let server = try startMock(pki, backend: backend) { $0.behavior.goAwayAfter = 100 }
            let report = try load(port: server.port, tls: try clientTLS(pki), backend: backend, requests: 5000, connections: 4)
            let statistics = server.stop()
            XCTAssertEqual(report.succeeded, 5000, "\(backend): \(report.failureCounts)")
            // Each request reached the server exactly once: none processed was sent again.
            XCTAssertEqual(statistics.requests, 5000, "\(backend)")
            XCTAssertEqual(statistics.statusCounts[200], 5000, "\(backend)")
            XCTAssertGreaterThanOrEqual(statistics.goAwaysSent, 45, "\(backend)")
            XCTAssertGreaterThanOrEqual(statistics.connectionsAccepted, 50, "\(backend)")
            XCTAssertGreaterThanOrEqual(report.goAwaysReceived, 45, "\(backend)")
        }
    }

    func testH2OnlyClientAgainstHTTP1OnlyServerFailsNamingBoth() throws {
        let pki = try TestPKI()
        let server = try startMock(pki, backend: .uring)
        defer { server.stop() }
        XCTAssertThrowsError(try load(port: server.port, tls: try clientTLS(pki, offering: ["h2"]), backend: .uring,
                                      requests: 10, connections: 1)) { error in
            let text = "\(error)"
            XCTAssertTrue(text.contains("h2") && text.contains("http/1.1"), text)
        }
    }

    func testClientOfferingBothGetsH2FromAnH2ServerAndHTTP1FromAnHTTP1Server() throws {
        let pki = try TestPKI()
        for http1Only in [false, true] {
            let server = try startMock(pki, backend: .uring, http1Only: http1Only) { $0.behavior.latencyNanoseconds = 5_000_000 }
            let report = try load(port: server.port, tls: try clientTLS(pki), backend: .uring, requests: 400, connections: 1)
            let statistics = server.stop()
            XCTAssertEqual(report.succeeded, 400)
            // HTTP/2 runs many streams on the one connection; HTTP/1.1 one request at a time.
            if http1Only {
                XCTAssertEqual(statistics.streamsOpenMax, 1)
            } else {
                XCTAssertGreaterThan(statistics.streamsOpenMax, 10)
            }
        }
    }

    /// Sends `total` requests, then stays idle (not exhausted, no work) until told to finish.
    private final class IdleAfterWorkload: ClientWorkload {
        let request: HTTP2Request
        var remaining: Int
        var answered = 0
        var finished = false
        init(request: HTTP2Request, total: Int) {
            self.request = request
            remaining = total
        }
        func nextRequest() -> (request: HTTP2Request, tag: UInt64)? {
            guard remaining > 0 else { return nil }
            remaining -= 1
            return (request, UInt64(remaining))
        }
        func received(tag: UInt64, response: HTTP2Response) { answered += 1 }
        func failed(tag: UInt64, failure: HTTP2StreamFailure) { XCTFail("\(failure)") }
        var isExhausted: Bool { finished }
        var hasWork: Bool { remaining > 0 }
        var nextReadyNanoseconds: UInt64? { nil }
    }

    func testIdleCloseDoesNotReconnectWhileThereIsNoWork() throws {
        for backend in [IOBackendKind.uring, .epoll] {
            let pki = try TestPKI()
            let server = try startMock(pki, backend: backend)
            var configuration = clientConfiguration(port: server.port, tls: try clientTLS(pki), backend: backend)
            configuration.http1.idleCloseNanoseconds = 100_000_000
            let request = HTTP2Request(authority: configuration.endpoint.authority, path: devicePath, body: Array("{}".utf8))
            let workload = IdleAfterWorkload(request: request, total: 3)
            let worker = try ClientWorker(configuration: configuration, connectionCount: 1, workload: workload, clock: TurnClock(source: SystemClock.Monotonic()))
            // A parked worker sleeps until woken (new work arrives through a waker in a run):
            // wake it every 20 ms so that the loop below can look.
            let waker = try worker.makeWaker()
            let stop = Atomic<Bool>(false)
            let ticker = Thread {
                while !stop.load(ordering: .relaxed) {
                    waker.wake()
                    Thread.sleep(forTimeInterval: 0.02)
                }
            }
            ticker.start()
            defer { stop.store(true, ordering: .relaxed) }
            worker.start()
            let end = Date().addingTimeInterval(1.0)  // ten idle-close periods
            while Date() < end { XCTAssertFalse(try worker.turn()) }
            XCTAssertEqual(workload.answered, 3)
            // More work: the parked connection opens again and carries it.
            workload.remaining = 2
            let more = Date().addingTimeInterval(2.0)
            while workload.answered < 5 && Date() < more { _ = try worker.turn() }
            workload.finished = true
            while try !worker.turn() {}
            let statistics = server.stop()
            XCTAssertEqual(workload.answered, 5, "\(backend)")
            XCTAssertEqual(statistics.connectionsAccepted, 2, "\(backend): one before the idle close, one for the new work")
            XCTAssertEqual(worker.statistics.connectionsOpened, 2, "\(backend)")
        }
    }
}
