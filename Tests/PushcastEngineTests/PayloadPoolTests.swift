@testable import PushcastEngine
import XCTest

/// Request bodies going round (`PayloadPool`): a returned array is refilled in place when the
/// next body fits it, never holds more than the body, and the pool keeps a bounded number.
final class PayloadPoolTests: XCTestCase {
    private func storage(_ array: [UInt8]) -> UnsafeRawPointer? {
        array.withUnsafeBytes { $0.baseAddress }
    }

    private func make(_ pool: PayloadPool, _ bytes: [UInt8]) -> [UInt8] {
        bytes.withUnsafeBufferPointer { pool.make(copying: $0) }
    }

    func testAReturnedArrayIsRefilledInPlaceWithExactlyTheNewBody() {
        let pool = PayloadPool()
        var first = [UInt8](repeating: 0x41, count: 300)
        first.reserveCapacity(400)
        let firstStorage = storage(first)
        var returned = [first]
        first = []
        pool.give(&returned)
        XCTAssertTrue(returned.isEmpty)
        XCTAssertEqual(pool.count, 1)
        let body = Array("{\"aps\":{\"alert\":\"Hello Bob\"}}".utf8) + [UInt8](repeating: 0x20, count: 200)
        let made = make(pool, body)
        XCTAssertEqual(made, body)
        XCTAssertEqual(storage(made), firstStorage, "the returned storage was reused")
        XCTAssertEqual(pool.count, 0)
    }

    func testAnArrayTooSmallOrFarTooLargeIsLetGo() {
        let pool = PayloadPool()
        var returned = [[UInt8](repeating: 1, count: 10), [UInt8](repeating: 2, count: 5000)]
        let small = storage(returned[0]), large = storage(returned[1])
        pool.give(&returned)
        // Popped last first: the 5000-byte array is far larger than a 100-byte body.
        let a = make(pool, [UInt8](repeating: 7, count: 100))
        XCTAssertEqual(a, [UInt8](repeating: 7, count: 100))
        XCTAssertNotEqual(storage(a), large)
        XCTAssertLessThan(a.capacity, 1000)
        // Then the 10-byte array cannot hold 100 bytes.
        let b = make(pool, [UInt8](repeating: 8, count: 100))
        XCTAssertEqual(b, [UInt8](repeating: 8, count: 100))
        XCTAssertNotEqual(storage(b), small)
        XCTAssertEqual(pool.count, 0)
        // An empty pool makes new arrays.
        XCTAssertEqual(make(pool, [1, 2, 3]), [1, 2, 3])
    }

    func testAnArrayStillSharedIsCopiedNotChanged() {
        let pool = PayloadPool()
        let held = [UInt8](repeating: 0x61, count: 200)
        var returned = [held]
        pool.give(&returned)
        let made = make(pool, [UInt8](repeating: 0x62, count: 150))
        XCTAssertEqual(made, [UInt8](repeating: 0x62, count: 150))
        XCTAssertEqual(held, [UInt8](repeating: 0x61, count: 200), "a body someone still holds is never written")
    }

    func testThePoolKeepsAtMostKeptMax() {
        for pool in [PayloadPool(), PayloadPool(keptMax: 10)] {
            var returned = (0..<(pool.keptMax + 10)).map { _ in [UInt8](repeating: 0, count: 64) }
            pool.give(&returned)
            XCTAssertEqual(pool.count, pool.keptMax)
            XCTAssertTrue(returned.isEmpty)
            var more = [[UInt8](repeating: 0, count: 64)]
            pool.give(&more)
            XCTAssertEqual(pool.count, pool.keptMax)
        }
        XCTAssertEqual(PayloadPool().keptMax, PayloadPool.keptMaxDefault)
    }
}
