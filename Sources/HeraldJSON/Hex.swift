/// The project's one hex codec: device tokens, `\u00XX` escapes, frames
/// printed by `herald frame` and the recorder, and `herald decode`'s input.
/// Writes lowercase; reads either case.
@usableFromInline package enum Hex {
    /// The lowercase digit for a value below 16.
    @inlinable @inline(__always) package static func digit(_ v: UInt8) -> UInt8 {
        v < 10 ? UInt8(ascii: "0") &+ v : UInt8(ascii: "a") &+ (v &- 10)
    }

    /// The value of a hex digit (either case), or nil for any other byte.
    @inline(__always) package static func nibble(_ c: UInt8) -> UInt8? {
        let v = value(c)
        return v < 16 ? v : nil
    }

    /// The value of a hex digit (either case), or 0xFF for any other byte.
    @inline(__always) static func value(_ c: UInt8) -> UInt8 {
        let d = c &- UInt8(ascii: "0")
        if d < 10 { return d }
        let l = (c | 0x20) &- UInt8(ascii: "a")  // either case
        return l < 6 ? l &+ 10 : 0xFF
    }

    /// ``value(_:)`` of every byte, for the decoding loop: one load a digit.
    static let values: [UInt8] = (0...255).map { value(UInt8($0)) }

    /// Appends two lowercase digits per byte.
    @inlinable package static func append(_ bytes: some Sequence<UInt8>, to out: inout [UInt8]) {
        for b in bytes {
            out.append(digit(b >> 4))
            out.append(digit(b & 0xF))
        }
    }

    /// Appends two lowercase digits per byte, written in place (frames in the recorder's log).
    @inlinable package static func append(_ bytes: UnsafeRawBufferPointer, to out: inout [UInt8]) {
        let start = out.count, n = bytes.count
        guard n > 0 else { return }
        out.append(contentsOf: repeatElement(0, count: 2 * n))
        out.withUnsafeMutableBufferPointer { o in
            encode(bytes, into: o.baseAddress! + start)
        }
    }

    /// Appends two lowercase digits per byte to a JSON writer (hex needs no
    /// escaping), a piece at a time.
    package static func append(_ bytes: UnsafeRawBufferPointer, to out: inout some JSONOutput) {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 128) { digits in
            var start = 0
            while start < bytes.count {
                let n = min(64, bytes.count - start)
                encode(UnsafeRawBufferPointer(rebasing: bytes[start..<(start + n)]), into: digits.baseAddress!)
                out.put(UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(digits)[0..<(2 * n)]))
                start += n
            }
        }
    }

    /// Both digits of every byte, the first in the low byte (memory order on
    /// a little-endian machine is handled by writing the two bytes apart).
    static let pairs: [UInt16] = (0...255).map { UInt16(digit(UInt8($0) >> 4)) | UInt16(digit(UInt8($0) & 0xF)) << 8 }

    /// Writes `2 × bytes.count` lowercase digits at `out`: a table load a
    /// byte (a digit at a time, with a branch each, was 3% of herald send
    /// writing outcome lines).
    @usableFromInline static func encode(_ bytes: UnsafeRawBufferPointer, into out: UnsafeMutablePointer<UInt8>) {
        pairs.withUnsafeBufferPointer { table in
            for i in 0..<bytes.count {
                let p = table[Int(bytes[i])]
                out[2 &* i] = UInt8(truncatingIfNeeded: p)
                out[2 &* i &+ 1] = UInt8(truncatingIfNeeded: p >> 8)
            }
        }
    }

    /// Lowercase hex text of `bytes`, after `prefix` (one string built, not two joined).
    package static func string(_ bytes: UnsafeRawBufferPointer, after prefix: StaticString = "") -> String {
        let n = prefix.utf8CodeUnitCount
        return String(unsafeUninitializedCapacity: n + bytes.count * 2) { out in
            guard let base = out.baseAddress else { return 0 }
            base.update(from: prefix.utf8Start, count: n)
            encode(bytes, into: base + n)
            return n + bytes.count * 2
        }
    }

    /// The bytes of hex text, or the offset of the first byte that is not a
    /// hex digit (an odd count reports its length).
    package static func decode(_ text: some Collection<UInt8>) -> Result<[UInt8], HexError> {
        if let done = text.withContiguousStorageIfAvailable({ decode(UnsafeRawBufferPointer($0)) }) { return done }
        return Array(text).withUnsafeBytes { decode($0) }
    }

    /// ``decode(_:)-(some Collection<UInt8>)`` for bytes in memory.
    package static func decode(_ text: UnsafeRawBufferPointer) -> Result<[UInt8], HexError> {
        if text.count % 2 != 0 { return .failure(HexError(offset: text.count)) }
        var failure: HexError?
        let out = [UInt8](unsafeUninitializedCapacity: text.count / 2) { buffer, count in
            failure = decode(text, into: UnsafeMutableRawBufferPointer(buffer))
            count = failure == nil ? text.count / 2 : 0
        }
        if let failure { return .failure(failure) }
        return .success(out)
    }

    /// Decodes an even number of hex digits into `out` (at least half their
    /// count long); the first byte that is not a hex digit, or nil. Not
    /// generic, so no caller runs it through a collection's witness table
    /// (that made parsing a device token three times dearer).
    package static func decode(_ text: UnsafeRawBufferPointer, into out: UnsafeMutableRawBufferPointer) -> HexError? {
        let n = text.count / 2
        precondition(out.count >= n)
        guard n > 0, let src = text.baseAddress?.assumingMemoryBound(to: UInt8.self), let dst = out.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return nil }
        // Without a branch a digit (the bad ones are looked for afterwards): a
        // token's 64 digits were 6% of herald send with a test and branch each.
        return values.withUnsafeBufferPointer { table -> HexError? in
            var bad: UInt8 = 0
            for k in 0..<n {
                let hi = table[Int(src[2 &* k])], lo = table[Int(src[2 &* k &+ 1])]
                bad |= hi | lo
                dst[k] = hi &<< 4 | lo
            }
            guard bad >= 16 else { return nil }
            for k in 0..<(2 * n) where table[Int(src[k])] >= 16 { return HexError(offset: k) }
            return nil
        }
    }
}

/// Hex text that does not decode: where it went wrong.
package struct HexError: Error, Equatable {
    package var offset: Int
    package init(offset: Int) { self.offset = offset }
}
