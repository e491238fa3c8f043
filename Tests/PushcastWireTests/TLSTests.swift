// In-memory client-to-server TLS: both roles of TLSSession pumped against each other, no sockets
// (docs/DESIGN.md §2.8, second layer).
import COpenSSL
import XCTest
import PushcastSystem
@testable import PushcastWire

final class TLSTests: XCTestCase {
    private var directory: TemporaryDirectory!
    private var pki: TestPKI!

    override func setUpWithError() throws {
        directory = try TemporaryDirectory()
        pki = try TestPKI(directory: directory)
    }

    override func tearDown() {
        pki = nil
        directory = nil
    }

    private func sessions(
        client clientConfiguration: TLSConfiguration, server serverConfiguration: TLSConfiguration, serverName: String = "localhost"
    ) throws -> (client: TLSSession, server: TLSSession) {
        let client = try TLSSession(context: TLSContext(role: .client, configuration: clientConfiguration, files: SecretFile.read), serverName: serverName)
        let server = try TLSSession(context: TLSContext(role: .server, configuration: serverConfiguration, files: SecretFile.read), serverName: nil)
        return (client, server)
    }

    private func assertConfigurationError(
        _ configuration: TLSConfiguration, role: TLSContext.Role, mentions fragments: [String], file: StaticString = #filePath, line: UInt = #line
    ) -> TLSError? {
        do {
            _ = try TLSContext(role: role, configuration: configuration, files: SecretFile.read)
            XCTFail("context was created", file: file, line: line)
            return nil
        } catch {
            XCTAssertEqual(error.kind, .configuration, error.description, file: file, line: line)
            for fragment in fragments {
                XCTAssertTrue(error.description.contains(fragment), "'\(error.description)' lacks '\(fragment)'", file: file, line: line)
            }
            XCTAssertEqual(ERR_peek_error(), 0, "OpenSSL error queue left non-empty", file: file, line: line)
            return error
        }
    }

    // MARK: Handshake and data

    func testHandshakeNegotiatesH2AndCarriesDataBothWays() throws {
        let (client, server) = try sessions(client: pki.clientConfiguration(), server: pki.serverConfiguration())
        XCTAssertFalse(client.isHandshakeComplete)
        XCTAssertNil(client.negotiatedALPN)
        XCTAssertNil(pumpHandshake(client: client, server: server).map { "\($0.side): \($0.error)" })
        XCTAssertTrue(client.isHandshakeComplete)
        XCTAssertTrue(server.isHandshakeComplete)
        XCTAssertEqual(client.negotiatedALPN, "h2")
        XCTAssertEqual(server.negotiatedALPN, "h2")

        try write(client, Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8))
        XCTAssertGreaterThan(client.pendingCiphertextBytes, 0)
        transfer(from: client, to: server)
        XCTAssertEqual(client.pendingCiphertextBytes, 0)
        XCTAssertEqual(try readAvailable(server, upTo: 1000), Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8))

        try write(server, [0, 0, 0, 4, 0, 0, 0, 0, 0])
        transfer(from: server, to: client)
        XCTAssertEqual(try readAvailable(client, upTo: 1000), [0, 0, 0, 4, 0, 0, 0, 0, 0])
        // Nothing more is buffered: a read with no ciphertext reports "need more".
        XCTAssertEqual(try readAvailable(client, upTo: 1), [])
    }

    func testOneMebibyteInSixteenKibibyteWritesArrivesIntactBothWays() throws {
        let (client, server) = try sessions(client: pki.clientConfiguration(), server: pki.serverConfiguration())
        XCTAssertNil(pumpHandshake(client: client, server: server))
        let payload = (0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 11) }
        for (writer, reader) in [(client, server), (server, client)] {
            var received: [UInt8] = []
            var offset = 0
            while offset < payload.count {
                let end = min(offset + 16 * 1024, payload.count)
                try write(writer, Array(payload[offset..<end]))
                offset = end
                if offset % (128 * 1024) == 0 {  // let ciphertext build up across several writes
                    transfer(from: writer, to: reader)
                    received += try readAvailable(reader, upTo: payload.count)
                }
            }
            transfer(from: writer, to: reader)
            received += try readAvailable(reader, upTo: payload.count)
            XCTAssertEqual(received.count, payload.count)
            XCTAssertTrue(received == payload, "payload corrupted")
        }
    }

    func testCloseNotifyEndsTheSession() throws {
        let (client, server) = try sessions(client: pki.clientConfiguration(), server: pki.serverConfiguration())
        XCTAssertNil(pumpHandshake(client: client, server: server))
        try write(client, [1, 2, 3])
        client.shutdown()
        transfer(from: client, to: server)
        XCTAssertEqual(try readAvailable(server, upTo: 3), [1, 2, 3])
        XCTAssertThrowsError(try readAvailable(server, upTo: 1)) { error in
            XCTAssertEqual((error as? TLSError)?.kind, .closed)
            XCTAssertTrue("\(error)".contains("close_notify"), "\(error)")
        }
        // Terminal: the next read says the same thing.
        XCTAssertThrowsError(try readAvailable(server, upTo: 1)) { XCTAssertEqual(($0 as? TLSError)?.kind, .closed) }
        XCTAssertThrowsError(try write(client, [4])) { XCTAssertEqual(($0 as? TLSError)?.kind, .closed) }
    }

    func testStaleErrorOnTheOpenSSLQueueDoesNotBreakTheNextCall() throws {
        let (client, server) = try sessions(client: pki.clientConfiguration(), server: pki.serverConfiguration())
        XCTAssertNil(pumpHandshake(client: client, server: server))
        // Leave an unrelated error behind, as another library on this thread might.
        XCTAssertNil(BIO_new_file(directory.path + "/absent", "rb"))
        XCTAssertNotEqual(ERR_peek_error(), 0)
        XCTAssertEqual(try readAvailable(server, upTo: 1), [])
        try write(server, [9])
        transfer(from: server, to: client)
        XCTAssertEqual(try readAvailable(client, upTo: 1), [9])
    }

    // MARK: Verification

    func testClientRejectsServerFromAnotherCA() throws {
        let other = try TestPKI(directory: directory, name: "Other CA")
        let (client, server) = try sessions(client: other.clientConfiguration(), server: pki.serverConfiguration())
        let failure = try XCTUnwrap(pumpHandshake(client: client, server: server))
        XCTAssertEqual(failure.side, .client)
        XCTAssertEqual(failure.error.kind, .verificationFailed)
        XCTAssertTrue(failure.error.description.contains("certificate verification failed"), failure.error.description)
        XCTAssertTrue(failure.error.description.contains("local issuer"), failure.error.description)
        XCTAssertTrue(failure.error.description.contains("localhost"), failure.error.description)
        XCTAssertEqual(ERR_peek_error(), 0)
        // The failure is terminal.
        XCTAssertThrowsError(try client.advanceHandshake()) { XCTAssertEqual(($0 as? TLSError)?.kind, .verificationFailed) }
    }

    func testSystemTrustStoreAloneDoesNotTrustTheThrowAwayCA() throws {
        var configuration = TLSConfiguration()  // system store only: verification stays on
        configuration.trustsSystemStore = true
        let (client, server) = try sessions(client: configuration, server: pki.serverConfiguration())
        let failure = try XCTUnwrap(pumpHandshake(client: client, server: server))
        XCTAssertEqual(failure.side, .client)
        XCTAssertEqual(failure.error.kind, .verificationFailed, failure.error.description)
    }

    func testClientRejectsHostNameMismatch() throws {
        let (client, server) = try sessions(client: pki.clientConfiguration(), server: pki.serverConfiguration(), serverName: "other.example")
        let failure = try XCTUnwrap(pumpHandshake(client: client, server: server))
        XCTAssertEqual(failure.side, .client)
        XCTAssertEqual(failure.error.kind, .verificationFailed)
        XCTAssertTrue(failure.error.description.contains("hostname mismatch"), failure.error.description)
        XCTAssertTrue(failure.error.description.contains("other.example"), failure.error.description)
    }

    func testIPLiteralsVerifyAgainstSubjectAltNameIPAddresses() throws {
        for address in ["127.0.0.1", "::1"] {
            let (client, server) = try sessions(client: pki.clientConfiguration(), server: pki.serverConfiguration(), serverName: address)
            XCTAssertNil(pumpHandshake(client: client, server: server).map { "\($0.error)" }, address)
            XCTAssertEqual(client.negotiatedALPN, "h2")
        }
        let (client, server) = try sessions(client: pki.clientConfiguration(), server: pki.serverConfiguration(), serverName: "127.0.0.2")
        let failure = try XCTUnwrap(pumpHandshake(client: client, server: server))
        XCTAssertEqual(failure.error.kind, .verificationFailed)
        XCTAssertTrue(failure.error.description.contains("IP address mismatch"), failure.error.description)
    }

    // MARK: ALPN

    func testServerWithoutH2RefusesAndClientNamesH2() throws {
        var serverConfiguration = pki.serverConfiguration()
        serverConfiguration.alpnProtocols = ["http/1.1"]
        let (client, server) = try sessions(client: pki.clientConfiguration(), server: serverConfiguration)
        let failure = try XCTUnwrap(pumpHandshake(client: client, server: server))
        // The server refuses first, with a no_application_protocol alert; the client reads it.
        XCTAssertEqual(failure.side, .server)
        XCTAssertEqual(failure.error.kind, .alpnNotNegotiated)
        XCTAssertTrue(failure.error.description.contains("http/1.1"), failure.error.description)
        transfer(from: server, to: client)
        XCTAssertThrowsError(try client.advanceHandshake()) { error in
            let error = error as! TLSError
            XCTAssertEqual(error.kind, .alpnNotNegotiated)
            XCTAssertTrue(error.description.contains("peer did not select ALPN protocol h2 (offered: h2)"), error.description)
        }
    }

    func testServerWithoutALPNLetsClientFailWithClearError() throws {
        var serverConfiguration = pki.serverConfiguration()
        serverConfiguration.alpnProtocols = []
        let (client, server) = try sessions(client: pki.clientConfiguration(), server: serverConfiguration)
        let failure = try XCTUnwrap(pumpHandshake(client: client, server: server))
        XCTAssertEqual(failure.side, .client)
        XCTAssertEqual(failure.error, TLSError(kind: .alpnNotNegotiated, description: "peer did not select ALPN protocol h2 (offered: h2)"))
        XCTAssertNil(client.negotiatedALPN)
        XCTAssertFalse(client.isHandshakeComplete)
    }

    func testClientOfferingOnlyHTTP1IsRefusedByH2Server() throws {
        var clientConfiguration = pki.clientConfiguration()
        clientConfiguration.alpnProtocols = ["http/1.1"]
        let (client, server) = try sessions(client: clientConfiguration, server: pki.serverConfiguration())
        let failure = try XCTUnwrap(pumpHandshake(client: client, server: server))
        XCTAssertEqual(failure.side, .server)
        XCTAssertEqual(failure.error.kind, .alpnNotNegotiated)
        XCTAssertTrue(failure.error.description.contains("client did not offer ALPN protocol h2"), failure.error.description)
    }

    func testClientWithoutALPNIsRefusedUnlessTheServerAcceptsPriorKnowledge() throws {
        var clientConfiguration = pki.clientConfiguration()
        clientConfiguration.alpnProtocols = []
        let (client, server) = try sessions(client: clientConfiguration, server: pki.serverConfiguration())
        let failure = try XCTUnwrap(pumpHandshake(client: client, server: server))
        XCTAssertEqual(failure.side, .server)
        XCTAssertEqual(failure.error.kind, .alpnNotNegotiated)

        var lenient = pki.serverConfiguration()
        lenient.acceptsClientsWithoutALPN = true
        let (quiet, accepting) = try sessions(client: clientConfiguration, server: lenient)
        XCTAssertNil(try pumpHandshake(client: quiet, server: accepting))
        XCTAssertTrue(accepting.isHandshakeComplete)
        XCTAssertNil(accepting.negotiatedALPN)
        // An offer without h2 is still refused.
        var http1 = pki.clientConfiguration()
        http1.alpnProtocols = ["http/1.1"]
        let (offering, refusing) = try sessions(client: http1, server: lenient)
        XCTAssertEqual(try XCTUnwrap(pumpHandshake(client: offering, server: refusing)).error.kind, .alpnNotNegotiated)
    }

    func testServerPicksItsPreferredProtocolAmongOffered() throws {
        var clientConfiguration = pki.clientConfiguration()
        clientConfiguration.alpnProtocols = ["http/1.1", "h2"]
        var serverConfiguration = pki.serverConfiguration()
        serverConfiguration.alpnProtocols = ["h2", "http/1.1"]
        let (client, server) = try sessions(client: clientConfiguration, server: serverConfiguration)
        XCTAssertNil(pumpHandshake(client: client, server: server))
        XCTAssertEqual(client.negotiatedALPN, "h2")
        XCTAssertEqual(server.negotiatedALPN, "h2")
    }

    // MARK: Client certificates

    private func mutualServerConfiguration() -> TLSConfiguration {
        var configuration = pki.serverConfiguration()
        configuration.clientCAFile = pki.caFile
        return configuration
    }

    func testClientCertificateFromPEMWithEncryptedKeyInOneFile() throws {
        let combined = try directory.write(
            "client.pem", pki.client.certificatePEM + pki.client.encryptedPrivateKeyPEM(passphrase: "correct horse"))
        var configuration = pki.clientConfiguration()
        configuration.clientCertificate = .pem(certificateFile: combined, privateKeyFile: combined, passphrase: "correct horse")
        let (client, server) = try sessions(client: configuration, server: mutualServerConfiguration())
        XCTAssertNil(pumpHandshake(client: client, server: server).map { "\($0.side): \($0.error)" })
        try write(client, [7, 7])
        transfer(from: client, to: server)
        XCTAssertEqual(try readAvailable(server, upTo: 2), [7, 7])
    }

    func testServerRequiringClientCertificateRejectsClientWithout() throws {
        let (client, server) = try sessions(client: pki.clientConfiguration(), server: mutualServerConfiguration())
        let failure = try XCTUnwrap(pumpHandshake(client: client, server: server))
        XCTAssertEqual(failure.side, .server)
        XCTAssertEqual(failure.error.kind, .verificationFailed)
        XCTAssertTrue(failure.error.description.contains("no certificate"), failure.error.description)
        // TLS 1.3: the client finished first and learns of the refusal from the server's alert.
        transfer(from: server, to: client)
        XCTAssertThrowsError(try readAvailable(client, upTo: 1)) { error in
            XCTAssertTrue("\(error)".contains("certificate required"), "\(error)")
        }
    }

    func testServerRejectsClientCertificateFromAnotherCA() throws {
        let other = try TestPKI(directory: directory, name: "Other CA")
        let certificate = try directory.write("other-client.pem", other.client.certificatePEM)
        let key = try directory.write("other-client.key", other.client.privateKeyPEM)
        var configuration = pki.clientConfiguration()
        configuration.clientCertificate = .pem(certificateFile: certificate, privateKeyFile: key, passphrase: nil)
        let (client, server) = try sessions(client: configuration, server: mutualServerConfiguration())
        let failure = try XCTUnwrap(pumpHandshake(client: client, server: server))
        XCTAssertEqual(failure.side, .server)
        XCTAssertEqual(failure.error.kind, .verificationFailed)
        XCTAssertTrue(failure.error.description.contains("certificate verification failed"), failure.error.description)
    }

    func testClientCertificateFromPKCS12() throws {
        let bundle = try directory.write(
            "client.p12", pki.client.pkcs12(passphrase: "p12 secret", caCertificatePEM: pki.authority.certificatePEM))
        var configuration = pki.clientConfiguration()
        configuration.clientCertificate = .pkcs12(file: bundle, passphrase: "p12 secret")
        let (client, server) = try sessions(client: configuration, server: mutualServerConfiguration())
        XCTAssertNil(pumpHandshake(client: client, server: server).map { "\($0.side): \($0.error)" })
        XCTAssertEqual(client.negotiatedALPN, "h2")
    }

    func testWrongPKCS12PassphraseIsAConfigurationErrorThatHidesThePassphrase() throws {
        let bundle = try directory.write("client.p12", pki.client.pkcs12(passphrase: "right-one", caCertificatePEM: nil))
        var configuration = pki.clientConfiguration()
        configuration.clientCertificate = .pkcs12(file: bundle, passphrase: "Wr0ngPassphrase")
        let error = assertConfigurationError(configuration, role: .client, mentions: [bundle, "PKCS#12"])
        XCTAssertFalse(error?.description.contains("Wr0ngPassphrase") ?? true)
        XCTAssertFalse(error?.description.contains("right-one") ?? true)
    }

    func testWrongKeyPassphraseIsAConfigurationErrorThatHidesThePassphrase() throws {
        let key = try directory.write("server-encrypted.key", pki.server.encryptedPrivateKeyPEM(passphrase: "server-secret"))
        var configuration = pki.serverConfiguration()
        configuration.privateKeyFile = key
        configuration.privateKeyPassphrase = "not-the-secret"
        let error = assertConfigurationError(configuration, role: .server, mentions: [key, "passphrase"])
        XCTAssertFalse(error?.description.contains("not-the-secret") ?? true)
        // Without a passphrase the encrypted key fails too (and never prompts on a terminal).
        configuration.privateKeyPassphrase = nil
        _ = assertConfigurationError(configuration, role: .server, mentions: [key])
        // With the right one the server works.
        configuration.privateKeyPassphrase = "server-secret"
        let (client, server) = try sessions(client: pki.clientConfiguration(), server: configuration)
        XCTAssertNil(pumpHandshake(client: client, server: server))
    }

    // MARK: Configuration errors

    func testMissingCAFileNamesThePath() {
        var configuration = TLSConfiguration()
        configuration.additionalCAFile = directory.path + "/absent/ca.pem"
        _ = assertConfigurationError(configuration, role: .client, mentions: ["cannot read CA file \(directory.path)/absent/ca.pem", "No such file"])
    }

    func testCAFileWithoutCertificatesIsRejected() throws {
        var configuration = TLSConfiguration()
        configuration.additionalCAFile = try directory.write("empty.pem", "not a certificate\n")
        _ = assertConfigurationError(configuration, role: .client, mentions: ["empty.pem", "no PEM certificate"])
    }

    func testClientMustTrustSomething() {
        var configuration = TLSConfiguration()
        configuration.trustsSystemStore = false
        _ = assertConfigurationError(configuration, role: .client, mentions: ["trusts no certificate authority"])
    }

    func testServerNeedsCertificateAndKey() {
        _ = assertConfigurationError(TLSConfiguration(), role: .server, mentions: ["certificateChainFile"])
    }

    func testServerKeyMustMatchCertificate() throws {
        var configuration = pki.serverConfiguration()
        configuration.privateKeyFile = try directory.write("client.key", pki.client.privateKeyPEM)
        _ = assertConfigurationError(configuration, role: .server, mentions: ["does not match"])
    }

    func testInvalidALPNNameIsRejected() {
        var configuration = pki.clientConfiguration()
        configuration.alpnProtocols = [""]
        _ = assertConfigurationError(configuration, role: .client, mentions: ["ALPN"])
    }

    func testClientSessionNeedsServerName() throws {
        let context = try TLSContext(role: .client, configuration: pki.clientConfiguration(), files: SecretFile.read)
        XCTAssertThrowsError(try TLSSession(context: context, serverName: nil)) { XCTAssertEqual(($0 as? TLSError)?.kind, .configuration) }
        XCTAssertThrowsError(try TLSSession(context: context, serverName: "")) { XCTAssertEqual(($0 as? TLSError)?.kind, .configuration) }
    }

    // MARK: Protocol version

    /// A raw OpenSSL client capped at TLS 1.1 (and allowed to use it) is refused by our server.
    func testServerRefusesTLS11() throws {
        let server = try TLSSession(context: TLSContext(role: .server, configuration: pki.serverConfiguration(), files: SecretFile.read), serverName: nil)
        let context = try XCTUnwrap(SSL_CTX_new(TLS_client_method()))
        defer { SSL_CTX_free(context) }
        SSL_CTX_set_security_level(context, 0)
        XCTAssertEqual(SSL_CTX_ctrl(context, SSL_CTRL_SET_MIN_PROTO_VERSION, Int(TLS1_VERSION), nil), 1)
        XCTAssertEqual(SSL_CTX_ctrl(context, SSL_CTRL_SET_MAX_PROTO_VERSION, Int(TLS1_1_VERSION), nil), 1)
        XCTAssertEqual(SSL_CTX_set_cipher_list(context, "DEFAULT:@SECLEVEL=0"), 1)
        let ssl = try XCTUnwrap(SSL_new(context))
        defer { SSL_free(ssl) }
        let (toServer, fromServer) = (BIO_new(BIO_s_mem())!, BIO_new(BIO_s_mem())!)
        SSL_set_bio(ssl, fromServer, toServer)
        SSL_set_connect_state(ssl)
        XCTAssertEqual(SSL_do_handshake(ssl), -1)  // ClientHello written; waiting for the reply
        ERR_clear_error()
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        let count = BIO_read(toServer, &buffer, Int32(buffer.count))
        XCTAssertGreaterThan(count, 0)
        buffer.withUnsafeBytes { server.feedCiphertext(UnsafeRawBufferPointer(rebasing: $0[0..<Int(count)])) }
        XCTAssertThrowsError(try server.advanceHandshake()) { error in
            XCTAssertEqual((error as? TLSError)?.kind, .handshakeFailed)
            XCTAssertTrue("\(error)".contains("unsupported protocol"), "\(error)")
        }
    }
}
