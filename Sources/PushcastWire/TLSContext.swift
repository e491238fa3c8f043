// TLSContext: one SSL_CTX, built and checked once from a TLSConfiguration, then shared read-only
// by every TLSSession of that role. Every configuration error happens here; the credential files'
// bytes come from the caller's reader (PushcastReactor's `SecretFile.read`).
import COpenSSL
import PushcastCore
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

public final class TLSContext: @unchecked Sendable {
    // @unchecked: the SSL_CTX is fully configured in init and never changed afterwards; OpenSSL
    // allows concurrent SSL_new and handshakes on a shared, unchanging SSL_CTX. The one mutable
    // part, the client-certificate hand-off, is behind a Mutex.

    public enum Role: Sendable { case client, server }

    public let role: Role
    /// The SSL_CTX; freed in deinit.
    let handle: OpaquePointer
    /// The configured ALPN protocols, in order of preference.
    public let alpnProtocols: [String]
    /// True when a handshake must settle on one of `alpnProtocols` (the configuration lists "h2").
    let requiresH2: Bool
    /// Whether the configuration lists "http/1.1": a client then takes a server that selects no
    /// protocol to speak HTTP/1.1 (what a server without ALPN speaks).
    public var offersHTTP1: Bool { alpnProtocols.contains(TLSContext.http1) }
    public static let http1 = "http/1.1"
    public static let h2 = "h2"
    /// Server role: `TLSConfiguration.acceptsClientsWithoutALPN`.
    let acceptsClientsWithoutALPN: Bool
    /// Server role: the ALPN list in wire format (length-prefixed), read by `selectALPN`.
    fileprivate let alpnServerList: UnsafeMutableRawBufferPointer?
    /// Server role with `clientCAFile`: every handshake requires and verifies a client
    /// certificate, and `takeClientCertificate` tells what it was.
    public let verifiesClientCertificates: Bool
    /// Client certificates of completed server handshakes, by the thread that completed them,
    /// until `takeClientCertificate` takes them (see there why by thread).
    fileprivate let completedHandshakes = Mutex<[pthread_t: TLSClientCertificate]>([:])
    /// Client role with a client certificate: the certificate it presents, as loaded (subject UID
    /// and CN), with `verificationError` set when it is outside its validity window now, which a
    /// server will refuse ("certificate has expired (notAfter Nov 30 15:04:57 2026 GMT)"). Set
    /// during init only.
    public private(set) var ownCertificate: TLSClientCertificate?

    /// `files` reads the credential files the configuration names (PushcastReactor's
    /// `SecretFile.read`); TLSContext parses the bytes and never touches the file system itself.
    public init(role: Role, configuration: TLSConfiguration, files: SecretFileReader) throws(TLSError) {
        ERR_clear_error()
        let wire = try Self.alpnWireFormat(configuration.alpnProtocols)
        let method = role == .client ? TLS_client_method() : TLS_server_method()
        guard let handle = SSL_CTX_new(method) else {
            throw TLSError(kind: .configuration, description: "cannot create SSL_CTX: \(OpenSSLErrorQueue.drain().message())")
        }
        self.role = role
        self.handle = handle
        self.alpnProtocols = configuration.alpnProtocols
        self.requiresH2 = configuration.alpnProtocols.contains("h2")
        self.acceptsClientsWithoutALPN = role == .server && configuration.acceptsClientsWithoutALPN
        self.verifiesClientCertificates = role == .server && configuration.clientCAFile != nil
        if role == .server && !wire.isEmpty {
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: wire.count, alignment: 1)
            buffer.copyBytes(from: wire)
            alpnServerList = buffer
        } else {
            alpnServerList = nil
        }
        // On a throw below, deinit frees what was made so far.
        try configureCommon()
        switch role {
        case .client: try configureClient(configuration, alpnWireFormat: wire, files: files)
        case .server: try configureServer(configuration, files: files)
        }
    }

    deinit {
        SSL_CTX_free(handle)
        alpnServerList?.deallocate()
    }

    /// TLS 1.2 at least; no compression (CRIME) and no renegotiation (nothing here needs it, and
    /// it is the main source of surprise re-handshakes on a memory BIO).
    private func configureCommon() throws(TLSError) {
        guard pushcast_SSL_CTX_set_min_proto_version(handle, TLS1_2_VERSION) == 1 else {
            throw failure("cannot require TLS 1.2 or later")
        }
        SSL_CTX_set_options(handle, PUSHCAST_SSL_OP_NO_COMPRESSION | PUSHCAST_SSL_OP_NO_RENEGOTIATION)
    }

    private func configureClient(_ configuration: TLSConfiguration, alpnWireFormat wire: [UInt8], files: SecretFileReader) throws(TLSError) {
        // The server is always verified; there is deliberately no option to turn this off.
        SSL_CTX_set_verify(handle, SSL_VERIFY_PEER, nil)
        guard configuration.trustsSystemStore || configuration.additionalCAFile != nil else {
            throw TLSError(kind: .configuration, description:
                "client trusts no certificate authority: set trustsSystemStore or additionalCAFile")
        }
        if configuration.trustsSystemStore {
            // The hashed directory (SSL_CERT_DIR, /etc/ssl/certs on Debian) is searched lazily,
            // one CA per lookup; the bundle file would parse all ~150 CAs up front (about 40 ms of
            // CPU per process). Without a usable directory, fall back to the default file too.
            let directory = getenv("SSL_CERT_DIR").map { String(cString: $0) }
                ?? String(cString: X509_get_default_cert_dir())
            let loaded = access(directory, R_OK | X_OK) == 0
                ? SSL_CTX_set_default_verify_dir(handle) : SSL_CTX_set_default_verify_paths(handle)
            guard loaded == 1 else { throw failure("cannot load the system trust store") }
        }
        if let file = configuration.additionalCAFile {
            try trustCertificates(inFile: file, describedAs: "CA file", asClientCAList: false, files: files)
        }
        switch configuration.clientCertificate {
        case nil: break
        case let .pem(certificateFile, privateKeyFile, passphrase):
            try usePEMCredentials(certificateFile: certificateFile, privateKeyFile: privateKeyFile, passphrase: passphrase, files: files)
        case let .pkcs12(file, passphrase):
            try usePKCS12Credentials(file: file, passphrase: passphrase, files: files)
        }
        if !wire.isEmpty {
            // Unlike most of OpenSSL, SSL_CTX_set_alpn_protos returns 0 on success.
            guard SSL_CTX_set_alpn_protos(handle, wire, UInt32(wire.count)) == 0 else { throw failure("cannot set ALPN protocols") }
        }
    }

    private func configureServer(_ configuration: TLSConfiguration, files: SecretFileReader) throws(TLSError) {
        guard let chainFile = configuration.certificateChainFile, let keyFile = configuration.privateKeyFile else {
            throw TLSError(kind: .configuration, description: "a TLS server needs certificateChainFile and privateKeyFile")
        }
        try usePEMCredentials(certificateFile: chainFile, privateKeyFile: keyFile, passphrase: configuration.privateKeyPassphrase, files: files)
        if let file = configuration.clientCAFile {
            try requireClientCertificates(caFile: file, admittingUnverified: configuration.admitsUnverifiedClientCertificates, files: files)
        } else {
            SSL_CTX_set_verify(handle, SSL_VERIFY_NONE, nil)
        }
        if alpnServerList != nil {
            SSL_CTX_set_alpn_select_cb(handle, selectALPN, Unmanaged.passUnretained(self).toOpaque())
        }
    }

    /// A client certificate is required and verified against the CAs in `caFile`; each completed
    /// handshake records it for `takeClientCertificate`.
    private func requireClientCertificates(caFile file: String, admittingUnverified: Bool, files: SecretFileReader) throws(TLSError) {
        try trustCertificates(inFile: file, describedAs: "client CA file", asClientCAList: true, files: files)
        // Admitting: the verify callback accepts whatever failed; the handshake then records why.
        SSL_CTX_set_verify(handle, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, admittingUnverified ? admitClientCertificate : nil)
        // Without a session ID context, a client that resumes a session fails its handshake when
        // the server verifies clients (SSL_R_SESSION_ID_CONTEXT_UNINITIALIZED).
        let sessionContext = Array("pushcast client certificates".utf8)
        guard SSL_CTX_set_session_id_context(handle, sessionContext, UInt32(sessionContext.count)) == 1 else {
            throw failure("cannot set the session ID context")
        }
        // The info callback finds this context through the SSL_CTX's app data (ex_data index 0);
        // every TLSSession keeps its context alive, so an unretained reference is enough.
        guard SSL_CTX_set_ex_data(handle, 0, Unmanaged.passUnretained(self).toOpaque()) == 1 else {
            throw failure("cannot attach the context to its SSL_CTX")
        }
        SSL_CTX_set_info_callback(handle, recordClientCertificate)
    }

    /// Server role with `clientCAFile`: the client certificate of the handshake that completed
    /// last on the calling thread, taken once (nil until another handshake completes there).
    /// Call it as soon as the call that completed a session's handshake returns (the one after
    /// which `isHandshakeComplete` turned true), before driving any other session on the thread.
    ///
    /// Why by thread: a TLSSession keeps its SSL to itself, and a server handshake completes
    /// inside one SSL_do_handshake call on the thread that drives the session; the callback that
    /// sees the certificate runs within that call, so the thread's latest entry is that session's.
    public func takeClientCertificate() -> TLSClientCertificate? {
        completedHandshakes.withLock { $0.removeValue(forKey: pthread_self()) }
    }

    /// Adds every certificate in a PEM file to the trust store, and for a server also to the list
    /// of CA names sent in CertificateRequest.
    private func trustCertificates(inFile path: String, describedAs what: String, asClientCAList: Bool, files: SecretFileReader) throws(TLSError) {
        let certificates = try TLSCredentials.withContents(ofFile: path, describedAs: what, files: files) { bytes throws(TLSError) in
            try TLSCredentials.certificates(inPEM: bytes, source: "\(what) \(path)")
        }
        defer { certificates.forEach { X509_free($0) } }
        let store = SSL_CTX_get_cert_store(handle)
        for certificate in certificates {
            // Both calls take their own reference.
            guard X509_STORE_add_cert(store, certificate) == 1 else { throw failure("cannot trust a certificate from \(what) \(path)") }
            if asClientCAList && SSL_CTX_add_client_CA(handle, certificate) != 1 {
                throw failure("cannot list a client CA from \(what) \(path)")
            }
        }
    }

    /// Certificate (plus chain) and key from PEM files, which may be one file.
    private func usePEMCredentials(certificateFile: String, privateKeyFile: String, passphrase: String?, files: SecretFileReader) throws(TLSError) {
        let certificates = try TLSCredentials.withContents(ofFile: certificateFile, describedAs: "certificate file", files: files) { bytes throws(TLSError) in
            try TLSCredentials.certificates(inPEM: bytes, source: "certificate file \(certificateFile)")
        }
        let key = try TLSCredentials.withContents(ofFile: privateKeyFile, describedAs: "private key file", files: files) { bytes throws(TLSError) in
            try TLSCredentials.privateKey(inPEM: bytes, source: privateKeyFile, passphrase: passphrase)
        }
        try use(key: key, certificate: certificates[0], chain: certificates.dropFirst(), source: privateKeyFile)
    }

    private func usePKCS12Credentials(file: String, passphrase: String, files: SecretFileReader) throws(TLSError) {
        let bundle = try TLSCredentials.withContents(ofFile: file, describedAs: "PKCS#12 file", files: files) { bytes throws(TLSError) in
            try TLSCredentials.pkcs12(inDER: bytes, source: file, passphrase: passphrase)
        }
        try use(key: bundle.key, certificate: bundle.certificate, chain: bundle.chain[...], source: file)
    }

    /// Installs a key and certificate chain, taking ownership of all of them.
    private func use(key: OpaquePointer, certificate: OpaquePointer, chain: ArraySlice<OpaquePointer>, source: String) throws(TLSError) {
        defer {
            EVP_PKEY_free(key)
            X509_free(certificate)
        }
        var remaining = chain
        defer { remaining.forEach { X509_free($0) } }
        guard X509_check_private_key(certificate, key) == 1 else {
            throw failure("the private key in \(source) does not match its certificate")
        }
        guard SSL_CTX_use_certificate(handle, certificate) == 1 else { throw failure("cannot use the certificate from \(source)") }
        while let next = remaining.first {
            // add0 takes ownership on success only.
            guard pushcast_SSL_CTX_add0_chain_cert(handle, next) == 1 else { throw failure("cannot add a chain certificate from \(source)") }
            remaining.removeFirst()
        }
        guard SSL_CTX_use_PrivateKey(handle, key) == 1 else { throw failure("cannot use the private key from \(source)") }
        if role == .client { ownCertificate = TLSClientCertificate(loaded: certificate) }
    }

    /// A `.configuration` error carrying whatever OpenSSL queued, with the queue emptied.
    private func failure(_ what: String) -> TLSError {
        TLSError(kind: .configuration, description: "\(what): \(OpenSSLErrorQueue.drain().message())")
    }

    /// ALPN protocol names as length-prefixed bytes (RFC 7301 section 3.1).
    private static func alpnWireFormat(_ protocols: [String]) throws(TLSError) -> [UInt8] {
        var wire: [UInt8] = []
        for name in protocols {
            let bytes = Array(name.utf8)
            guard (1...255).contains(bytes.count) else {
                throw TLSError(kind: .configuration, description: "ALPN protocol name must be 1 to 255 bytes: '\(name)'")
            }
            wire.append(UInt8(bytes.count))
            wire.append(contentsOf: bytes)
        }
        return wire
    }
}

/// What a server learned of its client's certificate in a completed handshake
/// (`TLSContext.takeClientCertificate`).
public struct TLSClientCertificate: Sendable, Equatable {
    /// The subject's UID (OID 0.9.2342.19200300.100.1.1): the bundle ID in Apple's push
    /// certificates.
    public var subjectUID: String?
    /// The subject's CN ("Apple Push Services: com.example.app").
    public var commonName: String?
    /// Nil when the certificate verified against the client CAs; else why not, in OpenSSL's
    /// words ("certificate has expired"). Only a context that admits unverified client
    /// certificates completes such a handshake.
    public var verificationError: String?

    public init(subjectUID: String?, commonName: String?, verificationError: String? = nil) {
        self.subjectUID = subjectUID
        self.commonName = commonName
        self.verificationError = verificationError
    }

    /// The peer certificate of a server-side SSL whose handshake has just completed.
    fileprivate init(peerOf ssl: OpaquePointer) {
        let result = SSL_get_verify_result(ssl)
        verificationError = result == X509_V_OK ? nil : String(cString: X509_verify_cert_error_string(result))
        guard let certificate = SSL_get0_peer_certificate(ssl) else {
            verificationError = verificationError ?? "no client certificate"
            return
        }
        let name = X509_get_subject_name(certificate)
        subjectUID = Self.entry(NID_userId, of: name)
        commonName = Self.entry(NID_commonName, of: name)
    }

    /// A certificate as loaded for presenting: its subject, and whether it is outside its validity
    /// window now (the only check that can be made without the server's trust store).
    fileprivate init(loaded certificate: OpaquePointer) {
        let name = X509_get_subject_name(certificate)
        subjectUID = Self.entry(NID_userId, of: name)
        commonName = Self.entry(NID_commonName, of: name)
        func text(_ time: UnsafePointer<ASN1_TIME>?) -> String {
            (try? CertificateBuilding.writingPEM { ASN1_TIME_print($0, time) }) ?? "?"
        }
        if X509_cmp_current_time(X509_get0_notAfter(certificate)) < 0 {
            verificationError = "certificate has expired (notAfter \(text(X509_get0_notAfter(certificate))))"
        } else if X509_cmp_current_time(X509_get0_notBefore(certificate)) > 0 {
            verificationError = "certificate is not yet valid (notBefore \(text(X509_get0_notBefore(certificate))))"
        }
        ERR_clear_error()
    }

    /// The first entry of type `nid` in a name, as UTF-8 text.
    private static func entry(_ nid: Int32, of name: OpaquePointer?) -> String? {
        guard let name else { return nil }
        let index = X509_NAME_get_index_by_NID(name, nid, -1)
        guard index >= 0, let data = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(name, index)) else { return nil }
        var utf8: UnsafeMutablePointer<UInt8>? = nil
        let count = ASN1_STRING_to_UTF8(&utf8, data)
        guard count >= 0, let utf8 else { return nil }
        defer { pushcast_OPENSSL_free(utf8) }
        return String(decoding: UnsafeBufferPointer(start: utf8, count: Int(count)), as: UTF8.self)
    }
}

/// `SSL_CTX_set_info_callback`, installed on servers that verify clients: when a handshake
/// completes, records the client certificate for `TLSContext.takeClientCertificate`, under the
/// calling thread.
private func recordClientCertificate(_ ssl: OpaquePointer?, _ event: Int32, _ value: Int32) {
    guard event & SSL_CB_HANDSHAKE_DONE != 0, let ssl,
          let raw = SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), 0) else { return }
    let context = Unmanaged<TLSContext>.fromOpaque(raw).takeUnretainedValue()
    let certificate = TLSClientCertificate(peerOf: ssl)
    context.completedHandshakes.withLock { $0[pthread_self()] = certificate }
}

/// `SSL_verify_cb` of a server that admits unverified client certificates
/// (`TLSConfiguration.admitsUnverifiedClientCertificates`): every certificate passes, and
/// SSL_get_verify_result still holds the failure, which the handshake records.
private func admitClientCertificate(_ preverified: Int32, _ store: OpaquePointer?) -> Int32 { 1 }

/// Server ALPN selection (`SSL_CTX_alpn_select_cb_func`): the first of the server's protocols, in
/// its order of preference, that the client offered. No match is a fatal no_application_protocol
/// alert (RFC 7301 section 3.2) rather than a silent fallback to no ALPN. `context` is the
/// unretained TLSContext; every TLSSession keeps its context alive.
private func selectALPN(
    _ ssl: OpaquePointer?, _ selected: UnsafeMutablePointer<UnsafePointer<UInt8>?>?, _ selectedLength: UnsafeMutablePointer<UInt8>?,
    _ offered: UnsafePointer<UInt8>?, _ offeredLength: UInt32, _ context: UnsafeMutableRawPointer?
) -> Int32 {
    guard let selected, let selectedLength, let offered, let context,
          let server = Unmanaged<TLSContext>.fromOpaque(context).takeUnretainedValue().alpnServerList else {
        return SSL_TLSEXT_ERR_ALERT_FATAL
    }
    let client = UnsafeRawBufferPointer(start: offered, count: Int(offeredLength))
    var serverIndex = 0
    while serverIndex < server.count {
        let candidate = UnsafeRawBufferPointer(rebasing: server[serverIndex ..< serverIndex + 1 + Int(server[serverIndex])])
        var clientIndex = 0
        while clientIndex < client.count {
            let end = min(client.count, clientIndex + 1 + Int(client[clientIndex]))
            if candidate.elementsEqual(client[clientIndex ..< end]) {
                // Points into the server list, which lives as long as the context.
                selected.pointee = candidate.baseAddress!.assumingMemoryBound(to: UInt8.self) + 1
                selectedLength.pointee = UInt8(candidate.count - 1)
                return SSL_TLSEXT_ERR_OK
            }
            clientIndex = end
        }
        serverIndex += candidate.count
    }
    return SSL_TLSEXT_ERR_ALERT_FATAL
}
