// CertificateFactory: throw-away certificate authorities and leaf certificates, made in memory
// with OpenSSL (EC P-256, SHA-256). The mock server and the tests use it so that no private key
// is ever checked in (design.md section 1, data/).
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
    /// authorityKeyIdentifier).
    static func makeCertificate(
        subject commonName: String, publicKey: OpaquePointer, issuer: OpaquePointer?, signingKey: OpaquePointer,
        validDays: Int, extensions: [(Int32, String)]
    ) throws(TLSError) -> OpaquePointer {
        guard !commonName.isEmpty, !commonName.utf8.contains(0) else {
            throw TLSError(kind: .configuration, description: "certificate common name must be non-empty text")
        }
        guard validDays >= 1 else { throw TLSError(kind: .configuration, description: "validDays must be at least 1, not \(validDays)") }
        guard let certificate = X509_new() else { throw failure("cannot allocate a certificate") }
        do throws(TLSError) {
            try fill(certificate, commonName: commonName, publicKey: publicKey, issuer: issuer, validDays: validDays)
            for (nid, value) in extensions {
                try addExtension(nid, value, to: certificate, issuer: issuer ?? certificate)
            }
            guard X509_sign(certificate, signingKey, EVP_sha256()) > 0 else { throw failure("cannot sign the certificate for '\(commonName)'") }
            return certificate
        } catch {
            X509_free(certificate)
            throw error
        }
    }

    private static func fill(
        _ certificate: OpaquePointer, commonName: String, publicKey: OpaquePointer, issuer: OpaquePointer?, validDays: Int
    ) throws(TLSError) {
        guard let name = X509_NAME_new() else { throw failure("cannot allocate a name") }
        defer { X509_NAME_free(name) }
        guard X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, commonName, -1, -1, 0) == 1 else {
            throw failure("cannot use '\(commonName)' as a common name")
        }
        let issuerName = issuer.map { X509_get_subject_name($0) } ?? name
        let serial = try randomSerial()
        defer { ASN1_INTEGER_free(serial) }
        guard X509_set_version(certificate, Int(X509_VERSION_3)) == 1,
              X509_set_serialNumber(certificate, serial) == 1,
              X509_set_subject_name(certificate, name) == 1,
              X509_set_issuer_name(certificate, issuerName) == 1,
              X509_set_pubkey(certificate, publicKey) == 1,
              // An hour of slack for clocks that run behind.
              X509_gmtime_adj(X509_getm_notBefore(certificate), -3600) != nil,
              X509_gmtime_adj(X509_getm_notAfter(certificate), validDays * 86_400) != nil else {
            throw failure("cannot fill in the certificate for '\(commonName)'")
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
