import HeraldCore

/// Where the payload builder writes: ``JSONWriter`` (a growable array) or
/// ``PayloadWriter`` (a fixed buffer, no per-byte bookkeeping). Both write
/// the same bytes for the same calls.
protocol PayloadSink {
    mutating func byte(_ b: UInt8)
    mutating func raw(_ s: StaticString)
    mutating func string(_ s: String)
    mutating func int(_ v: Int)
    mutating func number(_ n: JSONNumber)
    mutating func value(_ v: JSONValue)
}

extension JSONWriter: PayloadSink {}

extension PayloadSink {
    /// Writes a comma unless this is the first member.
    @inline(__always) mutating func separator(_ first: inout Bool) {
        if first { first = false } else { byte(UInt8(ascii: ",")) }
    }

    /// Writes an array of strings.
    @inline(__always) mutating func strings(_ a: [String]) {
        byte(UInt8(ascii: "["))
        var first = true
        for s in a {
            separator(&first)
            string(s)
        }
        byte(UInt8(ascii: "]"))
    }
}

/// Writes compact JSON into a buffer of fixed capacity, as ``JSONWriter``
/// does (same escaping, same number and value forms), with one bounds check
/// per piece instead of an array append per byte. When the capacity runs out,
/// `overflowed` turns true and writing stops; the caller then starts again
/// with a ``JSONWriter``.
struct PayloadWriter: PayloadSink {
    let base: UnsafeMutablePointer<UInt8>
    let capacity: Int
    private(set) var count = 0
    private(set) var overflowed = false

    init(base: UnsafeMutablePointer<UInt8>, capacity: Int) {
        self.base = base
        self.capacity = capacity
    }

    @inline(__always) mutating func room(_ n: Int) -> Bool {
        if count &+ n <= capacity { return true }
        overflowed = true
        return false
    }

    @inline(__always) mutating func byte(_ b: UInt8) {
        guard room(1) else { return }
        base[count] = b
        count &+= 1
    }

    @inline(__always) mutating func put(_ raw: UnsafeRawBufferPointer) {
        guard room(raw.count) else { return }
        if let src = raw.baseAddress { (base + count).initialize(from: src.assumingMemoryBound(to: UInt8.self), count: raw.count) }
        count &+= raw.count
    }

    @inline(__always) mutating func raw(_ s: StaticString) {
        put(UnsafeRawBufferPointer(start: s.utf8Start, count: s.utf8CodeUnitCount))
    }

    mutating func string(_ s: String) {
        let done: Void? = s.utf8.withContiguousStorageIfAvailable { string(utf8: UnsafeRawBufferPointer($0)) }
        if done == nil {
            var native = s
            native.withUTF8 { string(utf8: UnsafeRawBufferPointer($0)) }
        }
    }

    mutating func string(utf8 buf: UnsafeRawBufferPointer) {
        guard room(buf.count &+ 2) else { return }
        base[count] = UInt8(ascii: "\"")
        count &+= 1
        var runStart = 0
        while true {
            let k = JSONWriter.nextEscape(in: buf, from: runStart)
            put(UnsafeRawBufferPointer(rebasing: buf[runStart..<k]))
            if k == buf.count { break }
            escape(buf[k])
            runStart = k &+ 1
        }
        byte(UInt8(ascii: "\""))
    }

    mutating func escape(_ c: UInt8) {
        guard room(6) else { return }
        base[count] = UInt8(ascii: "\\")
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
            base[count &+ 1] = short
            count &+= 2
            return
        }
        let digits: StaticString = "0123456789abcdef"
        base[count &+ 1] = UInt8(ascii: "u")
        base[count &+ 2] = UInt8(ascii: "0")
        base[count &+ 3] = UInt8(ascii: "0")
        base[count &+ 4] = digits.utf8Start[Int(c >> 4)]
        base[count &+ 5] = digits.utf8Start[Int(c & 0xF)]
        count &+= 6
    }

    mutating func int(_ v: Int) {
        if v >= 0 && v < 10 { byte(UInt8(ascii: "0") &+ UInt8(v)); return }
        guard room(20) else { return }
        var magnitude = v.magnitude
        if v < 0 { base[count] = UInt8(ascii: "-"); count &+= 1 }
        var digits = 0
        var m = magnitude
        repeat { digits &+= 1; m /= 10 } while m > 0
        var k = count &+ digits
        count = k
        repeat {
            k &-= 1
            base[k] = UInt8(ascii: "0") &+ UInt8(magnitude % 10)
            magnitude /= 10
        } while magnitude > 0
    }

    mutating func number(_ n: JSONNumber) {
        let done: Void? = n.text.utf8.withContiguousStorageIfAvailable { put(UnsafeRawBufferPointer($0)) }
        if done == nil {
            var native = n.text
            native.withUTF8 { put(UnsafeRawBufferPointer($0)) }
        }
    }

    mutating func value(_ v: JSONValue) {
        switch v {
        case .null: raw("null")
        case .bool(let b): if b { raw("true") } else { raw("false") }
        case .number(let n): number(n)
        case .string(let s): string(s)
        case .array(let a):
            byte(UInt8(ascii: "["))
            var first = true
            for e in a {
                separator(&first)
                value(e)
            }
            byte(UInt8(ascii: "]"))
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
