// IssuedCertificate: a leaf certificate and its key as PEM text, with the other encodings a
// client or server configuration may ask for (encrypted PKCS#8, PKCS#12).
import COpenSSL

public struct IssuedCertificate: Sendable {
    public let certificatePEM: String
    /// Unencrypted PKCS#8 ("BEGIN PRIVATE KEY").
    public let privateKeyPEM: String

    init(certificatePEM: String, privateKeyPEM: String) {
        self.certificatePEM = certificatePEM
        self.privateKeyPEM = privateKeyPEM
    }

    /// The key as encrypted PKCS#8 ("BEGIN ENCRYPTED PRIVATE KEY"), AES-256-CBC with PBKDF2.
    public func encryptedPrivateKeyPEM(passphrase: String) throws(TLSError) -> String {
        ERR_clear_error()
        guard !passphrase.isEmpty else { throw TLSError(kind: .configuration, description: "the key passphrase must not be empty") }
        let key = try loadKey()
        defer { EVP_PKEY_free(key) }
        let bytes = Array(passphrase.utf8)
        do {
            return try CertificateBuilding.writingPEM { bio in
                bytes.withUnsafeBufferPointer { secret in
                    PEM_write_bio_PKCS8PrivateKey(
                        bio, key, EVP_aes_256_cbc(),
                        UnsafeMutableRawPointer(mutating: secret.baseAddress!).assumingMemoryBound(to: CChar.self),
                        Int32(secret.count), nil, nil)
                }
            }
        } catch {
            throw TLSError.configuration(error.description, redacting: passphrase)
        }
    }

    /// A DER PKCS#12 bundle of the key, the certificate and optionally the CA certificate, with
    /// OpenSSL 3's defaults (PBES2 AES-256-CBC, PBKDF2, HMAC-SHA-256 MAC).
    public func pkcs12(passphrase: String, caCertificatePEM: String?) throws(TLSError) -> [UInt8] {
        ERR_clear_error()
        guard !passphrase.isEmpty else { throw TLSError(kind: .configuration, description: "the PKCS#12 passphrase must not be empty") }
        let key = try loadKey()
        defer { EVP_PKEY_free(key) }
        let certificate = try Self.certificates(in: certificatePEM, source: "issued certificate")
        defer { certificate.forEach { X509_free($0) } }
        let authority = try caCertificatePEM.map { pem throws(TLSError) in try Self.certificates(in: pem, source: "CA certificate") } ?? []
        defer { authority.forEach { X509_free($0) } }
        guard let stack = OPENSSL_sk_new_null() else { throw CertificateBuilding.failure("cannot allocate a certificate stack") }
        defer { OPENSSL_sk_free(stack) }  // the stack does not own its entries
        for extra in authority {
            guard OPENSSL_sk_push(stack, UnsafeRawPointer(extra)) > 0 else { throw CertificateBuilding.failure("cannot build the CA list") }
        }
        guard let bundle = PKCS12_create(passphrase, nil, key, certificate[0], stack, 0, 0, 0, 0, 0) else {
            throw TLSError.configuration(CertificateBuilding.failure("cannot create a PKCS#12 bundle").description, redacting: passphrase)
        }
        defer { PKCS12_free(bundle) }
        return try CertificateBuilding.writingBytes { i2d_PKCS12_bio($0, bundle) }
    }

    private func loadKey() throws(TLSError) -> OpaquePointer {
        try TLSCredentials.withUTF8(of: privateKeyPEM) { bytes throws(TLSError) in
            try TLSCredentials.privateKey(inPEM: bytes, source: "issued private key", passphrase: nil)
        }
    }

    private static func certificates(in pem: String, source: String) throws(TLSError) -> [OpaquePointer] {
        try TLSCredentials.withUTF8(of: pem) { bytes throws(TLSError) in
            try TLSCredentials.certificates(inPEM: bytes, source: source)
        }
    }
}
