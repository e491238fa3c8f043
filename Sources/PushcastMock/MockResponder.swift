import PushcastCore
import PushcastProviderKit
import PushcastReactor
import PushcastTransport
import PushcastWire
import Synchronization

/// How the mock behaves; every fault is off by default.
public struct MockBehavior: Sendable {
    /// Delay before each answer.
    public var latencyNanoseconds: UInt64 = 0
    /// After this many requests on one connection, send GOAWAY (streams up to the last one seen
    /// are still answered).
    public var goAwayAfter: Int? = nil
    /// APNs's habit: after a rejected request, lower SETTINGS_MAX_CONCURRENT_STREAMS on that
    /// connection to this value until the next accepted request.
    public var streamsAfterReject: Int? = nil
    /// Answer this status (503, 500, 429) to this fraction of otherwise good requests.
    public var errorStatus: Int = 503
    public var errorRate: Double = 0
    /// Requests per second the whole server accepts; the rest get 429 TooManyRequests.
    public var rateLimitPerSecond: Int? = nil
    /// Provider-token checks on the APNs listener.
    public var authentication: MockAuthentication = .none
    /// Seed for the error-rate draw, so a run replays.
    public var seed: UInt64 = 1
    public init() {}
}

/// A shared token bucket for `--rate-limit`; locked only when the limit is on.
final class MockRateLimiter: Sendable {
    private struct Bucket { var tokens: Double; var lastNanoseconds: UInt64 }
    private let perSecond: Double
    private let bucket: Mutex<Bucket>

    init(perSecond: Int) {
        self.perSecond = Double(perSecond)
        bucket = Mutex(Bucket(tokens: Double(perSecond), lastNanoseconds: Reactor.nowNanoseconds()))
    }

    func admit() -> Bool {
        let now = Reactor.nowNanoseconds()
        return bucket.withLock { b in
            let elapsed = Double(now &- b.lastNanoseconds) / 1e9
            b.tokens = min(perSecond, b.tokens + elapsed * perSecond)
            b.lastNanoseconds = now
            guard b.tokens >= 1 else { return false }
            b.tokens -= 1
            return true
        }
    }
}

/// Which statistics a listener's workers count in: the first listener's (the top-level fields)
/// or the second's (`fcm`).
enum MockListener {
    case first
    case second
    /// The Web Push listener's (`webpush`).
    case third
}

/// What one worker of a listener shares with the others.
struct MockListenerShared {
    let provider: any ProviderResponder
    let listener: MockListener
    let board: MockStatisticsBoard
    let once: FirstTimeSet
    let rateLimiter: MockRateLimiter?
    /// `--fcm-quota`: the provider's quota over a rolling minute; nil: none.
    let quota: MockProjectQuota?
    /// The Retry-After of the 429s the rate limit answers.
    let retryAfterSeconds: Int
    let log: MockRequestLog?
    let wallMilliseconds: @Sendable () -> Int64
}

/// One worker's responder: answers each request through its provider's responder (the
/// provider's rules), applies the mock's faults around it (rate limit, quota, error rate,
/// latency, GOAWAY after N requests, the stream limit after a rejection), counts, logs, and
/// answers `GET /stats` with the counters of every worker of every listener.
final class MockResponder: ServerResponder {
    private let behavior: MockBehavior
    private let shared: MockListenerShared
    private let slot: Int
    private let workerIndex: Int
    private let random: SplitMix64
    private var counters = MockCounters()
    private var changed = false
    /// Connections with a lowered stream limit (after a rejection), and those whose credentials
    /// have been accepted once.
    private var rejectedConnections = Set<UInt64>()
    private var authenticatedConnections = Set<UInt64>()
    private let streamsMax: Int
    private static let jsonHeaders = [HTTP2Header("content-type", "application/json")]

    /// `slot` is this worker's place on the board; `workerIndex` its index on its listener.
    init(behavior: MockBehavior, shared: MockListenerShared, slot: Int, workerIndex: Int, streamsMax: Int) {
        self.behavior = behavior
        self.shared = shared
        self.slot = slot
        self.workerIndex = workerIndex
        self.streamsMax = streamsMax
        let salt: UInt64 = shared.listener == .first ? 0 : shared.listener == .second ? 0xFC : 0x3B
        random = SplitMix64(seed: behavior.seed &+ salt &+ UInt64(workerIndex) &* 0x9E37_79B9)
        if shared.listener != .first { publish() }
    }

    func handle(_ request: HTTP2ServerRequest, on connection: ServerConnectionControl) -> ServerReply {
        changed = true
        if request.method(is: "GET") && request.withPath({ bytesEqual($0, Self.statsPath) }) {
            publish()
            let body = Array(shared.board.total().json.utf8)
            return .respond(status: 200, headers: Self.jsonHeaders, body: body, delayNanoseconds: 0)
        }
        counters.streamsOpenMax = max(counters.streamsOpenMax, connection.streamsOpenMax)
        let context = ProviderRequestContext(wallMilliseconds: shared.wallMilliseconds, random: random,
                                             clientCertificate: connection.clientCertificate, once: shared.once)
        var answer = shared.provider.respond(to: request, context: context)
        if let issued = answer.issuedCredential {
            counters.tokenRequests += 1
            if issued { counters.tokensIssued += 1 }
        } else {
            counters.requests += 1
            answer = faulted(answer, request: request, context: context)
            counters.count(status: answer.status)
            if answer.kind == .accepted { counters.delivered += 1 }
        }
        limitStreams(after: answer, on: connection)
        if let limit = behavior.goAwayAfter, connection.requestCount >= limit, !connection.goingAway {
            connection.goAway()
            counters.goAwaysSent += 1
        }
        if let log = shared.log { log.record(provider: shared.provider, worker: workerIndex, http1: connection.speaksHTTP1, request: request, answer: answer) }
        if answer.headers.isEmpty {
            return .respondInline(status: answer.status, header: answer.inlineHeader, body: answer.body,
                                  delayNanoseconds: behavior.latencyNanoseconds)
        }
        return .respond(status: answer.status, headers: answer.allHeaders, body: answer.body, delayNanoseconds: behavior.latencyNanoseconds)
    }

    /// The mock's faults on an answer the provider accepted: the quota, the rate limit, the
    /// error rate, in that order.
    private func faulted(_ answer: ProviderServerAnswer, request: HTTP2ServerRequest, context: ProviderRequestContext) -> ProviderServerAnswer {
        guard answer.kind == .accepted else { return answer }
        let provider = shared.provider
        if let quota = shared.quota, let wait = quota.admit() {
            return provider.answer(.throttled(retryAfterSeconds: wait, scope: .provider), to: request, context: context)
        }
        if let limiter = shared.rateLimiter, !limiter.admit() {
            return provider.answer(.throttled(retryAfterSeconds: shared.retryAfterSeconds, scope: .provider), to: request, context: context)
        }
        if behavior.errorRate > 0, Double(random.next() >> 11) / Double(1 << 53) < behavior.errorRate {
            let fault: ProviderServerFault = behavior.errorStatus == 429
                ? .throttled(retryAfterSeconds: shared.retryAfterSeconds, scope: .provider) : .serverError(status: behavior.errorStatus)
            return provider.answer(fault, to: request, context: context)
        }
        return answer
    }

    /// The connection's stream limit: raised once credentials are accepted (APNs allows one
    /// stream until then), lowered after a rejection and raised again after an accepted request
    /// (`streamsAfterReject`, APNs's habit; a device gone is not a rejection).
    private func limitStreams(after answer: ProviderServerAnswer, on connection: ServerConnectionControl) {
        if shared.provider.streamsBeforeCredentials != nil, answer.kind != .credentialsRefused,
           authenticatedConnections.insert(connection.id).inserted {
            connection.setMaxConcurrentStreams(streamsMax)
        }
        guard let lowered = behavior.streamsAfterReject, answer.issuedCredential == nil else { return }
        switch answer.kind {
        case .accepted:
            if rejectedConnections.remove(connection.id) != nil { connection.setMaxConcurrentStreams(streamsMax) }
        case .deviceGone:
            break
        case .refused, .credentialsRefused, .busy:
            if rejectedConnections.insert(connection.id).inserted { connection.setMaxConcurrentStreams(lowered) }
        }
    }

    private static let statsPath: StaticString = "/stats"

    private func publish() {
        shared.board.publish(worker: slot, counters.statistics(for: shared.listener))
    }

    func connectionOpened(_ connection: ServerConnectionControl) {
        counters.connectionsAccepted += 1
        counters.connectionsOpen += 1
        changed = true
        if let streams = shared.provider.streamsBeforeCredentials { connection.setMaxConcurrentStreams(streams) }
    }

    func connectionClosed(_ connection: ServerConnectionControl) {
        counters.connectionsOpen -= 1
        counters.streamsOpenMax = max(counters.streamsOpenMax, connection.streamsOpenMax)
        counters.streamsOpenMaxPerConnection.record(connection.streamsOpenMax)
        counters.streamsPerConnection.record(connection.requestCount)
        rejectedConnections.remove(connection.id)
        authenticatedConnections.remove(connection.id)
        changed = true
    }

    func misbehaved(_ action: ServerMisbehaviorAction, on connection: ServerConnectionControl) {
        counters.misbehavior.count(action)
        changed = true
    }

    func turnEnded() {
        guard changed else { return }
        changed = false
        publish()
    }
}

/// One worker's counts, published as its listener's statistics. Statuses are tallied in an
/// array and copied out when published (once per loop turn), not hashed per request.
struct MockCounters {
    var requests = 0
    var delivered = 0
    var tokenRequests = 0
    var tokensIssued = 0
    var connectionsAccepted = 0
    var connectionsOpen = 0
    var goAwaysSent = 0
    var streamsOpenMax = 0
    var streamsOpenMaxPerConnection = ConnectionDistribution()
    var streamsPerConnection = ConnectionDistribution()
    var misbehavior = MockMisbehaviorStatistics()
    private var statusTally = [Int](repeating: 0, count: 1000)
    private var statusesSeen: [Int] = []
    private var statusesOther: [Int: Int] = [:]

    @inline(__always)
    mutating func count(status: Int) {
        guard status >= 0 && status < statusTally.count else {
            statusesOther[status, default: 0] += 1
            return
        }
        if statusTally[status] == 0 { statusesSeen.append(status) }
        statusTally[status] += 1
    }

    var statusCounts: [Int: Int] {
        var counts = statusesOther
        for status in statusesSeen { counts[status] = statusTally[status] }
        return counts
    }

    func statistics(for listener: MockListener) -> MockStatistics {
        var statistics = MockStatistics()
        switch listener {
        case .first:
            statistics.requests = requests
            statistics.delivered = delivered
            statistics.statusCounts = statusCounts
            statistics.connectionsAccepted = connectionsAccepted
            statistics.connectionsOpen = connectionsOpen
            statistics.goAwaysSent = goAwaysSent
            statistics.streamsOpenMax = streamsOpenMax
            statistics.streamsOpenMaxPerConnection = streamsOpenMaxPerConnection
            statistics.streamsPerConnection = streamsPerConnection
            statistics.misbehavior = misbehavior
        case .second: statistics.fcm = listenerStatistics
        case .third: statistics.webpush = listenerStatistics
        }
        return statistics
    }

    /// The counters of a listener after the first, in its own block.
    var listenerStatistics: MockFCMStatistics {
        var statistics = MockFCMStatistics()
        statistics.listening = true
        statistics.requests = requests
        statistics.delivered = delivered
        statistics.statusCounts = statusCounts
        statistics.tokenRequests = tokenRequests
        statistics.tokensIssued = tokensIssued
        statistics.connectionsAccepted = connectionsAccepted
        statistics.connectionsOpen = connectionsOpen
        statistics.goAwaysSent = goAwaysSent
        statistics.streamsOpenMax = streamsOpenMax
        statistics.misbehavior = misbehavior
        return statistics
    }
}
