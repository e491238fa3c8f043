@testable import PushcastEngine
import XCTest

/// The notification channel between the reader and a worker: batches move whole, and the arrays
/// the worker has emptied come back to the reader for its next batches, at most `spareMax` kept.
final class NotificationChannelTests: XCTestCase {
    private func notification(_ row: Int) -> PreparedNotification {
        PreparedNotification(row: row, id: "d\(row)", token: String(repeating: "a", count: 64), messageID: nil, payload: [1, 2, 3])
    }

    private func base(_ array: [PreparedNotification]) -> UnsafeRawPointer? {
        array.withUnsafeBufferPointer { UnsafeRawPointer($0.baseAddress) }
    }

    /// The worker hands out every notification of what it took (a vacant one left behind).
    private func handOut(_ pending: inout [[PreparedNotification]]) -> [Int] {
        var rows: [Int] = []
        for b in pending.indices {
            for i in pending[b].indices {
                var taken = PreparedNotification.vacant
                swap(&taken, &pending[b][i])
                rows.append(taken.row)
            }
        }
        return rows
    }

    func testEmptiedBatchArraysGoBackToTheReader() {
        let channel = NotificationChannel(capacity: 1000)
        var batch: [PreparedNotification] = []
        batch.reserveCapacity(256)
        for row in 1...200 { batch.append(notification(row)) }
        let sent = base(batch)
        channel.push(&batch)
        XCTAssertTrue(batch.isEmpty)
        XCTAssertGreaterThanOrEqual(batch.capacity, 256)
        XCTAssertNotEqual(base(batch), sent, "the reader got new storage: the batch moved whole")

        var pending: [[PreparedNotification]] = []
        XCTAssertEqual(channel.takeAll(into: &pending).taken, 200)
        XCTAssertEqual(base(pending[0]), sent)
        XCTAssertEqual(handOut(&pending), Array(1...200))
        // The next take empties the handed-out array and keeps it.
        XCTAssertEqual(channel.takeAll(into: &pending).taken, 0)
        XCTAssertTrue(pending.isEmpty)

        var second: [PreparedNotification] = []
        second.reserveCapacity(256)
        for row in 201...400 { second.append(notification(row)) }
        channel.push(&second)
        XCTAssertEqual(base(second), sent, "the reader's next storage is the array the worker emptied")
        XCTAssertTrue(second.isEmpty)
        XCTAssertEqual(channel.takeAll(into: &pending).taken, 200)
        XCTAssertEqual(handOut(&pending), Array(201...400))
    }

    func testSpareArraysAreBounded() {
        let channel = NotificationChannel(capacity: 100_000)
        var pending: [[PreparedNotification]] = []
        let batches = NotificationChannel.spareMax + 5
        func push() {
            var batch: [PreparedNotification] = []
            batch.reserveCapacity(256)
            for row in 0..<200 { batch.append(notification(row)) }
            channel.push(&batch)
        }
        for _ in 0..<batches { push() }
        XCTAssertEqual(channel.spareCount, 0)
        XCTAssertEqual(channel.takeAll(into: &pending).taken, 200 * batches)
        XCTAssertEqual(handOut(&pending).count, 200 * batches)
        _ = channel.takeAll(into: &pending)
        XCTAssertEqual(channel.spareCount, NotificationChannel.spareMax, "the rest were let go")
        push()
        push()
        XCTAssertEqual(channel.spareCount, NotificationChannel.spareMax - 2)
    }
}
