// TLSCredentials: reading certificates and keys from files and PEM/DER bytes, with one error
// wording for every failure ("cannot read CA file /x/y: No such file or directory"). Used when a
// TLSContext is built and by the CertificateFactory; never on the per-connection path.
import COpenSSL
import PushcastCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

enum TLSCredentials {
    /// Credential files larger than this are refused (a full system CA bundle is about 200 KiB).
    static let fileBytesMax = 16 << 20

    /// Calls `body` with the whole contents of the file at `path`, read by `files` (Wire makes no
    /// syscalls; PushcastReactor's `SecretFile.read` reads, into memory wiped afterwards, because
    /// it may be a private key). `what` names the file in errors ("CA file").
    static func withContents<R>(
        ofFile path: String, describedAs what: String, files: SecretFileReader,
        _ body: (UnsafeRawBufferPointer) throws(TLSError) -> R
    ) throws(TLSError) -> R {
        let contents: SecretBytes
        do {
            contents = try files(path, fileBytesMax)
        } catch {
            throw TLSError(kind: .configuration, description: "cannot read \(what) \(path): \(error.reason)")
        }
        return try contents.withUnsafeBytes(body)
    }

    /// Calls `body` with the UTF-8 bytes of `text` (PEM held in memory).
    static func withUTF8<R>(of text: String, _ body: (UnsafeRawBufferPointer) throws(TLSError) -> R) throws(TLSError) -> R {
        var text = text
        let result = text.withUTF8 { bytes in
            Result { () throws(TLSError) in try body(UnsafeRawBufferPointer(bytes)) }
        }
        return try result.get()
    }

    /// Calls `body` with a read-only memory BIO over `bytes`, which must outlive the call.
    static func withMemoryBIO<R>(
        over bytes: UnsafeRawBufferPointer, _ body: (OpaquePointer) throws(TLSError) -> R
    ) throws(TLSError) -> R {
        guard bytes.count <= Int(Int32.max), let bio = BIO_new_mem_buf(bytes.baseAddress, Int32(bytes.count)) else {
            throw TLSError(kind: .configuration, description: "cannot create a memory BIO: \(OpenSSLErrorQueue.drain().message())")
        }
        defer { BIO_free(bio) }
        return try body(bio)
    }

    /// The bytes written so far to a memory BIO made with `BIO_new(BIO_s_mem())`.
    static func contents(ofMemoryBIO bio: OpaquePointer) -> UnsafeRawBufferPointer {
        var data: UnsafeMutablePointer<CChar>? = nil
        let count = pushcast_BIO_get_mem_data(bio, &data)
        guard let data, count > 0 else { return UnsafeRawBufferPointer(start: nil, count: 0) }
        return UnsafeRawBufferPointer(start: data, count: count)
    }

    /// Every certificate in PEM `bytes`, in order; at least one. The caller frees each (`X509_free`).
    static func certificates(inPEM bytes: UnsafeRawBufferPointer, source: String) throws(TLSError) -> [OpaquePointer] {
        try withMemoryBIO(over: bytes) { bio throws(TLSError) in
            var certificates: [OpaquePointer] = []
            while let certificate = PEM_read_bio_X509(bio, nil, nil, nil) {
                certificates.append(certificate)
            }
            // Running out of PEM blocks leaves PEM_R_NO_START_LINE behind; anything else is a fault.
            let last = ERR_peek_last_error()
            let reachedEnd = ERR_GET_LIB(last) == ERR_LIB_PEM && ERR_GET_REASON(last) == PEM_R_NO_START_LINE
            let errors = OpenSSLErrorQueue.drain()
            guard reachedEnd, !certificates.isEmpty else {
                certificates.forEach { X509_free($0) }
                let reason = reachedEnd ? "no PEM certificate found" : errors.message()
                throw TLSError(kind: .configuration, description: "cannot load certificates from \(source): \(reason)")
            }
            return certificates
        }
    }

    /// The first private key in PEM `bytes` (other PEM blocks, such as certificates, are skipped).
    /// The caller frees it (`EVP_PKEY_free`).
    static func privateKey(inPEM bytes: UnsafeRawBufferPointer, source: String, passphrase: String?) throws(TLSError) -> OpaquePointer {
        try withMemoryBIO(over: bytes) { bio throws(TLSError) in
            let key = withPassphrase(passphrase) { PEM_read_bio_PrivateKey(bio, nil, passphraseCallback, $0) }
            guard let key else {
                let errors = OpenSSLErrorQueue.drain()
                let detail = redacted(errors.message(), passphrase)
                let reason: String
                if PassphraseFailure.noneGiven.matches(errors) {
                    reason = "the key is encrypted, and no passphrase was given (\(detail))"
                } else if PassphraseFailure.wrong.matches(errors) {
                    reason = "the passphrase is wrong (\(detail))"
                } else {
                    reason = "\(detail) (if the key is encrypted, its passphrase is missing or wrong)"
                }
                throw TLSError(kind: .configuration, description: "cannot load private key from \(source): \(reason)")
            }
            return key
        }
    }

    /// The key, certificate and extra chain certificates of a DER PKCS#12 bundle. The caller frees
    /// all of them. A bundle encrypted with a legacy algorithm (RC2-40, as Keychain exports the
    /// certificate) is opened with OpenSSL's legacy provider, loaded on that first need.
    static func pkcs12(
        inDER bytes: UnsafeRawBufferPointer, source: String, passphrase: String
    ) throws(TLSError) -> (key: OpaquePointer, certificate: OpaquePointer, chain: [OpaquePointer]) {
        var attempt = try openPKCS12(bytes, source: source, passphrase: passphrase)
        if case .refused(let errors) = attempt, errors.contains(reason: Int32(ERR_R_UNSUPPORTED)), LegacyProvider.isLoaded {
            attempt = try openPKCS12(bytes, source: source, passphrase: passphrase)
        }
        switch attempt {
        case .opened(let key, let certificate, let chain):
            return (key, certificate, chain)
        case .refused(let errors):
            let detail = redacted(errors.message(or: "no key or certificate in the bundle"), passphrase)
            let reason: String
            if PassphraseFailure.wrong.matches(errors) {
                reason = (passphrase.isEmpty ? "it needs a passphrase, and none was given" : "the passphrase is wrong") + " (\(detail))"
            } else if errors.contains(reason: Int32(ERR_R_UNSUPPORTED)) {
                reason = "it is encrypted with an algorithm OpenSSL keeps in its legacy provider (RC2-40, as Keychain exports), "
                    + "which could not be loaded; re-export it with AES (\(detail))"
            } else {
                reason = detail + " (is the passphrase right?)"
            }
            throw TLSError(kind: .configuration, description: "cannot open PKCS#12 file \(source): \(reason)")
        }
    }

    /// One PKCS12_parse of the bundle; throws only when the bytes are not PKCS#12 at all.
    private static func openPKCS12(
        _ bytes: UnsafeRawBufferPointer, source: String, passphrase: String
    ) throws(TLSError) -> PKCS12Attempt {
        try withMemoryBIO(over: bytes) { bio throws(TLSError) in
            guard let bundle = d2i_PKCS12_bio(bio, nil) else {
                let reason = OpenSSLErrorQueue.drain().message()
                throw TLSError.configuration("cannot parse PKCS#12 file \(source): \(reason)", redacting: passphrase)
            }
            defer { PKCS12_free(bundle) }
            var key: OpaquePointer? = nil
            var certificate: OpaquePointer? = nil
            var stack: OpaquePointer? = nil
            let parsed = PKCS12_parse(bundle, passphrase, &key, &certificate, &stack) == 1
            var chain: [OpaquePointer] = []
            if let stack {
                for index in 0..<OPENSSL_sk_num(stack) {
                    if let element = OPENSSL_sk_value(stack, index) { chain.append(OpaquePointer(element)) }
                }
                OPENSSL_sk_free(stack)
            }
            guard parsed, let key, let certificate else {
                EVP_PKEY_free(key)
                X509_free(certificate)
                chain.forEach { X509_free($0) }
                return .refused(OpenSSLErrorQueue.drain())
            }
            return .opened(key: key, certificate: certificate, chain: chain)
        }
    }

    /// OpenSSL's words with `secret` blanked out, as a last line of defence (OpenSSL does not echo
    /// passphrases). Only OpenSSL's part is redacted: our own wording ("the passphrase is wrong")
    /// and the file name stay readable even when the passphrase is a word they contain.
    private static func redacted(_ openSSLText: String, _ secret: String?) -> String {
        TLSError.configuration(openSSLText, redacting: secret).description
    }

    /// Runs `body` with `passphrase` as a C string for `passphraseCallback`, or nil.
    private static func withPassphrase<R>(_ passphrase: String?, _ body: (UnsafeMutableRawPointer?) -> R) -> R {
        guard let passphrase else { return body(nil) }
        return passphrase.withCString { body(UnsafeMutableRawPointer(mutating: $0)) }
    }
}

/// What PKCS12_parse made of a bundle: its key, certificate and extra chain certificates (owned
/// by whoever holds them), or OpenSSL's errors.
private enum PKCS12Attempt {
    case opened(key: OpaquePointer, certificate: OpaquePointer, chain: [OpaquePointer])
    case refused(OpenSSLErrorQueue)
}

/// Why a passphrase did not open a key or bundle, recognised by OpenSSL's reason strings (the
/// reason codes alone collide across libraries: bad decrypt is 100 in EVP and in the providers).
private enum PassphraseFailure {
    /// The decryption or the PKCS#12 MAC failed: the passphrase is not the one used.
    case wrong
    /// The key is encrypted and the callback had no passphrase to give.
    case noneGiven

    private var reasons: [String] {
        switch self {
        case .wrong: return ["bad decrypt", "mac verify failure", "pkcs12 cipherfinal error"]
        case .noneGiven: return ["bad password read", "unable to get passphrase", "problems getting password"]
        }
    }

    func matches(_ errors: OpenSSLErrorQueue) -> Bool {
        errors.lines.contains { line in reasons.contains { line.contains($0) } }
    }
}

/// OpenSSL 3 keeps RC2-40, which Keychain (and OpenSSL 1.x `pkcs12 -export`) use to encrypt the
/// certificate inside a .p12, in its legacy provider, which is not loaded by default. It is
/// loaded into the default library context the first time a bundle needs it, keeping the default
/// provider (retain_fallbacks): it adds old ciphers that can be fetched by name; TLS still offers
/// only the suites of its cipher lists, none of them legacy.
private enum LegacyProvider {
    static let isLoaded: Bool = {
        let provider = OSSL_PROVIDER_try_load(nil, "legacy", 1)
        ERR_clear_error()  // a missing module leaves errors; the caller explains instead
        return provider != nil
    }()
}

/// `pem_password_cb`: copies the passphrase passed as user data. With none it fails, so OpenSSL
/// never falls back to prompting on a terminal.
private func passphraseCallback(
    _ buffer: UnsafeMutablePointer<CChar>?, _ size: Int32, _ forWriting: Int32, _ userData: UnsafeMutableRawPointer?
) -> Int32 {
    guard let buffer, let userData else { return -1 }
    let length = strlen(userData.assumingMemoryBound(to: CChar.self))
    guard length <= Int(size) else { return -1 }
    memcpy(buffer, userData, length)
    return Int32(length)
}
