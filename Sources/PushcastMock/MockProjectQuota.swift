import PushcastReactor
import Synchronization

/// `mock --fcm-quota N/min`: FCM's project quota, as FCM counts it: messages over a rolling
/// minute (not aligned to the clock), shared by every FCM worker. A send over it is answered
/// 429 naming the project quota, with a Retry-After of the seconds until the oldest counted
/// second leaves the window.
final class MockProjectQuota: Sendable {
    private struct Window {
        /// Sends counted in each of the last 60 seconds, by second (index: second % 60).
        var counts = [Int](repeating: 0, count: 60)
        var seconds = [UInt64](repeating: UInt64.max, count: 60)
    }

    let perMinute: Int
    private let window = Mutex(Window())

    init(perMinute: Int) {
        precondition(perMinute > 0)
        self.perMinute = perMinute
    }

    /// Counts a send that fits and returns nil; over the quota, returns the Retry-After seconds.
    func admit(nowNanoseconds now: UInt64 = Reactor.nowNanoseconds()) -> Int? {
        let second = now / 1_000_000_000
        return window.withLock { w in
            var used = 0
            var oldest = second
            for i in 0..<60 where w.seconds[i] != UInt64.max && w.seconds[i] + 60 > second {
                used += w.counts[i]
                oldest = min(oldest, w.seconds[i])
            }
            guard used < perMinute else { return max(1, Int(oldest + 60 - second)) }
            let slot = Int(second % 60)
            if w.seconds[slot] != second {
                w.seconds[slot] = second
                w.counts[slot] = 0
            }
            w.counts[slot] += 1
            return nil
        }
    }
}
