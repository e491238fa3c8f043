// Throw-away APNs signing keys for the demo, the mock and the tests. Real keys come from Apple's
// developer account as `.p8` files; nothing here writes a key to disk.

/// A freshly generated P-256 key pair in the formats APNs tooling uses.
public struct APNsKeyPair: Sendable {
    /// PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`), the format of an Apple `.p8` file.
    public let privateKeyPEM: String
    /// SubjectPublicKeyInfo PEM (`-----BEGIN PUBLIC KEY-----`), what the mock verifies with.
    public let publicKeyPEM: String

    public static func generate() throws(APNsCredentialError) -> APNsKeyPair {
        let key = try ES256Key.generateForAPNs()
        guard let privateKeyPEM = key.pem(publicOnly: false), let publicKeyPEM = key.pem(publicOnly: true) else {
            throw APNsCredentialError("cannot write the generated key pair as PEM")
        }
        return APNsKeyPair(privateKeyPEM: privateKeyPEM, publicKeyPEM: publicKeyPEM)
    }
}
