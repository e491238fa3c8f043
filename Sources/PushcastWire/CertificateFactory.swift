// CertificateFactory: throw-away certificate authorities and leaf certificates, made in memory
// with OpenSSL (EC P-256, SHA-256). The mock server and the tests use it so that no private key
// is ever checked in (docs/DESIGN.md §1, data/). A SigningAuthority also issues client
// certificates of any subject and validity window (APNs push certificates, expired ones) for tests.
import COpenSSL

public struct CertificateFactory: Sendable {
    /// A self-signed CA (basicConstraints critical CA:TRUE, keyUsage keyCertSign and cRLSign,
    /// subjectKeyIdentifier), valid from an hour ago for ten years.
    public static func makeAuthority(commonName: String) throws(TLSError) -> CertificateAuthority {
        ERR_clear_error()
        let key = try CertificateBuilding.generateKey()
        do throws(TLSError) {
            let certificate = try CertificateBuilding.makeCertificate(
                subject: commonName, publicKey: key, issuer: nil, signingKey: key, validDays: 3650,
                extensions: [
                    (NID_basic_constraints, "critical,CA:TRUE"),
                    (NID_key_usage, "critical,keyCertSign,cRLSign"),
                    (NID_subject_key_identifier, "hash"),
                ])
            let pem: String
            do throws(TLSError) { pem = try CertificateBuilding.pem(ofCertificate: certificate) } catch {
                X509_free(certificate)
                throw error
            }
            return CertificateAuthority(key: key, certificate: certificate, certificatePEM: pem)
        } catch {
            EVP_PKEY_free(key)
            throw error
        }
    }
}

extension CertificateFactory {
    /// A CA like `makeAuthority`'s whose private key is kept as PEM in the value, so that a test
    /// can issue client certificates of any subject and validity from it, at any time: APNs-style
    /// push certificates (subject UID = bundle ID), expired ones, ones for another topic.
    public static func makeSigningAuthority(commonName: String) throws(TLSError) -> SigningAuthority {
        ERR_clear_error()
        let key = try CertificateBuilding.generateKey()
        defer { EVP_PKEY_free(key) }
        let certificate = try CertificateBuilding.makeCertificate(
            subject: commonName, publicKey: key, issuer: nil, signingKey: key, validDays: 3650,
            extensions: [
                (NID_basic_constraints, "critical,CA:TRUE"),
                (NID_key_usage, "critical,keyCertSign,cRLSign"),
                (NID_subject_key_identifier, "hash"),
            ])
        defer { X509_free(certificate) }
        return SigningAuthority(certificatePEM: try CertificateBuilding.pem(ofCertificate: certificate),
                                privateKeyPEM: try CertificateBuilding.pem(ofPrivateKey: key))
    }
}

/// A throw-away CA held as PEM text (certificate and unencrypted key): test material only, for
/// issuing client certificates (`issueClientCertificate`). Made by
/// `CertificateFactory.makeSigningAuthority`.
public struct SigningAuthority: Sendable {
    public let certificatePEM: String
    /// Unencrypted PKCS#8. Never a real CA's key.
    public let privateKeyPEM: String

    /// A client certificate (extendedKeyUsage clientAuth) with a new P-256 key, signed by this CA.
    /// `subject` lists the name's entries by OpenSSL short name, in order, e.g.
    /// `[("UID", "com.example.app"), ("CN", "Apple Push Services: com.example.app"), ("OU", "TEAM123456"), ("C", "US")]`
    /// as in Apple's push certificates. The validity window is in seconds relative to now:
    /// `notBefore: -172_800, notAfter: -86_400` makes a certificate that expired yesterday.
    public func issueClientCertificate(
        subject: [(String, String)], notBefore: Int = -3600, notAfter: Int = 30 * 86_400
    ) throws(TLSError) -> IssuedCertificate {
        ERR_clear_error()
        let authorityKey = try TLSCredentials.withUTF8(of: privateKeyPEM) { bytes throws(TLSError) in
            try TLSCredentials.privateKey(inPEM: bytes, source: "signing authority key", passphrase: nil)
        }
        defer { EVP_PKEY_free(authorityKey) }
        let authority = try TLSCredentials.withUTF8(of: certificatePEM) { bytes throws(TLSError) in
            try TLSCredentials.certificates(inPEM: bytes, source: "signing authority certificate")
        }
        defer { authority.forEach { X509_free($0) } }
        let leafKey = try CertificateBuilding.generateKey()
        defer { EVP_PKEY_free(leafKey) }
        let leaf = try CertificateBuilding.makeCertificate(
            subject: subject, publicKey: leafKey, issuer: authority[0], signingKey: authorityKey,
            validity: (notBefore, notAfter),
            extensions: [
                (NID_basic_constraints, "critical,CA:FALSE"),
                (NID_key_usage, "critical,digitalSignature"),
                (NID_ext_key_usage, "clientAuth"),
                (NID_subject_key_identifier, "hash"),
                (NID_authority_key_identifier, "keyid:always"),
            ])
        defer { X509_free(leaf) }
        return IssuedCertificate(certificatePEM: try CertificateBuilding.pem(ofCertificate: leaf),
                                 privateKeyPEM: try CertificateBuilding.pem(ofPrivateKey: leafKey))
    }
}

/// Low-level steps shared by the factory, the authority and issued certificates.
enum CertificateBuilding {
    /// A new EC P-256 key pair; the caller frees it.
    static func generateKey() throws(TLSError) -> OpaquePointer {
        guard let parameters = EVP_PKEY_CTX_new_from_name(nil, "EC", nil) else { throw failure("cannot create an EC key context") }
        defer { EVP_PKEY_CTX_free(parameters) }
        var key: OpaquePointer? = nil
        guard EVP_PKEY_keygen_init(parameters) == 1,
              EVP_PKEY_CTX_set_group_name(parameters, "P-256") == 1,
              EVP_PKEY_generate(parameters, &key) == 1, let key else {
            throw failure("cannot generate an EC P-256 key")
        }
        return key
    }

    /// A signed X.509 v3 certificate; the caller frees it. `issuer` nil means self-signed.
    /// Extensions are OpenSSL config strings, added in order (so subjectKeyIdentifier can precede
    /// authorityKeyIdentifier). Valid from an hour ago (slack for clocks that run behind) for
    /// `validDays`.
    static func makeCertificate(
        subject commonName: String, publicKey: OpaquePointer, issuer: OpaquePointer?, signingKey: OpaquePointer,
        validDays: Int, extensions: [(Int32, String)]
    ) throws(TLSError) -> OpaquePointer {
        guard validDays >= 1 else { throw TLSError(kind: .configuration, description: "validDays must be at least 1, not \(validDays)") }
        return try makeCertificate(
            subject: [("CN", commonName)], publicKey: publicKey, issuer: issuer, signingKey: signingKey,
            validity: (-3600, validDays * 86_400), extensions: extensions)
    }

    /// The same with any subject (entries by OpenSSL short name, in order: "UID", "CN", "OU", "O",
    /// "C") and a validity window in seconds relative to now; a negative offset is in the past, so
    /// an already expired certificate can be made.
    static func makeCertificate(
        subject: [(String, String)], publicKey: OpaquePointer, issuer: OpaquePointer?, signingKey: OpaquePointer,
        validity: (notBefore: Int, notAfter: Int), extensions: [(Int32, String)]
    ) throws(TLSError) -> OpaquePointer {
        guard !subject.isEmpty, subject.allSatisfy({ !$0.1.isEmpty && !$0.1.utf8.contains(0) }) else {
            throw TLSError(kind: .configuration, description: "certificate subject entries must be non-empty text")
        }
        guard validity.notAfter > validity.notBefore else {
            throw TLSError(kind: .configuration, description: "a certificate's notAfter must come after its notBefore")
        }
        let label = subject.map { "\($0.0)=\($0.1)" }.joined(separator: ", ")
        guard let certificate = X509_new() else { throw failure("cannot allocate a certificate") }
        do throws(TLSError) {
            try fill(certificate, subject: subject, publicKey: publicKey, issuer: issuer, validity: validity)
            for (nid, value) in extensions {
                try addExtension(nid, value, to: certificate, issuer: issuer ?? certificate)
            }
            guard X509_sign(certificate, signingKey, EVP_sha256()) > 0 else { throw failure("cannot sign the certificate for '\(label)'") }
            return certificate
        } catch {
            X509_free(certificate)
            throw error
        }
    }

    private static func fill(
        _ certificate: OpaquePointer, subject: [(String, String)], publicKey: OpaquePointer, issuer: OpaquePointer?,
        validity: (notBefore: Int, notAfter: Int)
    ) throws(TLSError) {
        guard let name = X509_NAME_new() else { throw failure("cannot allocate a name") }
        defer { X509_NAME_free(name) }
        for (field, value) in subject {
            guard X509_NAME_add_entry_by_txt(name, field, MBSTRING_UTF8, value, -1, -1, 0) == 1 else {
                throw failure("cannot use '\(value)' as subject \(field)")
            }
        }
        let issuerName = issuer.map { X509_get_subject_name($0) } ?? name
        let serial = try randomSerial()
        defer { ASN1_INTEGER_free(serial) }
        guard X509_set_version(certificate, Int(X509_VERSION_3)) == 1,
              X509_set_serialNumber(certificate, serial) == 1,
              X509_set_subject_name(certificate, name) == 1,
              X509_set_issuer_name(certificate, issuerName) == 1,
              X509_set_pubkey(certificate, publicKey) == 1,
              X509_gmtime_adj(X509_getm_notBefore(certificate), validity.notBefore) != nil,
              X509_gmtime_adj(X509_getm_notAfter(certificate), validity.notAfter) != nil else {
            throw failure("cannot fill in the certificate")
        }
    }

    /// A positive random 159-bit serial (RFC 5280 section 4.1.2.2 allows at most 20 octets).
    private static func randomSerial() throws(TLSError) -> UnsafeMutablePointer<ASN1_INTEGER> {
        guard let number = BN_new() else { throw failure("cannot allocate a serial number") }
        defer { BN_free(number) }
        guard BN_rand(number, 159, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) == 1,
              let serial = BN_to_ASN1_INTEGER(number, nil) else {
            throw failure("cannot make a random serial number")
        }
        return serial
    }

    private static func addExtension(_ nid: Int32, _ value: String, to certificate: OpaquePointer, issuer: OpaquePointer) throws(TLSError) {
        var context = X509V3_CTX()
        X509V3_set_ctx(&context, issuer, certificate, nil, nil, 0)
        guard let ext = X509V3_EXT_conf_nid(nil, &context, nid, value) else {
            throw failure("cannot make certificate extension \(String(cString: OBJ_nid2sn(nid))) '\(value)'")
        }
        defer { X509_EXTENSION_free(ext) }
        guard X509_add_ext(certificate, ext, -1) == 1 else { throw failure("cannot add certificate extension '\(value)'") }
    }

    static func pem(ofCertificate certificate: OpaquePointer) throws(TLSError) -> String {
        try writingPEM { PEM_write_bio_X509($0, certificate) }
    }

    /// Unencrypted PKCS#8 ("BEGIN PRIVATE KEY").
    static func pem(ofPrivateKey key: OpaquePointer) throws(TLSError) -> String {
        try writingPEM { PEM_write_bio_PrivateKey($0, key, nil, nil, 0, nil, nil) }
    }

    /// Runs `write` against a fresh memory BIO and returns what it wrote as text.
    static func writingPEM(_ write: (OpaquePointer) -> Int32) throws(TLSError) -> String {
        let bytes = try writingBytes(write)
        return String(decoding: bytes, as: UTF8.self)
    }

    static func writingBytes(_ write: (OpaquePointer) -> Int32) throws(TLSError) -> [UInt8] {
        guard let bio = BIO_new(BIO_s_mem()) else { throw failure("cannot allocate a memory BIO") }
        defer { BIO_free(bio) }
        guard write(bio) == 1 else { throw failure("cannot encode") }
        return Array(TLSCredentials.contents(ofMemoryBIO: bio))
    }

    static func failure(_ what: String) -> TLSError {
        TLSError(kind: .configuration, description: "\(what): \(OpenSSLErrorQueue.drain().message())")
    }
}
