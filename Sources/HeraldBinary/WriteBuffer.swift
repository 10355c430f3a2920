/// A growable byte buffer that frames are written into, reused across writes.
///
/// Like SwiftNIO's `ByteBuffer` for the writing side: `count` bytes are
/// written, storage beyond them is kept for the next frame, and ``clear()``
/// empties the buffer without giving its memory back. Encoding many frames
/// into one buffer and writing it at once is how the binary interface wants
/// to be fed (Apple recommends batching writes).
///
/// ```swift
/// var buffer = WriteBuffer(capacity: 1 << 16)
/// for n in notifications { try FrameEncoder.encode(n, into: &buffer) }
/// buffer.withUnsafeReadableBytes { socket.write($0) }
/// buffer.clear()
/// ```
public struct WriteBuffer: Sendable {
    @usableFromInline var storage: [UInt8]
    @usableFromInline var written: Int
    /// Bytes written so far.
    @inlinable public var count: Int { written }

    /// An empty buffer with room for `capacity` bytes before it grows.
    public init(capacity: Int = 1 << 16) {
        storage = [UInt8](repeating: 0, count: max(capacity, 16))
        written = 0
    }

    /// Whether nothing is written.
    @inlinable public var isEmpty: Bool { count == 0 }

    /// Bytes the buffer can hold before it grows.
    public var capacity: Int { storage.count }

    /// Forgets the written bytes, keeping the memory.
    @inlinable public mutating func clear() { written = 0 }

    /// Makes room for `n` more bytes, calls `body` with a pointer to them and
    /// counts them as written. `body` must write all `n` bytes.
    @inlinable
    public mutating func write<R>(reserving n: Int, _ body: (UnsafeMutableRawPointer) throws -> R) rethrows -> R {
        if count + n > storage.count { grow(to: count + n) }
        let start = written
        written += n
        return try storage.withUnsafeMutableBytes { raw in try body(raw.baseAddress! + start) }
    }

    @usableFromInline
    mutating func grow(to minimum: Int) {
        var newCapacity = storage.count * 2
        while newCapacity < minimum { newCapacity *= 2 }
        storage.append(contentsOf: repeatElement(0, count: newCapacity - storage.count))
    }

    /// Appends raw bytes.
    @inlinable
    public mutating func append(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.count > 0 else { return }
        write(reserving: bytes.count) { p in p.copyMemory(from: bytes.baseAddress!, byteCount: bytes.count) }
    }

    /// Appends bytes.
    @inlinable
    public mutating func append(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { append($0) }
    }

    /// Calls `body` with the written bytes.
    @inlinable
    public func withUnsafeReadableBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try storage.withUnsafeBytes { raw in try body(UnsafeRawBufferPointer(rebasing: raw[0..<count])) }
    }

    /// A copy of the written bytes.
    public var bytes: [UInt8] { Array(storage[0..<count]) }

    /// Overwrites 4 bytes at `offset` (already written) with `value`, big-endian:
    /// how a transport gives a frame its per-connection identifier in place.
    @inlinable
    public mutating func setUInt32(_ value: UInt32, at offset: Int) {
        precondition(offset >= 0 && offset + 4 <= count, "offset outside the written bytes")
        storage.withUnsafeMutableBytes { $0.storeBytes(of: value.bigEndian, toByteOffset: offset, as: UInt32.self) }
    }
}
