import PushcastCore
import PushcastTransport
import PushcastWire

/// One FCM worker's responder: the token endpoint and FCM sends (MockFCMRules), the faults that
/// make sense for FCM (latency, error rate, rate limit, GOAWAY after N requests), counters, the
/// log, and `GET /stats` with the counters of every worker of both listeners.
final class MockFCMResponder: ServerResponder {
    private let shared: MockFCMShared
    private let behavior: MockBehavior
    private let board: MockStatisticsBoard
    private let slot: Int
    private let workerIndex: Int
    private let rateLimiter: MockRateLimiter?
    private let log: MockRequestLog?
    private let random: SplitMix64
    private var statistics = MockStatistics()
    private var setup: MockFCMSetup?
    private var changed = false
    private static let jsonHeaders = [HTTP2Header("content-type", "application/json")]

    /// `slot` is this worker's place on the board (after the APNs workers').
    init(shared: MockFCMShared, behavior: MockBehavior, board: MockStatisticsBoard, slot: Int, workerIndex: Int,
         rateLimiter: MockRateLimiter?, log: MockRequestLog?) {
        self.shared = shared
        self.behavior = behavior
        self.board = board
        self.slot = slot
        self.workerIndex = workerIndex
        self.rateLimiter = rateLimiter
        self.log = log
        random = SplitMix64(seed: behavior.seed &+ 0xFC &+ UInt64(workerIndex) &* 0x9E37_79B9)
        statistics.fcm.listening = true
        board.publish(worker: slot, statistics)
    }

    func handle(_ request: HTTP2ServerRequest, on connection: ServerConnectionControl) -> ServerReply {
        changed = true
        let path = request.path
        if path == "/stats" && request.method(is: "GET") {
            publish()
            return .respond(status: 200, headers: Self.jsonHeaders, body: Array(board.total().json.utf8), delayNanoseconds: 0)
        }
        statistics.fcm.streamsOpenMax = max(statistics.fcm.streamsOpenMax, connection.streamsOpenMax)
        if let limit = behavior.goAwayAfter, connection.requestCount >= limit, !connection.goingAway {
            connection.goAway()
            statistics.fcm.goAwaysSent += 1
        }
        if setup == nil { setup = shared.setup }
        let now = shared.configuration.wallMilliseconds()

        if path == "/token" {
            statistics.fcm.tokenRequests += 1
            guard let setup else { return reply(.notReady, request: request, token: nil) }
            let (answer, issued) = MockFCMTokenEndpoint(shared: shared).evaluate(request, setup: setup, nowMilliseconds: now)
            if issued { statistics.fcm.tokensIssued += 1 }
            return reply(answer, request: request, token: nil)
        }

        statistics.fcm.requests += 1
        guard let setup else { return reply(counted(.notReady), request: request, token: nil) }
        var (answer, token) = MockFCMRules(shared: shared).evaluate(request, setup: setup, nowMilliseconds: now)
        if answer.status == 200, let quota = shared.quota, let wait = quota.admit() {
            answer = .projectQuotaExceeded(retryAfterSeconds: wait)
        }
        if answer.status == 200, let limiter = rateLimiter, !limiter.admit() {
            answer = .projectQuotaExceeded(retryAfterSeconds: shared.configuration.retryAfterSeconds)
        }
        if answer.status == 200, behavior.errorRate > 0, Double(random.next() >> 11) / Double(1 << 53) < behavior.errorRate {
            answer = .fault(status: behavior.errorStatus, retryAfterSeconds: shared.configuration.retryAfterSeconds)
        }
        return reply(counted(answer), request: request, token: token)
    }

    private func counted(_ answer: MockFCMAnswer) -> MockFCMAnswer {
        statistics.fcm.statusCounts[answer.status, default: 0] += 1
        if answer.status == 200 { statistics.fcm.delivered += 1 }
        return answer
    }

    private func reply(_ answer: MockFCMAnswer, request: HTTP2ServerRequest, token: String?) -> ServerReply {
        log?.recordFCM(worker: workerIndex, request: request, token: token, status: answer.status, error: answer.error)
        return .respond(status: answer.status, headers: answer.headers, body: answer.body, delayNanoseconds: behavior.latencyNanoseconds)
    }

    private func publish() {
        board.publish(worker: slot, statistics)
    }

    func connectionOpened(_ connection: ServerConnectionControl) {
        statistics.fcm.connectionsAccepted += 1
        statistics.fcm.connectionsOpen += 1
        changed = true
    }

    func connectionClosed(_ connection: ServerConnectionControl) {
        statistics.fcm.connectionsOpen -= 1
        statistics.fcm.streamsOpenMax = max(statistics.fcm.streamsOpenMax, connection.streamsOpenMax)
        changed = true
    }

    func misbehaved(_ action: ServerMisbehaviorAction, on connection: ServerConnectionControl) {
        statistics.fcm.misbehavior.count(action)
        changed = true
    }

    func turnEnded() {
        guard changed else { return }
        changed = false
        publish()
    }
}
