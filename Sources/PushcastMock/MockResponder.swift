import PushcastAPNs
import PushcastCore
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
    /// Provider-token checks.
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

/// One worker's responder: answers APNs requests the way APNs does (MockAPNsRules), applies the
/// faults, counts, and answers `GET /stats` with the counters of all workers.
final class MockResponder: ServerResponder {
    private let behavior: MockBehavior
    private let board: MockStatisticsBoard
    private let workerIndex: Int
    private let rules: MockAPNsRules
    private let rateLimiter: MockRateLimiter?
    private let log: MockRequestLog?
    private let random: SplitMix64
    private var statistics = MockStatistics()
    private var changed = false
    /// Connections with a lowered stream limit (after a rejection), and those whose provider
    /// token has been accepted once.
    private var rejectedConnections = Set<UInt64>()
    private var authenticatedConnections = Set<UInt64>()
    private let streamsMax: Int
    private static let jsonHeaders = [HTTP2Header("content-type", "application/json")]

    init(behavior: MockBehavior, board: MockStatisticsBoard, workerIndex: Int, shared: MockSharedState,
         rateLimiter: MockRateLimiter?, log: MockRequestLog?, streamsMax: Int) {
        self.behavior = behavior
        self.board = board
        self.workerIndex = workerIndex
        self.rateLimiter = rateLimiter
        self.log = log
        self.streamsMax = streamsMax
        random = SplitMix64(seed: behavior.seed &+ UInt64(workerIndex) &* 0x9E37_79B9)
        rules = MockAPNsRules(authentication: behavior.authentication, shared: shared, wallClock: SystemWallClock())
    }

    func handle(_ request: HTTP2ServerRequest, on connection: ServerConnectionControl) -> ServerReply {
        changed = true
        if request.method == "GET" && request.path == "/stats" {
            board.publish(worker: workerIndex, statistics)
            let body = Array(board.total().json.utf8)
            return .respond(status: 200, headers: Self.jsonHeaders, body: body, delayNanoseconds: 0)
        }
        statistics.requests += 1
        if connection.streamsOpenMax > statistics.streamsOpenMax { statistics.streamsOpenMax = connection.streamsOpenMax }

        var answer = rules.evaluate(request)
        if answer.status == 200, let limiter = rateLimiter, !limiter.admit() {
            answer = MockAPNsAnswer(status: 429, reason: "TooManyRequests")
        }
        if answer.status == 200, behavior.errorRate > 0,
           Double(random.next() >> 11) / Double(1 << 53) < behavior.errorRate {
            answer = MockAPNsAnswer(status: behavior.errorStatus, reason: Self.reason(forStatus: behavior.errorStatus))
        }
        statistics.statusCounts[answer.status, default: 0] += 1
        if answer.status == 200 { statistics.delivered += 1 }

        if case .token = behavior.authentication, answer.status != 403,
           authenticatedConnections.insert(connection.id).inserted {
            connection.setMaxConcurrentStreams(streamsMax)
        }
        if let lowered = behavior.streamsAfterReject {
            // 410 is not an error to APNs; everything else that is not 200 is.
            if answer.status != 200 && answer.status != 410 {
                if rejectedConnections.insert(connection.id).inserted { connection.setMaxConcurrentStreams(lowered) }
            } else if answer.status == 200, rejectedConnections.remove(connection.id) != nil {
                connection.setMaxConcurrentStreams(streamsMax)
            }
        }
        if let limit = behavior.goAwayAfter, connection.requestCount >= limit, !connection.goingAway {
            connection.goAway()
            statistics.goAwaysSent += 1
        }
        let apnsID = request.header("apns-id") ?? Self.randomUUID(random)
        log?.record(worker: workerIndex, request: request, answer: answer, apnsID: apnsID)
        return .respond(status: answer.status, headers: [HTTP2Header("apns-id", apnsID)], body: answer.body,
                        delayNanoseconds: behavior.latencyNanoseconds)
    }

    static func reason(forStatus status: Int) -> String {
        switch status {
        case 429: return "TooManyRequests"
        case 500: return "InternalServerError"
        default: return "ServiceUnavailable"
        }
    }

    /// A random canonical UUID, for requests that came without an apns-id.
    static func randomUUID(_ random: SplitMix64) -> String {
        let hex = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(36)
        var a = random.next(), b = random.next()
        for i in 0..<32 {
            if i == 8 || i == 12 || i == 16 || i == 20 { out.append(UInt8(ascii: "-")) }
            let nibble: UInt64
            if i < 16 { nibble = a & 0xF; a >>= 4 } else { nibble = b & 0xF; b >>= 4 }
            out.append(hex[Int(i == 12 ? 4 : (i == 16 ? (nibble & 0x3) | 0x8 : nibble))])
        }
        return String(decoding: out, as: UTF8.self)
    }

    func connectionOpened(_ connection: ServerConnectionControl) {
        statistics.connectionsAccepted += 1
        statistics.connectionsOpen += 1
        changed = true
        // APNs allows one stream until the first request with a valid provider token.
        if case .token = behavior.authentication { connection.setMaxConcurrentStreams(1) }
    }

    func connectionClosed(_ connection: ServerConnectionControl) {
        statistics.connectionsOpen -= 1
        statistics.streamsOpenMax = max(statistics.streamsOpenMax, connection.streamsOpenMax)
        statistics.streamsOpenMaxSumOverConnections += connection.streamsOpenMax
        statistics.streamsOpenMaxPerConnection.append(connection.streamsOpenMax)
        rejectedConnections.remove(connection.id)
        authenticatedConnections.remove(connection.id)
        changed = true
    }

    func turnEnded() {
        guard changed else { return }
        changed = false
        board.publish(worker: workerIndex, statistics)
    }
}
