// PushcastMock: the mock push server that the demo, the tests and the benchmarks run against.
// It runs on the same Wire sessions and reactor as the client, one worker thread per core, and
// can misbehave on purpose (latency, stream limits, GOAWAY).

import PushcastTransport
import Synchronization

/// Counters of one mock worker. The worker keeps them in plain fields and publishes a copy once
/// per loop turn, so no lock is taken per request.
public struct MockStatistics: Sendable, Equatable {
    public var requests = 0
    /// Requests answered 200.
    public var delivered = 0
    public var statusCounts: [Int: Int] = [:]
    public var connectionsAccepted = 0
    public var connectionsOpen = 0
    public var goAwaysSent = 0
    /// The most streams seen open at once on any one connection.
    public var streamsOpenMax = 0
    /// Over closed connections, bounded (a histogram and the top few, never one entry per
    /// connection, so memory and the report stay flat over millions of reconnects): each
    /// connection's most streams open at once ("how full did the client keep its connections"),
    /// and how many requests (streams) it carried.
    public var streamsOpenMaxPerConnection = ConnectionDistribution()
    public var streamsPerConnection = ConnectionDistribution()
    /// What `--misbehave` did on the APNs listener.
    public var misbehavior = MockMisbehaviorStatistics()
    /// The FCM listener's counters (`mock --fcm`); the fields above count the APNs listener only.
    public var fcm = MockFCMStatistics()
    /// The Web Push listener's counters (`mock --webpush`); `delivered` counts 201s, and the
    /// token fields stay 0.
    public var webpush = MockFCMStatistics()

    public init() {}

    public mutating func merge(_ other: MockStatistics) {
        requests += other.requests
        delivered += other.delivered
        for (k, v) in other.statusCounts { statusCounts[k, default: 0] += v }
        connectionsAccepted += other.connectionsAccepted
        connectionsOpen += other.connectionsOpen
        goAwaysSent += other.goAwaysSent
        streamsOpenMax = max(streamsOpenMax, other.streamsOpenMax)
        streamsOpenMaxPerConnection.merge(other.streamsOpenMaxPerConnection)
        streamsPerConnection.merge(other.streamsPerConnection)
        misbehavior.merge(other.misbehavior)
        fcm.merge(other.fcm)
        webpush.merge(other.webpush)
    }

    /// One JSON object, hand-written (no Foundation serialisation).
    public var json: String {
        let statuses = statusCounts.keys.sorted().map { "\"\($0)\":\(statusCounts[$0]!)" }.joined(separator: ",")
        return "{\"requests\":\(requests),\"delivered\":\(delivered),\"status\":{\(statuses)},\"connections_accepted\":\(connectionsAccepted),"
            + "\"connections_open\":\(connectionsOpen),\"goaways_sent\":\(goAwaysSent),"
            + "\"max_concurrent_streams\":\(streamsOpenMax),"
            + "\"max_concurrent_streams_per_connection\":\(streamsOpenMaxPerConnection.json),"
            + "\"streams_per_connection\":\(streamsPerConnection.json)"
            + (misbehavior.isEmpty ? "" : ",\"misbehavior\":" + misbehavior.json)
            + (fcm.listening ? ",\"fcm\":" + fcm.json : "")
            + (webpush.listening ? ",\"webpush\":" + webpush.json : "") + "}"
    }
}

/// A per-connection figure over every closed connection, in bounded space: how many, their sum,
/// a histogram in power-of-two buckets (0, 1, 2-3, 4-7, …) and the `topCount` largest values.
public struct ConnectionDistribution: Sendable, Equatable {
    public static let topCount = 8
    /// Bucket 0 holds 0; bucket b > 0 holds 2^(b-1) ... 2^b - 1; the last one everything above.
    public static let bucketCount = 32
    public private(set) var connections = 0
    public private(set) var sum = 0
    public private(set) var buckets = [Int](repeating: 0, count: ConnectionDistribution.bucketCount)
    /// The largest values seen, largest first; at most `topCount`.
    public private(set) var top: [Int] = []

    public init() {}

    public mutating func record(_ value: Int) {
        let value = max(0, value)
        connections += 1
        sum += value
        buckets[Self.bucket(of: value)] += 1
        guard top.count < Self.topCount || value > top[top.count - 1] else { return }
        let index = top.firstIndex(where: { $0 < value }) ?? top.count
        top.insert(value, at: index)
        if top.count > Self.topCount { top.removeLast() }
    }

    public mutating func merge(_ other: ConnectionDistribution) {
        connections += other.connections
        sum += other.sum
        for index in buckets.indices { buckets[index] += other.buckets[index] }
        top = Array((top + other.top).sorted(by: >).prefix(Self.topCount))
    }

    static func bucket(of value: Int) -> Int {
        value == 0 ? 0 : min(bucketCount - 1, Int.bitWidth - value.leadingZeroBitCount)
    }

    /// `{"connections":N,"sum":S,"top":[…],"histogram":{"0":a,"1":b,"2-3":c,…}}`, non-empty buckets only.
    public var json: String {
        var histogram: [String] = []
        for (index, count) in buckets.enumerated() where count > 0 {
            let low = index == 0 ? 0 : 1 << (index - 1), high = index == 0 ? 0 : (1 << index) - 1
            let label = index == Self.bucketCount - 1 ? "\(low)+" : low == high ? "\(low)" : "\(low)-\(high)"
            histogram.append("\"\(label)\":\(count)")
        }
        let largest = top.map(String.init).joined(separator: ",")
        return "{\"connections\":\(connections),\"sum\":\(sum),\"top\":[\(largest)],\"histogram\":{\(histogram.joined(separator: ","))}}"
    }
}

/// Counters of the FCM listener. Send requests, token-endpoint calls and `GET /stats` are
/// counted apart: `requests` and `status` are the sends (and unknown paths) only.
public struct MockFCMStatistics: Sendable, Equatable {
    /// True once an FCM worker runs, so the report shows the block even before any traffic.
    public var listening = false
    public var requests = 0
    /// Sends answered 200.
    public var delivered = 0
    public var statusCounts: [Int: Int] = [:]
    /// `POST /token` calls, and how many of them got an access token.
    public var tokenRequests = 0
    public var tokensIssued = 0
    public var connectionsAccepted = 0
    public var connectionsOpen = 0
    public var goAwaysSent = 0
    /// The most streams seen open at once on any one FCM connection.
    public var streamsOpenMax = 0
    /// What `--misbehave` did on the FCM listener.
    public var misbehavior = MockMisbehaviorStatistics()

    public init() {}

    public mutating func merge(_ other: MockFCMStatistics) {
        listening = listening || other.listening
        requests += other.requests
        delivered += other.delivered
        for (k, v) in other.statusCounts { statusCounts[k, default: 0] += v }
        tokenRequests += other.tokenRequests
        tokensIssued += other.tokensIssued
        connectionsAccepted += other.connectionsAccepted
        connectionsOpen += other.connectionsOpen
        goAwaysSent += other.goAwaysSent
        streamsOpenMax = max(streamsOpenMax, other.streamsOpenMax)
        misbehavior.merge(other.misbehavior)
    }

    public var json: String {
        let statuses = statusCounts.keys.sorted().map { "\"\($0)\":\(statusCounts[$0]!)" }.joined(separator: ",")
        return "{\"requests\":\(requests),\"delivered\":\(delivered),\"status\":{\(statuses)},\"token_requests\":\(tokenRequests),"
            + "\"tokens_issued\":\(tokensIssued),\"connections_accepted\":\(connectionsAccepted),\"connections_open\":\(connectionsOpen),"
            + "\"goaways_sent\":\(goAwaysSent),\"max_concurrent_streams\":\(streamsOpenMax)"
            + (misbehavior.isEmpty ? "" : ",\"misbehavior\":" + misbehavior.json) + "}"
    }
}

/// What a misbehaving listener (`--misbehave`) did instead of answering. In the JSON report only
/// when something was counted.
public struct MockMisbehaviorStatistics: Sendable, Equatable {
    /// Request streams reset with REFUSED_STREAM (refuse-all) or INTERNAL_ERROR (reset-all).
    public var streamsRefused = 0
    public var streamsReset = 0
    /// Requests left unanswered (silent, garbage-after-preface, and any that reached a
    /// goaway-zero connection).
    public var requestsIgnored = 0
    /// GOAWAY(last-stream-id 0) frames queued (goaway-zero).
    public var goAwaysSent = 0
    /// Connections closed on purpose right after their handshake (goaway-zero, close-after-handshake).
    public var connectionsClosed = 0
    /// Connections that got bytes that are not HTTP/2 (garbage-after-preface).
    public var garbageSent = 0
    /// Requests answered with a body that never ends (huge-body) or a huge header block
    /// (huge-headers).
    public var hugeBodiesSent = 0
    public var hugeHeadersSent = 0
    /// Connections switched to one byte at a time (trickle).
    public var connectionsTrickled = 0
    /// Connections opened with a flow-control window of 0 (window-zero).
    public var windowsWithheld = 0
    /// Open connections closed unanswered when the server turned bad (--misbehave-after).
    public var connectionsDropped = 0
    /// Requests answered `:status 200` and then cut by RST_STREAM or GOAWAY (answer-then-refuse,
    /// answer-then-goaway): each one is a request the client sent.
    public var answersCut = 0
    /// PING bursts sent (ping-flood).
    public var pingFloods = 0

    public init() {}

    public var isEmpty: Bool { self == MockMisbehaviorStatistics() }

    mutating func count(_ action: ServerMisbehaviorAction) {
        switch action {
        case .streamRefused: streamsRefused += 1
        case .streamReset: streamsReset += 1
        case .requestIgnored: requestsIgnored += 1
        case .goAwaySent: goAwaysSent += 1
        case .connectionClosed: connectionsClosed += 1
        case .garbageSent: garbageSent += 1
        case .hugeBodySent: hugeBodiesSent += 1
        case .hugeHeadersSent: hugeHeadersSent += 1
        case .trickleStarted: connectionsTrickled += 1
        case .windowWithheld: windowsWithheld += 1
        case .connectionDropped: connectionsDropped += 1
        case .answerCut: answersCut += 1
        case .closedHalfAnswered: connectionsClosed += 1
        case .pingsFlooded: pingFloods += 1
        }
    }

    public mutating func merge(_ other: MockMisbehaviorStatistics) {
        streamsRefused += other.streamsRefused
        streamsReset += other.streamsReset
        requestsIgnored += other.requestsIgnored
        goAwaysSent += other.goAwaysSent
        connectionsClosed += other.connectionsClosed
        garbageSent += other.garbageSent
        hugeBodiesSent += other.hugeBodiesSent
        hugeHeadersSent += other.hugeHeadersSent
        connectionsTrickled += other.connectionsTrickled
        windowsWithheld += other.windowsWithheld
        connectionsDropped += other.connectionsDropped
        answersCut += other.answersCut
        pingFloods += other.pingFloods
    }

    public var json: String {
        "{\"streams_refused\":\(streamsRefused),\"streams_reset\":\(streamsReset),\"requests_ignored\":\(requestsIgnored),"
            + "\"goaways_sent\":\(goAwaysSent),\"connections_closed\":\(connectionsClosed),\"garbage_sent\":\(garbageSent),"
            + "\"huge_bodies_sent\":\(hugeBodiesSent),\"huge_headers_sent\":\(hugeHeadersSent),\"connections_trickled\":\(connectionsTrickled),"
            + "\"windows_withheld\":\(windowsWithheld),\"connections_dropped\":\(connectionsDropped),\"answers_cut\":\(answersCut),\"ping_floods\":\(pingFloods)}"
    }
}

/// The published counters of every worker, readable from any thread.
public final class MockStatisticsBoard: Sendable {
    private final class Slot: Sendable {
        let statistics = Mutex(MockStatistics())
    }
    private let slots: [Slot]

    public init(workers: Int) {
        slots = (0..<workers).map { _ in Slot() }
    }

    func publish(worker: Int, _ statistics: MockStatistics) {
        slots[worker].statistics.withLock { $0 = statistics }
    }

    public func total() -> MockStatistics {
        var sum = MockStatistics()
        for slot in slots { sum.merge(slot.statistics.withLock { $0 }) }
        return sum
    }
}
