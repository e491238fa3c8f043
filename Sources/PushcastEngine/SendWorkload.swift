import PushcastCore
import PushcastProviderKit
import PushcastTransport
import PushcastWire
import Synchronization

/// Settings of one provider's send loop that every worker of that provider shares.
public struct SendPolicy: Sendable {
    public var retry: RetryPolicy
    /// Retry requests whose fate is unknown (connection lost after writing, timeout).
    public var retryUnknown: Bool
    /// The provider's token bucket (`--rate`, adaptive on 429, paused by Retry-After); shared by
    /// its workers. Nil: no limit and no pauses.
    public var limiter: ProviderRateLimiter?
    /// The campaign-wide pace (`--duration`), shared by every provider's workers.
    public var pacer: ProviderRateLimiter?
    /// Resends per notification that do not count as attempts (the server never processed the
    /// request: REFUSED_STREAM, GOAWAY-unprocessed, never sent). A server that refuses every
    /// stream would otherwise be asked forever.
    public var resendsMax: Int
    /// A row's whole time budget from its first send (`--request-timeout`): no retry or resend
    /// starts after it has passed. Nil: only the per-request deadline applies.
    public var rowDeadlineNanoseconds: UInt64?
    /// The longest Retry-After honoured (`--max-retry-after`): a longer one (an hour, or a
    /// garbled 999999999) is cut to this, for the row and for a provider-wide pause alike.
    public var retryAfterMaxNanoseconds: UInt64 = SendPolicy.retryAfterMaxDefaultNanoseconds
    /// A provider-wide pause at least this long is told in one line.
    public static let pauseToldNanoseconds: UInt64 = 5_000_000_000
    /// 60 s: FCM's project quota is counted per minute, so a minute's wait always clears it;
    /// APNs and FCM document no longer wait; and a night job stays alive.
    public static let retryAfterMaxDefaultNanoseconds: UInt64 = 60_000_000_000

    public init(retry: RetryPolicy, retryUnknown: Bool, limiter: ProviderRateLimiter? = nil, pacer: ProviderRateLimiter? = nil,
                resendsMax: Int = 10, rowDeadlineNanoseconds: UInt64? = nil) {
        precondition(resendsMax >= 0, "resendsMax is a count")
        self.retry = retry
        self.retryUnknown = retryUnknown
        self.limiter = limiter
        self.pacer = pacer
        self.resendsMax = resendsMax
        self.rowDeadlineNanoseconds = rowDeadlineNanoseconds
    }
}

/// One worker's send loop for one provider, as a `ClientWorkload`: takes prepared notifications
/// from its channel, has the adapter build each request, and turns every answer into exactly one
/// outcome (docs/DESIGN.md §2.9), retrying what docs/PROTOCOL.md (§1.6, §2.5) says to retry, within the provider's
/// rate limit.
public final class SendWorkload<Adapter: ProviderAdapter>: ClientWorkload {
    private let adapter: Adapter
    /// Where the notification's parts go in the request (the adapter's, read once).
    private let layout: RequestLayout
    /// Whether the notification being sent had an id of its own (`giveBack` returns it).
    private var lentID = false
    private let policy: SendPolicy
    private let channel: NotificationChannel
    private let outcomes: OutcomeChannel
    private let gauge: WorkerGauge
    private let clock: MonotonicClock
    private let random: RandomSource

    /// Notifications in flight or waiting for a retry, by tag (a slab index); a free slot holds
    /// `PreparedNotification.vacant`. Notifications move between the slab and `pending` by swaps,
    /// so a notification's buffers are never retained or released on its way through.
    private var slab: [PreparedNotification]
    /// The credential generation each in-flight request carried.
    private var credentialOf: [UInt64]
    private var freeTags: [Int]
    /// Taken from the channel, not yet handed out: batches in arrival order; `pendingBatch` and
    /// `pendingIndex` point at the next one (the slots before it hold vacant notifications).
    private var pending: [[PreparedNotification]] = []
    private var pendingBatch = 0
    private var pendingIndex = 0
    /// Retries waiting for their back-off to pass, by ready time.
    private var retries: MinHeap<(ready: UInt64, tag: Int)>
    /// Safe-to-retry requests go again at once, ahead of new ones.
    private var resend: [Int] = []
    private var channelFinished = false
    private var outbox: [OutcomeRecord] = []
    /// The bodies of the rows in `outbox`, going back to the reader with them (`PayloadPool`).
    private var spentPayloads: [[UInt8]] = []
    private var inFlight = 0
    /// The one request this worker sends, changed in place for each notification (only its
    /// path suffix, apns-id and body change), and read in place by the session.
    private let request: UnsafeMutablePointer<HTTP2Request>
    /// When a request held back (by the rate limiter, or for want of a credential) may go.
    private var heldUntil: UInt64? = nil
    /// The rows handed to a connection since the last `willWrite` (the journal's dispatch marks).
    private var dispatch: DispatchMarks?
    /// A dispatch mark could not be written: nothing more may go out.
    private var dispatchBroken = false
    /// Stops this worker's lane alone (`CredentialDecision.stopLane`); without it, the run stops.
    private let breakLane: (@Sendable (String) -> Void)?

    public init(adapter: Adapter, policy: SendPolicy, channel: NotificationChannel, outcomes: OutcomeChannel, gauge: WorkerGauge,
                clock: MonotonicClock, random: RandomSource, inFlightMax: Int, dispatch: DispatchMarks? = nil,
                breakLane: (@Sendable (String) -> Void)? = nil) {
        self.dispatch = dispatch
        self.breakLane = breakLane
        self.adapter = adapter
        layout = adapter.layout
        self.policy = policy
        self.channel = channel
        self.outcomes = outcomes
        self.gauge = gauge
        self.clock = clock
        self.random = random
        let capacity = inFlightMax + channel.capacity
        slab = Array(repeating: .vacant, count: capacity)
        credentialOf = Array(repeating: 0, count: capacity)
        freeTags = Array((0..<capacity).reversed())
        retries = MinHeap(capacity: capacity) { $0.ready < $1.ready }
        request = .allocate(capacity: 1)
        request.initialize(to: adapter.makeRequest())
        resend.reserveCapacity(capacity)
        outbox.reserveCapacity(256)
        pending.reserveCapacity(64)
    }

    deinit {
        request.deinitialize(count: 1)
        request.deallocate()
    }

    // MARK: - ClientWorkload

    public func nextRequest() -> (request: HTTP2Request, tag: UInt64)? {
        guard let tag = prepareNext() else { return nil }
        let copy = request.pointee
        restoreLent(tag)
        return (copy, UInt64(tag))
    }

    public func submitNext(_ submit: (UnsafePointer<HTTP2Request>, UInt64) -> Void) -> Bool {
        guard let tag = prepareNext() else { return false }
        submit(UnsafePointer(request), UInt64(tag))
        restoreLent(tag)
        dispatch?.note(row: slab[tag].row)
        return true
    }

    /// The notification's buffers, lent to `request` by `prepareNext`, go back to its slot.
    private func restoreLent(_ tag: Int) {
        slab.withUnsafeMutableBufferPointer { slots in giveBack(slots.baseAddress! + tag) }
    }

    /// Lends the notification's body, and its token and id where the provider's layout puts them,
    /// to `request` by swaps: a copy would retain each one on the worker thread, an atomic write
    /// to memory the reader thread allocated and will free. The token and id stay packed (the
    /// session formats them into the header block).
    @inline(__always)
    private func lend(_ n: UnsafeMutablePointer<PreparedNotification>) {
        if !layout.sealsBody { swap(&request.pointee.body, &n.pointee.payload) }
        if layout.tokenInPath { swap(&request.pointee.packedPathSuffix, &n.pointee.packedToken) }
        guard layout.idInHeader else { return }
        lentID = n.pointee.packedMessageID != nil
        if lentID {
            swap(&request.pointee.packedHeader.value, &n.pointee.packedMessageID!)
        } else {
            request.pointee.packedHeader.value = .empty
        }
    }

    /// Moves what `lend` lent back into the notification, as soon as the request has been handed
    /// over (the session copies what it sends).
    @inline(__always)
    private func giveBack(_ n: UnsafeMutablePointer<PreparedNotification>) {
        if !layout.sealsBody { swap(&request.pointee.body, &n.pointee.payload) }
        if layout.tokenInPath { swap(&request.pointee.packedPathSuffix, &n.pointee.packedToken) }
        if layout.idInHeader && lentID { swap(&request.pointee.packedHeader.value, &n.pointee.packedMessageID!) }
    }

    /// Picks the next notification that may go now and turns `request` into its request; nil
    /// when none may go. A body the adapter cannot seal ends its row unsent, and the next one is
    /// picked.
    private func prepareNext() -> Int? {
        while true {
            guard let (tag, credential, now) = pickNext() else { return nil }
            if layout.sealsBody && !sealed(tag, now: now) { continue }
            // Read in place in the slab: a copy would retain and release each of its buffers.
            slab.withUnsafeMutableBufferPointer { slots in lend(slots.baseAddress! + tag) }
            if slab[tag].firstSentNanoseconds == 0 { slab[tag].firstSentNanoseconds = now }
            credentialOf[tag] = credential
            inFlight += 1
            return tag
        }
    }

    /// Has the adapter write the request's body for the notification at `tag` (`RequestLayout.
    /// sealsBody`), afresh for each attempt. When it cannot, the row ends now, never sent:
    /// `invalid` for a row whose own data the adapter refuses, the field named in the error;
    /// `failed` otherwise (`unknown` for either when an earlier attempt may have gone out).
    private func sealed(_ tag: Int, now: UInt64) -> Bool {
        guard let refusal = adapter.seal(payload: slab[tag].payload, into: &request.pointee.body) else { return true }
        var notification = takeOut(tag, "seal")
        if notification.firstSentNanoseconds == 0 { notification.firstSentNanoseconds = now }
        let mayHaveGoneOut = notification.mayHaveGoneOut
        switch refusal {
        case .invalid(let problem):
            finish(tag, &notification, mayHaveGoneOut ? .unknown : .invalid, status: nil, reason: problem.reason,
                   error: problem.field.map { "field '\($0)': \(problem.message)" } ?? problem.message)
        case .failed(let reason):
            finish(tag, &notification, mayHaveGoneOut ? .unknown : .failed, status: nil, reason: reason)
        }
        return false
    }

    /// The next notification that may go now, and the credential generation it goes with.
    private func pickNext() -> (tag: Int, credential: UInt64, now: UInt64)? {
        guard !outcomes.isStopped && !channel.isLaneBroken else { return nil }
        let now = clock.nowNanoseconds()
        if let held = heldUntil {
            guard held <= now else { return nil }
            heldUntil = nil
        }
        // Is anything ready? Only then take a permit: a permit taken for nothing is lost.
        let retryReady = retries.first.map { $0.ready <= now } ?? false
        guard !resend.isEmpty || retryReady || hasFresh() else { return nil }
        guard adapter.credentialReady else {
            // No credential yet (a refresh is under way): no permit is spent; ask again soon.
            heldUntil = now + max(1_000_000, adapter.credentialPollNanoseconds)
            return nil
        }
        if let wait = permitWait(now: now) {
            heldUntil = wait
            return nil
        }
        let tag: Int
        if let again = resend.popLast() {
            tag = again
        } else if retryReady, let head = retries.first {
            retries.pop()
            tag = head.tag
        } else {
            guard let fresh = takeFresh() else { return nil }
            tag = fresh
        }
        precondition(!slab[tag].isVacant, "empty slab slot \(tag)")
        guard let credential = adapter.authorize(&request.pointee) else {
            // No credential yet (a refresh is under way): hold this one and ask again soon.
            resend.append(tag)
            heldUntil = now + max(1_000_000, adapter.credentialPollNanoseconds)
            return nil
        }
        return (tag, credential, now)
    }

    /// The notification's slab slot starts loading, then (`near`, when the slot is in) its
    /// payload's storage header, which the payload's release writes: both were last touched when
    /// the request went out, a round trip ago.
    public func willReceive(tag: UInt64, near: Bool) {
        let index = Int(tag)
        // The mutable view: in place, where reading the class's array property retains it.
        slab.withUnsafeMutableBufferPointer { buffer in
            guard index >= 0, index < buffer.count else { return }
            let slot = UnsafeRawPointer(buffer.baseAddress! + index)
            if near {
                Prefetch.arrayStorage(at: slot + PreparedNotification.payloadOffset)
            } else {
                for offset in stride(from: 0, to: MemoryLayout<PreparedNotification>.size, by: 64) { Prefetch.read(slot + offset) }
                Prefetch.read(slot + MemoryLayout<PreparedNotification>.size - 1)
            }
        }
    }

    public func received(tag: UInt64, response: HTTP2Response) {
        inFlight -= 1
        let index = Int(tag)
        // Moved out of the slab (no copy); put back only when it is retried.
        var notification = takeOut(index, "response")
        notification.attempts += 1
        let answer = adapter.classify(response)
        switch answer.verdict {
        case .delivered(let messageID):
            finish(index, &notification, .delivered, status: answer.status, reason: nil, messageID: messageID)
        case .prune(let reason, let unregisteredAt):
            finish(index, &notification, .pruned, status: answer.status, reason: reason, unregisteredAt: unregisteredAt)
        case .fail(let reason):
            finish(index, &notification, .failed, status: answer.status, reason: reason)
        case .retry(let reason, let retryAfter, let throttle):
            retry(index, &notification, status: answer.status, reason: reason, retryAfter: retryAfter, throttle: throttle)
        case .reauthenticate(let reason):
            switch adapter.credentialRejected(generation: credentialOf[index]) {
            case .retry where policy.retry.mayRetry(attemptsMade: notification.attempts):
                slab[index] = notification
                resend.append(index)
            case .retry:
                finish(index, &notification, .failed, status: answer.status, reason: reason)
            case .stop(let message):
                finish(index, &notification, .failed, status: answer.status, reason: reason)
                outcomes.stop(reason: message)
            case .stopLane(let message):
                finish(index, &notification, .failed, status: answer.status, reason: reason)
                if let breakLane { breakLane(message) } else { outcomes.stop(reason: message) }
            }
        case .stopRun(let reason, let message):
            finish(index, &notification, .failed, status: answer.status, reason: reason)
            outcomes.stop(reason: message)
        }
    }

    public func failed(tag: UInt64, failure: HTTP2StreamFailure) {
        inFlight -= 1
        let index = Int(tag)
        var notification = takeOut(index, "failure")
        if outcomes.isAbandoned {
            abandoned(index, &notification, failure)
            return
        }
        if failure.isSafeToRetry {
            resendUnprocessed(index, &notification, failure)
            return
        }
        if case .unsendable(let why) = failure {
            // Refused before a byte was written: never sent, and sending it again cannot help.
            finish(index, &notification, .failed, status: nil, reason: "\(OutcomeReason.unsendable) (\(why))")
            return
        }
        notification.attempts += 1
        let reason: String
        switch failure {
        case .deadlineExceeded: reason = OutcomeReason.timeout
        case .reset: reason = OutcomeReason.streamReset
        case .cutAfterResponse: reason = OutcomeReason.answerCut
        case .responseBodyTooLarge, .responseHeadersTooLarge: reason = OutcomeReason.responseTooLarge
        default: reason = OutcomeReason.connectionLost
        }
        let ready = clock.nowNanoseconds() + policy.retry.delayNanoseconds(retry: notification.attempts, random: random)
        if policy.retryUnknown && policy.retry.mayRetry(attemptsMade: notification.attempts) && withinDeadline(notification, now: ready) {
            notification.mayHaveGoneOut = true
            slab[index] = notification
            scheduleRetry(index, at: ready)
        } else {
            finish(index, &notification, .unknown, status: nil, reason: reason)
        }
    }

    /// A retryable answer: the row waits its back-off, or the Retry-After (at most
    /// `--max-retry-after`) when longer. A provider-wide limit (or the spread rule) also slows and
    /// pauses the whole provider; a device's own limit delays that row alone. A row whose wait
    /// would pass its deadline ends now.
    private func retry(_ index: Int, _ notification: inout PreparedNotification, status: Int, reason: String,
                       retryAfter: Double?, throttle: ThrottleScope) {
        let now = clock.nowNanoseconds()
        var delay = policy.retry.delayNanoseconds(retry: notification.attempts, random: random)
        var told: UInt64? = nil
        if let retryAfter, retryAfter > 0 {
            told = retryAfter >= Double(UInt64.max / 2) / 1e9 ? UInt64.max / 2 : UInt64(retryAfter * 1e9)
            delay = max(delay, min(told!, policy.retryAfterMaxNanoseconds))
        }
        var providerWide = throttle == .provider
        if throttle != .none, let limiter = policy.limiter {
            let spread = throttle == .device && notification.attempts == 1 && limiter.deviceThrottled(nowNanoseconds: now)
            providerWide = providerWide || spread
            if providerWide {
                limiter.throttled(nowNanoseconds: now, quota: throttle == .provider)
                if limiter.pause(untilNanoseconds: now + delay, nowNanoseconds: now) && delay >= SendPolicy.pauseToldNanoseconds {
                    outcomes.notice(pauseNotice(status: status, reason: reason, spread: spread, told: told, delay: delay), afterNanoseconds: delay)
                }
            }
        }
        if providerWide {
            _ = gauge.providerThrottles.add(1, ordering: .relaxed)
        } else if throttle != .none {
            _ = gauge.deviceThrottles.add(1, ordering: .relaxed)
        }
        if providerWide && throttle == .provider && Int(notification.resends) < policy.resendsMax {
            // The project's quota refused it unprocessed: it waits out the provider's pause like
            // a refused stream, on the resend budget, its deadline starting again when it goes.
            notification.resends += 1
            notification.firstSentNanoseconds = 0
            slab[index] = notification
            scheduleRetry(index, at: now + delay)
        } else if policy.retry.mayRetry(attemptsMade: notification.attempts) && withinDeadline(notification, now: now + delay) {
            slab[index] = notification
            scheduleRetry(index, at: now + delay)
        } else {
            // Past the deadline because of the Retry-After: say so, not only what the server said.
            let late = told != nil && policy.retry.mayRetry(attemptsMade: notification.attempts)
            finish(index, &notification, notification.mayHaveGoneOut ? .unknown : .failed, status: status,
                   reason: late ? OutcomeReason.retryAfterPastDeadline : reason)
        }
    }

    private func pauseNotice(status: Int, reason: String, spread: Bool, told: UInt64?, delay: UInt64) -> String {
        var text = "\(adapter.provider.rawValue): pausing every send for \(delay / 1_000_000_000) s after \(status) \(reason)"
        if spread { text += " from many devices at once (the provider's own limit)" }
        if let told, told > policy.retryAfterMaxNanoseconds {
            text += "; its Retry-After of \(told / 1_000_000_000) s cut to --max-retry-after"
        }
        return text
    }

    /// The run was interrupted and its drain ran out: a request the server never processed is
    /// left unsent (no outcome: a resume sends it), any other is `unknown` (`Interrupted`).
    private func abandoned(_ index: Int, _ notification: inout PreparedNotification, _ failure: HTTP2StreamFailure) {
        if failure.isSafeToRetry && !notification.mayHaveGoneOut {
            freeTags.append(index)
            return
        }
        finish(index, &notification, .unknown, status: nil, reason: OutcomeReason.interrupted)
    }

    /// A request the server never processed goes again without counting an attempt: at once the
    /// first time (a graceful GOAWAY moves it to a fresh connection), then after a growing,
    /// jittered pause. Past the row's resend budget or deadline it ends `failed` (or `unknown`
    /// when an earlier attempt may have gone out), with a reason naming what the server did.
    private func resendUnprocessed(_ index: Int, _ notification: inout PreparedNotification, _ failure: HTTP2StreamFailure) {
        notification.resends += 1
        let now = clock.nowNanoseconds()
        let delay = notification.resends <= 1 ? 0 : resendDelay(Int(notification.resends))
        guard Int(notification.resends) <= policy.resendsMax && withinDeadline(notification, now: now + delay) else {
            let reason: String
            switch failure {
            case .refusedStream: reason = OutcomeReason.refusedStream
            case .goAwayUnprocessed: reason = OutcomeReason.goAwayUnprocessed
            case .flowControlBlocked: reason = OutcomeReason.flowControlBlocked
            default: reason = OutcomeReason.notSent
            }
            finish(index, &notification, notification.mayHaveGoneOut ? .unknown : .failed, status: nil, reason: reason)
            return
        }
        slab[index] = notification
        if delay == 0 {
            if !notification.mayHaveGoneOut { dispatch?.returned(row: notification.row) }
            resend.append(index)
            _ = gauge.retries.add(1, ordering: .relaxed)
        } else {
            scheduleRetry(index, at: now + delay)
        }
    }

    /// The pause before resend number `n` (2 and up): uniform in 0...min(50 ms × 2^(n−2), 2 s).
    /// Short, since the server said it never processed the request; long enough that a server
    /// refusing everything is not asked in a tight loop.
    private func resendDelay(_ n: Int) -> UInt64 {
        let ceiling: UInt64 = min(50_000_000 << UInt64(min(n - 2, 6)), 2_000_000_000)
        return max(1_000_000, random.next().multipliedFullWidth(by: ceiling + 1).high)
    }

    /// Whether a retry of `n` starting at `now` is still inside the row's time budget.
    @inline(__always)
    private func withinDeadline(_ n: PreparedNotification, now: UInt64) -> Bool {
        guard let budget = policy.rowDeadlineNanoseconds, n.firstSentNanoseconds != 0 else { return true }
        return now &- n.firstSentNanoseconds < budget
    }

    public var isExhausted: Bool {
        if outcomes.isStopped || channel.isLaneBroken { return true }
        refillIfEmpty()
        return channelFinished && !hasPending && resend.isEmpty && retries.isEmpty
    }

    /// Something to send now or after a back-off: a connection closed while idle opens again.
    public var hasWork: Bool {
        guard !isExhausted else { return false }
        return hasPending || !resend.isEmpty || !retries.isEmpty
    }

    public var nextReadyNanoseconds: UInt64? {
        // A stopped run sends nothing more: a retry that is due would only wake the worker at
        // once, every turn, until the answers in flight come (a busy poll).
        guard !outcomes.isStopped && !channel.isLaneBroken else { return nil }
        switch (retries.first?.ready, heldUntil) {
        case let (retry?, held?): return min(retry, held)
        case let (retry?, nil): return retry
        case let (nil, held): return held
        }
    }

    public func turnEnded() {
        gauge.inFlight.store(inFlight, ordering: .relaxed)
        publishOutbox()
    }

    public var shouldAbandon: Bool { dispatchBroken || outcomes.isAbandoned }

    /// With dispatch marks, the answers not yet in the kernel hold their stream slots: a crash
    /// then leaves at most the connections' stream limits of rows unknown.
    public var streamSlotsHeld: Int { dispatch == nil ? 0 : outcomes.unpersisted }

    /// The rows handed out this turn reach the journal before their bytes can reach a socket. A
    /// mark that cannot be written stops the run, and this worker drops its connections unwritten.
    public func willWrite() {
        guard dispatch?.isEmpty == false else { return }
        do { try dispatch!.write() } catch {
            dispatchBroken = true
            outcomes.stop(reason: "cannot record what goes out in the journal (\(error.description)); stopped sending")
        }
    }

    /// The worker stopped (the run stopped, or a fatal transport error). What was never sent, or
    /// was answered and waits for a retry, has no outcome (a resume sends it); a notification
    /// whose earlier attempt may have gone out is recorded `unknown` (`Interrupted`): sending it
    /// again is the user's call (`--retry-unknown`). Then everything goes to the writer.
    public func flush() {
        var held: [Int] = resend
        while let head = retries.first {
            retries.pop()
            held.append(head.tag)
        }
        resend.removeAll()
        for index in held where slab[index].mayHaveGoneOut {
            var notification = takeOut(index, "stop")
            finish(index, &notification, .unknown, status: nil, reason: OutcomeReason.interrupted)
        }
        turnEnded()
    }

    // MARK: - Internals

    /// When the rate limits let the next request go; nil when one may go now (the permit is taken).
    private func permitWait(now: UInt64) -> UInt64? {
        if let limiter = policy.limiter, case .waitUntil(let time) = limiter.acquire(nowNanoseconds: now) { return time }
        if let pacer = policy.pacer, case .waitUntil(let time) = pacer.acquire(nowNanoseconds: now) { return time }
        return nil
    }

    private func hasFresh() -> Bool {
        refillIfEmpty()
        return hasPending && !freeTags.isEmpty
    }

    private var hasPending: Bool { pendingBatch < pending.count }

    private func refillIfEmpty() {
        guard !hasPending, !channelFinished else { return }
        // What was handed out left vacant notifications behind (nothing to release); the
        // channel empties those arrays and keeps some for the reader.
        pendingBatch = 0
        pendingIndex = 0
        // The channel holds at most its capacity, and the slab has room for that on top of the
        // in-flight budget, so everything taken fits.
        let (count, closed) = channel.takeAll(into: &pending)
        if count > 0 { outcomes.nudge() }
        channelFinished = closed && pending.isEmpty
    }

    private func takeFresh() -> Int? {
        refillIfEmpty()
        guard hasPending, let tag = freeTags.popLast() else { return nil }
        // The notification a few places on starts coming over from the reader's core.
        let ahead = pendingIndex + 4
        pending[pendingBatch].withUnsafeMutableBufferPointer { batch in
            if ahead < batch.count { PreparedNotification.prefetchBuffers(of: batch.baseAddress! + ahead) }
        }
        // A swap: the slab's vacant notification goes where this one was.
        swap(&slab[tag], &pending[pendingBatch][pendingIndex])
        pendingIndex += 1
        if pendingIndex == pending[pendingBatch].count {
            pendingBatch += 1
            pendingIndex = 0
        }
        return tag
    }

    /// Moves the notification out of slot `index`, leaving a vacant one.
    private func takeOut(_ index: Int, _ what: String) -> PreparedNotification {
        precondition(!slab[index].isVacant, "\(what) for an empty slab slot \(index)")
        var taken = PreparedNotification.vacant
        swap(&taken, &slab[index])
        return taken
    }

    private func scheduleRetry(_ index: Int, at ready: UInt64) {
        if !slab[index].mayHaveGoneOut { dispatch?.returned(row: slab[index].row) }
        retries.push((ready, index))
        _ = gauge.retries.add(1, ordering: .relaxed)
    }

    /// Whether the answer names no id, or the request's own.
    @inline(__always)
    private static func isOwn(_ answered: String?, _ own: PackedText?) -> Bool {
        guard var answered else { return true }
        guard let own else { return false }
        return answered.withUTF8 { own.equals(utf8: UnsafeRawBufferPointer($0)) }
    }

    /// `n` has been taken out of the slab; its slot is free again. Its id, token and apns-id move into the
    /// outcome record by swaps (no retain or release); the rest of it dies with the caller.
    private func finish(_ index: Int, _ n: inout PreparedNotification, _ outcome: OutcomeKind, status: Int?, reason: String?,
                        error: String? = nil, messageID: String? = nil, unregisteredAt: String? = nil) {
        let latency = Double(clock.nowNanoseconds() &- n.firstSentNanoseconds) / 1e6
        // An answer that echoes the request's own id (APNs does) records the request's packed
        // id, and the answer's String, made on this thread, is freed here (freeing it on the
        // reader's thread would take this thread's malloc arena lock once the reader's small
        // cache of 7 blocks is full).
        let ownID = Self.isOwn(messageID, n.packedMessageID)
        outbox.append(OutcomeRecord(row: n.row, id: nil, token: PackedText.empty, provider: adapter.provider, outcome: outcome,
                                    status: status, reason: reason, error: error, messageID: ownID ? nil : messageID.map(PackedText.init),
                                    unregisteredAt: unregisteredAt, attempts: n.attempts, latencyMilliseconds: latency))
        outbox.withUnsafeMutableBufferPointer { records in
            let record = records.baseAddress! + (records.count - 1)
            swap(&record.pointee.id, &n.id)
            swap(&record.pointee.packedToken, &n.packedToken)
            if ownID { swap(&record.pointee.packedMessageID, &n.packedMessageID) }
        }
        var body: [UInt8] = []
        swap(&body, &n.payload)
        if !body.isEmpty { spentPayloads.append(body) }
        freeTags.append(index)
        if outbox.count >= 256 { publishOutbox() }
    }

    private func publishOutbox() {
        outcomes.push(&outbox)
        outcomes.returnPayloads(&spentPayloads)
    }
}
