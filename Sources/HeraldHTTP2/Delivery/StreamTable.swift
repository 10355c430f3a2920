import DequeModule

/// Values kept by stream number while their streams are open, for numbers
/// given out in increasing order (a delivery machine's streams; a connection's
/// HTTP/2 stream ids, halved). Most streams end in about the order they
/// opened, so the table is a window of numbers from the oldest open one: a
/// number's place is found by a subtraction, not a hash, and the oldest open
/// stream (the first to time out) is the window's first.
///
/// The window holds a 4-byte place per number, the values themselves a slot
/// each in a pool reused as streams end: a stream that stays open while
/// thousands open and end after it costs 4 bytes for each of them (until it
/// ends or times out), not a value's size.
///
/// Public and inlinable (like ``LaneQueue``) so that the HTTP/2 transport's
/// module compiles it for its own value type: a generic table called across
/// modules went through its unspecialized form, a value copied at each look-up.
public struct StreamTable<Value> {
    /// The pool slot of number `first + i`, or -1 once that stream ended (or never opened).
    @usableFromInline var places = Deque<Int32>()
    /// The number of `places[0]`.
    @usableFromInline var first = 0
    @usableFromInline var pool: [Value?] = []
    @usableFromInline var freeSlots: [Int32] = []
    @usableFromInline var storedCount = 0

    /// Streams open.
    @inlinable public var count: Int { storedCount }

    @inlinable public init() {}

    @inlinable public var isEmpty: Bool { storedCount == 0 }

    /// The oldest number still open.
    @inlinable public var firstKey: Int? { places.isEmpty ? nil : first }

    /// Opens `key`, which comes after every number given so far.
    @inlinable public mutating func insert(_ value: consuming Value, at key: Int) {
        if places.isEmpty { first = key }
        precondition(key >= first + places.count, "stream numbers are given out in increasing order")
        while first + places.count < key { places.append(-1) }
        let slot: Int32
        if let reused = freeSlots.popLast() {
            slot = reused
            pool[Int(slot)] = consume value
        } else {
            slot = Int32(pool.count)
            pool.append(consume value)
        }
        places.append(slot)
        storedCount += 1
    }

    /// The pool slot of `key`, if open.
    @inlinable @inline(__always)
    func slot(of key: Int) -> Int? {
        let i = key - first
        guard i >= 0, i < places.count else { return nil }
        let s = places[i]
        return s < 0 ? nil : Int(s)
    }

    @inlinable public func contains(_ key: Int) -> Bool { slot(of: key) != nil }

    /// `body` on `key`'s value; nil when `key` is not open. The value passed may be a copy
    /// (unwrapping the slot's optional copies it): ``update(_:_:)`` reads in place.
    @inlinable public func withValue<R>(_ key: Int, _ body: (borrowing Value) throws -> R) rethrows -> R? {
        guard let s = slot(of: key) else { return nil }
        return try body(pool[s]!)
    }

    /// `body` changing `key`'s value where it lies; nil when `key` is not open.
    @inlinable public mutating func update<R>(_ key: Int, _ body: (inout Value) throws -> R) rethrows -> R? {
        guard let s = slot(of: key) else { return nil }
        return try body(&pool[s]!)
    }

    /// Ends `key`, returning its value.
    @inlinable public mutating func remove(_ key: Int) -> Value? {
        let i = key - first
        guard i >= 0, i < places.count, places[i] >= 0 else { return nil }
        let s = Int(places[i])
        places[i] = -1
        var value: Value? = nil
        swap(&value, &pool[s])
        freeSlots.append(Int32(s))
        storedCount -= 1
        while let f = places.first, f < 0 {
            places.removeFirst()
            first += 1
        }
        if storedCount == 0 {
            // Nothing open: the pool's slots are all free, and numbering may start anywhere.
            places.removeAll(keepingCapacity: true)
            freeSlots.removeAll(keepingCapacity: true)
            pool.removeAll(keepingCapacity: true)
        }
        return value
    }

    /// The open numbers, oldest first.
    @inlinable public var keys: [Int] {
        var out: [Int] = []
        out.reserveCapacity(count)
        for (i, s) in places.enumerated() where s >= 0 { out.append(first + i) }
        return out
    }

    /// Ends every stream, returning them oldest first.
    @inlinable public mutating func removeAll() -> [(key: Int, value: Value)] {
        var out: [(key: Int, value: Value)] = []
        out.reserveCapacity(count)
        for key in keys { out.append((key, remove(key)!)) }
        return out
    }
}

extension StreamTable: Sendable where Value: Sendable {}
