// Helpers for the in-memory TLS tests: a per-test directory for PEM files, a throw-away PKI, and a
// pump that moves ciphertext between a client and a server session with no sockets.
import Foundation
import XCTest
@testable import PushcastWire

/// A directory made for one test and removed with it.
final class TemporaryDirectory {
    let path: String

    init() throws {
        path = NSTemporaryDirectory() + "pushcast-tls-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    /// Writes `text` to `name` and returns the full path.
    func write(_ name: String, _ text: String) throws -> String {
        try write(name, Array(text.utf8))
    }

    func write(_ name: String, _ bytes: [UInt8]) throws -> String {
        let file = path + "/" + name
        try Data(bytes).write(to: URL(fileURLWithPath: file))
        return file
    }
}

/// A CA, a server certificate for localhost / 127.0.0.1 / ::1, and a client certificate.
struct TestPKI {
    let authority: CertificateAuthority
    let server: IssuedCertificate
    let client: IssuedCertificate
    let caFile: String
    let serverCertificateFile: String
    let serverKeyFile: String

    init(directory: TemporaryDirectory, name: String = "Test CA") throws {
        authority = try CertificateFactory.makeAuthority(commonName: name)
        server = try authority.issue(
            commonName: "localhost", dnsNames: ["localhost"], ipAddresses: ["127.0.0.1", "::1"], serverAuth: true, clientAuth: false)
        client = try authority.issue(commonName: "pushcast client", dnsNames: [], ipAddresses: [], serverAuth: false, clientAuth: true)
        let tag = UUID().uuidString
        caFile = try directory.write("ca-\(tag).pem", authority.certificatePEM)
        serverCertificateFile = try directory.write("server-\(tag).pem", server.certificatePEM)
        serverKeyFile = try directory.write("server-\(tag).key", server.privateKeyPEM)
    }

    func serverConfiguration() -> TLSConfiguration {
        var configuration = TLSConfiguration()
        configuration.certificateChainFile = serverCertificateFile
        configuration.privateKeyFile = serverKeyFile
        return configuration
    }

    /// A client that trusts only this CA.
    func clientConfiguration() -> TLSConfiguration {
        var configuration = TLSConfiguration()
        configuration.trustsSystemStore = false
        configuration.additionalCAFile = caFile
        return configuration
    }
}

enum Side: Equatable { case client, server }

struct PumpFailure: Error {
    let side: Side
    let error: TLSError
}

/// Moves every pending ciphertext byte from `source` to `destination`; returns how many moved.
@discardableResult
func transfer(from source: TLSSession, to destination: TLSSession) -> Int {
    var moved = 0
    var buffer = [UInt8](repeating: 0, count: 4096)  // small, so the loop runs more than once
    while source.pendingCiphertextBytes > 0 {
        let count = buffer.withUnsafeMutableBytes { source.takeCiphertext(into: $0) }
        XCTAssertGreaterThan(count, 0, "pending ciphertext but nothing taken")
        if count == 0 { break }
        buffer.withUnsafeBytes { destination.feedCiphertext(UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
        moved += count
    }
    return moved
}

/// Runs both handshakes until both are complete and no bytes are in flight, or one side throws.
func pumpHandshake(client: TLSSession, server: TLSSession, roundsMax: Int = 32) -> PumpFailure? {
    for _ in 0..<roundsMax {
        do { _ = try client.advanceHandshake() } catch { return PumpFailure(side: .client, error: error) }
        let toServer = transfer(from: client, to: server)
        do { _ = try server.advanceHandshake() } catch { return PumpFailure(side: .server, error: error) }
        let toClient = transfer(from: server, to: client)
        if client.isHandshakeComplete && server.isHandshakeComplete && toServer == 0 && toClient == 0 { return nil }
    }
    XCTFail("handshake made no progress in \(roundsMax) rounds")
    return nil
}

/// Reads plaintext from `session` until `count` bytes arrived or no more are available.
func readAvailable(_ session: TLSSession, upTo count: Int) throws -> [UInt8] {
    var received: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 16 * 1024)
    while received.count < count {
        let n = try buffer.withUnsafeMutableBytes { try session.readPlaintext(into: $0) }
        if n == 0 { break }
        received += buffer[0..<n]
    }
    return received
}

func write(_ session: TLSSession, _ bytes: [UInt8]) throws {
    try bytes.withUnsafeBytes { try session.writePlaintext($0) }
}
