/// Field-by-field reading for a decoder that knows the shape it expects (the
/// request decoder's direct path): the same strict grammar as ``JSONParser``,
/// without building a ``JSONValue`` for what the caller reads itself. Each
/// reader returns nil, leaving the position where it was, when the input is
/// not the plain form it reads; the caller then falls back to
/// ``JSONParser/parse(_:)-(UnsafeRawBufferPointer)``, whose errors name the problem.
extension JSONParser {
    /// A reader at the start of `raw`.
    package init(fields raw: UnsafeRawBufferPointer) { self.init(raw) }

    /// Skips whitespace; consumes `c` if it comes next.
    @inline(__always) package mutating func consume(_ c: UInt8) -> Bool {
        skipWhitespace()
        guard i < end, base[i] == c else { return false }
        i += 1
        return true
    }

    /// Skips whitespace; the next byte, if any.
    @inline(__always) package mutating func peek() -> UInt8? {
        skipWhitespace()
        return i < end ? base[i] : nil
    }

    /// Whether only whitespace is left.
    package mutating func atEnd() -> Bool {
        skipWhitespace()
        return i == end
    }

    /// A string of printable ASCII with no escapes, as its bytes (between the
    /// quotes, which are consumed); nil for anything else.
    package mutating func plainString() -> UnsafeRawBufferPointer? {
        skipWhitespace()
        guard i < end, base[i] == UInt8(ascii: "\"") else { return nil }
        let k = plainRunEnd(from: i + 1)
        guard k < end, base[k] == UInt8(ascii: "\"") else { return nil }
        let s = UnsafeRawBufferPointer(rebasing: base[(i + 1)..<k])
        i = k + 1
        return s
    }

    /// A string (escapes decoded, UTF-8 checked), or nil if the next value is
    /// not a string or the string is invalid.
    package mutating func string() -> String? {
        guard peek() == UInt8(ascii: "\"") else { return nil }
        let start = i
        do { return try parseString() } catch {
            i = start
            return nil
        }
    }

    /// An integer written plainly (`-`, digits, no fraction or exponent, no
    /// leading zero, at most 18 digits); nil for any other value.
    package mutating func integer() -> Int? {
        skipWhitespace()
        var k = i
        var negative = false
        if k < end && base[k] == UInt8(ascii: "-") { negative = true; k += 1 }
        let first = k
        var n = 0
        while k < end, isDigit(base[k]) {
            n = n &* 10 &+ Int(base[k] &- UInt8(ascii: "0"))
            k += 1
        }
        let digits = k - first
        guard digits >= 1, digits <= 18, !(digits > 1 && base[first] == UInt8(ascii: "0")) else { return nil }
        if k < end {
            let c = base[k]
            if c == UInt8(ascii: ".") || c == UInt8(ascii: "e") || c == UInt8(ascii: "E") { return nil }
        }
        i = k
        return negative ? -n : n
    }

    /// `true` or `false`; nil for any other value.
    package mutating func bool() -> Bool? {
        switch peek() {
        case UInt8(ascii: "t"):
            guard (try? expect("true")) != nil else { return nil }
            return true
        case UInt8(ascii: "f"):
            guard (try? expect("false")) != nil else { return nil }
            return false
        default: return nil
        }
    }

    /// Any value, parsed as ``JSONParser/parse(_:)-(UnsafeRawBufferPointer)``
    /// would at `depth`; nil if it is invalid.
    package mutating func value(depth: Int) -> JSONValue? {
        skipWhitespace()
        let start = i
        do { return try parseValue(depth: depth) } catch {
            i = start
            return nil
        }
    }
}
