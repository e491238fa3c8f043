import PushcastTransport
import PushcastWire

/// How the mock behaves; every fault is off by default.
public struct MockBehavior: Sendable {
    /// Delay before each answer.
    public var latencyNanoseconds: UInt64 = 0
    /// After this many requests on one connection, send GOAWAY (streams up to the last one seen
    /// are still answered).
    public var goAwayAfter: Int? = nil
    public init() {}
}

/// One worker's responder: answers POSTs with 200 and `GET /stats` with the counters of all
/// workers.
final class MockResponder: ServerResponder {
    private let behavior: MockBehavior
    private let board: MockStatisticsBoard
    private let workerIndex: Int
    private var statistics = MockStatistics()
    private var changed = false
    private static let jsonHeaders = [HTTP2Header("content-type", "application/json")]

    init(behavior: MockBehavior, board: MockStatisticsBoard, workerIndex: Int) {
        self.behavior = behavior
        self.board = board
        self.workerIndex = workerIndex
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
        let status = request.method == "POST" ? 200 : 405
        statistics.statusCounts[status, default: 0] += 1
        if let limit = behavior.goAwayAfter, connection.requestCount >= limit, !connection.goingAway {
            connection.goAway()
            statistics.goAwaysSent += 1
        }
        return .respond(status: status, headers: [], body: [], delayNanoseconds: behavior.latencyNanoseconds)
    }

    func connectionOpened(_ connection: ServerConnectionControl) {
        statistics.connectionsAccepted += 1
        statistics.connectionsOpen += 1
        changed = true
    }

    func connectionClosed(_ connection: ServerConnectionControl) {
        statistics.connectionsOpen -= 1
        statistics.streamsOpenMax = max(statistics.streamsOpenMax, connection.streamsOpenMax)
        statistics.streamsOpenMaxSumOverConnections += connection.streamsOpenMax
        statistics.streamsOpenMaxPerConnection.append(connection.streamsOpenMax)
        changed = true
    }

    func turnEnded() {
        guard changed else { return }
        changed = false
        board.publish(worker: workerIndex, statistics)
    }
}
