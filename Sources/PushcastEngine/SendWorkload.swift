import PushcastAPNs
import PushcastCore
import PushcastTransport
import PushcastWire

/// Campaign-wide APNs settings every worker shares.
public struct APNsSendSettings: Sendable {
    public var headers: APNsCampaignHeaders
    /// Token auth: the shared JWT source. Nil with certificate auth.
    public var tokenSource: APNsTokenSource?
    public var authority: String
    public var retry: RetryPolicy
    /// Retry requests whose fate is unknown (connection lost after writing, timeout).
    public var retryUnknown: Bool

    public init(headers: APNsCampaignHeaders, tokenSource: APNsTokenSource?, authority: String, retry: RetryPolicy, retryUnknown: Bool) {
        self.headers = headers
        self.tokenSource = tokenSource
        self.authority = authority
        self.retry = retry
        self.retryUnknown = retryUnknown
    }
}

/// One worker's APNs send loop, as a `ClientWorkload`: takes prepared notifications from its
/// channel, builds each request from pre-built campaign headers, and turns every response into
/// exactly one outcome (design.md 2.9), retrying what protocol-facts.md says to retry.
public final class APNsWorkload: ClientWorkload {
    private let settings: APNsSendSettings
    private let channel: NotificationChannel
    private let outcomes: OutcomeChannel
    private let gauge: WorkerGauge
    private let clock: MonotonicClock
    private let random: RandomSource

    /// Notifications in flight or waiting for a retry, by tag (a slab index).
    private var slab: [PreparedNotification?]
    private var freeTags: [Int]
    /// Taken from the channel, not yet handed out: batches in reverse order, each reversed, so
    /// that popLast moves notifications out in arrival order without copying.
    private var pending: [[PreparedNotification]] = []
    private var taken: [[PreparedNotification]] = []
    /// Retries waiting for their back-off to pass, by ready time.
    private var retries: MinHeap<(ready: UInt64, tag: Int)>
    /// Safe-to-retry requests go again at once, ahead of new ones.
    private var resend: [Int] = []
    private var channelFinished = false
    private var outbox: [OutcomeRecord] = []
    private var bearer: APNsBearerToken?
    private var inFlight = 0

    public init(settings: APNsSendSettings, channel: NotificationChannel, outcomes: OutcomeChannel, gauge: WorkerGauge,
                clock: MonotonicClock, random: RandomSource, inFlightMax: Int) {
        self.settings = settings
        self.channel = channel
        self.outcomes = outcomes
        self.gauge = gauge
        self.clock = clock
        self.random = random
        let capacity = inFlightMax + channel.capacity
        slab = Array(repeating: nil, count: capacity)
        freeTags = Array((0..<capacity).reversed())
        retries = MinHeap(capacity: capacity) { $0.ready < $1.ready }
        resend.reserveCapacity(capacity)
        outbox.reserveCapacity(256)
        pending.reserveCapacity(64)
        taken.reserveCapacity(64)
        bearer = settings.tokenSource?.current()
    }

    // MARK: - ClientWorkload

    public func nextRequest() -> (request: HTTP2Request, tag: UInt64)? {
        guard !outcomes.isStopped else { return nil }
        let tag: Int
        if let again = resend.popLast() {
            tag = again
        } else if let head = retries.first, head.ready <= clock.nowNanoseconds() {
            retries.pop()
            tag = head.tag
        } else {
            guard let fresh = takeFresh() else { return nil }
            tag = fresh
        }
        guard var notification = slab[tag] else { preconditionFailure("empty slab slot \(tag)") }
        if notification.firstSentNanoseconds == 0 {
            notification.firstSentNanoseconds = clock.nowNanoseconds()
            slab[tag] = notification
        }
        inFlight += 1
        let authorization: String?
        if let source = settings.tokenSource, var cached = bearer {
            if source.refreshIfNeeded(&cached) { bearer = cached }
            authorization = cached.authorization
        } else {
            authorization = nil
        }
        let request = HTTP2Request(authority: settings.authority, path: "/3/device/" + notification.token,
                                   headers: settings.headers.headers(authorization: authorization, apnsID: notification.apnsID),
                                   body: notification.payload)
        return (request, UInt64(tag))
    }

    public func received(tag: UInt64, response: HTTP2Response) {
        inFlight -= 1
        let index = Int(tag)
        guard var notification = slab[index] else { preconditionFailure("response for an empty slot") }
        notification.attempts += 1
        let summary = APNsResponseSummary(response: response)
        switch summary.verdict {
        case .delivered:
            finish(index, notification, .delivered, status: summary.status, reason: nil,
                   apnsID: summary.apnsID ?? notification.apnsID)
        case .prune(let reason):
            finish(index, notification, .pruned, status: summary.status, reason: reason, unregisteredAt: summary.unregisteredAt)
        case .fail(let reason):
            finish(index, notification, .failed, status: summary.status, reason: reason)
        case .retry(let reason):
            if settings.retry.mayRetry(attemptsMade: notification.attempts) {
                slab[index] = notification
                scheduleRetry(index, retry: notification.attempts)
            } else {
                finish(index, notification, .failed, status: summary.status, reason: reason)
            }
        case .refreshTokenAndRetry:
            handleExpiredToken(index, notification, status: summary.status)
        case .stopRun(let reason):
            finish(index, notification, .failed, status: summary.status, reason: reason)
            outcomes.stop(reason: "APNs rejected the credential: \(summary.status) \(reason)")
        }
    }

    public func failed(tag: UInt64, failure: HTTP2StreamFailure) {
        inFlight -= 1
        let index = Int(tag)
        guard var notification = slab[index] else { preconditionFailure("failure for an empty slot") }
        if failure.isSafeToRetry {
            // Not processed by the server: send again without counting an attempt.
            resend.append(index)
            _ = gauge.retries.add(1, ordering: .relaxed)
            return
        }
        notification.attempts += 1
        let reason: String
        switch failure {
        case .deadlineExceeded: reason = OutcomeReason.timeout
        case .reset: reason = OutcomeReason.streamReset
        default: reason = OutcomeReason.connectionLost
        }
        if settings.retryUnknown && settings.retry.mayRetry(attemptsMade: notification.attempts) {
            slab[index] = notification
            scheduleRetry(index, retry: notification.attempts)
        } else {
            finish(index, notification, .unknown, status: nil, reason: reason)
        }
    }

    public var isExhausted: Bool {
        if outcomes.isStopped { return true }
        refillIfEmpty()
        return channelFinished && pending.isEmpty && resend.isEmpty && retries.isEmpty
    }

    public var nextReadyNanoseconds: UInt64? { retries.first?.ready }

    public func turnEnded() {
        gauge.inFlight.store(inFlight, ordering: .relaxed)
        outcomes.push(&outbox)
    }

    /// The worker stopped (a fatal transport error): what was never sent has no outcome; tell the
    /// writer.
    public func flush() { turnEnded() }

    // MARK: - Internals

    private func refillIfEmpty() {
        guard pending.isEmpty, !channelFinished else { return }
        // The channel holds at most its capacity, and the slab has room for that on top of the
        // in-flight budget, so everything taken fits.
        let (count, closed) = channel.takeAll(into: &taken)
        if count > 0 {
            while var batch = taken.popLast() {
                batch.reverse()
                pending.append(batch)
            }
            outcomes.nudge()
        }
        channelFinished = closed && pending.isEmpty
    }

    private func takeFresh() -> Int? {
        refillIfEmpty()
        guard !pending.isEmpty, let tag = freeTags.popLast() else { return nil }
        let last = pending.count - 1
        slab[tag] = pending[last].popLast()
        if pending[last].isEmpty { pending.removeLast() }
        return tag
    }

    private func scheduleRetry(_ index: Int, retry: Int) {
        let delay = settings.retry.delayNanoseconds(retry: retry, random: random)
        retries.push((clock.nowNanoseconds() + delay, index))
        _ = gauge.retries.add(1, ordering: .relaxed)
    }

    private func handleExpiredToken(_ index: Int, _ notification: PreparedNotification, status: Int) {
        guard let source = settings.tokenSource, let seen = bearer else {
            finish(index, notification, .failed, status: status, reason: "ExpiredProviderToken")
            return
        }
        switch source.refreshAfterExpired(seenToken: seen) {
        case .refreshed(let fresh):
            bearer = fresh
            if settings.retry.mayRetry(attemptsMade: notification.attempts) {
                slab[index] = notification
                resend.append(index)
            } else {
                finish(index, notification, .failed, status: status, reason: "ExpiredProviderToken")
            }
        case .tooSoon(_, let seconds):
            finish(index, notification, .failed, status: status, reason: "ExpiredProviderToken")
            outcomes.stop(reason: "APNs rejected a provider token signed less than 20 minutes ago as expired "
                + "(403 ExpiredProviderToken); check this host's clock. A new token may be signed in \(seconds) s.")
        }
    }

    private func finish(_ index: Int, _ n: PreparedNotification, _ outcome: OutcomeKind, status: Int?, reason: String?,
                        apnsID: String? = nil, unregisteredAt: String? = nil) {
        let latency = Double(clock.nowNanoseconds() &- n.firstSentNanoseconds) / 1e6
        outbox.append(OutcomeRecord(row: n.row, id: n.id, token: n.token, provider: .apns, outcome: outcome,
                                    status: status, reason: reason, apnsID: apnsID ?? n.apnsID,
                                    unregisteredAt: unregisteredAt, attempts: n.attempts, latencyMilliseconds: latency))
        slab[index] = nil
        freeTags.append(index)
        if outbox.count >= 256 { outcomes.push(&outbox) }
    }
}
