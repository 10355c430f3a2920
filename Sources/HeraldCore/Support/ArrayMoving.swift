extension Array {
    /// Hands each element to `body` in order, moved out of the array, which is left empty:
    /// iterating a batch and then releasing it copied every element (a retain of each of its
    /// references) and released it again. Reversed in place through the buffer (whose swaps
    /// move; the array's own `reverse()` swapped by copies), then taken off the end.
    /// Public and inlinable so each module compiles it for its elements.
    @inlinable public mutating func removeAllInOrder(_ body: (consuming Element) throws -> Void) rethrows {
        withUnsafeMutableBufferPointer { $0.reverse() }
        while let element = popLast() { try body(element) }
    }
}
