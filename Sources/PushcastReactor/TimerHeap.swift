import PushcastCore

// Timers ordered by deadline, then by scheduling order, so timers with equal deadlines fire
// first-in first-out. The reactor waits no longer than the earliest deadline. The heap itself is
// PushcastCore's MinHeap.

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

    private var entries: MinHeap<Entry>
    private var sequenceNext: UInt64 = 0

    init(capacity: Int) {
        entries = MinHeap(capacity: capacity) { $0.precedes($1) }
    }

    var count: Int { entries.count }
    var earliestDeadline: UInt64? { entries.first?.deadlineNanoseconds }

    mutating func insert(id: UInt64, deadlineNanoseconds: UInt64) {
        entries.push(Entry(deadlineNanoseconds: deadlineNanoseconds, sequence: sequenceNext, id: id))
        sequenceNext &+= 1
    }

    /// Removes and returns the earliest timer if it is due at `nowNanoseconds`.
    mutating func popDue(nowNanoseconds: UInt64) -> Entry? {
        guard let first = entries.first, first.deadlineNanoseconds <= nowNanoseconds else { return nil }
        return entries.pop()
    }
}
