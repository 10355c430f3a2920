/// Where escapes fall in UTF-8 text, and what they cost: the scanning the
/// writer uses, and the sizes the payload size guard budgets with.
extension JSONWriter {
    /// The offset of the first byte at or after `start` that needs escaping
    /// (a control character, `"` or `\`), or `buf.count`. Scans eight bytes at a time.
    @inlinable @inline(__always) public static func nextEscape(in buf: UnsafeRawBufferPointer, from start: Int) -> Int {
        let count = buf.count
        var k = start
        // Sixteen bytes per step (two independent words), then eight, then one.
        while k &+ 16 <= count {
            let a = escapeMask(buf.loadUnaligned(fromByteOffset: k, as: UInt64.self))
            let b = escapeMask(buf.loadUnaligned(fromByteOffset: k &+ 8, as: UInt64.self))
            if a | b != 0 { break }
            k &+= 16
        }
        while k &+ 8 <= count && !needsEscape(buf.loadUnaligned(fromByteOffset: k, as: UInt64.self)) { k &+= 8 }
        while k < count {
            let c = buf[k]
            if c < 0x20 || c == UInt8(ascii: "\"") || c == UInt8(ascii: "\\") { return k }
            k &+= 1
        }
        return count
    }

    /// Whether any of the eight bytes of `w` is a control character, `"` or `\`.
    @inlinable @inline(__always) static func needsEscape(_ w: UInt64) -> Bool { escapeMask(w) != 0 }

    /// Nonzero when some byte of `w` is a control character, `"` or `\`.
    @inlinable @inline(__always) static func escapeMask(_ w: UInt64) -> UInt64 {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let high: UInt64 = 0x8080_8080_8080_8080
        let control = (w &- ones &* 0x20) & ~w & high  // some byte < 0x20
        let q = w ^ (ones &* 0x22)
        let quote = (q &- ones) & ~q & high  // some byte == '"'
        let b = w ^ (ones &* 0x5C)
        let backslash = (b &- ones) & ~b & high  // some byte == '\\'
        return control | quote | backslash
    }

    /// The number of bytes `c` takes inside a JSON string.
    @inline(__always) public static func escapedSize(of c: UInt8) -> Int {
        if c >= 0x20 { return (c == UInt8(ascii: "\"") || c == UInt8(ascii: "\\")) ? 2 : 1 }
        switch c {
        case 0x08, 0x0C, 0x0A, 0x0D, 0x09: return 2
        default: return 6
        }
    }

    /// The number of bytes `s` takes as a JSON string, without its quotes.
    public static func escapedSize(of s: String) -> Int {
        if let n = s.utf8.withContiguousStorageIfAvailable({ escapedSize(utf8: UnsafeRawBufferPointer($0)) }) { return n }
        var n = 0
        for c in s.utf8 { n &+= escapedSize(of: c) }
        return n
    }

    /// The number of bytes UTF-8 text takes as a JSON string, without its quotes.
    public static func escapedSize(utf8 buf: UnsafeRawBufferPointer) -> Int {
        let count = buf.count
        var n = count
        var k = 0
        while true {
            k = nextEscape(in: buf, from: k)
            if k == count { return n }
            n &+= escapedSize(of: buf[k]) &- 1
            k &+= 1
        }
    }

    /// The longest prefix of UTF-8 text whose escaped size is at most `budget`:
    /// its length in bytes and its escaped size. The cut may fall inside a
    /// scalar or a grapheme cluster; callers round it down as they need.
    public static func escapedPrefix(utf8 buf: UnsafeRawBufferPointer, budget: Int) -> (count: Int, escapedSize: Int) {
        guard budget > 0 else { return (0, 0) }
        let count = buf.count
        var used = 0
        var k = 0
        while true {
            let e = nextEscape(in: buf, from: k)
            // Bytes k..<e are written as they are: one byte each.
            if used &+ (e &- k) >= budget { return (k &+ (budget &- used), budget) }
            used &+= e &- k
            if e == count { return (count, used) }
            let n = escapedSize(of: buf[e])
            if used &+ n > budget { return (e, used) }
            used &+= n
            k = e &+ 1
        }
    }

}

extension JSONValue {
    /// The compact JSON text of this value.
    public var compactBytes: [UInt8] {
        var w = JSONWriter()
        w.value(self)
        return w.bytes
    }

    /// The compact JSON text of this value, as a string.
    public var compactText: String { String(decoding: compactBytes, as: UTF8.self) }
}
