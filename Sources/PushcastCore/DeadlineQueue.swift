/// Work due at a time, taken in (due, arrival) order. Delays are usually one constant (the mock's
/// `--latency-ms`), so due times arrive in order: those go to a ring buffer, O(1) in and out, and
/// each element is moved once. An element due before the ring's last one goes to a heap instead,
/// and `pop` takes the earlier of the two heads. A plain heap moved each element about log2(n)
/// times, a copy of its whole value each time: a fifth of the mock's CPU with 8,000 answers waiting.
public struct DeadlineQueue<Element> {
    @usableFromInline struct Entry {
        @usableFromInline var due: UInt64
        @usableFromInline var sequence: UInt64
        @usableFromInline var element: Element
        @inlinable init(due: UInt64, sequence: UInt64, element: Element) {
            self.due = due
            self.sequence = sequence
            self.element = element
        }
    }

    @usableFromInline var ring: [Entry?]
    @usableFromInline var head = 0
    @usableFromInline var ringCount = 0
    @usableFromInline var late: MinHeap<Entry>
    @usableFromInline var sequence: UInt64 = 0

    @inlinable
    public init(capacity: Int = 16) {
        ring = Array(repeating: nil, count: max(1, capacity))
        late = MinHeap(capacity: 0) { a, b in a.due != b.due ? a.due < b.due : a.sequence < b.sequence }
    }

    @inlinable
    public var count: Int { ringCount + late.count }
    @inlinable
    public var isEmpty: Bool { count == 0 }

    /// The earliest due time, if anything is queued.
    @inlinable
    public var firstDue: UInt64? {
        switch (ringKey, late.first?.due) {
        case (nil, nil): return nil
        case (let r?, nil): return r.due
        case (nil, let h?): return h
        case (let r?, let h?): return min(r.due, h)
        }
    }

    @inlinable
    public mutating func push(_ element: Element, due: UInt64) {
        sequence &+= 1
        let entry = Entry(due: due, sequence: sequence, element: element)
        if ringCount > 0, let lastDue = ring[(head + ringCount - 1) % ring.count]?.due, lastDue > due {
            late.push(entry)
            return
        }
        if ringCount == ring.count { grow() }
        ring[(head + ringCount) % ring.count] = entry
        ringCount += 1
    }

    /// Removes and returns the earliest element if it is due at `now`.
    @inlinable
    public mutating func popDue(now: UInt64) -> Element? {
        let fromRing: Bool
        switch (ringKey, late.first.map { (due: $0.due, sequence: $0.sequence) }) {
        case (nil, nil): return nil
        case (let r?, nil): fromRing = true; if r.due > now { return nil }
        case (nil, let h?): fromRing = false; if h.due > now { return nil }
        case (let r?, let h?):
            fromRing = r.due != h.due ? r.due < h.due : r.sequence < h.sequence
            if (fromRing ? r.due : h.due) > now { return nil }
        }
        if !fromRing { return late.pop()?.element }
        let entry = ring[head].take()
        head = (head + 1) % ring.count
        ringCount -= 1
        return entry?.element
    }

    /// The ring head's order key, read in place (the element is not copied).
    @inlinable
    var ringKey: (due: UInt64, sequence: UInt64)? {
        guard ringCount > 0, let due = ring[head]?.due, let sequence = ring[head]?.sequence else { return nil }
        return (due, sequence)
    }

    @inlinable
    mutating func grow() {
        var bigger = [Entry?](repeating: nil, count: ring.count * 2)
        for i in 0..<ringCount { bigger[i] = ring[(head + i) % ring.count].take() }
        ring = bigger
        head = 0
    }
}
