import Foundation
import PushcastFCM
import PushcastSystem
import XCTest

/// Checks made with tools that share no code with PushcastFCM: the `openssl` command line for
/// signatures, Foundation for base64 and JSON.
enum Independent {
    static let openssl = "/usr/bin/openssl"

    static func temporaryDirectory() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("pushcast-fcm-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    /// Runs a program and returns its exit status and combined output.
    static func run(_ executable: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let output = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: output, as: UTF8.self))
    }

    /// `openssl dgst -sha256 -verify pub.pem -signature sig.bin input.txt`.
    static func opensslVerifies(publicKeyPEM: [UInt8], signature: [UInt8], input: [UInt8]) throws -> Bool {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let key = directory.appendingPathComponent("pub.pem"), sig = directory.appendingPathComponent("sig.bin")
        let data = directory.appendingPathComponent("input.txt")
        try Data(publicKeyPEM).write(to: key)
        try Data(signature).write(to: sig)
        try Data(input).write(to: data)
        let result = try run(openssl, ["dgst", "-sha256", "-verify", key.path, "-signature", sig.path, data.path])
        if result.status == 0 { XCTAssertTrue(result.output.contains("Verified OK"), result.output) }
        return result.status == 0
    }

    static func base64URLDecode(_ text: Substring) -> Data? {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        return Data(base64Encoded: base64)
    }

    static func base64URL(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    static func json(_ part: Substring) throws -> [String: Any] {
        let data = try XCTUnwrap(base64URLDecode(part))
        return try XCTUnwrap(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }
}

/// One generated service account per test run (RSA key generation takes a moment).
enum Fixture {
    static let tokenURI = "https://oauth2.example.test/token"
    static let clientEmail = "pushcast@pushcast-demo.iam.gserviceaccount.com"
    static let generated = try! FCMServiceAccountGenerator.generate(projectID: "pushcast-demo", clientEmail: clientEmail, tokenURI: tokenURI)
    static let account = try! FCMServiceAccount(json: generated.serviceAccountJSON, source: "service-account.json")
    static let signer = try! RS256Signer(account: account)
    static let publicKey = try! RS256PublicKey(pem: generated.publicKeyPEM, source: "pub.pem")
    static let other = try! FCMServiceAccountGenerator.generate(projectID: "other", clientEmail: clientEmail, tokenURI: tokenURI)
    static let otherPublicKey = try! RS256PublicKey(pem: other.publicKeyPEM, source: "other.pem")

    /// The generated file as a dictionary a test can change and write back.
    static func fields() throws -> [String: Any] {
        try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(generated.serviceAccountJSON)) as? [String: Any])
    }

    static func json(_ fields: [String: Any]) throws -> [UInt8] {
        [UInt8](try JSONSerialization.data(withJSONObject: fields))
    }

    /// The base64 body lines of the private key, which no message may contain.
    static func privateKeyLines() throws -> [String] {
        let pem = try XCTUnwrap(try fields()["private_key"] as? String)
        return pem.split(separator: "\n").filter { !$0.hasPrefix("-----") }.map(String.init)
    }
}

final class RS256Tests: XCTestCase {
    func testSignatureVerifiesWithTheOpenSSLCommandLine() throws {
        let input = Array("header.claims for the openssl CLI".utf8)
        let signature = try Fixture.signer.sign(input)
        XCTAssertEqual(signature.count, 256, "a 2048-bit key signs 256 bytes")
        XCTAssertTrue(try Independent.opensslVerifies(publicKeyPEM: Fixture.generated.publicKeyPEM, signature: signature, input: input))
        XCTAssertFalse(try Independent.opensslVerifies(publicKeyPEM: Fixture.other.publicKeyPEM, signature: signature, input: input),
                       "the CLI check must be able to fail")
        XCTAssertFalse(try Independent.opensslVerifies(publicKeyPEM: Fixture.generated.publicKeyPEM, signature: signature, input: input + [0x2E]))
    }

    func testVerifyAcceptsOnlyTheRightKeyAndBytes() throws {
        let input = Array("some signing input".utf8)
        let signature = try Fixture.signer.sign(input)
        XCTAssertTrue(Fixture.publicKey.verify(input, signature: signature))
        XCTAssertFalse(Fixture.otherPublicKey.verify(input, signature: signature))
        XCTAssertFalse(Fixture.publicKey.verify(Array("some signing inpuT".utf8), signature: signature))
        var flipped = signature
        flipped[100] ^= 0x01
        XCTAssertFalse(Fixture.publicKey.verify(input, signature: flipped))
        XCTAssertFalse(Fixture.publicKey.verify(input, signature: Array(signature.dropLast())))
        XCTAssertFalse(Fixture.publicKey.verify(input, signature: []))
    }

    func testPublicKeyDerivedFromTheAccountMatchesTheGeneratedOne() throws {
        XCTAssertEqual(try Fixture.signer.publicKeyPEM(), Fixture.generated.publicKeyPEM)
        let derived = try Fixture.signer.publicKey()
        let input = Array("derived".utf8)
        XCTAssertTrue(derived.verify(input, signature: try Fixture.signer.sign(input)))
    }

    func testSigningFromSeveralThreads() throws {
        let inputs = (0..<16).map { Array("message \($0)".utf8) }
        let signatures = UnsafeMutableBufferPointer<[UInt8]>.allocate(capacity: inputs.count)
        signatures.initialize(repeating: [])
        defer { signatures.deallocate() }
        nonisolated(unsafe) let slots = signatures
        DispatchQueue.concurrentPerform(iterations: inputs.count) { index in
            slots[index] = (try? Fixture.signer.sign(inputs[index])) ?? []
        }
        for (index, input) in inputs.enumerated() {
            XCTAssertTrue(Fixture.publicKey.verify(input, signature: signatures[index]), "signature \(index)")
        }
    }

    func testPublicKeyErrorsNameTheFile() throws {
        XCTAssertThrowsError(try RS256PublicKey(pem: [], source: "empty.pem")) { error in
            XCTAssertTrue("\(error)".contains("empty.pem"), "\(error)")
        }
        XCTAssertThrowsError(try RS256PublicKey(pem: Array("not a key".utf8), source: "junk.pem")) { error in
            XCTAssertTrue("\(error)".contains("junk.pem") && "\(error)".contains("BEGIN PUBLIC KEY"), "\(error)")
        }
        XCTAssertThrowsError(try RS256PublicKey(file: "/nonexistent/pub.pem", files: SecretFile.read)) { error in
            XCTAssertTrue("\(error)".contains("/nonexistent/pub.pem"), "\(error)")
        }
    }

    func testRefusesNonRSAAndShortKeys() throws {
        let directory = try Independent.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        for (name, options) in [("ec", ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"]),
                                ("rsa1024", ["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:1024"])] {
            let keyPath = directory.appendingPathComponent("\(name).pem").path
            let pubPath = directory.appendingPathComponent("\(name).pub.pem").path
            XCTAssertEqual(try Independent.run(Independent.openssl, ["genpkey"] + options + ["-out", keyPath]).status, 0)
            XCTAssertEqual(try Independent.run(Independent.openssl, ["pkey", "-in", keyPath, "-pubout", "-out", pubPath]).status, 0)
            let expected = name == "ec" ? "not an RSA key" : "1024 bits"
            XCTAssertThrowsError(try RS256PublicKey(file: pubPath, files: SecretFile.read)) { error in
                XCTAssertTrue("\(error)".contains(expected) && "\(error)".contains(pubPath), "\(error)")
            }
            var fields = try Fixture.fields()
            fields["private_key"] = try String(contentsOfFile: keyPath, encoding: .utf8)
            let account = try FCMServiceAccount(json: try Fixture.json(fields), source: "\(name).json")
            XCTAssertThrowsError(try RS256Signer(account: account)) { error in
                XCTAssertTrue("\(error)".contains(expected) && "\(error)".contains("\(name).json"), "\(error)")
            }
        }
    }
}
