#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Looks into a payload already known to be valid JSON, without allocating.
///
/// The gateway's priority rule needs one fact the validator does not report:
/// whether the `aps` dictionary asks only for a background update
/// (`content-available`, with no `alert`, `badge` or `sound`). Priority 10 is
/// an error for such a notification. The check is cheap: a byte search for
/// `content-available` first, and the structural scan only when it is found,
/// so alert payloads (nearly all of them) pay one linear pass over bytes.
/// The frame stage uses it too, to choose priority 5 when a request leaves
/// the priority open.
public enum PayloadInspector {
    static let needle: [UInt8] = Array("content-available".utf8)

    /// Whether `payload` (valid JSON) has a top-level `aps` object with
    /// `content-available` and none of `alert`, `badge`, `sound`.
    public static func isContentAvailableOnly(_ payload: UnsafeRawBufferPointer) -> Bool {
        guard contains(payload, needle) else { return false }
        var s = Scanner(b: payload, i: 0)
        s.ws()
        guard s.peek == UInt8(ascii: "{") else { return false }
        s.i += 1
        while true {
            s.ws()
            guard s.peek == UInt8(ascii: "\"") else { return false }
            let key = s.string()
            s.ws(); s.i += 1; s.ws()  // ':'
            if equals(payload, key, "aps") && s.peek == UInt8(ascii: "{") {
                return apsIsContentAvailableOnly(&s)
            }
            s.skipValue()
            s.ws()
            guard s.peek == UInt8(ascii: ",") else { return false }
            s.i += 1
        }
    }

    static func apsIsContentAvailableOnly(_ s: inout Scanner) -> Bool {
        s.i += 1
        var contentAvailable = false
        var visible = false
        while true {
            s.ws()
            guard s.peek == UInt8(ascii: "\"") else { break }
            let key = s.string()
            if equals(s.b, key, "content-available") { contentAvailable = true }
            if equals(s.b, key, "alert") || equals(s.b, key, "badge") || equals(s.b, key, "sound") { visible = true }
            s.ws(); s.i += 1; s.ws()
            s.skipValue()
            s.ws()
            guard s.peek == UInt8(ascii: ",") else { break }
            s.i += 1
        }
        return contentAvailable && !visible
    }

    /// Whether `hay` contains `content-available`: memchr for its rare `-`, then a compare.
    static func contains(_ hay: UnsafeRawBufferPointer, _ needle: [UInt8]) -> Bool {
        let n = needle.count
        let dash = 7  // needle[7] == "-"
        guard hay.count >= n else { return false }
        return needle.withUnsafeBytes { nb in
            let base = hay.baseAddress!
            var i = dash
            let last = hay.count - n + dash
            while i <= last {
                guard let hit = memchr(base + i, Int32(UInt8(ascii: "-")), last - i + 1) else { return false }
                let k = base.distance(to: UnsafeRawPointer(hit))
                if memcmp(base + k - dash, nb.baseAddress!, n) == 0 { return true }
                i = k + 1
            }
            return false
        }
    }

    static func equals(_ b: UnsafeRawBufferPointer, _ r: Range<Int>, _ s: StaticString) -> Bool {
        guard r.count == s.utf8CodeUnitCount else { return false }
        let p = s.utf8Start
        for k in 0..<r.count where b[r.lowerBound + k] != p[k] { return false }
        return true
    }

    struct Scanner {
        let b: UnsafeRawBufferPointer
        var i: Int
        var peek: UInt8 { i < b.count ? b[i] : 0 }
        mutating func ws() {
            while i < b.count, b[i] == 0x20 || b[i] == 0x0A || b[i] == 0x0D || b[i] == 0x09 { i += 1 }
        }
        /// At an opening quote: skips the string and returns the range of its raw contents.
        mutating func string() -> Range<Int> {
            i += 1
            let start = i
            while i < b.count && b[i] != UInt8(ascii: "\"") {
                i += b[i] == UInt8(ascii: "\\") ? 2 : 1
            }
            let r = start..<min(i, b.count)
            i += 1
            return r
        }
        mutating func skipValue() {
            var depth = 0
            while i < b.count {
                let c = b[i]
                switch c {
                case UInt8(ascii: "\""): _ = string(); if depth == 0 { return }; continue
                case UInt8(ascii: "{"), UInt8(ascii: "["): depth += 1
                case UInt8(ascii: "}"), UInt8(ascii: "]"):
                    if depth == 0 { return }
                    depth -= 1
                    if depth == 0 { i += 1; return }
                case UInt8(ascii: ","): if depth == 0 { return }
                default: break
                }
                i += 1
            }
        }
    }
}
