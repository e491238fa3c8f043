import Foundation
import PushcastMock
import PushcastSystem
import PushcastTransport
import PushcastWire
import XCTest

/// Throw-away certificates for a test: a CA, and a server certificate for localhost/127.0.0.1.
struct TestPKI {
    let directory: String
    let caFile: String
    let certFile: String
    let keyFile: String

    init() throws {
        directory = NSTemporaryDirectory() + "pushcast-test-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let authority = try CertificateFactory.makeAuthority(commonName: "pushcast test CA")
        let leaf = try authority.issue(commonName: "localhost", dnsNames: ["localhost"], ipAddresses: ["127.0.0.1"],
                                       serverAuth: true, clientAuth: false)
        caFile = directory + "/ca.pem"
        certFile = directory + "/cert.pem"
        keyFile = directory + "/key.pem"
        try authority.certificatePEM.write(toFile: caFile, atomically: true, encoding: .utf8)
        try (leaf.certificatePEM + authority.certificatePEM).write(toFile: certFile, atomically: true, encoding: .utf8)
        try leaf.privateKeyPEM.write(toFile: keyFile, atomically: true, encoding: .utf8)
    }

    func clientTLS(offering alpn: [String] = ["h2"]) throws -> TLSContext {
        var configuration = TLSConfiguration()
        configuration.trustsSystemStore = false
        configuration.additionalCAFile = caFile
        configuration.alpnProtocols = alpn
        return try TLSContext(role: .client, configuration: configuration, files: SecretFile.read)
    }
}

/// Finds a program on PATH, or nil.
func which(_ program: String) -> String? {
    for directory in (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":") {
        let path = "\(directory)/\(program)"
        if FileManager.default.isExecutableFile(atPath: path) { return path }
    }
    return nil
}

/// A child process with its output captured to a file, killed at the end of the test.
final class ChildProcess {
    let process = Process()
    let outputPath: String

    init(_ executable: String, _ arguments: [String]) throws {
        outputPath = NSTemporaryDirectory() + "pushcast-child-\(UUID().uuidString).log"
        FileManager.default.createFile(atPath: outputPath, contents: nil)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: outputPath))
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardOutput = handle
        process.standardError = handle
        try process.run()
    }

    var output: String { (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? "" }

    /// Waits for exit, killing the process after `seconds`.
    @discardableResult
    func wait(seconds: Double) -> Int32 {
        let deadline = Date().addingTimeInterval(seconds)
        while process.isRunning && Date() < deadline { usleep(20_000) }
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
        return process.terminationStatus
    }

    func stop() {
        if process.isRunning { process.interrupt() }
        wait(seconds: 5)
    }
}

/// Polls until a TCP port accepts connections (nghttpd takes a moment to listen).
func waitForPort(_ port: UInt16, seconds: Double = 10) -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        close(fd)
        if rc == 0 { return true }
        usleep(50_000)
    }
    return false
}

/// A free TCP port on loopback (bind to 0, read it back, close).
func freePort() -> UInt16 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = 0
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    _ = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
    }
    return UInt16(bigEndian: address.sin_port)
}

let devicePath = "/3/device/" + String(repeating: "0123456789abcdef", count: 4)
