/// Request bodies' storage, going round: the reader thread renders each row's body into an array
/// (`RowPreparer`), a worker sends it and, when the row's outcome is final, gives the array back
/// through the outcome channel (`OutcomeChannel.returnPayloads`), and the reader renders a later
/// row into it. Without it, every body was allocated on the reader thread and freed on a worker:
/// glibc then could not reuse the block for the reader's next row, and the reader's `malloc`
/// went through the arena's bins for every row (perf: 7 % of the client's samples in the
/// allocator at 8 x 1000 streams and 50 ms).
///
/// Reader-thread only. Keeps at most `keptMax` arrays; an array much larger than the body it
/// would hold is let go, so one large payload does not pin its size on every later row.
public final class PayloadPool {
    private var spare: [[UInt8]] = []
    /// The most arrays kept. The campaign loop passes every notification that can be outstanding
    /// at once (channels, streams in flight, and a feed turn's rows): a smaller bound let go of
    /// arrays that a later feed turn then allocated again. With 4,096 at 4 x 250 streams, the
    /// frees of overflowing arrays were 2 % of the client's samples (malloc_consolidate, walking
    /// the fast bins on each), and the same number of fresh arrays followed. The pool never holds
    /// more than were once in flight together.
    public let keptMax: Int
    /// The bound when none is given (tests, and preparers used alone).
    public static let keptMaxDefault = 4096

    public init(keptMax: Int = PayloadPool.keptMaxDefault) { self.keptMax = max(0, keptMax) }

    public var count: Int { spare.count }

    /// Takes the arrays in `returned` (it comes back empty).
    /// The arrays move over one by one: appending copies would retain each, and emptying
    /// `returned` would release each again.
    public func give(_ returned: inout [[UInt8]]) {
        let taken = min(returned.count, keptMax - spare.count)
        for index in 0..<max(0, taken) {
            var array: [UInt8] = []
            swap(&array, &returned[index])
            spare.append(consume array)
        }
        returned.removeAll(keepingCapacity: true)
    }

    /// An array holding exactly `bytes`: a kept one refilled when one fits, else a new one.
    public func make(copying bytes: UnsafeBufferPointer<UInt8>) -> [UInt8] {
        guard var array = spare.popLast() else { return Array(bytes) }
        let capacity = array.capacity
        guard capacity >= bytes.count, capacity <= 2 * bytes.count + 256 else { return Array(bytes) }
        // Refilling keeps the storage when the array is the only reference to it (it is, once
        // its request went out); otherwise this copies, as `Array(bytes)` would.
        array.removeAll(keepingCapacity: true)
        array.append(contentsOf: bytes)
        return array
    }
}
