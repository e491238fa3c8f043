/// A binary min-heap with a fixed comparison, for timers and delayed work. `reserveCapacity` at
/// start-up keeps pushes from allocating on the hot path. Inlinable, so each user gets a copy
/// specialised for its element (unspecialised, every move went through generic metadata).
public struct MinHeap<Element> {
    @usableFromInline var items: [Element] = []
    @usableFromInline let less: (Element, Element) -> Bool

    @inlinable
    public init(capacity: Int = 0, less: @escaping (Element, Element) -> Bool) {
        self.less = less
        items.reserveCapacity(capacity)
    }

    @inlinable
    public var count: Int { items.count }
    @inlinable
    public var isEmpty: Bool { items.isEmpty }
    @inlinable
    public var first: Element? { items.first }

    @inlinable
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

    @inlinable @discardableResult
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
