/// A fixed-size log-linear histogram of latencies in microseconds (HdrHistogram's idea, with
/// 64 sub-buckets per power of two, so percentiles are within ~1.6 %). Constant memory whatever
/// the request count, and mergeable across workers.
public struct LatencyHistogram: Sendable, Equatable {
    static let subBucketBits = 6
    static let subBucketCount = 1 << subBucketBits
    static let bucketCount = (64 - subBucketBits + 1) * subBucketCount

    private var counts: [UInt64]
    public private(set) var count: UInt64 = 0
    public private(set) var minimum: UInt64 = .max
    public private(set) var maximum: UInt64 = 0
    public private(set) var sum: UInt64 = 0

    public init() { counts = [UInt64](repeating: 0, count: Self.bucketCount) }

    static func index(of value: UInt64) -> Int {
        if value < UInt64(subBucketCount) { return Int(value) }
        let msb = 63 - value.leadingZeroBitCount
        let shift = msb - subBucketBits
        let sub = Int((value >> UInt64(shift)) & UInt64(subBucketCount - 1))
        return (shift + 1) * subBucketCount + sub
    }

    /// The smallest value that lands in bucket `index`.
    static func lowerBound(of index: Int) -> UInt64 {
        if index < subBucketCount { return UInt64(index) }
        let shift = index / subBucketCount - 1
        let sub = UInt64(index % subBucketCount)
        return (UInt64(subBucketCount) | sub) << UInt64(shift)
    }

    public mutating func record(_ value: UInt64) {
        counts[Self.index(of: value)] &+= 1
        count &+= 1
        sum &+= value
        if value < minimum { minimum = value }
        if value > maximum { maximum = value }
    }

    public mutating func merge(_ other: LatencyHistogram) {
        guard other.count > 0 else { return }
        for i in 0..<counts.count where other.counts[i] != 0 { counts[i] &+= other.counts[i] }
        count &+= other.count
        sum &+= other.sum
        minimum = min(minimum, other.minimum)
        maximum = max(maximum, other.maximum)
    }

    /// The value at quantile `q` (0...1): the lower bound of the bucket holding it, clamped to the
    /// observed range. Zero when empty.
    public func value(atQuantile q: Double) -> UInt64 {
        guard count > 0 else { return 0 }
        let rank = max(1, UInt64((Double(count) * min(max(q, 0), 1)).rounded(.up)))
        if rank >= count { return maximum }  // the top of the range is known exactly
        var seen: UInt64 = 0
        for i in 0..<counts.count {
            seen &+= counts[i]
            if seen >= rank { return min(max(Self.lowerBound(of: i), minimum), maximum) }
        }
        return maximum
    }

    public var mean: Double { count == 0 ? 0 : Double(sum) / Double(count) }
}

extension LatencyHistogram {
    /// The non-empty buckets as (the smallest value the bucket holds, count): what a summary file
    /// keeps so that shards' histograms can be merged (`pushcast merge`) instead of averaged.
    public var buckets: [(lowerBound: UInt64, count: UInt64)] {
        counts.indices.filter { counts[$0] != 0 }.map { (Self.lowerBound(of: $0), counts[$0]) }
    }

    /// A histogram from a summary file's buckets and totals. False-free: a lower bound always
    /// lands in its own bucket.
    public init(buckets: [(lowerBound: UInt64, count: UInt64)], minimum: UInt64, maximum: UInt64, sum: UInt64) {
        self.init()
        for bucket in buckets where bucket.count > 0 {
            counts[Self.index(of: bucket.lowerBound)] &+= bucket.count
            count &+= bucket.count
        }
        guard count > 0 else { return }
        self.minimum = minimum
        self.maximum = maximum
        self.sum = sum
    }
}
