/// Writes compact JSON (no whitespace) into a byte buffer.
///
/// Strings are escaped as RFC 8259 requires and no more: `"` and `\` get a
/// backslash, control characters get their short escape (`\n`, `\t`, …) or
/// `\u00XX`; everything else, non-ASCII included, is written as UTF-8.
public struct JSONWriter: Sendable {
    public var bytes: [UInt8]

    public init(capacity: Int = 256) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    @inline(__always) public mutating func raw(_ s: StaticString) {
        s.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    @inline(__always) public mutating func byte(_ b: UInt8) { bytes.append(b) }

    /// Writes `"key":`.
    @inline(__always) public mutating func key(_ s: StaticString) {
        bytes.append(UInt8(ascii: "\""))
        s.withUTF8Buffer { bytes.append(contentsOf: $0) }
        bytes.append(UInt8(ascii: "\""))
        bytes.append(UInt8(ascii: ":"))
    }

    /// Writes a string as an escaped JSON string, quotes included.
    public mutating func string(_ s: String) {
        let done: Void? = s.utf8.withContiguousStorageIfAvailable { string(utf8: UnsafeRawBufferPointer($0)) }
        if done == nil {
            var native = s
            native.withUTF8 { string(utf8: UnsafeRawBufferPointer($0)) }
        }
    }

    /// Writes UTF-8 bytes as an escaped JSON string, quotes included.
    ///
    /// Finds the bytes that need escaping eight at a time and copies the
    /// runs between them in one piece.
    public mutating func string(utf8 buf: UnsafeRawBufferPointer) {
        bytes.append(UInt8(ascii: "\""))
        let count = buf.count
        var runStart = 0
        while true {
            let k = JSONWriter.nextEscape(in: buf, from: runStart)
            if runStart < k { appendBytes(UnsafeRawBufferPointer(rebasing: buf[runStart..<k])) }
            if k == count { break }
            JSONWriter.appendEscape(buf[k], to: &bytes)
            runStart = k &+ 1
        }
        bytes.append(UInt8(ascii: "\""))
    }

    /// The offset of the first byte at or after `start` that needs escaping
    /// (a control character, `"` or `\`), or `buf.count`. Scans eight bytes at a time.
    @inline(__always) public static func nextEscape(in buf: UnsafeRawBufferPointer, from start: Int) -> Int {
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

    @inline(__always) mutating func appendBytes(_ raw: UnsafeRawBufferPointer) {
        bytes.append(contentsOf: raw.assumingMemoryBound(to: UInt8.self))
    }

    /// Whether any of the eight bytes of `w` is a control character, `"` or `\`.
    @inline(__always) static func needsEscape(_ w: UInt64) -> Bool { escapeMask(w) != 0 }

    /// Nonzero when some byte of `w` is a control character, `"` or `\`.
    @inline(__always) static func escapeMask(_ w: UInt64) -> UInt64 {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let high: UInt64 = 0x8080_8080_8080_8080
        let control = (w &- ones &* 0x20) & ~w & high  // some byte < 0x20
        let q = w ^ (ones &* 0x22)
        let quote = (q &- ones) & ~q & high  // some byte == '"'
        let b = w ^ (ones &* 0x5C)
        let backslash = (b &- ones) & ~b & high  // some byte == '\\'
        return control | quote | backslash
    }

    static func appendEscape(_ c: UInt8, to bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "\\"))
        switch c {
        case UInt8(ascii: "\""): bytes.append(UInt8(ascii: "\""))
        case UInt8(ascii: "\\"): bytes.append(UInt8(ascii: "\\"))
        case 0x08: bytes.append(UInt8(ascii: "b"))
        case 0x0C: bytes.append(UInt8(ascii: "f"))
        case 0x0A: bytes.append(UInt8(ascii: "n"))
        case 0x0D: bytes.append(UInt8(ascii: "r"))
        case 0x09: bytes.append(UInt8(ascii: "t"))
        default:
            let digits: StaticString = "0123456789abcdef"
            bytes.append(UInt8(ascii: "u")); bytes.append(UInt8(ascii: "0")); bytes.append(UInt8(ascii: "0"))
            bytes.append(digits.utf8Start[Int(c >> 4)]); bytes.append(digits.utf8Start[Int(c & 0xF)])
        }
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

    /// Writes an integer.
    public mutating func int(_ v: Int) {
        if v >= 0 && v < 10 { bytes.append(UInt8(ascii: "0") &+ UInt8(v)); return }
        var v = v
        if v < 0 {
            bytes.append(UInt8(ascii: "-"))
            if v == Int.min { bytes.append(contentsOf: String(Int.min).utf8.dropFirst()); return }
            v = -v
        }
        var tmp: (UInt64, UInt64, UInt64) = (0, 0, 0)
        let count = withUnsafeMutableBytes(of: &tmp) { buf -> Int in
            var k = 24
            while v > 0 { k -= 1; buf[k] = UInt8(ascii: "0") &+ UInt8(v % 10); v /= 10 }
            bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: buf[k..<24]))
            return 24 - k
        }
        _ = count
    }

    public mutating func number(_ n: JSONNumber) { bytes.append(contentsOf: n.text.utf8) }

    public mutating func bool(_ b: Bool) { b ? raw("true") : raw("false") }

    /// Writes any JSON value compactly, keeping object key order.
    public mutating func value(_ v: JSONValue) {
        switch v {
        case .null: raw("null")
        case .bool(let b): bool(b)
        case .number(let n): number(n)
        case .string(let s): string(s)
        case .array(let a):
            byte(UInt8(ascii: "["))
            for (k, e) in a.enumerated() {
                if k > 0 { byte(UInt8(ascii: ",")) }
                value(e)
            }
            byte(UInt8(ascii: "]"))
        case .object(let o):
            byte(UInt8(ascii: "{"))
            var first = true
            for (k, e) in o {
                if !first { byte(UInt8(ascii: ",")) }
                first = false
                string(k)
                byte(UInt8(ascii: ":"))
                value(e)
            }
            byte(UInt8(ascii: "}"))
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
