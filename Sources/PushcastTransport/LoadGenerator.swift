import PushcastCore
import PushcastReactor
import PushcastSystem
import PushcastWire

/// What one load run did: the figures `pushcast bench` prints.
public struct LoadReport: Sendable {
    public var requests = 0
    public var succeeded = 0
    public var failed = 0
    public var retried = 0
    public var statusCounts: [Int: Int] = [:]
    public var failureCounts: [String: Int] = [:]
    public var latencyMicroseconds = LatencyHistogram()
    public var seconds = 0.0
    public var cpuMicroseconds: UInt64 = 0
    public var peakResidentKibibytes: UInt64 = 0
    public var connections = 0
    public var streams = 0
    public var streamsInFlightMax = 0
    public var goAwaysReceived = 0
    public var io = IOBackendKind.uring

    public init() {}

    public var requestsPerSecond: Double { seconds > 0 ? Double(succeeded + failed) / seconds : 0 }
    public var cpuMicrosecondsPerRequest: Double {
        let done = succeeded + failed
        return done > 0 ? Double(cpuMicroseconds) / Double(done) : 0
    }

    mutating func merge(_ other: LoadReport) {
        requests += other.requests
        succeeded += other.succeeded
        failed += other.failed
        retried += other.retried
        for (k, v) in other.statusCounts { statusCounts[k, default: 0] += v }
        for (k, v) in other.failureCounts { failureCounts[k, default: 0] += v }
        latencyMicroseconds.merge(other.latencyMicroseconds)
        streamsInFlightMax = max(streamsInFlightMax, other.streamsInFlightMax)
        goAwaysReceived += other.goAwaysReceived
    }
}

/// Settings of a load run (h2load-style: N requests over C connections × M streams).
public struct LoadConfiguration: Sendable {
    public var client: ClientConfiguration
    public var requests: Int
    public var connections: Int
    public var streams: Int
    public var workers: Int
    public var request: HTTP2Request
    /// A request whose stream was not processed (GOAWAY, REFUSED_STREAM, lost before sending) is
    /// sent again, up to this many times.
    public var retriesMax = 5

    public init(client: ClientConfiguration, requests: Int, connections: Int, streams: Int, workers: Int, request: HTTP2Request) {
        self.client = client
        self.requests = requests
        self.connections = connections
        self.streams = streams
        self.workers = workers
        self.request = request
    }
}

/// Sends the same request N times, keeping every connection full, and measures it.
public enum LoadGenerator {
    public static func run(_ configuration: LoadConfiguration) throws(TransportError) -> LoadReport {
        let workers = max(1, min(configuration.workers, configuration.connections))
        var client = configuration.client
        client.limits.streamsPerConnectionMax = configuration.streams
        client.limits.connectionsMax = configuration.connections
        let before = ResourceUsage.current()
        let start = Reactor.nowNanoseconds()
        let frozenClient = client
        let outcomes: [Result<LoadReport, TransportError>] = runOnThreads(count: workers, name: "bench") { index in
            // Spread requests and connections evenly over the workers.
            let share = configuration.requests / workers + (index < configuration.requests % workers ? 1 : 0)
            let connections = configuration.connections / workers + (index < configuration.connections % workers ? 1 : 0)
            let clock = TurnClock(source: SystemClock.Monotonic())
            let workload = RepeatedRequestWorkload(
                request: configuration.request, total: share, inFlightMax: connections * configuration.streams,
                retriesMax: configuration.retriesMax, clock: clock)
            do throws(TransportError) {
                let worker = try ClientWorker(configuration: frozenClient, connectionCount: connections,
                                              workload: workload, clock: clock)
                try worker.run()
                var report = workload.report
                report.streamsInFlightMax = worker.statistics.streamsInFlightMax
                report.goAwaysReceived = worker.statistics.goAwaysReceived
                report.io = worker.backendKind
                return .success(report)
            } catch {
                return .failure(error)
            }
        }
        let end = Reactor.nowNanoseconds()
        let after = ResourceUsage.current()
        var total = LoadReport()
        for outcome in outcomes {
            switch outcome {
            case .success(let r):
                total.merge(r)
                total.io = r.io
            case .failure(let e):
                throw e
            }
        }
        total.seconds = Double(end - start) / 1e9
        total.cpuMicroseconds = after.cpuMicroseconds - before.cpuMicroseconds
        total.peakResidentKibibytes = after.peakResidentKibibytes
        total.connections = configuration.connections
        total.streams = configuration.streams
        return total
    }
}

/// N copies of one request; the tag indexes a fixed table of start times, so nothing is
/// allocated per request beyond what the HTTP/2 session does.
final class RepeatedRequestWorkload: ClientWorkload {
    private let request: HTTP2Request
    private let total: Int
    private let retriesMax: Int
    private let clock: MonotonicClock
    private var handedOut = 0
    /// Attempt counts of requests waiting to be sent again.
    private var retryAttempts: [UInt8] = []
    private var startNanoseconds: [UInt64]
    private var attempts: [UInt8]
    private var freeTags: [UInt64]
    /// Responses per status 100...599, folded into `report.statusCounts` when read (a dictionary
    /// update per response costs a hash).
    private var statusTally = [Int](repeating: 0, count: 500)
    private var tallied = LoadReport()

    var report: LoadReport {
        var report = tallied
        for (offset, count) in statusTally.enumerated() where count > 0 {
            report.statusCounts[100 + offset, default: 0] += count
        }
        return report
    }

    init(request: HTTP2Request, total: Int, inFlightMax: Int, retriesMax: Int, clock: MonotonicClock) {
        self.request = request
        self.total = total
        self.retriesMax = retriesMax
        self.clock = clock
        startNanoseconds = Array(repeating: 0, count: inFlightMax)
        attempts = Array(repeating: 0, count: inFlightMax)
        freeTags = (0..<UInt64(inFlightMax)).reversed()
        tallied.requests = total
    }

    func nextRequest() -> (request: HTTP2Request, tag: UInt64)? {
        guard !retryAttempts.isEmpty || handedOut < total, let tag = freeTags.popLast() else { return nil }
        if let previous = retryAttempts.popLast() {
            attempts[Int(tag)] = previous
        } else {
            handedOut += 1
            attempts[Int(tag)] = 0
        }
        startNanoseconds[Int(tag)] = clock.nowNanoseconds()
        return (request, tag)
    }

    func received(tag: UInt64, response: HTTP2Response) {
        let elapsed = clock.nowNanoseconds() - startNanoseconds[Int(tag)]
        tallied.latencyMicroseconds.record(elapsed / 1000)
        let status = response.status
        if status >= 100 && status < 600 {
            statusTally[status - 100] += 1
        } else {
            tallied.statusCounts[status, default: 0] += 1
        }
        if status >= 200 && status < 300 { tallied.succeeded += 1 } else { tallied.failed += 1 }
        freeTags.append(tag)
    }

    func failed(tag: UInt64, failure: HTTP2StreamFailure) {
        let i = Int(tag)
        freeTags.append(tag)
        if failure.isSafeToRetry && Int(attempts[i]) < retriesMax {
            // The tag is given back; the retry takes a fresh one, carrying its attempt count.
            retryAttempts.append(attempts[i] &+ 1)
            tallied.retried += 1
            return
        }
        tallied.failed += 1
        tallied.failureCounts["\(failure)", default: 0] += 1
    }

    var isExhausted: Bool { handedOut >= total && retryAttempts.isEmpty }
    var nextReadyNanoseconds: UInt64? { nil }
}
