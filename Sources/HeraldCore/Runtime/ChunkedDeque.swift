import DequeModule

/// A first-in-first-out queue kept in chunks of at most ``chunkSize`` elements, so that it never
/// moves all its elements at once. A `Deque` doubles its one buffer as it grows, moving every
/// element (for ``LaneQueue``'s requests some 400 bytes each): at 100,000 queued requests that
/// was 51 ms under `herald serve`'s queue lock, and a fast-lane POST waited for it
/// (docs/benchmarks.md, "Stop 68"). Here a chunk is made as the last one fills and freed as it
/// empties, and only the chunks' list (one reference a chunk) ever grows.
@usableFromInline
struct ChunkedDeque<Element> {
    @usableFromInline var chunks = Deque<Deque<Element>>()
    @usableFromInline var count = 0

    @inlinable static var chunkSize: Int { 1024 }

    @inlinable init() {}

    @inlinable var isEmpty: Bool { count == 0 }

    @inlinable var first: Element? { chunks.first?.first }

    @inlinable mutating func append(_ item: consuming Element) {
        if chunks.isEmpty || chunks[chunks.count - 1].count >= Self.chunkSize {
            chunks.append(Deque(minimumCapacity: Self.chunkSize))
        }
        chunks[chunks.count - 1].append(item)
        count += 1
    }

    @inlinable mutating func prepend(_ item: consuming Element) {
        if chunks.isEmpty || chunks[0].count >= Self.chunkSize {
            chunks.prepend(Deque(minimumCapacity: Self.chunkSize))
        }
        chunks[0].prepend(item)
        count += 1
    }

    @inlinable mutating func popFirst() -> Element? {
        guard !chunks.isEmpty else { return nil }
        let item = chunks[0].popFirst()
        if chunks[0].isEmpty { chunks.removeFirst() }
        count -= 1
        return item
    }

    /// The first `n` elements (at most ``count``), taken out in order.
    @inlinable mutating func removeFirst(upTo n: Int) -> [Element] {
        var out: [Element] = []
        out.reserveCapacity(Swift.min(n, count))
        // Moved out one by one (a prefix copied, then removed, would retain and release each).
        while out.count < n, !chunks.isEmpty {
            while out.count < n, let item = chunks[0].popFirst() { out.append(item) }
            if chunks[0].isEmpty { chunks.removeFirst() }
        }
        count -= out.count
        return out
    }

    /// Every element, in order, and the queue emptied.
    @inlinable mutating func removeAll() -> [Element] { removeFirst(upTo: count) }
}

extension ChunkedDeque: Sendable where Element: Sendable {}
