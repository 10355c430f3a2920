import DequeModule

/// Something that waits in a lane.
public protocol LaneCarrying {
    var lane: Lane { get }
}

/// Items waiting in two lanes, taken fast lane first, with the bulk lane's
/// minimum share: while both lanes wait, at least one take in
/// ``bulkShareEvery`` is from the bulk lane, so a steady stream of fast-lane
/// items slows a campaign by at most 10% and never stops it. Within a lane,
/// first in, first out; ``prepend(_:)`` puts an item back at the front of its
/// lane (a retry goes before what came after it). Sans-I/O, no clock.
public struct LaneQueue<Element: LaneCarrying> {
    /// In chunks (``ChunkedDeque``): a campaign of a million requests queued here never moves at once.
    @usableFromInline var fastLane: ChunkedDeque<Element>
    @usableFromInline var bulkLane: ChunkedDeque<Element>
    /// Fast-lane takes since the last bulk take while the bulk lane waited.
    @usableFromInline var fastInARow = 0
    /// While both lanes wait: one take in this many is from the bulk lane.
    @inlinable public static var bulkShareEvery: Int { 10 }

    @inlinable public init() {
        fastLane = ChunkedDeque()
        bulkLane = ChunkedDeque()
    }

    @inlinable public var isEmpty: Bool { fastLane.isEmpty && bulkLane.isEmpty }
    @inlinable public var count: Int { fastLane.count + bulkLane.count }

    @inlinable public mutating func append(_ item: consuming Element) {
        if item.lane == .fast { fastLane.append(item) } else { bulkLane.append(item) }
    }

    /// `items` in order, moved in (``Swift/Array/removeAllInOrder(_:)``): no element copied
    /// and released again, as iterating the array would.
    @inlinable public mutating func append(moving items: consuming [Element]) {
        items.removeAllInOrder { append($0) }
    }

    @inlinable public mutating func append(contentsOf items: some Sequence<Element>) {
        for item in items { append(item) }
    }

    /// Back at the front of its lane.
    @inlinable public mutating func prepend(_ item: Element) {
        if item.lane == .fast { fastLane.prepend(item) } else { bulkLane.prepend(item) }
    }

    /// Back at the front of their lanes, in the order given.
    @inlinable public mutating func prepend(contentsOf items: some BidirectionalCollection<Element>) {
        for item in items.reversed() { prepend(item) }
    }

    /// The next item: fast lane first, but the bulk lane's turn once ``bulkShareEvery`` - 1 fast
    /// items went while it waited.
    @inlinable public mutating func popFirst() -> Element? {
        if bulkLane.isEmpty {
            fastInARow = 0
            return fastLane.popFirst()
        }
        if fastLane.isEmpty || fastInARow >= Self.bulkShareEvery - 1 {
            fastInARow = 0
            return bulkLane.popFirst()
        }
        fastInARow += 1
        return fastLane.popFirst()
    }

    /// Each lane's first element (the next it gives).
    @inlinable public var heads: (fast: Element?, bulk: Element?) { (fastLane.first, bulkLane.first) }

    /// Whether a fast-lane item waits.
    @inlinable public var hasFast: Bool { !fastLane.isEmpty }

    /// The next fast-lane item, whatever waits in the bulk lane (whose turn this does not take).
    @inlinable public mutating func popFast() -> Element? { fastLane.popFirst() }

    /// Up to `max` items, at most `bulk` of them from the bulk lane, in the order ``popFirst()``
    /// (``popFast()`` once the bulk lane's `bulk` are taken) would give them; a lane alone is taken
    /// in one piece.
    @inlinable public mutating func take(max: Int, bulk: Int) -> [Element] {
        if bulkLane.isEmpty || bulk <= 0 {
            if bulkLane.isEmpty { fastInARow = 0 }
            return fastLane.removeFirst(upTo: max)
        }
        if fastLane.isEmpty {
            fastInARow = 0
            return bulkLane.removeFirst(upTo: Swift.min(max, bulk))
        }
        var out: [Element] = []
        out.reserveCapacity(Swift.min(max, count))
        var bulkLeft = bulk
        while out.count < max, let item = bulkLeft > 0 ? popFirst() : popFast() {
            if item.lane == .bulk { bulkLeft -= 1 }
            out.append(item)
        }
        return out
    }

    /// Empties both lanes, returning what waited (fast lane first).
    @inlinable public mutating func removeAll() -> [Element] { fastLane.removeAll() + bulkLane.removeAll() }
}

extension LaneQueue: Sendable where Element: Sendable {}
