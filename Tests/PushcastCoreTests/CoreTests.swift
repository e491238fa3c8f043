import Foundation
import XCTest
@testable import PushcastCore

final class CoreTests: XCTestCase {
    func testSplitMixIsDeterministic() {
        let a = SplitMix64(seed: 42), b = SplitMix64(seed: 42), c = SplitMix64(seed: 43)
        let xs = (0..<5).map { _ in a.next() }
        XCTAssertEqual(xs, (0..<5).map { _ in b.next() })
        XCTAssertNotEqual(xs, (0..<5).map { _ in c.next() })
    }

    func testManualClockAdvancesBothClocks() {
        let clock = ManualClock(nanoseconds: 0, epochSecondsAtZero: 1000)
        clock.advance(milliseconds: 2500)
        XCTAssertEqual(clock.nowNanoseconds(), 2_500_000_000)
        XCTAssertEqual(clock.secondsSinceEpoch(), 1002)
    }

    func testDefaultLimitsValidateAndBadOnesDoNot() throws {
        try Limits().validate()
        var bad = Limits()
        bad.receiveBufferCount = 100
        XCTAssertThrowsError(try bad.validate())
        bad = Limits()
        bad.connectionsMax = 0
        XCTAssertThrowsError(try bad.validate())
        XCTAssertEqual(Limits().streamsInFlightMax, 4000)
    }
}

final class LatencyHistogramTests: XCTestCase {
    func testPercentilesWithinBucketPrecision() {
        var h = LatencyHistogram()
        for v in 1...10_000 { h.record(UInt64(v)) }
        XCTAssertEqual(h.count, 10_000)
        XCTAssertEqual(h.minimum, 1)
        XCTAssertEqual(h.maximum, 10_000)
        let p50 = Double(h.value(atQuantile: 0.5)), p99 = Double(h.value(atQuantile: 0.99))
        XCTAssertEqual(p50, 5000, accuracy: 5000 * 0.02)
        XCTAssertEqual(p99, 9900, accuracy: 9900 * 0.02)
        XCTAssertEqual(h.value(atQuantile: 1.0), h.maximum)
    }

    func testBucketBoundsAreMonotonic() {
        var last: UInt64 = 0
        for i in 1..<(64 * 30) {
            let b = LatencyHistogram.lowerBound(of: i)
            XCTAssertGreaterThan(b, last)
            XCTAssertEqual(LatencyHistogram.index(of: b), i)
            last = b
        }
    }

    func testMergeEqualsRecordingEverything() {
        var a = LatencyHistogram(), b = LatencyHistogram(), all = LatencyHistogram()
        for v in stride(from: 3, to: 90_000, by: 7) { a.record(UInt64(v)); all.record(UInt64(v)) }
        for v in stride(from: 5, to: 2_000_000, by: 13) { b.record(UInt64(v)); all.record(UInt64(v)) }
        a.merge(b)
        XCTAssertEqual(a, all)
        XCTAssertEqual(LatencyHistogram().value(atQuantile: 0.5), 0)
    }
}

final class MinHeapTests: XCTestCase {
    func testPopsInOrderForRandomInput() {
        let random = SplitMix64(seed: 7)
        var heap = MinHeap<UInt64>(capacity: 1000, less: <)
        var all: [UInt64] = []
        for _ in 0..<1000 {
            let v = random.next(below: 500)
            heap.push(v)
            all.append(v)
        }
        var out: [UInt64] = []
        while let v = heap.pop() { out.append(v) }
        XCTAssertEqual(out, all.sorted())
        XCTAssertNil(heap.pop())
    }
}

final class ProviderIDTests: XCTestCase {
    private func matches(_ text: String, _ aliases: [String]) -> Bool {
        var copy = text
        return copy.withUTF8 { ProviderID.matches(UnsafeRawBufferPointer($0), anyOf: aliases.map { Array($0.utf8) }) }
    }

    func testAliasMatchingIgnoresCaseAndSurroundingSpace() {
        let apple = ["ios", "apns", "ipados"]
        for text in ["ios", " IOS ", "Apns", "iPadOS", "ios\r", "\tios"] { XCTAssertTrue(matches(text, apple), text) }
        for text in ["", "iosx", "io", "i os", "android", "web"] { XCTAssertFalse(matches(text, apple), text) }
    }

    func testEqualityIsByNameAndPosition() {
        XCTAssertEqual(ProviderID("apns", position: 0), .apns)
        XCTAssertNotEqual(ProviderID("stub", position: 2), .fcm)
        XCTAssertEqual(ProviderID.fcm.position, 1)
    }
}
