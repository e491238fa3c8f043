import Foundation
import PushcastCore
import PushcastMock
import PushcastReactor
import PushcastTransport
import PushcastWire
import XCTest

/// Our client against our server over real sockets and TLS, for both I/O backends.
final class ClientServerTests: XCTestCase {
    private func startMock(_ pki: TestPKI, backend: IOBackendKind, _ adjust: (inout MockServerConfiguration) -> Void = { _ in }) throws -> MockServer {
        var configuration = MockServerConfiguration(certificate: .files(certificateChain: pki.certFile, privateKey: pki.keyFile))
        configuration.workers = 1
        configuration.reactor.backend = backend
        adjust(&configuration)
        return try MockServer(configuration: configuration)
    }

    private func load(port: UInt16, tls: TLSContext, backend: IOBackendKind, requests: Int, connections: Int = 2,
                      streams: Int = 100) throws -> LoadReport {
        var reactor = ReactorConfiguration()
        reactor.backend = backend
        let endpoint = Endpoint(host: "127.0.0.1", port: port)
        var client = ClientConfiguration(endpoint: endpoint, address: "127.0.0.1", tls: tls, limits: Limits(), reactor: reactor)
        client.reconnectDelayNanoseconds = 10_000_000
        let request = HTTP2Request(authority: endpoint.authority, path: devicePath, body: Array("{}".utf8))
        return try LoadGenerator.run(LoadConfiguration(client: client, requests: requests, connections: connections,
                                                       streams: streams, workers: 1, request: request))
    }

    func testGoAwayMidRunLosesNothing() throws {
        for backend in [IOBackendKind.uring, .epoll] {
            let pki = try TestPKI()
            let server = try startMock(pki, backend: backend) { $0.behavior.goAwayAfter = 1000 }
            let report = try load(port: server.port, tls: try pki.clientTLS(), backend: backend, requests: 20_000)
            let statistics = server.stop()
            XCTAssertEqual(report.succeeded, 20_000, "\(backend): \(report.failureCounts)")
            XCTAssertGreaterThan(report.goAwaysReceived, 5)
            XCTAssertGreaterThan(statistics.goAwaysSent, 5)
            // Streams the server refused as above its last-stream-id were resent, never lost.
            XCTAssertEqual(statistics.statusCounts[200], 20_000)
            XCTAssertGreaterThanOrEqual(statistics.connectionsAccepted, 20)
        }
    }

    func testClientObeysServerStreamLimit() throws {
        for backend in [IOBackendKind.uring, .epoll] {
            let pki = try TestPKI()
            let server = try startMock(pki, backend: backend) { $0.limits.streamsPerConnectionMax = 7 }
            let report = try load(port: server.port, tls: try pki.clientTLS(), backend: backend, requests: 5000, streams: 100)
            let statistics = server.stop()
            XCTAssertEqual(report.succeeded, 5000)
            XCTAssertLessThanOrEqual(report.streamsInFlightMax, 7)
            XCTAssertLessThanOrEqual(statistics.streamsOpenMax, 7)
            XCTAssertGreaterThanOrEqual(statistics.streamsOpenMax, 2)
        }
    }

    func testLatencyKeepsConnectionsFull() throws {
        let pki = try TestPKI()
        let server = try startMock(pki, backend: .uring) { $0.behavior.latencyNanoseconds = 50_000_000 }
        let report = try load(port: server.port, tls: try pki.clientTLS(), backend: .uring, requests: 4000, connections: 2, streams: 100)
        let statistics = server.stop()
        XCTAssertEqual(report.succeeded, 4000)
        // 2 × 100 streams in flight with 50 ms each: every connection ran full.
        XCTAssertEqual(statistics.streamsOpenMaxPerConnection.connections, 2)
        XCTAssertEqual(statistics.streamsOpenMaxPerConnection.top.count, 2)
        for m in statistics.streamsOpenMaxPerConnection.top { XCTAssertGreaterThanOrEqual(m, 90) }
        XCTAssertEqual(statistics.streamsPerConnection.sum, 4000)
        XCTAssertGreaterThan(report.latencyMicroseconds.value(atQuantile: 0.5), 45_000)
    }

    func testWrongCAStopsTheRunWithAVerificationError() throws {
        let pki = try TestPKI(), other = try TestPKI()
        let server = try startMock(pki, backend: .uring)
        defer { server.stop() }
        XCTAssertThrowsError(try load(port: server.port, tls: try other.clientTLS(), backend: .uring, requests: 10)) { error in
            let text = "\(error)"
            XCTAssertTrue(text.contains("verif"), text)
        }
    }

    func testConnectionRefusedStopsTheRun() throws {
        let pki = try TestPKI()
        let port = freePort()
        XCTAssertThrowsError(try load(port: port, tls: try pki.clientTLS(), backend: .epoll, requests: 10)) { error in
            XCTAssertTrue("\(error)".contains("refused"), "\(error)")
        }
    }
}
