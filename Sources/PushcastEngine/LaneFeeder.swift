import PushcastCore

/// The reader side of one lane: its channels and the batch being filled.
public final class LaneFeeder {
    public let provider: ProviderID
    let channels: [NotificationChannel]
    private var next = 0
    private var batch: [PreparedNotification] = []
    private var room = 0

    init(provider: ProviderID, channels: [NotificationChannel]) {
        self.provider = provider
        self.channels = channels
        batch.reserveCapacity(256)
    }

    /// Whether one more notification fits now. Waits for room for a sizeable batch: many tiny
    /// batches cost more than they carry.
    func canAccept() -> Bool {
        if batch.count < room { return true }
        if isBroken { return true }
        flush()
        for _ in 0..<channels.count {
            let channel = channels[next]
            let free = channel.room
            if free >= min(64, channel.capacity) {
                room = min(free, 256)
                return true
            }
            next = (next + 1) % channels.count
        }
        return false
    }

    func add(_ notification: consuming PreparedNotification) { batch.append(notification) }

    /// The lane broke: rows for it are dropped here, never sent and never recorded.
    var isBroken: Bool { channels.first?.isLaneBroken ?? false }

    func flush() {
        if isBroken { batch.removeAll(keepingCapacity: true) }
        if !batch.isEmpty {
            channels[next].push(&batch)
            next = (next + 1) % channels.count
        }
        room = 0
    }

    var isBlocked: Bool { !isBroken && batch.count >= room && channels.allSatisfy { $0.room < min(64, $0.capacity) } }

    private(set) var isClosed = false

    func close() {
        flush()
        isClosed = true
        for channel in channels { channel.close() }
    }

    func wake() { for channel in channels { channel.wake() } }
}
