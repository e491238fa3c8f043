import PushcastCore
import PushcastProviderKit
import PushcastWire

/// Why the OAuth2 token endpoint gave no access token.
public struct FCMTokenFetchError: Error, Sendable, CustomStringConvertible {
    public let description: String
    /// The endpoint refused the credential itself (a key that does not match, a deleted account):
    /// retrying cannot help, and the run stops with exit 2.
    public let isCredentialRejected: Bool
    public init(_ description: String, isCredentialRejected: Bool) {
        self.description = description
        self.isCredentialRejected = isCredentialRejected
    }
}

/// The OAuth2 access token every FCM worker shares (docs/PROTOCOL.md §2.2). One fetch at a time,
/// on its own thread: the first before any send, then about 5 minutes before expiry (a tenth of
/// the lifetime for short-lived tokens), and at once when FCM answers 401 to the current token.
public final class FCMAccessTokens: @unchecked Sendable {
    private struct State {
        var token: String? = nil
        var generation: UInt64 = 0
        var refreshAtNanoseconds: UInt64 = 0
        var expiresAtNanoseconds: UInt64 = 0
        /// FCM refused this generation: fetch a new one now, and hand out none until it comes.
        var rejectedGeneration: UInt64 = 0
        /// The generation fetched because its predecessor was refused, and when it came; refused
        /// too within a minute means the credential itself is bad.
        var fetchedAfterRejection: UInt64 = 0
        var fetchedAfterRejectionAtNanoseconds: UInt64 = 0
        var fetches = 0
        /// After a failed fetch: no new attempt before this, whatever asks for one.
        var notBeforeNanoseconds: UInt64 = 0
        var closed = false
        var fatal: String? = nil
    }

    private let fetch: @Sendable () -> Result<OAuthAccessToken, FCMTokenFetchError>
    private let clock: MonotonicClock
    private let threads: any ThreadSource
    private let condition: any WaitCondition
    /// The longest the refresher waits between looks at the clock.
    private let lookSeconds: Double
    private var state = State()
    /// Called once, from the refresher thread, when no token can be had any more.
    private var onFatal: (@Sendable (String) -> Void)?

    /// `fetch` performs one token request (blocking); it runs on the refresher thread only. The
    /// refresher looks at the clock at least every `lookSeconds` (a clock moved by a test is
    /// noticed that soon).
    public init(clock: MonotonicClock, threads: any ThreadSource, lookSeconds: Double = 1.0,
                fetch: @escaping @Sendable () -> Result<OAuthAccessToken, FCMTokenFetchError>) {
        self.clock = clock
        self.lookSeconds = lookSeconds
        self.threads = threads
        condition = threads.makeCondition()
        self.fetch = fetch
    }

    /// Token-endpoint calls so far.
    public var fetchCount: Int {
        condition.lock()
        defer { condition.unlock() }
        return state.fetches
    }

    /// The first token, fetched before anything is sent: a refused credential stops the run here.
    /// A passing failure (a 5xx, a lost connection) is tried again, up to `startAttempts` times in
    /// all, `startRetryDelaySeconds` apart and doubling.
    public func start(startAttempts: Int = 4, startRetryDelaySeconds: Double = 0.5,
                      onFatal: @escaping @Sendable (String) -> Void) throws(FCMTokenFetchError) {
        var attempt = 1
        while true {
            let result = fetch()
            condition.lock()
            state.fetches += 1
            condition.unlock()
            switch result {
            case .success(let token):
                install(token)
            case .failure(let error):
                guard !error.isCredentialRejected && attempt < startAttempts else { throw error }
                pause(seconds: startRetryDelaySeconds * Double(1 << (attempt - 1)))
                attempt += 1
                continue
            }
            break
        }
        self.onFatal = onFatal
        threads.start(name: "fcm-oauth") { [self] in refreshLoop() }
    }

    /// Waits before another first attempt (nothing else waits on the condition yet).
    private func pause(seconds: Double) {
        condition.lock()
        condition.wait(seconds: seconds)
        condition.unlock()
    }

    /// Stops the refresher thread.
    public func close() {
        condition.lock()
        state.closed = true
        condition.signal()
        condition.unlock()
    }

    /// The current token and its generation; nil while a refused or expired token is replaced.
    public func current() -> (token: String, generation: UInt64)? {
        condition.lock()
        defer { condition.unlock() }
        guard let token = state.token, state.rejectedGeneration != state.generation,
              clock.nowNanoseconds() < state.expiresAtNanoseconds else { return nil }
        return (token, state.generation)
    }

    /// FCM answered 401 to a request that carried this generation.
    public func rejected(generation: UInt64) -> CredentialDecision {
        condition.lock()
        defer { condition.unlock() }
        if let fatal = state.fatal { return .stop(fatal) }
        guard generation == state.generation else { return .retry }  // a newer token is already here
        if generation == state.fetchedAfterRejection
            && clock.nowNanoseconds() &- state.fetchedAfterRejectionAtNanoseconds < 60_000_000_000 {
            return .stop("FCM refused a freshly issued access token (401 UNAUTHENTICATED); check that the service account may send for this project")
        }
        if state.rejectedGeneration != generation {
            state.rejectedGeneration = generation
            condition.signal()
        }
        return .retry
    }

    private func install(_ token: OAuthAccessToken) {
        let now = clock.nowNanoseconds()
        let lifetime = UInt64(max(1, token.expiresInSeconds)) * 1_000_000_000
        // Refresh about 5 minutes early; for short-lived tokens, a tenth of their lifetime early.
        let lead = min(300_000_000_000, lifetime / 10)
        condition.lock()
        if state.rejectedGeneration == state.generation && state.generation > 0 {
            state.fetchedAfterRejection = state.generation + 1
            state.fetchedAfterRejectionAtNanoseconds = now
        }
        state.generation += 1
        state.token = token.accessToken
        state.expiresAtNanoseconds = now + lifetime
        state.refreshAtNanoseconds = now + lifetime - lead
        condition.unlock()
    }

    private func refreshLoop() {
        var failures = 0
        while true {
            condition.lock()
            while !state.closed {
                let now = clock.nowNanoseconds()
                let wanted = state.rejectedGeneration == state.generation || now >= state.refreshAtNanoseconds
                if wanted && now >= state.notBeforeNanoseconds { break }
                let until = wanted ? state.notBeforeNanoseconds : state.refreshAtNanoseconds
                condition.wait(seconds: min(Double(until - now) / 1e9, lookSeconds))
            }
            if state.closed {
                condition.unlock()
                return
            }
            state.fetches += 1
            condition.unlock()

            switch fetch() {
            case .success(let token):
                failures = 0
                install(token)
                condition.lock()
                state.notBeforeNanoseconds = 0
                condition.unlock()
            case .failure(let error):
                failures += 1
                condition.lock()
                let now = clock.nowNanoseconds()
                // Without a usable token (expired, or refused by FCM), five failures in a row end it.
                let stuck = now >= state.expiresAtNanoseconds || state.rejectedGeneration == state.generation
                condition.unlock()
                if error.isCredentialRejected || (stuck && failures >= 5) {
                    let message = "cannot renew the FCM access token: \(error.description)"
                    condition.lock()
                    state.fatal = message
                    state.closed = true
                    condition.unlock()
                    onFatal?(message)
                    return
                }
                // A passing failure (5xx, a lost connection): try again after a back-off. A refused
                // token stays refused meanwhile, and more 401s do not cut the back-off short.
                condition.lock()
                state.notBeforeNanoseconds = now + UInt64(min(30, 1 << min(failures, 5))) * 1_000_000_000
                condition.unlock()
            }
        }
    }

}

/// The OAuth2 token request for a service account. `send` performs one request over the
/// network (the command passes a fresh TLS + HTTP/2 connection, `SingleRequest.perform`).
public enum FCMTokenFetcher {
    public static func fetch(account: FCMServiceAccount, signer: RS256Signer, endpoint: String, authority: String, path: String,
                             nowEpochSeconds: @Sendable () -> Int64,
                             send: (HTTP2Request) -> Result<HTTP2Response, any Error>) -> Result<OAuthAccessToken, FCMTokenFetchError> {
        let assertion: String
        do {
            assertion = try OAuthAssertion.make(account: account, signer: signer, issuedAt: nowEpochSeconds())
        } catch {
            return .failure(FCMTokenFetchError("cannot sign the OAuth2 assertion with \(account.source): \(error.description)",
                                               isCredentialRejected: true))
        }
        let request = HTTP2Request(authority: authority, path: path,
                                   headers: [HTTP2Header("content-type", "application/x-www-form-urlencoded"),
                                             HTTP2Header("accept", "application/json")],
                                   body: OAuthTokenExchange.requestBody(assertion: assertion))
        switch send(request) {
        case .failure(let message):
            return .failure(FCMTokenFetchError("the token endpoint \(endpoint) did not answer: \(message)", isCredentialRejected: false))
        case .success(let response):
            switch OAuthTokenExchange.parseResponse(status: response.status, body: response.body) {
            case .success(let token): return .success(token)
            case .failure(let error):
                return .failure(FCMTokenFetchError("the token endpoint \(endpoint) refused the service account "
                    + "\(account.clientEmail) (\(account.source)): \(error.description)", isCredentialRejected: error.isCredentialRejected))
            }
        }
    }
}
