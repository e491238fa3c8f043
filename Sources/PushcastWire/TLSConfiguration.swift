// TLSConfiguration: what a TLSContext is built from. Plain values and file paths; the files are
// read (by the reader TLSContext.init is given) and checked once, never per connection.

/// Options for one `TLSContext`. The client fields and the server fields are read only by the
/// matching role.
public struct TLSConfiguration: Sendable {
    /// Offered by a client, or accepted by a server, in order of preference. When it contains "h2",
    /// a handshake that does not settle on "h2" fails with `.alpnNotNegotiated`.
    public var alpnProtocols: [String] = ["h2"]

    // Client role.

    /// Verify the server against the system trust store (`SSL_CTX_set_default_verify_paths`).
    public var trustsSystemStore: Bool = true
    /// A PEM file of extra trusted CAs (a mock server's CA), added on top of the system store.
    /// Verification itself is never switched off.
    public var additionalCAFile: String? = nil
    /// The certificate a client presents when the server asks for one.
    public var clientCertificate: ClientCertificate? = nil

    // Server role.

    /// PEM: the server certificate first, then any intermediates.
    public var certificateChainFile: String? = nil
    /// PEM private key, PKCS#8 or traditional, encrypted or not.
    public var privateKeyFile: String? = nil
    /// Decrypts `privateKeyFile` when it is encrypted.
    public var privateKeyPassphrase: String? = nil
    /// When set, the server requires a client certificate and verifies it against these CAs.
    public var clientCAFile: String? = nil
    /// With `clientCAFile`: a client certificate that does not verify (expired, from another CA)
    /// still completes the handshake, and `TLSClientCertificate.verificationError` says why, so
    /// that a server can refuse it in its own words (a mock answering 403 BadCertificate, as APNs
    /// does for some certificates). A client without any certificate is still refused. Off: such
    /// a handshake fails, which is what every real server here wants.
    public var admitsUnverifiedClientCertificates: Bool = false
    /// A client that offers no ALPN at all is taken to speak the first of `alpnProtocols` (HTTP/2
    /// with prior knowledge), as APNs takes aioapns, which never offers ALPN. A client that offers
    /// protocols, none of them accepted, is still refused. Off: such a handshake fails
    /// (RFC 9113 section 3.2), which is what pushcast's own servers want; the mock plays APNs.
    public var acceptsClientsWithoutALPN: Bool = false

    public init() {}
}

/// A client certificate and its private key.
public enum ClientCertificate: Sendable {
    /// PEM files; the certificate and the key may be the same file. A nil passphrase means the key
    /// is not encrypted (an encrypted key then fails to load instead of prompting on a terminal).
    case pem(certificateFile: String, privateKeyFile: String, passphrase: String?)
    /// A PKCS#12 (.p12 / .pfx) bundle holding the key, the certificate and optionally its chain.
    case pkcs12(file: String, passphrase: String)

    /// One file holding both: a PKCS#12 bundle when it is named .p12 or .pfx (as Apple's Keychain
    /// exports it), otherwise PEM with the certificate and the key together.
    public static func file(_ path: String, passphrase: String?) -> ClientCertificate {
        let lowered = path.lowercased()
        if lowered.hasSuffix(".p12") || lowered.hasSuffix(".pfx") { return .pkcs12(file: path, passphrase: passphrase ?? "") }
        return .pem(certificateFile: path, privateKeyFile: path, passphrase: passphrase)
    }
}
