// CertificateFactory output checked with OpenSSL directly: chain verification, extensions,
// serials, validity, and the encrypted key and PKCS#12 encodings.
import COpenSSL
import XCTest
@testable import PushcastWire

final class CertificateFactoryTests: XCTestCase {
    private func certificate(_ pem: String) throws -> OpaquePointer {
        let bio = try XCTUnwrap(BIO_new_mem_buf(pem, Int32(pem.utf8.count)))
        defer { BIO_free(bio) }
        return try XCTUnwrap(PEM_read_bio_X509(bio, nil, nil, nil))
    }

    /// X509_verify_cert of `leaf` against `authority` alone; returns the verify error (0 = OK).
    private func verify(_ leaf: OpaquePointer, against authority: OpaquePointer, purpose: Int32) throws -> Int32 {
        let store = try XCTUnwrap(X509_STORE_new())
        defer { X509_STORE_free(store) }
        XCTAssertEqual(X509_STORE_add_cert(store, authority), 1)
        let context = try XCTUnwrap(X509_STORE_CTX_new())
        defer { X509_STORE_CTX_free(context) }
        XCTAssertEqual(X509_STORE_CTX_init(context, store, leaf, nil), 1)
        XCTAssertEqual(X509_STORE_CTX_set_purpose(context, purpose), 1)
        _ = X509_verify_cert(context)
        return X509_STORE_CTX_get_error(context)
    }

    func testAuthorityIsASelfSignedCA() throws {
        let authority = try CertificateFactory.makeAuthority(commonName: "Pushcast Mock CA")
        XCTAssertTrue(authority.certificatePEM.hasPrefix("-----BEGIN CERTIFICATE-----"))
        let ca = try certificate(authority.certificatePEM)
        defer { X509_free(ca) }
        XCTAssertEqual(X509_check_ca(ca), 1)
        XCTAssertEqual(try verify(ca, against: ca, purpose: X509_PURPOSE_ANY), X509_V_OK)
        XCTAssertNotNil(X509_get0_subject_key_id(ca))
        XCTAssertNotEqual(X509_get_key_usage(ca) & UInt32(KU_KEY_CERT_SIGN), 0)
        XCTAssertEqual(OBJ_obj2nid(X509_get0_tbs_sigalg(ca).pointee.algorithm), NID_ecdsa_with_SHA256)
    }

    func testServerLeafVerifiesForItsNamesAndPurposeOnly() throws {
        let authority = try CertificateFactory.makeAuthority(commonName: "CA")
        let issued = try authority.issue(
            commonName: "localhost", dnsNames: ["localhost", "api.push.test"], ipAddresses: ["127.0.0.1", "::1"],
            serverAuth: true, clientAuth: false, validDays: 2)
        let ca = try certificate(authority.certificatePEM)
        defer { X509_free(ca) }
        let leaf = try certificate(issued.certificatePEM)
        defer { X509_free(leaf) }
        XCTAssertEqual(try verify(leaf, against: ca, purpose: X509_PURPOSE_SSL_SERVER), X509_V_OK)
        XCTAssertNotEqual(try verify(leaf, against: ca, purpose: X509_PURPOSE_SSL_CLIENT), X509_V_OK)
        XCTAssertEqual(X509_check_ca(leaf), 0)
        XCTAssertEqual(X509_check_host(leaf, "localhost", 0, 0, nil), 1)
        XCTAssertEqual(X509_check_host(leaf, "api.push.test", 0, 0, nil), 1)
        XCTAssertEqual(X509_check_host(leaf, "other.example", 0, 0, nil), 0)
        XCTAssertEqual(X509_check_ip_asc(leaf, "127.0.0.1", 0), 1)
        XCTAssertEqual(X509_check_ip_asc(leaf, "::1", 0), 1)
        XCTAssertEqual(X509_check_ip_asc(leaf, "10.0.0.1", 0), 0)
        XCTAssertNotNil(X509_get0_authority_key_id(leaf))
        // Valid from an hour ago (give or take a minute) for validDays.
        var days: Int32 = 0
        var seconds: Int32 = 0
        XCTAssertEqual(ASN1_TIME_diff(&days, &seconds, X509_get0_notBefore(leaf), nil), 1)
        XCTAssertEqual(Double(days * 86_400 + seconds), 3600, accuracy: 60)
        XCTAssertEqual(ASN1_TIME_diff(&days, &seconds, X509_get0_notBefore(leaf), X509_get0_notAfter(leaf)), 1)
        XCTAssertEqual(days * 86_400 + seconds, 2 * 86_400 + 3600)
        // The key belongs to the certificate.
        let key = try XCTUnwrap(issued.privateKeyPEM.withCString { pointer -> OpaquePointer? in
            let bio = BIO_new_mem_buf(pointer, -1)
            defer { BIO_free(bio) }
            return PEM_read_bio_PrivateKey(bio, nil, nil, nil)
        })
        defer { EVP_PKEY_free(key) }
        XCTAssertEqual(X509_check_private_key(leaf, key), 1)
        XCTAssertEqual(EVP_PKEY_get_bits(key), 256)
    }

    func testClientLeafHasClientPurposeAndSerialsDiffer() throws {
        let authority = try CertificateFactory.makeAuthority(commonName: "CA")
        let first = try authority.issue(commonName: "client", dnsNames: [], ipAddresses: [], serverAuth: false, clientAuth: true)
        let second = try authority.issue(commonName: "client", dnsNames: [], ipAddresses: [], serverAuth: false, clientAuth: true)
        let ca = try certificate(authority.certificatePEM)
        defer { X509_free(ca) }
        let a = try certificate(first.certificatePEM)
        defer { X509_free(a) }
        let b = try certificate(second.certificatePEM)
        defer { X509_free(b) }
        XCTAssertEqual(try verify(a, against: ca, purpose: X509_PURPOSE_SSL_CLIENT), X509_V_OK)
        XCTAssertNotEqual(try verify(a, against: ca, purpose: X509_PURPOSE_SSL_SERVER), X509_V_OK)
        XCTAssertNotEqual(ASN1_INTEGER_cmp(X509_get0_serialNumber(a), X509_get0_serialNumber(b)), 0)
        XCTAssertNotEqual(first.privateKeyPEM, second.privateKeyPEM)
    }

    func testLeafFromAnotherAuthorityDoesNotVerify() throws {
        let issuer = try CertificateFactory.makeAuthority(commonName: "CA")
        let stranger = try CertificateFactory.makeAuthority(commonName: "CA")  // same name, other key
        let issued = try issuer.issue(commonName: "localhost", dnsNames: ["localhost"], ipAddresses: [], serverAuth: true, clientAuth: false)
        let ca = try certificate(stranger.certificatePEM)
        defer { X509_free(ca) }
        let leaf = try certificate(issued.certificatePEM)
        defer { X509_free(leaf) }
        XCTAssertNotEqual(try verify(leaf, against: ca, purpose: X509_PURPOSE_SSL_SERVER), X509_V_OK)
    }

    func testEncryptedPrivateKeyNeedsItsPassphrase() throws {
        let authority = try CertificateFactory.makeAuthority(commonName: "CA")
        let issued = try authority.issue(commonName: "x", dnsNames: ["x"], ipAddresses: [], serverAuth: true, clientAuth: false)
        let encrypted = try issued.encryptedPrivateKeyPEM(passphrase: "open sesame")
        XCTAssertTrue(encrypted.hasPrefix("-----BEGIN ENCRYPTED PRIVATE KEY-----"), encrypted)
        XCTAssertFalse(encrypted.contains("open sesame"))
        func load(_ passphrase: String) -> OpaquePointer? {
            encrypted.withCString { pointer in
                let bio = BIO_new_mem_buf(pointer, -1)
                defer { BIO_free(bio) }
                return passphrase.withCString { PEM_read_bio_PrivateKey(bio, nil, nil, UnsafeMutableRawPointer(mutating: $0)) }
            }
        }
        XCTAssertNil(load("wrong"))
        ERR_clear_error()
        let key = try XCTUnwrap(load("open sesame"))
        defer { EVP_PKEY_free(key) }
        let leaf = try certificate(issued.certificatePEM)
        defer { X509_free(leaf) }
        XCTAssertEqual(X509_check_private_key(leaf, key), 1)
        XCTAssertThrowsError(try issued.encryptedPrivateKeyPEM(passphrase: "")) { XCTAssertEqual(($0 as? TLSError)?.kind, .configuration) }
    }

    func testPKCS12BundleOpensWithItsPassphraseOnly() throws {
        let authority = try CertificateFactory.makeAuthority(commonName: "CA")
        let issued = try authority.issue(commonName: "client", dnsNames: [], ipAddresses: [], serverAuth: false, clientAuth: true)
        let der = try issued.pkcs12(passphrase: "bundle pass", caCertificatePEM: authority.certificatePEM)
        XCTAssertEqual(der.first, 0x30)  // a DER SEQUENCE
        func parse(_ passphrase: String) throws -> (OpaquePointer?, OpaquePointer?, Int32) {
            let bio = try XCTUnwrap(BIO_new_mem_buf(der, Int32(der.count)))
            defer { BIO_free(bio) }
            let bundle = try XCTUnwrap(d2i_PKCS12_bio(bio, nil))
            defer { PKCS12_free(bundle) }
            var key: OpaquePointer? = nil
            var certificate: OpaquePointer? = nil
            var chain: OpaquePointer? = nil
            guard PKCS12_parse(bundle, passphrase, &key, &certificate, &chain) == 1 else { return (nil, nil, -1) }
            let count = chain.map { OPENSSL_sk_num($0) } ?? 0
            if let chain { OPENSSL_sk_pop_free(chain) { X509_free(OpaquePointer($0)) } }
            return (key, certificate, count)
        }
        let (key, leaf, chainCount) = try parse("bundle pass")
        defer { EVP_PKEY_free(key); X509_free(leaf) }
        XCTAssertNotNil(key)
        XCTAssertNotNil(leaf)
        XCTAssertEqual(chainCount, 1)
        if let key, let leaf { XCTAssertEqual(X509_check_private_key(leaf, key), 1) }
        let (wrongKey, wrongLeaf, _) = try parse("wrong pass")
        XCTAssertNil(wrongKey)
        XCTAssertNil(wrongLeaf)
        ERR_clear_error()
    }

    func testBadNamesAreConfigurationErrors() throws {
        let authority = try CertificateFactory.makeAuthority(commonName: "CA")
        for (dns, ip) in [(["a,IP:1.2.3.4"], [String]()), ([], ["localhost"]), ([""], [])] {
            XCTAssertThrowsError(try authority.issue(commonName: "x", dnsNames: dns, ipAddresses: ip, serverAuth: true, clientAuth: false)) {
                XCTAssertEqual(($0 as? TLSError)?.kind, .configuration, "\(dns) \(ip)")
            }
        }
        XCTAssertThrowsError(try authority.issue(commonName: "", dnsNames: [], ipAddresses: [], serverAuth: true, clientAuth: false))
        XCTAssertThrowsError(try authority.issue(commonName: "x", dnsNames: [], ipAddresses: [], serverAuth: true, clientAuth: false, validDays: 0))
        XCTAssertThrowsError(try CertificateFactory.makeAuthority(commonName: ""))
        XCTAssertEqual(ERR_peek_error(), 0)
    }
}
