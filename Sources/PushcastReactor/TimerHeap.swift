// A binary min-heap of timers ordered by deadline, then by scheduling order, so timers with equal
// deadlines fire first-in first-out. The reactor waits no longer than the earliest deadline.

struct TimerHeap {
    struct Entry {
        let deadlineNanoseconds: UInt64
        let sequence: UInt64
        let id: UInt64

        func precedes(_ other: Entry) -> Bool {
            if deadlineNanoseconds != other.deadlineNanoseconds {
                return deadlineNanoseconds < other.deadlineNanoseconds
            }
            return sequence < other.sequence
        }
    }

    private var entries: [Entry] = []
    private var sequenceNext: UInt64 = 0

    init(capacity: Int) {
        entries.reserveCapacity(capacity)
    }

    var count: Int { entries.count }
    var earliestDeadline: UInt64? { entries.first?.deadlineNanoseconds }

    mutating func insert(id: UInt64, deadlineNanoseconds: UInt64) {
        entries.append(Entry(deadlineNanoseconds: deadlineNanoseconds, sequence: sequenceNext, id: id))
        sequenceNext &+= 1
        var child = entries.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard entries[child].precedes(entries[parent]) else { break }
            entries.swapAt(child, parent)
            child = parent
        }
    }

    /// Removes and returns the earliest timer if it is due at `nowNanoseconds`.
    mutating func popDue(nowNanoseconds: UInt64) -> Entry? {
        guard let first = entries.first, first.deadlineNanoseconds <= nowNanoseconds else { return nil }
        let last = entries.removeLast()
        if !entries.isEmpty {
            entries[0] = last
            siftDown(from: 0)
        }
        return first
    }

    private mutating func siftDown(from start: Int) {
        var parent = start
        while true {
            let left = 2 * parent + 1
            let right = left + 1
            var best = parent
            if left < entries.count && entries[left].precedes(entries[best]) { best = left }
            if right < entries.count && entries[right].precedes(entries[best]) { best = right }
            if best == parent { return }
            entries.swapAt(parent, best)
            parent = best
        }
    }
}
