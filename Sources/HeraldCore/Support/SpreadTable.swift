/// A dictionary kept as 256 dictionaries, the key's table chosen by the caller (a byte of the key
/// that is cheap to read and evenly spread). A dictionary grows by doubling in one step, every
/// entry hashed and moved again: at a few hundred thousand entries, under a lock, that is a pause
/// of 100 ms and more for whoever waits on the lock (docs/benchmarks.md, "Stop 68"). Here a 256th
/// of the entries moves at a time.
package struct SpreadTable<Key: Hashable, Value> {
    package private(set) var tables = [[Key: Value]](repeating: [:], count: 256)

    package init() {}

    /// The value of `key`, kept in table `table`.
    package subscript(key: Key, table table: UInt8) -> Value? {
        get { tables[Int(table)][key] }
        set { tables[Int(table)][key] = newValue }
    }

    /// Changes table `table` in place.
    package mutating func update<R>(_ table: UInt8, _ body: (inout [Key: Value]) throws -> R) rethrows -> R {
        try body(&tables[Int(table)])
    }

    /// The entries in all tables.
    package var count: Int { tables.reduce(0) { $0 + $1.count } }
}

extension SpreadTable where Key == UInt64 {
    /// The value of `key`, kept in the table of its low byte (for numbers given out in turn, such as
    /// sequence numbers, an even spread).
    package subscript(key: UInt64) -> Value? {
        get { self[key, table: UInt8(truncatingIfNeeded: key)] }
        set { self[key, table: UInt8(truncatingIfNeeded: key)] = newValue }
    }
}

extension SpreadTable: Sendable where Key: Sendable, Value: Sendable {}
extension SpreadTable: Equatable where Value: Equatable {}
extension SpreadTable: Hashable where Value: Hashable {}
