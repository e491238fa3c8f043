import XCTest
@testable import PushcastCore

final class DeadlineQueueTests: XCTestCase {
    /// Against a sorted reference over random pushes and pops: mostly in-order dues (the ring),
    /// some earlier ones (the heap), equal dues kept in arrival order, and growth past capacity.
    func testMatchesSortedReferenceOverRandomOperations() {
        for seed in UInt64(1)...40 {
            let random = SplitMix64(seed: seed)
            var queue = DeadlineQueue<Int>(capacity: 2)
            var reference: [(due: UInt64, order: Int)] = []
            var now: UInt64 = 0, next = 0
            for _ in 0..<2_000 {
                if random.next() % 3 != 0 {
                    let base = now + 50
                    let due = random.next() % 5 == 0 ? base - min(base, random.next() % 60) : base + random.next() % 3
                    queue.push(next, due: due)
                    reference.append((due, next))
                    next += 1
                } else {
                    now += random.next() % 20
                }
                reference.sort { $0.due != $1.due ? $0.due < $1.due : $0.order < $1.order }
                XCTAssertEqual(queue.firstDue, reference.first?.due)
                while let popped = queue.popDue(now: now) {
                    let expected = reference.removeFirst()
                    XCTAssertEqual(popped, expected.order, "seed \(seed)")
                    XCTAssertLessThanOrEqual(expected.due, now)
                }
                XCTAssertEqual(queue.count, reference.count)
                if let first = reference.first { XCTAssertGreaterThan(first.due, now) }
            }
        }
    }

    func testEmptyQueueHasNothingDue() {
        var queue = DeadlineQueue<String>()
        XCTAssertNil(queue.firstDue)
        XCTAssertNil(queue.popDue(now: .max))
        queue.push("a", due: 10)
        XCTAssertNil(queue.popDue(now: 9))
        XCTAssertEqual(queue.popDue(now: 10), "a")
        XCTAssertTrue(queue.isEmpty)
    }
}
