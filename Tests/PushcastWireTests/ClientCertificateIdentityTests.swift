// Certificate auth at the TLS layer, in memory: push certificates issued by a SigningAuthority
// (subject UID and CN, any validity window), the server's record of the verified client
// certificate (TLSContext.takeClientCertificate), and what happens to certificates that do not
// verify, refused in the handshake or admitted with the reason.
import COpenSSL
import XCTest
import PushcastSystem
@testable import PushcastWire

final class ClientCertificateIdentityTests: XCTestCase {
    private var directory: TemporaryDirectory!
    private var pki: TestPKI!
    private var pushCA: SigningAuthority!
    private var pushCAFile: String!

    override func setUpWithError() throws {
        directory = try TemporaryDirectory()
        pki = try TestPKI(directory: directory)
        pushCA = try CertificateFactory.makeSigningAuthority(commonName: "Test Apple Worldwide Developer Relations CA")
        pushCAFile = try directory.write("push-ca.pem", pushCA.certificatePEM)
    }

    override func tearDown() {
        pki = nil
        directory = nil
    }

    private static let subject = [("UID", "com.example.app"), ("CN", "Apple Push Services: com.example.app"),
                                  ("OU", "TEAM123456"), ("O", "Example Inc."), ("C", "US")]

    private func serverContext(admitting: Bool = false) throws -> TLSContext {
        var configuration = pki.serverConfiguration()
        configuration.clientCAFile = pushCAFile
        configuration.admitsUnverifiedClientCertificates = admitting
        return try TLSContext(role: .server, configuration: configuration, files: SecretFile.read)
    }

    /// A client presenting `issued` from a PKCS#12 bundle.
    private func client(_ issued: IssuedCertificate) throws -> TLSSession {
        let bundle = try directory.write("client-\(UUID().uuidString).p12", issued.pkcs12(passphrase: "p12 pass", caCertificatePEM: nil))
        var configuration = pki.clientConfiguration()
        configuration.clientCertificate = .pkcs12(file: bundle, passphrase: "p12 pass")
        return try TLSSession(context: TLSContext(role: .client, configuration: configuration, files: SecretFile.read), serverName: "localhost")
    }

    private func certificate(_ pem: String) throws -> OpaquePointer {
        let bio = try XCTUnwrap(BIO_new_mem_buf(pem, Int32(pem.utf8.count)))
        defer { BIO_free(bio) }
        return try XCTUnwrap(PEM_read_bio_X509(bio, nil, nil, nil))
    }

    func testPushCertificateHasItsSubjectClientPurposeAndWindow() throws {
        let issued = try pushCA.issueClientCertificate(subject: Self.subject, notBefore: -172_800, notAfter: -86_400)
        let leaf = try certificate(issued.certificatePEM)
        defer { X509_free(leaf) }
        var buffer = [CChar](repeating: 0, count: 512)
        X509_NAME_oneline(X509_get_subject_name(leaf), &buffer, Int32(buffer.count))
        let subject = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        XCTAssertEqual(subject, "/UID=com.example.app/CN=Apple Push Services: com.example.app/OU=TEAM123456/O=Example Inc./C=US")
        XCTAssertNotEqual(X509_get_extended_key_usage(leaf) & UInt32(XKU_SSL_CLIENT), 0)
        // Expired a day ago: notAfter is before now.
        XCTAssertEqual(X509_cmp_current_time(X509_get0_notAfter(leaf)), -1)
        XCTAssertEqual(X509_cmp_current_time(X509_get0_notBefore(leaf)), -1)
        XCTAssertThrowsError(try pushCA.issueClientCertificate(subject: Self.subject, notBefore: 10, notAfter: 10))
        XCTAssertThrowsError(try pushCA.issueClientCertificate(subject: [("CN", "")]))
        XCTAssertEqual(ERR_peek_error(), 0)
    }

    func testServerRecordsTheVerifiedCertificatesUIDAndCommonName() throws {
        let context = try serverContext()
        XCTAssertTrue(context.verifiesClientCertificates)
        let server = try TLSSession(context: context, serverName: nil)
        let client = try client(pushCA.issueClientCertificate(subject: Self.subject))
        XCTAssertNil(pumpHandshake(client: client, server: server).map { "\($0.side): \($0.error)" })
        XCTAssertEqual(context.takeClientCertificate(),
                       TLSClientCertificate(subjectUID: "com.example.app", commonName: "Apple Push Services: com.example.app"))
        XCTAssertNil(context.takeClientCertificate(), "taken once")
        XCTAssertFalse(try TLSContext(role: .server, configuration: pki.serverConfiguration(), files: SecretFile.read).verifiesClientCertificates)
    }

    func testExpiredCertificateFailsTheHandshakeAndTheClientHearsWhy() throws {
        let context = try serverContext()
        let server = try TLSSession(context: context, serverName: nil)
        let client = try client(pushCA.issueClientCertificate(subject: Self.subject, notBefore: -172_800, notAfter: -86_400))
        let failure = try XCTUnwrap(pumpHandshake(client: client, server: server))
        XCTAssertEqual(failure.side, .server)
        XCTAssertEqual(failure.error.kind, .verificationFailed)
        XCTAssertTrue(failure.error.description.contains("certificate has expired"), failure.error.description)
        XCTAssertNil(context.takeClientCertificate())
        // TLS 1.3: the client's handshake is over; the server's alert arrives as it reads.
        transfer(from: server, to: client)
        XCTAssertThrowsError(try readAvailable(client, upTo: 1)) { error in
            XCTAssertTrue("\(error)".contains("certificate expired"), "\(error)")
        }
    }

    func testAdmittingServerCompletesTheHandshakeAndRecordsWhyItDidNotVerify() throws {
        let context = try serverContext(admitting: true)
        let expired = try pushCA.issueClientCertificate(subject: Self.subject, notBefore: -172_800, notAfter: -86_400)
        let stranger = try CertificateFactory.makeSigningAuthority(commonName: "Other CA")
            .issueClientCertificate(subject: [("UID", "com.other.app"), ("CN", "Apple Push Services: com.other.app")])
        for (issued, reason, uid) in [(expired, "certificate has expired", "com.example.app"),
                                      (stranger, "unable to verify the first certificate", "com.other.app")] {
            let server = try TLSSession(context: context, serverName: nil)
            XCTAssertNil(pumpHandshake(client: try client(issued), server: server).map { "\($0.side): \($0.error)" })
            let recorded = try XCTUnwrap(context.takeClientCertificate())
            XCTAssertEqual(recorded.subjectUID, uid)
            XCTAssertEqual(recorded.verificationError, reason)
        }
        // Still no entry without a certificate at all.
        let server = try TLSSession(context: context, serverName: nil)
        let bare = try TLSSession(context: TLSContext(role: .client, configuration: pki.clientConfiguration(), files: SecretFile.read), serverName: "localhost")
        XCTAssertEqual(try XCTUnwrap(pumpHandshake(client: bare, server: server)).error.kind, .verificationFailed)
    }

    func testCertificateWithoutUIDRecordsNone() throws {
        let context = try serverContext()
        let server = try TLSSession(context: context, serverName: nil)
        let client = try client(pushCA.issueClientCertificate(subject: [("CN", "Apple Development IOS Push Services: x")]))
        XCTAssertNil(pumpHandshake(client: client, server: server).map { "\($0.side): \($0.error)" })
        XCTAssertEqual(context.takeClientCertificate(),
                       TLSClientCertificate(subjectUID: nil, commonName: "Apple Development IOS Push Services: x"))
    }

    func testHandOffIsPerThread() throws {
        let context = try serverContext()
        let server = try TLSSession(context: context, serverName: nil)
        let client = try client(pushCA.issueClientCertificate(subject: Self.subject))
        XCTAssertNil(pumpHandshake(client: client, server: server).map { "\($0.side): \($0.error)" })
        final class Outcome: @unchecked Sendable { var taken: TLSClientCertificate?; let done = DispatchSemaphore(value: 0) }
        let outcome = Outcome()
        Thread {
            outcome.taken = context.takeClientCertificate()
            outcome.done.signal()
        }.start()
        outcome.done.wait()
        XCTAssertNil(outcome.taken, "another thread's handshake")
        XCTAssertNotNil(context.takeClientCertificate())
    }
}
