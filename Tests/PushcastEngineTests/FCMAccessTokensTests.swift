// FCMAccessTokens on an injected clock with a scripted token endpoint: the first fetch, the
// scheduled refresh (5 minutes or a tenth of the lifetime early), the immediate refresh after a
// 401, the back-off after a passing failure, the fatal paths and close(). The refresher is a real
// thread that here waits at most 10 ms between looks at the clock, so a test moves the clock and then
// waits (briefly, by polling) for the thread to act; "nothing happened" is proved by watching the
// thread read the clock twice after the move (or, once the thread has ended, by the counts it left:
// only that thread fetches, so they are final), never by a fixed sleep.

import Foundation
import PushcastCore
import PushcastFCM
import PushcastMock
import PushcastProviderKit
import PushcastReactor
import PushcastSystem
import PushcastTransport
import PushcastWire
import Synchronization
import XCTest

final class FCMAccessTokensTests: XCTestCase {
    // MARK: - Test doubles (also used by FCMWorkloadTests)

    /// A monotonic clock that a test moves by hand and the refresher thread reads: atomic, and it
    /// counts reads (and notes which threads read it) so that a test can tell when the refresher
    /// has looked at a new time, and how many threads look.
    final class SharedClock: MonotonicClock, Sendable {
        private let value: Atomic<UInt64>
        private let readCount = Atomic<Int>(0)
        private let readers = Mutex<Set<ObjectIdentifier>>([])

        init(seconds: Double) { value = Atomic(UInt64(seconds * 1e9)) }

        func nowNanoseconds() -> UInt64 {
            // The reader is noted before the read is counted: a test that sees the count move
            // also sees who moved it.
            let reader = ObjectIdentifier(Thread.current)
            readers.withLock { _ = $0.insert(reader) }
            readCount.add(1, ordering: .sequentiallyConsistent)
            return value.load(ordering: .sequentiallyConsistent)
        }

        /// How many threads other than the calling one have read the clock so far.
        var otherReaders: Int {
            let me = ObjectIdentifier(Thread.current)
            return readers.withLock { $0.subtracting([me]).count }
        }

        /// Moves the clock to `seconds` (never backwards).
        func set(seconds: Double) {
            let target = UInt64((seconds * 1e9).rounded())
            precondition(target >= value.load(ordering: .sequentiallyConsistent), "a monotonic clock never goes back")
            value.store(target, ordering: .sequentiallyConsistent)
        }

        var seconds: Double { Double(value.load(ordering: .sequentiallyConsistent)) / 1e9 }
        var reads: Int { readCount.load(ordering: .sequentiallyConsistent) }
    }

    /// The OAuth2 token endpoint as a script: each call answers the next scripted result, else a
    /// fresh token (`ya29.token-<call>`); `hold()` makes calls block until `release()`.
    final class TokenEndpoint: @unchecked Sendable {
        private let condition = NSCondition()
        private var callCount = 0
        private var answerCount = 0
        private var script: [Result<OAuthAccessToken, FCMTokenFetchError>] = []
        private var holding = false
        private var threads: [Thread] = []
        private var issued: [String] = []
        let lifetimeSeconds: Int

        init(lifetimeSeconds: Int) { self.lifetimeSeconds = lifetimeSeconds }

        func fetch() -> Result<OAuthAccessToken, FCMTokenFetchError> {
            condition.lock()
            defer { condition.unlock() }
            callCount += 1
            let call = callCount
            threads.append(Thread.current)
            condition.broadcast()
            while holding { condition.wait() }
            answerCount += 1
            condition.broadcast()
            if !script.isEmpty { return script.removeFirst() }
            let token = "ya29.token-\(call)"
            issued.append(token)
            return .success(OAuthAccessToken(accessToken: token, expiresInSeconds: lifetimeSeconds))
        }

        /// The next calls answer these, in order.
        func enqueue(_ results: Result<OAuthAccessToken, FCMTokenFetchError>...) {
            condition.lock()
            script += results
            condition.unlock()
        }

        func hold() {
            condition.lock()
            holding = true
            condition.unlock()
        }

        func release() {
            condition.lock()
            holding = false
            condition.broadcast()
            condition.unlock()
        }

        private func locked<T>(_ body: () -> T) -> T {
            condition.lock()
            defer { condition.unlock() }
            return body()
        }

        var calls: Int { locked { callCount } }
        var answers: Int { locked { answerCount } }
        /// Tokens handed out, in order.
        var tokens: [String] { locked { issued } }
        /// The thread of the latest call.
        var lastThread: Thread? { locked { threads.last } }
    }

    static func passingFailure(_ text: String = "the token endpoint https://oauth2.googleapis.com did not answer: connection lost")
        -> Result<OAuthAccessToken, FCMTokenFetchError> {
        .failure(FCMTokenFetchError(text, isCredentialRejected: false))
    }

    static func credentialFailure(_ text: String = "the token endpoint refused the service account sa@p.iam.gserviceaccount.com (sa.json): "
                                    + "400 invalid_grant: Invalid JWT Signature.") -> Result<OAuthAccessToken, FCMTokenFetchError> {
        .failure(FCMTokenFetchError(text, isCredentialRejected: true))
    }

    /// Polls `predicate` every 2 ms for up to `timeout` seconds (the refresher needs about 10 ms).
    static func eventually(timeout: Double = 5, _ predicate: () -> Bool) -> Bool {
        let deadline = Date(timeIntervalSinceNow: timeout)
        while Date() < deadline {
            if predicate() { return true }
            usleep(2_000)
        }
        return predicate()
    }

    /// The messages given to `onFatal` (or any other strings threads report).
    final class FatalLog: @unchecked Sendable {
        private let lock = NSLock()
        private var messages: [String] = []
        func record(_ message: String) {
            lock.lock()
            messages.append(message)
            lock.unlock()
        }
        var all: [String] {
            lock.lock()
            defer { lock.unlock() }
            return messages
        }
    }

    /// A started token source on a clock at 1,000 s.
    struct Rig {
        let clock = SharedClock(seconds: 1000)
        let endpoint: TokenEndpoint
        let tokens: FCMAccessTokens
        let fatal = FatalLog()

        init(lifetimeSeconds: Int, start: Bool = true) throws {
            let endpoint = TokenEndpoint(lifetimeSeconds: lifetimeSeconds)
            self.endpoint = endpoint
            tokens = FCMAccessTokens(clock: clock, threads: SystemThreads(), lookSeconds: 0.01) { endpoint.fetch() }
            if start {
                let fatal = self.fatal
                try tokens.start { fatal.record($0) }
            }
        }

        /// Waits until the refresher has read the clock `times` more times (it reads once per look,
        /// and once more only after acting on the previous look). The test thread must not read the
        /// clock (`current()`) meanwhile.
        func refresherLooked(times: Int = 2, file: StaticString = #filePath, line: UInt = #line) {
            let start = clock.reads
            XCTAssertTrue(FCMAccessTokensTests.eventually(timeout: 5) { clock.reads >= start + times },
                          "the refresher thread stopped looking at the clock", file: file, line: line)
        }

        func waitForGeneration(_ generation: UInt64, file: StaticString = #filePath, line: UInt = #line) {
            XCTAssertTrue(FCMAccessTokensTests.eventually { (tokens.current()?.generation ?? 0) >= generation },
                          "generation \(generation) never came (fetches: \(tokens.fetchCount))", file: file, line: line)
        }

        func close() {
            tokens.close()
            endpoint.release()
        }
    }

    func makeRig(lifetimeSeconds: Int, start: Bool = true) throws -> Rig {
        let rig = try Rig(lifetimeSeconds: lifetimeSeconds, start: start)
        addTeardownBlock { rig.close() }
        return rig
    }

    // MARK: - The first token

    func testStartFetchesOnceAndHandsOutGenerationOne() throws {
        let rig = try makeRig(lifetimeSeconds: 3600)
        XCTAssertEqual(rig.tokens.fetchCount, 1)
        XCTAssertEqual(rig.endpoint.calls, 1)
        let current = try XCTUnwrap(rig.tokens.current())
        XCTAssertEqual(current.token, "ya29.token-1")
        XCTAssertEqual(current.generation, 1)
        // Asking again costs nothing.
        XCTAssertEqual(rig.tokens.current()?.generation, 1)
        rig.refresherLooked()
        XCTAssertEqual(rig.endpoint.calls, 1, "no refresh long before expiry")
        XCTAssertTrue(rig.fatal.all.isEmpty)
    }

    /// A refused first token is thrown (not reported through onFatal) and leaves no refresher
    /// behind: the source is as new, and a later start() fetches generation 1 and starts exactly
    /// one refresher. Every refresher reads the clock at its first look, so once the clock has
    /// been read twice after the second start (the new refresher's looks are up to 1 s apart), it
    /// must have had exactly one reader besides this thread; a refresher left over from the failed
    /// start would be a second one (and, had it looked before the second start, it would also
    /// have fetched a token: there was none).
    func testStartThrowsARefusedCredentialAndStartsNoRefresher() throws {
        let rig = try makeRig(lifetimeSeconds: 3600, start: false)
        rig.endpoint.enqueue(Self.credentialFailure())
        let fatal = rig.fatal
        do {
            try rig.tokens.start { fatal.record($0) }
            XCTFail("start() accepted a refused credential")
        } catch {
            XCTAssertTrue(error.isCredentialRejected)
            XCTAssertTrue(error.description.contains("invalid_grant"), error.description)
        }
        XCTAssertEqual(rig.tokens.fetchCount, 1)
        XCTAssertEqual(rig.endpoint.calls, 1)
        XCTAssertTrue(rig.endpoint.lastThread === Thread.current, "start() fetches on the caller's thread")
        XCTAssertNil(rig.tokens.current(), "no token after a failed start")
        XCTAssertTrue(fatal.all.isEmpty, "a failed start reports through its error, not onFatal")

        // Started again: one more fetch, generation 1, and nothing else fetching.
        try rig.tokens.start { fatal.record($0) }
        XCTAssertEqual(rig.endpoint.calls, 2)
        let current = try XCTUnwrap(rig.tokens.current())
        XCTAssertEqual(current.generation, 1, "the failed start left no generation behind")
        XCTAssertEqual(current.token, "ya29.token-2")
        rig.refresherLooked()
        XCTAssertEqual(rig.clock.otherReaders, 1, "more than one refresher thread reads the clock: the failed start left one behind")
        XCTAssertEqual(rig.endpoint.calls, 2, "a refresher left by the failed start fetched a token")
        XCTAssertEqual(rig.tokens.fetchCount, 2)
        XCTAssertEqual(rig.tokens.current()?.generation, 1)
        XCTAssertTrue(fatal.all.isEmpty)
    }

    func testStartRetriesAPassingFailureOfTheFirstFetch() throws {
        let rig = try makeRig(lifetimeSeconds: 3600, start: false)
        rig.endpoint.enqueue(Self.passingFailure())
        let fatal = rig.fatal
        try rig.tokens.start(startAttempts: 3, startRetryDelaySeconds: 0.01) { fatal.record($0) }
        XCTAssertEqual(rig.tokens.fetchCount, 2)
        let current = try XCTUnwrap(rig.tokens.current())
        XCTAssertEqual(current.generation, 1, "a failed try is not a generation")
        XCTAssertEqual(current.token, "ya29.token-2")
    }

    func testStartGivesUpAfterItsAttemptsWithTheLastError() throws {
        let rig = try makeRig(lifetimeSeconds: 3600, start: false)
        rig.endpoint.enqueue(Self.passingFailure("first: 503"), Self.passingFailure("second: connection refused"))
        do {
            try rig.tokens.start(startAttempts: 2, startRetryDelaySeconds: 0.01) { _ in }
            XCTFail("start() succeeded without a token")
        } catch {
            XCTAssertFalse(error.isCredentialRejected)
            XCTAssertEqual(error.description, "second: connection refused")
        }
        XCTAssertEqual(rig.tokens.fetchCount, 2)
        XCTAssertEqual(rig.endpoint.calls, 2)
        XCTAssertNil(rig.tokens.current())
    }

    /// The whole first fetch against the mock's token endpoint, over TLS and HTTP/2: a key the
    /// endpoint does not know is refused with an error that names the account but never carries
    /// the signed assertion, its signature or the private key; the right key yields generation 1.
    func testStartThroughTheMockTokenEndpointNeverPrintsTheAssertion() throws {
        let directory = NSTemporaryDirectory() + "pushcast-fcm-tokens-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var configuration = MockServerConfiguration(certificate: .generated(directory: directory))
        configuration.reactor.backend = .epoll
        configuration.fcm = MockFCMConfiguration(credentials: .generated(directory: directory))
        let server = try MockServer(configuration: configuration)
        defer { _ = server.stop() }
        let fcm = try XCTUnwrap(server.fcm)
        let caFile = directory + "/ca.pem"
        try XCTUnwrap(server.authorityCertificatePEM).write(toFile: caFile, atomically: true, encoding: .utf8)
        var tlsConfiguration = TLSConfiguration()
        tlsConfiguration.trustsSystemStore = false
        tlsConfiguration.additionalCAFile = caFile
        var reactor = ReactorConfiguration()
        reactor.backend = .epoll
        let client = ClientConfiguration(endpoint: Endpoint(host: "127.0.0.1", port: fcm.port), address: "127.0.0.1",
                                         tls: try TLSContext(role: .client, configuration: tlsConfiguration, files: SecretFile.read), limits: Limits(), reactor: reactor)
        let account = try FCMServiceAccount.load(path: fcm.credentialsPath, files: SecretFile.read)
        let now = Int64(SystemClock.wallClockSeconds())

        // The same account, signed with another key.
        let forgedJSON = try FCMServiceAccountGenerator.generate(projectID: account.projectID, clientEmail: account.clientEmail,
                                                                 tokenURI: account.tokenURI).serviceAccountJSON
        let forged = try FCMServiceAccount(json: forgedJSON, source: "forged.json")
        let forgedSigner = try RS256Signer(account: forged)
        let assertion = try OAuthAssertion.make(account: forged, signer: forgedSigner, issuedAt: now)
        let refused = FCMAccessTokens(clock: SystemClock.Monotonic(), threads: SystemThreads()) {
            FCMTokenFetcher.fetch(account: forged, signer: forgedSigner, client: client, path: "/token", nowEpochSeconds: { now })
        }
        do {
            try refused.start { _ in }
            refused.close()
            XCTFail("the mock accepted an assertion signed by a key it does not know")
        } catch {
            XCTAssertTrue(error.isCredentialRejected, error.description)
            XCTAssertTrue(error.description.contains(account.clientEmail), error.description)
            XCTAssertTrue(error.description.contains("forged.json"), error.description)
            XCTAssertTrue(error.description.contains("Invalid JWT Signature"), error.description)
            XCTAssertFalse(error.description.contains(assertion), "the assertion leaked: \(error.description)")
            let signature = String(assertion.split(separator: ".").last!)
            XCTAssertFalse(error.description.contains(signature), "the assertion's signature leaked")
            XCTAssertFalse(error.description.contains("PRIVATE KEY"), "the key leaked")
        }
        XCTAssertEqual(refused.fetchCount, 1)
        XCTAssertNil(refused.current())

        let signer = try RS256Signer(account: account)
        let accepted = FCMAccessTokens(clock: SystemClock.Monotonic(), threads: SystemThreads()) {
            FCMTokenFetcher.fetch(account: account, signer: signer, client: client, path: "/token",
                                  nowEpochSeconds: { Int64(SystemClock.wallClockSeconds()) })
        }
        defer { accepted.close() }
        try accepted.start { message in XCTFail("fatal: \(message)") }
        let current = try XCTUnwrap(accepted.current())
        XCTAssertEqual(current.generation, 1)
        XCTAssertGreaterThanOrEqual(current.token.count, 32)
        XCTAssertEqual(accepted.fetchCount, 1)
    }

    // MARK: - Scheduled refresh

    func testAShortLivedTokenIsRefreshedATenthOfItsLifetimeEarlyWithOneFetch() throws {
        let rig = try makeRig(lifetimeSeconds: 100)  // issued at 1,000 s: refresh due at 1,090 s
        rig.clock.set(seconds: 1089.95)
        rig.refresherLooked()
        XCTAssertEqual(rig.endpoint.calls, 1, "refreshed before 90 % of the lifetime")
        XCTAssertEqual(rig.tokens.current()?.generation, 1)

        rig.clock.set(seconds: 1090)
        rig.waitForGeneration(2)
        XCTAssertEqual(rig.tokens.current()?.token, "ya29.token-2")
        rig.refresherLooked()
        XCTAssertEqual(rig.endpoint.calls, 2, "one fetch per refresh")
        XCTAssertEqual(rig.tokens.fetchCount, 2)

        // The next one is due 90 s after this install, not after the first.
        rig.clock.set(seconds: 1179.95)
        rig.refresherLooked()
        XCTAssertEqual(rig.endpoint.calls, 2)
        rig.clock.set(seconds: 1180)
        rig.waitForGeneration(3)
        rig.refresherLooked()
        XCTAssertEqual(rig.endpoint.calls, 3)
        XCTAssertTrue(rig.fatal.all.isEmpty)
    }

    func testAnHourLongTokenIsRefreshedFiveMinutesEarly() throws {
        let rig = try makeRig(lifetimeSeconds: 3600)  // refresh due at 1,000 + 3,300 s
        rig.clock.set(seconds: 4299.95)
        rig.refresherLooked()
        XCTAssertEqual(rig.endpoint.calls, 1, "refreshed more than 5 minutes early")
        rig.clock.set(seconds: 4300)
        rig.waitForGeneration(2)
        rig.refresherLooked()
        XCTAssertEqual(rig.endpoint.calls, 2, "one fetch per refresh")
    }

    func testAnExpiredTokenIsNotHandedOutWhileItsReplacementIsFetched() throws {
        let rig = try makeRig(lifetimeSeconds: 100)
        rig.endpoint.hold()
        rig.clock.set(seconds: 1090)
        XCTAssertTrue(Self.eventually { rig.endpoint.calls == 2 }, "the refresh started")
        XCTAssertEqual(rig.tokens.current()?.generation, 1, "still valid for 10 s")
        rig.clock.set(seconds: 1100)
        XCTAssertNil(rig.tokens.current(), "an expired token is never handed out")
        rig.endpoint.release()
        rig.waitForGeneration(2)
        XCTAssertEqual(rig.tokens.current()?.token, "ya29.token-2")
    }

    // MARK: - 401: the immediate refresh

    func testRejectingTheCurrentGenerationFetchesOnceForAllWorkers() throws {
        let rig = try makeRig(lifetimeSeconds: 3600)
        rig.endpoint.hold()
        let decisions = FatalLog()
        let tokens = rig.tokens
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            decisions.record("\(tokens.rejected(generation: 1))")
        }
        XCTAssertEqual(decisions.all, Array(repeating: "\(CredentialDecision.retry)", count: 8))
        XCTAssertTrue(Self.eventually { rig.endpoint.calls == 2 }, "a 401 refreshes at once, without waiting for the schedule")
        XCTAssertNil(rig.tokens.current(), "the refused token is not handed out while its replacement is fetched")
        XCTAssertEqual(rig.tokens.rejected(generation: 1), .retry, "a late worker reporting the same generation")
        rig.endpoint.release()
        rig.waitForGeneration(2)
        XCTAssertEqual(rig.tokens.current()?.token, "ya29.token-2")
        rig.refresherLooked()
        XCTAssertEqual(rig.endpoint.calls, 2, "eight workers, one generation: one fetch")
        XCTAssertEqual(rig.tokens.fetchCount, 2)
    }

    func testRejectingAnOlderGenerationRetriesWithoutFetching() throws {
        let rig = try makeRig(lifetimeSeconds: 100)
        rig.clock.set(seconds: 1090)
        rig.waitForGeneration(2)
        XCTAssertEqual(rig.tokens.rejected(generation: 1), .retry, "a request that still carried the old token")
        XCTAssertEqual(rig.tokens.current()?.generation, 2, "the newer token stays in use")
        rig.refresherLooked()
        XCTAssertEqual(rig.endpoint.calls, 2, "an old generation's 401 fetches nothing")
    }

    func testAFreshlyFetchedTokenRefusedAgainStopsTheRun() throws {
        let rig = try makeRig(lifetimeSeconds: 100)
        XCTAssertEqual(rig.tokens.rejected(generation: 1), .retry)
        rig.waitForGeneration(2)
        guard case .stop(let message) = rig.tokens.rejected(generation: 2) else {
            return XCTFail("a token fetched because its predecessor was refused, refused too, must stop the run")
        }
        XCTAssertTrue(message.contains("401"), message)
        XCTAssertTrue(message.contains("UNAUTHENTICATED"), message)
        XCTAssertFalse(message.contains("ya29."), "the token is not printed")
        rig.refresherLooked()
        XCTAssertEqual(rig.endpoint.calls, 2, "stopping fetches nothing")

        // A token from the schedule (not from a refusal) that is refused is renewed, not fatal.
        rig.clock.set(seconds: 1090)
        rig.waitForGeneration(3)
        XCTAssertEqual(rig.tokens.rejected(generation: 3), .retry)
        rig.waitForGeneration(4)
        XCTAssertEqual(rig.endpoint.calls, 4)
    }

    // MARK: - Failures

    func testAPassingFetchFailureBacksOffAndRetries() throws {
        let rig = try makeRig(lifetimeSeconds: 100)
        rig.endpoint.enqueue(Self.passingFailure(), Self.passingFailure())
        rig.clock.set(seconds: 1090)
        XCTAssertTrue(Self.eventually { rig.endpoint.answers == 2 })
        rig.refresherLooked()
        XCTAssertEqual(rig.tokens.current()?.generation, 1, "the old token serves until it expires")

        // First back-off: 2 s.
        rig.clock.set(seconds: 1091.95)
        rig.refresherLooked()
        XCTAssertEqual(rig.endpoint.calls, 2, "retried before its back-off")
        rig.clock.set(seconds: 1092)
        XCTAssertTrue(Self.eventually { rig.endpoint.answers == 3 })
        rig.refresherLooked()
        // Second back-off: 4 s.
        rig.clock.set(seconds: 1095.95)
        rig.refresherLooked()
        XCTAssertEqual(rig.endpoint.calls, 3, "retried before its doubled back-off")
        rig.clock.set(seconds: 1096)
        rig.waitForGeneration(2)
        XCTAssertEqual(rig.tokens.current()?.token, "ya29.token-4")
        XCTAssertEqual(rig.endpoint.calls, 4)
        XCTAssertTrue(rig.fatal.all.isEmpty, "passing failures are not fatal")
    }

    /// FCM refused generation 1 and the fetch of its replacement failed for a passing reason: the
    /// refused token must stay out of use until a new one comes (handing it out again only earns
    /// more 401s and burns the rows' attempts).
    func testARefusedTokenStaysHiddenWhileItsReplacementIsRetried() throws {
        let rig = try makeRig(lifetimeSeconds: 3600)
        rig.endpoint.enqueue(Self.passingFailure())
        XCTAssertEqual(rig.tokens.rejected(generation: 1), .retry)
        XCTAssertTrue(Self.eventually { rig.endpoint.answers == 2 }, "the immediate refresh")
        rig.refresherLooked()
        XCTAssertNil(rig.tokens.current(), "FCM refused this token: it must not be handed out again")
        // The retry comes after the back-off and brings generation 2.
        rig.clock.set(seconds: 1002)
        rig.waitForGeneration(2)
        XCTAssertEqual(rig.tokens.current()?.token, "ya29.token-3")
    }

    /// The same situation from the workers' side: more 401s for the refused generation arrive
    /// while the replacement waits out its back-off. They must not set off a fetch each.
    func testMore401sForTheRefusedTokenDoNotBypassTheBackOff() throws {
        let rig = try makeRig(lifetimeSeconds: 3600)
        rig.endpoint.enqueue(Self.passingFailure())
        XCTAssertEqual(rig.tokens.rejected(generation: 1), .retry)
        XCTAssertTrue(Self.eventually { rig.endpoint.answers == 2 })
        rig.refresherLooked()
        for _ in 0..<5 { XCTAssertEqual(rig.tokens.rejected(generation: 1), .retry) }
        rig.refresherLooked()
        XCTAssertEqual(rig.endpoint.calls, 2, "each further 401 fetched again at once, ignoring the 2 s back-off")
        rig.clock.set(seconds: 1002)
        rig.waitForGeneration(2)
    }

    /// FCM refused the token and its replacement cannot be had: five passing failures in a row
    /// end it, expired or not (nothing could be sent meanwhile).
    func testARefusedTokenWhoseReplacementKeepsFailingIsFatalAfterFiveTries() throws {
        let rig = try makeRig(lifetimeSeconds: 3600)
        rig.endpoint.enqueue(Self.passingFailure(), Self.passingFailure(), Self.passingFailure(), Self.passingFailure(),
                             Self.passingFailure("the token endpoint did not answer: connection refused"))
        XCTAssertEqual(rig.tokens.rejected(generation: 1), .retry)
        for call in 2...6 {
            // Move the clock on in small steps until the back-off lets the next try go.
            XCTAssertTrue(Self.eventually(timeout: 5) {
                if rig.endpoint.answers >= call { return true }
                rig.clock.set(seconds: rig.clock.seconds + 0.25)
                return false
            }, "try \(call)")
            if call < 6 { XCTAssertTrue(rig.fatal.all.isEmpty, "fatal after try \(call)") }
        }
        XCTAssertLessThan(rig.clock.seconds, 4600, "the token had not expired")
        XCTAssertTrue(Self.eventually { rig.fatal.all.count == 1 })
        XCTAssertEqual(rig.fatal.all, ["cannot renew the FCM access token: the token endpoint did not answer: connection refused"])
        XCTAssertNil(rig.tokens.current(), "the refused token stays out of use")
        if case .stop = rig.tokens.rejected(generation: 1) {} else { XCTFail("a 401 after the fatal error must stop") }
        XCTAssertEqual(rig.endpoint.calls, 6)
    }

    func testARefusedCredentialDuringRefreshCallsOnFatalOnceAndEndsTheThread() throws {
        let rig = try makeRig(lifetimeSeconds: 100)
        rig.endpoint.enqueue(Self.credentialFailure())
        rig.clock.set(seconds: 1090)
        XCTAssertTrue(Self.eventually { rig.fatal.all.count == 1 }, "onFatal was not called")
        let message = try XCTUnwrap(rig.fatal.all.first)
        XCTAssertTrue(message.hasPrefix("cannot renew the FCM access token: "), message)
        XCTAssertTrue(message.contains("invalid_grant: Invalid JWT Signature."), message)
        let thread = try XCTUnwrap(rig.endpoint.lastThread)
        XCTAssertFalse(thread === Thread.current, "the refresh ran on the refresher thread")
        // Before the thread is seen to end: a 401 now stops the worker and sets off no fetch, and
        // the token is past its refresh time and its expiry (a thread that kept going would fetch).
        XCTAssertEqual(rig.tokens.rejected(generation: 1), .stop(message), "workers that see a 401 now stop")
        rig.clock.set(seconds: 5000)
        XCTAssertTrue(Self.eventually { thread.isFinished }, "the refresher thread did not end")
        // The only thread that fetches has ended: these counts are final.
        XCTAssertEqual(rig.endpoint.calls, 2, "a refused credential is not asked again")
        XCTAssertEqual(rig.tokens.fetchCount, 2)
        XCTAssertEqual(rig.fatal.all.count, 1, "onFatal is called once")
        XCTAssertNil(rig.tokens.current(), "expired, and nothing replaces it")
    }

    /// A token endpoint that keeps failing for passing reasons is fatal only once the token has
    /// expired and five tries in a row failed.
    func testAnEndpointDownPastExpiryIsFatalAfterFiveTries() throws {
        let rig = try makeRig(lifetimeSeconds: 100)  // expires at 1,100 s
        rig.endpoint.enqueue(Self.passingFailure(), Self.passingFailure(), Self.passingFailure(), Self.passingFailure(),
                             Self.passingFailure("the token endpoint did not answer: connection refused"))
        // Tries at 1090, 1092 (+2), 1096 (+4), 1104 (+8, expired), 1120 (+16, fifth failure).
        for (call, time) in [(2, 1090.0), (3, 1092.0), (4, 1096.0), (5, 1104.0), (6, 1120.0)] {
            rig.clock.set(seconds: time)
            XCTAssertTrue(Self.eventually { rig.endpoint.answers == call }, "try \(call) at \(time) s")
            if call < 6 {
                rig.refresherLooked()
                XCTAssertTrue(rig.fatal.all.isEmpty, "fatal after try \(call)")
            }
        }
        XCTAssertTrue(Self.eventually { rig.fatal.all.count == 1 })
        XCTAssertTrue(rig.fatal.all.first?.contains("connection refused") ?? false, "\(rig.fatal.all)")
        XCTAssertNil(rig.tokens.current(), "expired")
    }

    /// close() ends the refresher thread, and no fetch comes after it: the clock is moved past the
    /// next refresh and the expiry before the thread is seen to end, and once it has ended (only it
    /// fetches) the counts are final.
    func testCloseEndsTheRefresherThread() throws {
        let rig = try makeRig(lifetimeSeconds: 100)
        rig.clock.set(seconds: 1090)
        rig.waitForGeneration(2)
        let thread = try XCTUnwrap(rig.endpoint.lastThread)
        XCTAssertFalse(thread.isFinished)
        rig.refresherLooked()  // back in its wait, with nothing due
        XCTAssertEqual(rig.endpoint.calls, 2)
        rig.tokens.close()
        rig.clock.set(seconds: 10_000)
        XCTAssertTrue(Self.eventually { thread.isFinished }, "close() did not end the refresher")
        XCTAssertEqual(rig.endpoint.calls, 2, "no fetch after close()")
        XCTAssertEqual(rig.tokens.fetchCount, 2)
        XCTAssertTrue(rig.fatal.all.isEmpty, "close() is not a fatal error")
    }
}
