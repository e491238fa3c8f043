/// A binary min-heap with a fixed comparison, for timers and delayed work. `reserveCapacity` at
/// start-up keeps pushes from allocating on the hot path.
public struct MinHeap<Element> {
    private var items: [Element] = []
    private let less: (Element, Element) -> Bool

    public init(capacity: Int = 0, less: @escaping (Element, Element) -> Bool) {
        self.less = less
        items.reserveCapacity(capacity)
    }

    public var count: Int { items.count }
    public var isEmpty: Bool { items.isEmpty }
    public var first: Element? { items.first }

    public mutating func push(_ element: Element) {
        items.append(element)
        var child = items.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard less(items[child], items[parent]) else { break }
            items.swapAt(child, parent)
            child = parent
        }
    }

    @discardableResult
    public mutating func pop() -> Element? {
        guard !items.isEmpty else { return nil }
        items.swapAt(0, items.count - 1)
        let top = items.removeLast()
        var parent = 0
        while true {
            let left = 2 * parent + 1, right = left + 1
            var smallest = parent
            if left < items.count && less(items[left], items[smallest]) { smallest = left }
            if right < items.count && less(items[right], items[smallest]) { smallest = right }
            if smallest == parent { break }
            items.swapAt(parent, smallest)
            parent = smallest
        }
        return top
    }
}
