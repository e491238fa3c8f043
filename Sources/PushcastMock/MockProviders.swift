// The one place the mock names its providers: which provider's responder answers on each
// listener, and the FCM listener's setup once its port is known. Everything else in the mock
// answers through `ProviderResponder` (PushcastProviderKit).

import PushcastAPNs
import PushcastFCM
import PushcastProviderKit
import PushcastSystem
import PushcastWebPush

/// How the APNs listener checks credentials (APNs's server rules, PushcastAPNs).
public typealias MockAuthentication = APNsServerAuthentication
/// Which APNs host the APNs listener plays for certificate auth.
public typealias MockAPNsEnvironment = APNsServerEnvironment

/// The responders of the mock's listeners: APNs on the first, FCM on the second (`--fcm`).
struct MockProviders {
    let first: any ProviderResponder
    let second: (any ProviderResponder)?
    /// Web Push on the third (`--webpush`).
    let third: (any ProviderResponder)?
    private let fcm: FCMResponder?
    private let fcmAccount: FCMServiceAccount?

    /// A given service account is read here, before anything listens, so a bad file fails fast.
    init(_ configuration: MockServerConfiguration) throws(MockServerError) {
        first = APNsResponder(authentication: configuration.behavior.authentication)
        third = try configuration.webpush.map { (webpush) throws(MockServerError) in try Self.webPushResponder(webpush) }
        guard let fcmConfiguration = configuration.fcm else {
            (second, fcm, fcmAccount) = (nil, nil, nil)
            return
        }
        var rules = FCMServerRules()
        rules.requiresBearer = fcmConfiguration.requiresBearer
        rules.tokenTTLSeconds = fcmConfiguration.tokenTTLSeconds
        rules.retryAfterSeconds = fcmConfiguration.retryAfterSeconds
        let responder = FCMResponder(rules: rules)
        (second, fcm) = (responder, responder)
        if case .serviceAccount(let path) = fcmConfiguration.credentials {
            do { fcmAccount = try FCMServiceAccount.load(path: path, files: SecretFile.read) } catch { throw MockServerError(description: error.description) }
        } else {
            fcmAccount = nil
        }
    }

    /// The second listener is bound to `port`: its setup is made (a generated service account is
    /// written now, with the token URI in it; a given one lends its key's public half and
    /// token_uri) and installed; returns what the mock announces.
    func secondBound(_ configuration: MockFCMConfiguration, host: String, port: UInt16) throws(MockServerError) -> MockFCMEndpoint {
        let endpoint = "https://\(MockServer.advertisedHost(host)):\(port)"
        let tokenURI = endpoint + "/token"
        do {
            let projectID: String, credentialsPath: String, issuer: String, publicKey: RS256PublicKey
            var audiences = [tokenURI]
            switch configuration.credentials {
            case .generated(let directory):
                projectID = configuration.projectID ?? "pushcast-demo"
                issuer = configuration.clientEmail
                let generated = try FCMServiceAccountGenerator.generate(projectID: projectID, clientEmail: issuer, tokenURI: tokenURI)
                credentialsPath = directory + "/fcm-service-account.json"
                try writeSecret(String(decoding: generated.serviceAccountJSON, as: UTF8.self), to: credentialsPath)
                publicKey = try RS256PublicKey(pem: generated.publicKeyPEM, source: credentialsPath)
            case .serviceAccount(let path):
                guard let account = fcmAccount else { throw FCMCredentialError("the FCM service account \(path) was not read") }
                projectID = configuration.projectID ?? account.projectID
                issuer = account.clientEmail
                credentialsPath = path
                publicKey = try RS256Signer(account: account).publicKey()
                if account.tokenURI != tokenURI { audiences.append(account.tokenURI) }
            }
            // Google's own endpoint as well: the mock's certificate names oauth2.googleapis.com, and
            // google-auth (firebase-admin) always signs for it, whatever the key file's token_uri.
            if !audiences.contains(Self.googleTokenURI) { audiences.append(Self.googleTokenURI) }
            let verifiers = audiences.map { OAuthAssertionVerifier(publicKey: publicKey, issuer: issuer, audience: $0) }
            fcm?.install(FCMServerSetup(projectID: projectID, verifiers: verifiers))
            return MockFCMEndpoint(port: port, endpoint: endpoint, tokenURI: tokenURI, credentialsPath: credentialsPath, projectID: projectID)
        } catch let error as MockServerError {
            throw error
        } catch {
            throw MockServerError(description: "mock FCM credentials: \(error)")
        }
    }

    /// The Web Push responder: demo keys from the seed, and a given subscription file's, read now.
    static func webPushResponder(_ configuration: MockWebPushConfiguration) throws(MockServerError) -> WebPushResponder {
        var subscriptions: [String: WebPushPrivateSubscription] = [:]
        if let path = configuration.subscriptionsPath {
            do {
                let bytes = try SecretFile.read(path, bytesMax: MockWebPushConfiguration.subscriptionFileBytesMax)
                subscriptions = try bytes.withUnsafeBytes { (text) throws(WebPushSubscriptionFile.Problem) in try WebPushSubscriptionFile.read(Array(text)) }
            } catch let error as WebPushSubscriptionFile.Problem {
                throw MockServerError(description: "--webpush-subscriptions \(path): \(error.description)")
            } catch {
                throw MockServerError(description: "--webpush-subscriptions \(path): cannot read: \(error)")
            }
        }
        return WebPushResponder(seed: configuration.seed ?? WebPushDemoSubscriptions.defaultSeed, subscriptions: subscriptions)
    }

    /// The audience Google's token endpoint checks assertions against.
    static let googleTokenURI = "https://oauth2.googleapis.com/token"
}
