import Foundation
import PushcastCore
import XCTest

final class NumberTextTests: XCTestCase {
    /// `fixed` is printf's `%.Nf`, byte for byte: exact ties, tiny and huge values, the signs of
    /// zero and NaN, and a sweep of random values of every magnitude.
    func testFixedIsPrintfByteForByte() {
        var values: [Double] = [0, -0.0, 0.5, 1.5, 2.5, -2.5, 0.125, 0.375, 1.005, 2.675, 0.05, 0.15, 0.25, 0.35, 9.995, 99.95,
                                999.9999, 1e-7, 5e-324, 1e15, 1e16, 1e22, 1e23, 1.7976931348623157e308, 123456.789,
                                Double(UInt64.max), 4503599627370495.5, 4503599627370497, .nan, -.nan, .infinity, -.infinity]
        let random = SplitMix64(seed: 7)
        for _ in 0..<2_000 {
            let bits = random.next()
            let value = Double(bitPattern: bits)
            values.append(value)
            // And values of the sizes summaries print: rates, milliseconds, seconds.
            values.append(Double(bits % 10_000_000) / Double(1 + bits >> 60))
            values.append(Double(bits % 100_000) / 1000)
        }
        for value in values {
            for places in 0...9 {
                XCTAssertEqual(NumberText.fixed(value, places: places), String(format: "%.\(places)f", value),
                               "value \(value) (bits \(value.bitPattern)), \(places) places")
            }
        }
    }

    func testGroupedPutsCommasBetweenThousands() {
        for value in [0, 7, 999, 1000, -1000, 1_234_567, -1_234, Int.max, Int.min, 100_000, 12_345] {
            XCTAssertEqual(NumberText.grouped(value), value.formatted(), "\(value)")
        }
    }
}
