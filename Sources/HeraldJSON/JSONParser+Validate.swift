/// Validation without building values: what the simulator and the size
/// guard run on every payload.
extension JSONParser {
    // No allocation for payloads of ordinary shape: keys are compared in
    // place (up to 16 per object remembered on the stack; larger objects
    // spill to an array), plain string text is skipped eight bytes a step.

    mutating func skipValue(depth: Int) throws(JSONError) {
        var ignored = false
        try skipValue(depth: depth, top: false, hasAPS: &ignored)
    }

    /// Skips the top-level object and reports whether it has an `aps` key holding an object.
    mutating func skipTopObject() throws(JSONError) -> Bool {
        var hasAPS = false
        try skipValue(depth: 0, top: true, hasAPS: &hasAPS)
        return hasAPS
    }

    /// Skips one value; with `top`, sets `hasAPS` when it is an object with an
    /// `aps` key (spelled without escapes) whose value is an object.
    mutating func skipValue(depth: Int, top: Bool, hasAPS: inout Bool) throws(JSONError) {
        guard i < end else { throw error("unexpected end of input, expected a value") }
        switch base[i] {
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            guard depth < Self.maximumDepth else { throw error("nesting deeper than \(Self.maximumDepth)") }
            let isObject = base[i] == UInt8(ascii: "{")
            let close = isObject ? UInt8(ascii: "}") : UInt8(ascii: "]")
            i += 1
            skipWhitespace()
            if i < end && base[i] == close { i += 1; return }
            var keys = KeyRanges()
            while true {
                skipWhitespace()
                var isAPS = false
                if isObject {
                    guard i < end, base[i] == UInt8(ascii: "\"") else { throw error("expected a string key") }
                    let keyStart = i
                    i += 1
                    try skipStringTail()
                    if keys.insertIsDuplicate(keyStart..<i, in: base) { throw error("duplicate key in object", at: keyStart) }
                    isAPS = top && i - keyStart == 5 && base[keyStart + 1] == UInt8(ascii: "a")
                        && base[keyStart + 2] == UInt8(ascii: "p") && base[keyStart + 3] == UInt8(ascii: "s")
                    skipWhitespace()
                    guard i < end, base[i] == UInt8(ascii: ":") else { throw error("expected ':' after key") }
                    i += 1
                    skipWhitespace()
                    if isAPS && i < end && base[i] == UInt8(ascii: "{") { hasAPS = true }
                }
                var ignored = false
                try skipValue(depth: depth + 1, top: false, hasAPS: &ignored)
                skipWhitespace()
                guard i < end else { throw error("unexpected end of input") }
                if base[i] == UInt8(ascii: ",") { i += 1; continue }
                if base[i] == close { i += 1; return }
                throw error(isObject ? "expected ',' or '}' in object" : "expected ',' or ']' in array")
            }
        case UInt8(ascii: "\""):
            i += 1
            try skipStringTail()
        case UInt8(ascii: "t"): try expect("true")
        case UInt8(ascii: "f"): try expect("false")
        case UInt8(ascii: "n"): try expect("null")
        default: try scanNumber()
        }
    }

    /// Skips the rest of a string after its opening quote: plain ASCII in a
    /// tight loop, escapes and UTF-8 through the full check.
    @inline(__always)
    mutating func skipStringTail() throws(JSONError) {
        i = plainRunEnd(from: i)
        guard i < end else { throw error("unterminated string") }
        if base[i] == UInt8(ascii: "\"") { i += 1; return }
        var none: [UInt8] = []
        try scanStringTail(build: false, into: &none)
    }
}

/// The keys seen in one object, as byte ranges of their raw (quoted) text,
/// to catch duplicates without copying: 8 on the stack, more in an array.
struct KeyRanges {
    var inline: (Int32, Int32, Int32, Int32, Int32, Int32, Int32, Int32, Int32, Int32, Int32, Int32, Int32, Int32, Int32, Int32) =
        (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    var count = 0
    var spill: [Range<Int>] = []

    /// Remembers `key`; returns true if an equal key was seen before.
    mutating func insertIsDuplicate(_ key: Range<Int>, in base: UnsafeRawBufferPointer) -> Bool {
        let n = min(count, 8)
        let duplicate = withUnsafeBytes(of: &inline) { raw -> Bool in
            let p = raw.bindMemory(to: Int32.self)
            for k in 0..<n where Self.equal(Int(p[2 * k])..<Int(p[2 * k + 1]), key, base) { return true }
            return false
        }
        if duplicate { return true }
        for r in spill where Self.equal(r, key, base) { return true }
        if count < 8 && key.upperBound <= Int(Int32.max) {
            let c = count
            withUnsafeMutableBytes(of: &inline) { raw in
                let p = raw.bindMemory(to: Int32.self)
                p[2 * c] = Int32(key.lowerBound)
                p[2 * c + 1] = Int32(key.upperBound)
            }
            count += 1
        } else {
            spill.append(key)
        }
        return false
    }

    @inline(__always)
    static func equal(_ a: Range<Int>, _ b: Range<Int>, _ base: UnsafeRawBufferPointer) -> Bool {
        guard a.count == b.count else { return false }
        var k = 0
        while k < a.count {
            if base[a.lowerBound + k] != base[b.lowerBound + k] { return false }
            k += 1
        }
        return true
    }
}

/// What ``JSONParser/validate(_:)`` learned about a JSON text.
