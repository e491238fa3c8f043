import PushcastAPNs
import PushcastCore
import PushcastReactor
import PushcastSystem
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
    private var statusTally = [Int](repeating: 0, count: 1000)
    private var statusesSeen: [Int] = []
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
        if request.method(is: "GET") && request.withPath({ bytesEqual($0, Self.statsPath) }) {
            publish()
            let body = Array(board.total().json.utf8)
            return .respond(status: 200, headers: Self.jsonHeaders, body: body, delayNanoseconds: 0)
        }
        statistics.requests += 1
        if connection.streamsOpenMax > statistics.streamsOpenMax { statistics.streamsOpenMax = connection.streamsOpenMax }

        var answer = rules.evaluate(request, clientCertificate: connection.clientCertificate)
        if answer.status == 200, let limiter = rateLimiter, !limiter.admit() {
            answer = MockAPNsAnswer(status: 429, reason: "TooManyRequests")
        }
        if answer.status == 200, behavior.errorRate > 0,
           Double(random.next() >> 11) / Double(1 << 53) < behavior.errorRate {
            answer = MockAPNsAnswer(status: behavior.errorStatus, reason: Self.reason(forStatus: behavior.errorStatus))
        }
        count(status: answer.status)
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
        // Echo the client's apns-id, or make one; held inline, so answering allocates nothing.
        var tooLong = false
        let echoed = request.withHeader("apns-id") { value -> HTTP2InlineHeader? in
            guard let value else { return nil }
            guard let header = HTTP2InlineHeader(name: "apns-id", value: value) else { tooLong = true; return nil }
            return header
        }
        if tooLong {
            // An id longer than an inline header holds: echo it the ordinary way.
            let apnsID = request.header("apns-id") ?? ""
            log?.record(worker: workerIndex, request: request, answer: answer, apnsID: apnsID)
            return .respond(status: answer.status, headers: [HTTP2Header("apns-id", apnsID)], body: answer.body,
                            delayNanoseconds: behavior.latencyNanoseconds)
        }
        let idHeader = echoed ?? Self.randomUUIDHeader(random)
        log?.record(worker: workerIndex, request: request, answer: answer, apnsID: idHeader.value)
        return .respondInline(status: answer.status, header: idHeader, body: answer.body,
                              delayNanoseconds: behavior.latencyNanoseconds)
    }

    private static let statsPath: StaticString = "/stats"

    /// Counts one answer. Statuses are tallied in an array and copied into
    /// `statistics.statusCounts` when published (once per loop turn), not hashed per request.
    @inline(__always)
    private func count(status: Int) {
        guard status >= 0 && status < statusTally.count else {
            statistics.statusCounts[status, default: 0] += 1
            return
        }
        if statusTally[status] == 0 { statusesSeen.append(status) }
        statusTally[status] += 1
    }

    private func publish() {
        for status in statusesSeen { statistics.statusCounts[status] = statusTally[status] }
        board.publish(worker: workerIndex, statistics)
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
        randomUUIDHeader(random).value
    }

    /// The same, written straight into an inline `apns-id` header.
    static func randomUUIDHeader(_ random: SplitMix64) -> HTTP2InlineHeader {
        HTTP2InlineHeader(name: "apns-id", count: 36) { out in writeRandomUUID(random, into: out) }
    }

    /// 36 bytes: 8-4-4-4-12 lower-case hex, version 4, RFC 4122 variant.
    static func writeRandomUUID(_ random: SplitMix64, into out: UnsafeMutableRawBufferPointer) {
        precondition(out.count >= 36)
        let a = random.next()
        var b = random.next()
        b = (b & ~0xF000_0000_0000_0000) | 0x4000_0000_0000_0000  // version 4: "4xxx" in group 3
        let c = (random.next() & 0x3FFF_FFFF_FFFF_FFFF) | 0x8000_0000_0000_0000  // variant 10xx: group 4
        let base = out.baseAddress!
        // 8-4-4-4-12 = a[0..<32] - a[32..<48] - b[48..<64] - c[48..<64] - c[0..<48], high nibble first.
        base.storeBytes(of: hex8(UInt32(truncatingIfNeeded: a >> 32)), toByteOffset: 0, as: UInt64.self)
        base.storeBytes(of: UInt8(ascii: "-"), toByteOffset: 8, as: UInt8.self)
        storeHex4(UInt16(truncatingIfNeeded: a >> 16), at: base + 9)
        base.storeBytes(of: UInt8(ascii: "-"), toByteOffset: 13, as: UInt8.self)
        storeHex4(UInt16(truncatingIfNeeded: b >> 48), at: base + 14)
        base.storeBytes(of: UInt8(ascii: "-"), toByteOffset: 18, as: UInt8.self)
        storeHex4(UInt16(truncatingIfNeeded: c >> 48), at: base + 19)
        base.storeBytes(of: UInt8(ascii: "-"), toByteOffset: 23, as: UInt8.self)
        storeHex4(UInt16(truncatingIfNeeded: c >> 32), at: base + 24)
        base.storeBytes(of: hex8(UInt32(truncatingIfNeeded: c)), toByteOffset: 28, as: UInt64.self)
    }

    /// Eight lower-case hex digits of `value`, most significant first, as the bytes of a
    /// little-endian UInt64 (SWAR: spread the nibbles one per byte, then add '0' or 'a' - 10).
    @inline(__always)
    static func hex8(_ value: UInt32) -> UInt64 {
        var x = UInt64(value.byteSwapped)  // most significant byte first in memory
        x = (x | (x << 16)) & 0x0000_FFFF_0000_FFFF
        x = (x | (x << 8)) & 0x00FF_00FF_00FF_00FF
        // Each byte holds two nibbles now; put the high one first.
        let high = (x >> 4) & 0x000F_000F_000F_000F
        let low = (x & 0x000F_000F_000F_000F) << 8
        x = high | low
        let letters = ((x &+ 0x0606_0606_0606_0606) >> 4) & 0x0101_0101_0101_0101
        return (x &+ 0x3030_3030_3030_3030 &+ letters &* 0x27).littleEndian
    }

    @inline(__always)
    static func storeHex4(_ value: UInt16, at pointer: UnsafeMutableRawPointer) {
        let digits = hex8(UInt32(value)) >> 32  // the last four of eight digits
        pointer.storeBytes(of: UInt32(truncatingIfNeeded: digits).littleEndian, as: UInt32.self)
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
        statistics.streamsOpenMaxPerConnection.record(connection.streamsOpenMax)
        statistics.streamsPerConnection.record(connection.requestCount)
        rejectedConnections.remove(connection.id)
        authenticatedConnections.remove(connection.id)
        changed = true
    }

    func misbehaved(_ action: ServerMisbehaviorAction, on connection: ServerConnectionControl) {
        statistics.misbehavior.count(action)
        changed = true
    }

    func turnEnded() {
        guard changed else { return }
        changed = false
        publish()
    }
}
