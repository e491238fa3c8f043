// CertificateAuthority: a throw-away CA that issues leaf certificates for the mock server and
// tests. Made by CertificateFactory.makeAuthority.
import COpenSSL
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

public final class CertificateAuthority: @unchecked Sendable {
    // @unchecked: the key and certificate are never modified after init; OpenSSL 3 allows
    // concurrent signing with one EVP_PKEY and concurrent reads of one X509.

    public let certificatePEM: String
    /// EVP_PKEY and X509, freed in deinit.
    private let key: OpaquePointer
    private let certificate: OpaquePointer

    /// Takes ownership of `key` and `certificate`.
    init(key: OpaquePointer, certificate: OpaquePointer, certificatePEM: String) {
        self.key = key
        self.certificate = certificate
        self.certificatePEM = certificatePEM
    }

    deinit {
        EVP_PKEY_free(key)
        X509_free(certificate)
    }

    /// A leaf certificate with a new P-256 key, signed by this CA with SHA-256. `dnsNames` and
    /// `ipAddresses` become subjectAltName entries (what host-name verification checks);
    /// `serverAuth` and `clientAuth` set extendedKeyUsage.
    public func issue(
        commonName: String, dnsNames: [String], ipAddresses: [String], serverAuth: Bool, clientAuth: Bool, validDays: Int = 30
    ) throws(TLSError) -> IssuedCertificate {
        ERR_clear_error()
        var extensions: [(Int32, String)] = [
            (NID_basic_constraints, "critical,CA:FALSE"),
            (NID_key_usage, "critical,digitalSignature"),
            (NID_subject_key_identifier, "hash"),
            (NID_authority_key_identifier, "keyid:always"),
        ]
        if let alternativeNames = try Self.subjectAltName(dnsNames: dnsNames, ipAddresses: ipAddresses) {
            extensions.append((NID_subject_alt_name, alternativeNames))
        }
        let usages = (serverAuth ? ["serverAuth"] : []) + (clientAuth ? ["clientAuth"] : [])
        if !usages.isEmpty {
            extensions.append((NID_ext_key_usage, usages.joined(separator: ",")))
        }
        let leafKey = try CertificateBuilding.generateKey()
        defer { EVP_PKEY_free(leafKey) }
        let leaf = try CertificateBuilding.makeCertificate(
            subject: commonName, publicKey: leafKey, issuer: certificate, signingKey: key, validDays: validDays, extensions: extensions)
        defer { X509_free(leaf) }
        return IssuedCertificate(
            certificatePEM: try CertificateBuilding.pem(ofCertificate: leaf),
            privateKeyPEM: try CertificateBuilding.pem(ofPrivateKey: leafKey))
    }

    /// A server certificate whose subjectAltName lists `hosts`: each entry that is an IPv4 or IPv6
    /// literal becomes an IP entry, every other one a DNS entry. The subject CN is the first host.
    public func issueServer(hosts: [String], validDays: Int = 30) throws(TLSError) -> IssuedCertificate {
        guard let first = hosts.first else {
            throw TLSError(kind: .configuration, description: "a server certificate needs at least one host name or address")
        }
        let addresses = hosts.filter(Self.isIPAddress)
        return try issue(commonName: first, dnsNames: hosts.filter { !Self.isIPAddress($0) }, ipAddresses: addresses,
                         serverAuth: true, clientAuth: false, validDays: validDays)
    }

    /// True for an IPv4 or IPv6 literal (without brackets).
    public static func isIPAddress(_ text: String) -> Bool {
        var buffer = in6_addr()
        return inet_pton(AF_INET, text, &buffer) == 1 || inet_pton(AF_INET6, text, &buffer) == 1
    }

    /// "DNS:a,IP:b" for X509V3_EXT_conf_nid, after checking each entry so that none can smuggle in
    /// another entry (a comma) and every IP address is a real literal.
    private static func subjectAltName(dnsNames: [String], ipAddresses: [String]) throws(TLSError) -> String? {
        var entries: [String] = []
        for name in dnsNames {
            guard !name.isEmpty, name.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: ",") }) else {
                throw TLSError(kind: .configuration, description: "not a DNS name for subjectAltName: '\(name)'")
            }
            entries.append("DNS:" + name)
        }
        for address in ipAddresses {
            guard isIPAddress(address) else {
                throw TLSError(kind: .configuration, description: "not an IP address for subjectAltName: '\(address)'")
            }
            entries.append("IP:" + address)
        }
        return entries.isEmpty ? nil : entries.joined(separator: ",")
    }
}
