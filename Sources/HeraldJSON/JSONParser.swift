/// A strict RFC 8259 JSON parser over UTF-8 bytes.
///
/// Strict means: no trailing commas, no comments, no leading zeros, no lone
/// surrogates in escapes, no invalid UTF-8, no control characters in strings,
/// no duplicate keys in an object, nothing but whitespace after the value.
/// Nesting is limited (``maximumDepth``) so hostile input cannot exhaust the stack.
public struct JSONParser {
    /// The deepest nesting accepted.
    public static let maximumDepth = 256
    /// Objects up to this many keys are searched in place for a duplicate key; larger ones use a set.
    static let linearKeyLimit = 16

    /// Parses one complete JSON text.
    public static func parse(_ bytes: some Collection<UInt8>) throws(JSONError) -> JSONValue {
        let fast: Result<JSONValue, JSONError>? = bytes.withContiguousStorageIfAvailable { buf in
            Result { () throws(JSONError) -> JSONValue in try parse(UnsafeRawBufferPointer(buf)) }
        }
        if let fast { return try fast.get() }
        let copy = Array(bytes)
        let slow: Result<JSONValue, JSONError> = copy.withUnsafeBytes { raw in
            Result { () throws(JSONError) -> JSONValue in try parse(raw) }
        }
        return try slow.get()
    }

    /// Parses one complete JSON text from a string.
    public static func parse(_ text: String) throws(JSONError) -> JSONValue {
        try parse(Array(text.utf8))
    }

    /// Parses one complete JSON text from raw bytes.
    public static func parse(_ raw: UnsafeRawBufferPointer) throws(JSONError) -> JSONValue {
        var p = JSONParser(raw)
        p.skipWhitespace()
        let v = try p.parseValue(depth: 0)
        p.skipWhitespace()
        if p.i != p.end { throw p.error("unexpected data after the JSON value") }
        return v
    }

    /// Checks that `raw` is one valid JSON text without building any value,
    /// and returns the kind of its top-level value and, for an object, whether
    /// it has a key `aps` whose value is an object. No allocation for ASCII keys.
    public static func validate(_ raw: UnsafeRawBufferPointer) throws(JSONError) -> JSONShape {
        var p = JSONParser(raw)
        p.skipWhitespace()
        var shape = JSONShape(isObject: false, hasAPSObject: false)
        if p.i < p.end && p.byte(p.i) == UInt8(ascii: "{") {
            shape.isObject = true
            shape.hasAPSObject = try p.skipTopObject()
        } else {
            try p.skipValue(depth: 0)
        }
        p.skipWhitespace()
        if p.i != p.end { throw p.error("unexpected data after the JSON value") }
        return shape
    }

    let base: UnsafeRawBufferPointer
    var i: Int
    let end: Int

    init(_ raw: UnsafeRawBufferPointer) {
        base = raw
        i = 0
        end = raw.count
    }

    @inline(__always) func byte(_ k: Int) -> UInt8 { base[k] }

    /// The index of the first byte from `k` that ends a plain run of string text (a quote, a
    /// backslash, a control character or a byte of a multi-byte character), or `end`. Eight
    /// bytes a step (a 64-character token is 8 steps, not 64 of four comparisons each): each
    /// test flags a byte's high bit; a flag above a flagged byte may be false (a borrow carried
    /// up), so only the lowest, always a true one, is read.
    @inline(__always) func plainRunEnd(from k: Int) -> Int {
        var k = k
        if let start = base.baseAddress {
            let ones: UInt64 = 0x0101_0101_0101_0101, highs: UInt64 = 0x8080_8080_8080_8080
            while k &+ 8 <= end {
                let w = UInt64(littleEndian: start.loadUnaligned(fromByteOffset: k, as: UInt64.self))
                let quote = w ^ (ones &* 0x22), backslash = w ^ (ones &* 0x5C)
                let stops = ((quote &- ones) & ~quote) | ((backslash &- ones) & ~backslash) | (w &- ones &* 0x20) | w
                let flagged = stops & highs
                if flagged != 0 { return k &+ flagged.trailingZeroBitCount >> 3 }
                k &+= 8
            }
        }
        while k < end {
            let c = base[k]
            if c == UInt8(ascii: "\"") || c == UInt8(ascii: "\\") || c < 0x20 || c >= 0x80 { return k }
            k &+= 1
        }
        return end
    }

    func error(_ message: String, at offset: Int? = nil) -> JSONError {
        let at = min(offset ?? i, end)
        var line = 1, column = 1
        for k in 0..<at {
            if base[k] == 0x0A { line += 1; column = 1 } else if base[k] & 0xC0 != 0x80 { column += 1 }
        }
        return JSONError(message: message, offset: at, line: line, column: column)
    }

    @inline(__always) mutating func skipWhitespace() {
        while i < end {
            let c = base[i]
            if c == 0x20 || c == 0x0A || c == 0x0D || c == 0x09 { i += 1 } else { return }
        }
    }

    mutating func expect(_ literal: StaticString) throws(JSONError) {
        let n = literal.utf8CodeUnitCount
        guard i + n <= end else { throw error("truncated literal, expected \(literal)") }
        let p = literal.utf8Start
        for k in 0..<n where base[i + k] != p[k] { throw error("invalid literal, expected \(literal)") }
        i += n
    }

    mutating func parseValue(depth: Int) throws(JSONError) -> JSONValue {
        guard i < end else { throw error("unexpected end of input, expected a value") }
        switch base[i] {
        case UInt8(ascii: "{"):
            guard depth < Self.maximumDepth else { throw error("nesting deeper than \(Self.maximumDepth)") }
            i += 1
            var obj = JSONObject()
            // Duplicate keys: a small object (a request has a handful of keys) is searched
            // in place, which costs less than hashing each key into a set; a set is made
            // once an object has `Self.linearKeyLimit` keys.
            var seen: Set<String>? = nil
            skipWhitespace()
            if i < end && base[i] == UInt8(ascii: "}") { i += 1; return .object(obj) }
            while true {
                skipWhitespace()
                guard i < end, base[i] == UInt8(ascii: "\"") else { throw error("expected a string key") }
                let keyOffset = i
                let key = try parseString()
                if seen == nil && obj.count >= Self.linearKeyLimit { seen = Set(obj.keys) }
                let duplicate = seen != nil ? !seen!.insert(key).inserted : obj.containsKey(key)
                if duplicate { throw error("duplicate key \"\(key)\"", at: keyOffset) }
                skipWhitespace()
                guard i < end, base[i] == UInt8(ascii: ":") else { throw error("expected ':' after key") }
                i += 1
                skipWhitespace()
                let v = try parseValue(depth: depth + 1)
                obj.appendUnchecked(key, v)
                skipWhitespace()
                guard i < end else { throw error("unexpected end of input in object") }
                if base[i] == UInt8(ascii: ",") { i += 1; continue }
                if base[i] == UInt8(ascii: "}") { i += 1; return .object(obj) }
                throw error("expected ',' or '}' in object")
            }
        case UInt8(ascii: "["):
            guard depth < Self.maximumDepth else { throw error("nesting deeper than \(Self.maximumDepth)") }
            i += 1
            var arr: [JSONValue] = []
            skipWhitespace()
            if i < end && base[i] == UInt8(ascii: "]") { i += 1; return .array(arr) }
            while true {
                skipWhitespace()
                arr.append(try parseValue(depth: depth + 1))
                skipWhitespace()
                guard i < end else { throw error("unexpected end of input in array") }
                if base[i] == UInt8(ascii: ",") { i += 1; continue }
                if base[i] == UInt8(ascii: "]") { i += 1; return .array(arr) }
                throw error("expected ',' or ']' in array")
            }
        case UInt8(ascii: "\""):
            return .string(try parseString())
        case UInt8(ascii: "t"): try expect("true"); return .bool(true)
        case UInt8(ascii: "f"): try expect("false"); return .bool(false)
        case UInt8(ascii: "n"): try expect("null"); return .null
        default:
            let start = i
            try scanNumber()
            let text = String(decoding: UnsafeRawBufferPointer(rebasing: base[start..<i]), as: UTF8.self)
            return .number(JSONNumber(validatedText: text))
        }
    }

    /// number = [ minus ] int [ frac ] [ exp ]
    mutating func scanNumber() throws(JSONError) {
        let start = i
        if i < end && base[i] == UInt8(ascii: "-") { i += 1 }
        guard i < end else { throw error("invalid number", at: start) }
        if base[i] == UInt8(ascii: "0") {
            i += 1
            if i < end && isDigit(base[i]) { throw error("leading zero in number", at: start) }
        } else if isDigit(base[i]) {
            while i < end && isDigit(base[i]) { i += 1 }
        } else {
            throw error(start == i ? "unexpected character, expected a value" : "invalid number", at: start)
        }
        if i < end && base[i] == UInt8(ascii: ".") {
            i += 1
            guard i < end && isDigit(base[i]) else { throw error("digit expected after '.'") }
            while i < end && isDigit(base[i]) { i += 1 }
        }
        if i < end && (base[i] | 0x20) == UInt8(ascii: "e") {
            i += 1
            if i < end && (base[i] == UInt8(ascii: "+") || base[i] == UInt8(ascii: "-")) { i += 1 }
            guard i < end && isDigit(base[i]) else { throw error("digit expected in exponent") }
            while i < end && isDigit(base[i]) { i += 1 }
        }
    }

    @inline(__always) func isDigit(_ c: UInt8) -> Bool { c &- UInt8(ascii: "0") < 10 }

    /// Parses a string starting at the opening quote.
    mutating func parseString() throws(JSONError) -> String {
        i += 1
        let start = i
        // Fast path: plain ASCII with no escapes.
        i = plainRunEnd(from: i)
        if i < end && base[i] == UInt8(ascii: "\"") {
            let s = String(decoding: UnsafeRawBufferPointer(rebasing: base[start..<i]), as: UTF8.self)
            i += 1
            return s
        }
        var out = [UInt8](UnsafeRawBufferPointer(rebasing: base[start..<i]))
        try scanStringTail(into: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Validates (and, when `out` is given, decodes) the rest of a string up to
    /// and including its closing quote.
    mutating func scanStringTail(into out: inout [UInt8]) throws(JSONError) {
        try scanStringTail(build: true, into: &out)
    }

    mutating func scanStringTail(build: Bool, into out: inout [UInt8]) throws(JSONError) {
        while true {
            guard i < end else { throw error("unterminated string") }
            let c = base[i]
            if c == UInt8(ascii: "\"") { i += 1; return }
            if c < 0x20 { throw error("unescaped control character in string") }
            if c == UInt8(ascii: "\\") {
                i += 1
                guard i < end else { throw error("unterminated escape") }
                let e = base[i]
                i += 1
                var scalar: UInt32
                switch e {
                case UInt8(ascii: "\""): scalar = 0x22
                case UInt8(ascii: "\\"): scalar = 0x5C
                case UInt8(ascii: "/"): scalar = 0x2F
                case UInt8(ascii: "b"): scalar = 0x08
                case UInt8(ascii: "f"): scalar = 0x0C
                case UInt8(ascii: "n"): scalar = 0x0A
                case UInt8(ascii: "r"): scalar = 0x0D
                case UInt8(ascii: "t"): scalar = 0x09
                case UInt8(ascii: "u"):
                    let u = try hex4()
                    if u >= 0xD800 && u < 0xDC00 {
                        guard i + 2 <= end, base[i] == UInt8(ascii: "\\"), base[i + 1] == UInt8(ascii: "u") else {
                            throw error("lone high surrogate in \\u escape")
                        }
                        i += 2
                        let low = try hex4()
                        guard low >= 0xDC00 && low < 0xE000 else { throw error("invalid low surrogate in \\u escape") }
                        scalar = 0x10000 + ((u - 0xD800) << 10) + (low - 0xDC00)
                    } else if u >= 0xDC00 && u < 0xE000 {
                        throw error("lone low surrogate in \\u escape")
                    } else {
                        scalar = u
                    }
                default:
                    throw error("invalid escape '\\\(Character(Unicode.Scalar(e)))'", at: i - 2)
                }
                if build { Self.appendUTF8(scalar, to: &out) }
                continue
            }
            if c < 0x80 {
                if build { out.append(c) }
                i += 1
                continue
            }
            let n = try utf8SequenceLength(at: i)
            if build { out.append(contentsOf: UnsafeRawBufferPointer(rebasing: base[i..<i + n])) }
            i += n
        }
    }

    /// Validates one multi-byte UTF-8 sequence (no overlongs, no surrogates, ≤ U+10FFFF).
    func utf8SequenceLength(at k: Int) throws(JSONError) -> Int {
        let c = base[k]
        var n: Int, lo: UInt8 = 0x80, hi: UInt8 = 0xBF
        switch c {
        case 0xC2...0xDF: n = 2
        case 0xE0: n = 3; lo = 0xA0
        case 0xE1...0xEC, 0xEE, 0xEF: n = 3
        case 0xED: n = 3; hi = 0x9F
        case 0xF0: n = 4; lo = 0x90
        case 0xF1...0xF3: n = 4
        case 0xF4: n = 4; hi = 0x8F
        default: throw error("invalid UTF-8 byte 0x\(String(c, radix: 16))", at: k)
        }
        guard k + n <= end else { throw error("truncated UTF-8 sequence", at: k) }
        let second = base[k + 1]
        guard second >= lo && second <= hi else { throw error("invalid UTF-8 sequence", at: k) }
        for m in 2..<max(n, 2) where base[k + m] & 0xC0 != 0x80 { throw error("invalid UTF-8 sequence", at: k) }
        return n
    }

    mutating func hex4() throws(JSONError) -> UInt32 {
        guard i + 4 <= end else { throw error("truncated \\u escape") }
        var v: UInt32 = 0
        for _ in 0..<4 {
            guard let d = Hex.nibble(base[i]) else { throw error("invalid hex digit in \\u escape") }
            v = v << 4 | UInt32(d)
            i += 1
        }
        return v
    }

    static func appendUTF8(_ scalar: UInt32, to out: inout [UInt8]) {
        switch scalar {
        case 0..<0x80: out.append(UInt8(scalar))
        case 0x80..<0x800:
            out.append(UInt8(0xC0 | scalar >> 6)); out.append(UInt8(0x80 | scalar & 0x3F))
        case 0x800..<0x10000:
            out.append(UInt8(0xE0 | scalar >> 12)); out.append(UInt8(0x80 | (scalar >> 6) & 0x3F)); out.append(UInt8(0x80 | scalar & 0x3F))
        default:
            out.append(UInt8(0xF0 | scalar >> 18)); out.append(UInt8(0x80 | (scalar >> 12) & 0x3F))
            out.append(UInt8(0x80 | (scalar >> 6) & 0x3F)); out.append(UInt8(0x80 | scalar & 0x3F))
        }
    }
}

public struct JSONShape: Sendable, Hashable {
    /// The top-level value is an object.
    public var isObject: Bool
    /// The top-level object has a key `aps` whose value is an object.
    public var hasAPSObject: Bool
}

/// A JSON syntax error with its position.
public struct JSONError: Error, Sendable, Hashable, CustomStringConvertible {
    public let message: String
    /// Byte offset from the start of the text.
    public let offset: Int
    /// 1-based line and column (column counts characters).
    public let line: Int
    public let column: Int

    public var description: String { "invalid JSON at line \(line), column \(column): \(message)" }
}
