// The mock's per-connection figures in bounded space: a histogram and the top few, whatever the
// number of connections.

@testable import PushcastMock
import PushcastCore
import XCTest

final class ConnectionDistributionTests: XCTestCase {
    func testBucketsTopAndSumOverAMillionConnections() {
        var distribution = ConnectionDistribution()
        let random = SplitMix64(seed: 7)
        var values: [Int] = []
        for _ in 0..<1_000_000 {
            let value = Int(random.next() % 5000)
            values.append(value)
            distribution.record(value)
        }
        XCTAssertEqual(distribution.connections, 1_000_000)
        XCTAssertEqual(distribution.sum, values.reduce(0, +))
        XCTAssertEqual(distribution.top, Array(values.sorted(by: >).prefix(ConnectionDistribution.topCount)))
        XCTAssertEqual(distribution.buckets.reduce(0, +), 1_000_000)
        // 2048...4095 is bucket 12.
        XCTAssertEqual(distribution.buckets[12], values.filter { (2048...4095).contains($0) }.count)
        XCTAssertLessThan(distribution.json.utf8.count, 600, distribution.json)
    }

    func testBucketEdgesAndLabels() {
        var distribution = ConnectionDistribution()
        for value in [0, 1, 2, 3, 4, 7, 8, 1 << 40] { distribution.record(value) }
        XCTAssertEqual(Array(distribution.buckets.prefix(5)), [1, 1, 2, 2, 1])
        XCTAssertEqual(distribution.buckets[ConnectionDistribution.bucketCount - 1], 1)
        XCTAssertEqual(distribution.json,
                       "{\"connections\":8,\"sum\":\(25 + (1 << 40)),\"top\":[\(1 << 40),8,7,4,3,2,1,0],"
                       + "\"histogram\":{\"0\":1,\"1\":1,\"2-3\":2,\"4-7\":2,\"8-15\":1,\"1073741824+\":1}}")
    }

    func testMergeEqualsRecordingEverythingInOne() {
        var a = ConnectionDistribution(), b = ConnectionDistribution(), all = ConnectionDistribution()
        for value in 0..<500 {
            if value % 3 == 0 { a.record(value * 7 % 101) } else { b.record(value * 7 % 101) }
            all.record(value * 7 % 101)
        }
        a.merge(b)
        XCTAssertEqual(a, all)
    }

    func testStatisticsReportStaysSmallWithManyConnections() {
        var statistics = MockStatistics()
        for connection in 0..<100_000 {
            statistics.streamsOpenMaxPerConnection.record(connection % 1000)
            statistics.streamsPerConnection.record(connection % 37)
        }
        XCTAssertLessThan(statistics.json.utf8.count, 4096, statistics.json)
        XCTAssertTrue(statistics.json.contains("\"streams_per_connection\":{\"connections\":100000,"), statistics.json)
    }
}
