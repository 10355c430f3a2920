/// A first-in, first-out queue whose elements are moved in and out, never
/// copied: a ring of optional slots. `Deque.append(_:)` (swift-collections)
/// takes its element borrowed and copies it into the storage, so every item a
/// delivery machine queued was retained and released once more (a retain of
/// each of its references: 1.3% of `herald send` on one core). Here `append`
/// and `prepend` take the element `consuming` and `popFirst` moves it out.
///
/// Public and inlinable (like ``LaneQueue``) so each module compiles it for
/// its own elements.
public struct MoveQueue<Element> {
    @usableFromInline var slots: [Element?] = []
    /// Where the first element lies in `slots`.
    @usableFromInline var head = 0
    @usableFromInline var storedCount = 0

    @inlinable public init() {}

    @inlinable public var count: Int { storedCount }
    @inlinable public var isEmpty: Bool { storedCount == 0 }

    /// The slot of the element at `offset` from the front.
    @inlinable @inline(__always) func slot(_ offset: Int) -> Int {
        let s = head + offset
        return s >= slots.count ? s - slots.count : s
    }

    /// Room for at least one more, the elements moved into a larger ring in order.
    @inlinable mutating func grow() {
        let capacity = Swift.max(16, slots.count * 2)
        var larger: [Element?] = []
        larger.reserveCapacity(capacity)
        for k in 0..<storedCount { larger.append(slots[slot(k)].take()) }
        while larger.count < capacity { larger.append(nil) }
        slots = larger
        head = 0
    }

    @inlinable public mutating func append(_ element: consuming Element) {
        if storedCount == slots.count { grow() }
        slots[slot(storedCount)] = consume element
        storedCount += 1
    }

    /// Puts `element` at the front.
    @inlinable public mutating func prepend(_ element: consuming Element) {
        if storedCount == slots.count { grow() }
        head = head == 0 ? slots.count - 1 : head - 1
        slots[head] = consume element
        storedCount += 1
    }

    @inlinable public mutating func popFirst() -> Element? {
        guard storedCount > 0 else { return nil }
        let element = slots[head].take()
        head = head + 1 == slots.count ? 0 : head + 1
        storedCount -= 1
        return element
    }

    /// A copy of the first element.
    @inlinable public var first: Element? { storedCount > 0 ? slots[head] : nil }

    /// `items`, in their order, moved in before the element now at `index` (the front by default).
    @inlinable public mutating func insert(contentsOf items: consuming [Element], at index: Int = 0) {
        precondition(index >= 0 && index <= storedCount, "index out of range")
        var before: [Element] = []
        before.reserveCapacity(index)
        for _ in 0..<index { before.append(popFirst()!) }
        while let item = items.popLast() { prepend(item) }
        while let item = before.popLast() { prepend(item) }
    }

    /// Empties the queue, returning its elements in order (moved out).
    @inlinable @discardableResult public mutating func removeAll() -> [Element] {
        var out: [Element] = []
        out.reserveCapacity(storedCount)
        while let element = popFirst() { out.append(element) }
        return out
    }

    /// `transform` of each element, front first (the elements read in place).
    @inlinable public func map<T>(_ transform: (Element) throws -> T) rethrows -> [T] {
        var out: [T] = []
        out.reserveCapacity(storedCount)
        for k in 0..<storedCount { out.append(try transform(slots[slot(k)]!)) }
        return out
    }
}

extension MoveQueue: Sendable where Element: Sendable {}
