import Foundation
import PushcastCore
import PushcastMock
import PushcastReactor
import PushcastTransport
import PushcastWire
import XCTest

/// Our client against Debian's nghttpd, and h2load against our server, on loopback over real TLS.
final class InteropTests: XCTestCase {
    /// nghttpd serving a static file for the APNs-style POST path.
    private func startNghttpd(_ pki: TestPKI) throws -> (ChildProcess, UInt16) {
        guard let nghttpd = which("nghttpd") else {
            XCTFail("nghttpd is missing: run `make deps` (Debian package nghttp2-server)")
            throw CocoaError(.fileNoSuchFile)
        }
        let docroot = pki.directory + "/docroot"
        let file = docroot + devicePath
        try FileManager.default.createDirectory(atPath: (file as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try "{}".write(toFile: file, atomically: true, encoding: .utf8)
        let port = freePort()
        let child = try ChildProcess(nghttpd, ["-d", docroot, "-m", "1000", "--address=127.0.0.1", String(port), pki.keyFile, pki.certFile])
        guard waitForPort(port) else {
            child.stop()
            XCTFail("nghttpd did not listen: \(child.output)")
            throw CocoaError(.fileNoSuchFile)
        }
        return (child, port)
    }

    private func runClient(port: UInt16, pki: TestPKI, backend: IOBackendKind, requests: Int) throws -> LoadReport {
        var reactor = ReactorConfiguration()
        reactor.backend = backend
        let endpoint = Endpoint(host: "127.0.0.1", port: port)
        let client = ClientConfiguration(endpoint: endpoint, address: "127.0.0.1", tls: try pki.clientTLS(),
                                         limits: Limits(), reactor: reactor)
        let request = HTTP2Request(authority: endpoint.authority, path: devicePath,
                                   headers: [HTTP2Header("content-type", "application/json")],
                                   body: Array(#"{"aps":{"alert":"hi"}}"#.utf8))
        let load = LoadConfiguration(client: client, requests: requests, connections: 4, streams: 250, workers: 2, request: request)
        return try LoadGenerator.run(load)
    }

    private func assertAllSucceeded(_ report: LoadReport, requests: Int, backend: IOBackendKind) {
        XCTAssertEqual(report.io, backend)
        XCTAssertEqual(report.succeeded, requests, "failures: \(report.failureCounts), statuses: \(report.statusCounts)")
        XCTAssertEqual(report.failed, 0)
        XCTAssertEqual(report.statusCounts[200], requests)
        XCTAssertGreaterThan(report.streamsInFlightMax, 1, "the client should multiplex")
        XCTAssertLessThanOrEqual(report.streamsInFlightMax, 250)
    }

    func testClientCompletes100kRequestsAgainstNghttpdWithUring() throws {
        let pki = try TestPKI()
        let (nghttpd, port) = try startNghttpd(pki)
        defer { nghttpd.stop() }
        let report = try runClient(port: port, pki: pki, backend: .uring, requests: 100_000)
        assertAllSucceeded(report, requests: 100_000, backend: .uring)
    }

    func testClientCompletes100kRequestsAgainstNghttpdWithEpoll() throws {
        let pki = try TestPKI()
        let (nghttpd, port) = try startNghttpd(pki)
        defer { nghttpd.stop() }
        let report = try runClient(port: port, pki: pki, backend: .epoll, requests: 100_000)
        assertAllSucceeded(report, requests: 100_000, backend: .epoll)
    }

    func testH2loadAgainstOurServerReportsAll2xx() throws {
        guard let h2load = which("h2load") else { return XCTFail("h2load is missing: run `make deps` (nghttp2-client)") }
        for backend in [IOBackendKind.uring, .epoll] {
            let pki = try TestPKI()
            var configuration = MockServerConfiguration(certificate: .files(certificateChain: pki.certFile, privateKey: pki.keyFile))
            configuration.workers = 2
            configuration.reactor.backend = backend
            let server = try MockServer(configuration: configuration)
            let body = pki.directory + "/body.json"
            try #"{"aps":{"alert":"hi"}}"#.write(toFile: body, atomically: true, encoding: .utf8)
            let child = try ChildProcess(h2load, ["-n", "100000", "-c", "4", "-m", "250", "-d", body,
                                                  "https://127.0.0.1:\(server.port)\(devicePath)"])
            let status = child.wait(seconds: 240)
            let statistics = server.stop()
            let output = child.output
            XCTAssertEqual(status, 0, output)
            XCTAssertTrue(output.contains("requests: 100000 total, 100000 started, 100000 done, 100000 succeeded, 0 failed, 0 errored"), output)
            XCTAssertTrue(output.contains("status codes: 100000 2xx, 0 3xx, 0 4xx, 0 5xx"), output)
            XCTAssertEqual(statistics.requests, 100_000)
            XCTAssertEqual(statistics.statusCounts[200], 100_000)
            XCTAssertEqual(server.workerFailures, [])
            XCTAssertEqual(server.backendKind, backend)
        }
    }
}
