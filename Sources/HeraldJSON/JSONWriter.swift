/// Where JSON text goes. A writer supplies two primitives, one byte and a
/// run of bytes; everything else (string escaping, integers, numbers, whole
/// values) is written once, in the extension below, so ``JSONWriter`` and
/// ``FixedJSONWriter`` write the same bytes for the same calls.
///
/// Strings are escaped as RFC 8259 requires and no more: `"` and `\` get a
/// backslash, control characters get their short escape (`\n`, `\t`, …) or
/// `\u00XX`; everything else, non-ASCII included, is written as UTF-8.
public protocol JSONOutput {
    mutating func byte(_ b: UInt8)
    mutating func put(_ raw: UnsafeRawBufferPointer)
    /// Writes two lowercase hex digits a byte (hex needs no escaping).
    mutating func hex(_ bytes: UnsafeRawBufferPointer)
}

extension JSONOutput {
    /// ``hex(_:)``, a piece at a time through ``put(_:)``.
    public mutating func hex(_ bytes: UnsafeRawBufferPointer) {
        Hex.append(bytes, to: &self)
    }

    @inlinable @inline(__always) public mutating func raw(_ s: StaticString) {
        put(UnsafeRawBufferPointer(start: s.utf8Start, count: s.utf8CodeUnitCount))
    }

    /// Writes `"key":`.
    @inlinable @inline(__always) public mutating func key(_ s: StaticString) {
        byte(UInt8(ascii: "\""))
        raw(s)
        byte(UInt8(ascii: "\""))
        byte(UInt8(ascii: ":"))
    }

    /// Writes a comma unless this is the first member.
    @inlinable @inline(__always) public mutating func separator(_ first: inout Bool) {
        if first { first = false } else { byte(UInt8(ascii: ",")) }
    }

    /// Writes a string as an escaped JSON string, quotes included.
    @inlinable public mutating func string(_ s: String) {
        let done: Void? = s.utf8.withContiguousStorageIfAvailable { string(utf8: UnsafeRawBufferPointer($0)) }
        if done == nil {
            var native = s
            native.withUTF8 { string(utf8: UnsafeRawBufferPointer($0)) }
        }
    }

    /// Writes UTF-8 bytes as an escaped JSON string, quotes included.
    ///
    /// Finds the bytes that need escaping sixteen at a time and copies the
    /// runs between them in one piece.
    @inlinable public mutating func string(utf8 buf: UnsafeRawBufferPointer) {
        byte(UInt8(ascii: "\""))
        var runStart = 0
        while true {
            let k = JSONWriter.nextEscape(in: buf, from: runStart)
            if runStart < k { put(UnsafeRawBufferPointer(rebasing: buf[runStart..<k])) }
            if k == buf.count { break }
            escape(buf[k])
            runStart = k &+ 1
        }
        byte(UInt8(ascii: "\""))
    }

    /// Writes the escape of one byte that needs it (see ``JSONWriter/nextEscape(in:from:)``).
    @inlinable public mutating func escape(_ c: UInt8) {
        var short: UInt8 = 0
        switch c {
        case UInt8(ascii: "\""): short = UInt8(ascii: "\"")
        case UInt8(ascii: "\\"): short = UInt8(ascii: "\\")
        case 0x08: short = UInt8(ascii: "b")
        case 0x0C: short = UInt8(ascii: "f")
        case 0x0A: short = UInt8(ascii: "n")
        case 0x0D: short = UInt8(ascii: "r")
        case 0x09: short = UInt8(ascii: "t")
        default: break
        }
        if short != 0 {
            var pair = (UInt8(ascii: "\\"), short)
            withUnsafeBytes(of: &pair) { put($0) }
            return
        }
        var six = (UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"), Hex.digit(c >> 4), Hex.digit(c & 0xF))
        withUnsafeBytes(of: &six) { put($0) }
    }

    /// Writes an integer.
    @inlinable public mutating func int(_ v: Int) {
        if v >= 0 && v < 10 { byte(UInt8(ascii: "0") &+ UInt8(v)); return }
        var magnitude = v.magnitude
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)
        withUnsafeMutableBytes(of: &digits) { buf in
            var k = 24
            repeat {
                k &-= 1
                buf[k] = UInt8(ascii: "0") &+ UInt8(magnitude % 10)
                magnitude /= 10
            } while magnitude > 0
            if v < 0 { k &-= 1; buf[k] = UInt8(ascii: "-") }
            put(UnsafeRawBufferPointer(rebasing: buf[k..<24]))
        }
    }

    @inlinable public mutating func number(_ n: JSONNumber) {
        let done: Void? = n.text.utf8.withContiguousStorageIfAvailable { put(UnsafeRawBufferPointer($0)) }
        if done == nil {
            var native = n.text
            native.withUTF8 { put(UnsafeRawBufferPointer($0)) }
        }
    }

    @inlinable public mutating func bool(_ b: Bool) { b ? raw("true") : raw("false") }

    /// Writes a JSON array, each element with `element`.
    @inlinable public mutating func array<S: Sequence>(_ items: S, _ element: (inout Self, S.Element) -> Void) {
        byte(UInt8(ascii: "["))
        var first = true
        for e in items {
            separator(&first)
            element(&self, e)
        }
        byte(UInt8(ascii: "]"))
    }

    /// Writes an array of strings.
    @inlinable public mutating func strings(_ a: [String]) { array(a) { $0.string($1) } }

    /// Writes any JSON value compactly, keeping object key order.
    @inlinable public mutating func value(_ v: JSONValue) {
        switch v {
        case .null: raw("null")
        case .bool(let b): bool(b)
        case .number(let n): number(n)
        case .string(let s): string(s)
        case .array(let a): array(a) { $0.value($1) }
        case .object(let o):
            byte(UInt8(ascii: "{"))
            var first = true
            for (k, e) in o {
                separator(&first)
                string(k)
                byte(UInt8(ascii: ":"))
                value(e)
            }
            byte(UInt8(ascii: "}"))
        }
    }
}

/// Writes compact JSON (no whitespace) into a growable byte array.
public struct JSONWriter: JSONOutput, Sendable {
    public var bytes: [UInt8]

    public init(capacity: Int = 256) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    @inlinable @inline(__always) public mutating func byte(_ b: UInt8) { bytes.append(b) }

    @inlinable @inline(__always) public mutating func put(_ raw: UnsafeRawBufferPointer) {
        bytes.append(contentsOf: raw.assumingMemoryBound(to: UInt8.self))
    }
}

/// Writes compact JSON into a buffer of fixed capacity, with one bounds check
/// per piece instead of an array append per byte: the payload builder's fast
/// path. When the capacity runs out, `overflowed` turns true and writing
/// stops; the caller then starts again with a ``JSONWriter``.
public struct FixedJSONWriter: JSONOutput {
    public let base: UnsafeMutablePointer<UInt8>
    public let capacity: Int
    /// Bytes written so far.
    public var count: Int { written }
    /// Whether a write did not fit (it and everything after it were dropped).
    public var overflowed: Bool { didOverflow }
    @usableFromInline var written = 0
    @usableFromInline var didOverflow = false

    public init(base: UnsafeMutablePointer<UInt8>, capacity: Int) {
        self.base = base
        self.capacity = capacity
    }

    @inlinable @inline(__always) public mutating func byte(_ b: UInt8) {
        guard written < capacity else { didOverflow = true; return }
        base[written] = b
        written &+= 1
    }

    /// ``JSONOutput/hex(_:)`` encoded straight into the buffer (a device token in each outcome line).
    public mutating func hex(_ bytes: UnsafeRawBufferPointer) {
        guard written &+ 2 &* bytes.count <= capacity else { didOverflow = true; return }
        Hex.encode(bytes, into: base + written)
        written &+= 2 &* bytes.count
    }

    @inlinable @inline(__always) public mutating func put(_ raw: UnsafeRawBufferPointer) {
        guard written &+ raw.count <= capacity else { didOverflow = true; return }
        if raw.count <= 16 {
            // A key or a number: a few bytes copied here, where a call to memmove cost more.
            for k in 0..<raw.count { base[written &+ k] = raw[k] }
        } else if let src = raw.baseAddress {
            (base + written).initialize(from: src.assumingMemoryBound(to: UInt8.self), count: raw.count)
        }
        written &+= raw.count
    }
}
