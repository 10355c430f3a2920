#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A map from strings to small values for the localizer's per-request
/// lookups (a key's id, a language tag's chain), with a cheaper hash than
/// `Dictionary`'s.
///
/// `Dictionary<String, _>` hashes with SipHash-1-3, whose set-up and
/// finalisation cost more than the short keys themselves: two lookups per
/// request were a tenth of `herald bench localize`. This table hashes the
/// UTF-8 bytes eight at a time (multiply and rotate, seeded per process so
/// the probe sequence cannot be chosen from outside), probes linearly, and
/// compares candidates byte for byte. Keys compare as their UTF-8 bytes, so
/// two strings that `==` would call equal under Unicode canonical equivalence
/// but are spelled differently are different keys here (``StringTable``
/// falls back to its `Dictionary` on a miss, so key lookups keep `String`'s
/// equality; a language tag's chain is only computed again).
struct StringIndex<Value: Sendable>: Sendable {
    private var keys: [String] = []
    private var values: [Value] = []
    /// Open-addressing slots: 0 is empty, otherwise the entry's index + 1.
    private var slots: [Int32] = Array(repeating: 0, count: 16)
    private var hashes: [UInt64] = []

    init() {}

    var count: Int { keys.count }

    subscript(key: String) -> Value? {
        let (_, entry) = probe(key, Self.hash(key))
        return entry.map { values[$0] }
    }

    /// Adds `key` or replaces its value.
    mutating func set(_ key: String, _ value: Value) {
        let h = Self.hash(key)
        let (slot, entry) = probe(key, h)
        if let entry {
            values[entry] = value
            return
        }
        keys.append(key)
        values.append(value)
        hashes.append(h)
        if keys.count * 2 > slots.count {
            slots = Array(repeating: 0, count: slots.count * 2)
            let mask = slots.count &- 1
            for (n, hash) in hashes.enumerated() {
                var j = Int(truncatingIfNeeded: hash) & mask
                while slots[j] != 0 { j = (j &+ 1) & mask }
                slots[j] = Int32(n &+ 1)
            }
        } else {
            slots[slot] = Int32(keys.count)
        }
    }

    /// Where `key` (hashing to `h`) is: its entry's index, or `nil` and the empty slot where it would go.
    @inline(__always)
    private func probe(_ key: String, _ h: UInt64) -> (slot: Int, entry: Int?) {
        let mask = slots.count &- 1
        var i = Int(truncatingIfNeeded: h) & mask
        while true {
            let s = Int(slots[i])
            if s == 0 { return (i, nil) }
            if hashes[s &- 1] == h && Self.sameBytes(keys[s &- 1], key) { return (i, s &- 1) }
            i = (i &+ 1) & mask
        }
    }

    @inline(__always)
    static func hash(_ s: String) -> UInt64 {
        if let h = s.utf8.withContiguousStorageIfAvailable({ hash(UnsafeRawBufferPointer($0)) }) { return h }
        var copy = s
        return copy.withUTF8 { hash(UnsafeRawBufferPointer($0)) }
    }

    static func hash(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
        let m: UInt64 = 0x9E37_79B9_7F4A_7C15
        var h = stringIndexSeed ^ (UInt64(bytes.count) &* m)
        var k = 0
        while k &+ 8 <= bytes.count {
            h = (h ^ bytes.loadUnaligned(fromByteOffset: k, as: UInt64.self)) &* m
            h = (h << 29) | (h >> 35)
            k &+= 8
        }
        var tail: UInt64 = 0
        if k < bytes.count {
            if bytes.count >= 8 {
                // The last eight bytes, overlapping those already mixed in.
                tail = bytes.loadUnaligned(fromByteOffset: bytes.count &- 8, as: UInt64.self)
            } else {
                var shift: UInt64 = 0
                while k < bytes.count {
                    tail |= UInt64(bytes[k]) << shift
                    shift &+= 8
                    k &+= 1
                }
            }
        }
        h = (h ^ tail) &* m
        h ^= h >> 32
        h = h &* 0xD6E8_FEB8_6659_FD93
        return h ^ (h >> 32)
    }

    @inline(__always)
    static func sameBytes(_ a: String, _ b: String) -> Bool {
        var a = a, b = b
        return a.withUTF8 { x in
            b.withUTF8 { y in
                x.count == y.count && (x.count == 0 || memcmp(x.baseAddress!, y.baseAddress!, x.count) == 0)
            }
        }
    }
}

/// ``StringIndex``'s hash seed, chosen once per process.
private let stringIndexSeed: UInt64 = UInt64.random(in: 1...UInt64.max)
