/// The line of each object key of a JSON text, by key path (`["strings",
/// "WELCOME", "localizations", "fr"]`), down to a given depth: what a string
/// catalog's entries need to be reported at their line. Reads valid JSON
/// (the catalog parser has checked it); on anything else it just knows fewer lines.
struct JSONKeyLines {
    private var lines: [[String]: Int] = [:]

    init(_ bytes: [UInt8], maxDepth: Int = 4) {
        var line = 1
        var path: [String] = []  // per open container: the current key of an object, "[]" for an array
        var inObject: [Bool] = []
        var expectKey = false
        var i = 0
        while i < bytes.count {
            switch bytes[i] {
            case UInt8(ascii: "\n"): line += 1
            case UInt8(ascii: "{"):
                inObject.append(true)
                path.append("")
                expectKey = true
            case UInt8(ascii: "["):
                inObject.append(false)
                path.append("[]")
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                guard !path.isEmpty else { return }
                inObject.removeLast()
                path.removeLast()
            case UInt8(ascii: ","):
                expectKey = inObject.last == true
            case UInt8(ascii: "\""):
                let text = Self.string(bytes, &i)
                if expectKey, !path.isEmpty {
                    path[path.count - 1] = text
                    if path.count <= maxDepth, lines[path] == nil { lines[path] = line }
                    expectKey = false
                }
            default: break
            }
            i += 1
        }
    }

    /// The 1-based line where the key at `path` is written.
    func line(of path: [String]) -> Int? { lines[path] }

    /// Reads the string starting at the quote at `i`, leaving `i` on its closing quote.
    static func string(_ b: [UInt8], _ i: inout Int) -> String {
        var scalars = String.UnicodeScalarView()
        var bytes: [UInt8] = []
        func flush() {
            scalars.append(contentsOf: String(decoding: bytes, as: UTF8.self).unicodeScalars)
            bytes.removeAll()
        }
        var pendingHigh: UInt32?
        i += 1
        while i < b.count, b[i] != UInt8(ascii: "\"") {
            guard b[i] == UInt8(ascii: "\\"), i + 1 < b.count else {
                bytes.append(b[i])
                i += 1
                continue
            }
            i += 1
            flush()
            let escaped = b[i]
            i += 1
            switch escaped {
            case UInt8(ascii: "n"): scalars.append("\n")
            case UInt8(ascii: "t"): scalars.append("\t")
            case UInt8(ascii: "r"): scalars.append("\r")
            case UInt8(ascii: "b"): scalars.append("\u{8}")
            case UInt8(ascii: "f"): scalars.append("\u{C}")
            case UInt8(ascii: "u"):
                guard i + 4 <= b.count, let unit = UInt32(String(decoding: b[i..<i + 4], as: UTF8.self), radix: 16) else { continue }
                i += 4
                if (0xD800..<0xDC00).contains(unit) {
                    pendingHigh = unit
                } else if (0xDC00..<0xE000).contains(unit), let high = pendingHigh {
                    pendingHigh = nil
                    if let s = Unicode.Scalar(0x10000 + ((high - 0xD800) << 10) + (unit - 0xDC00)) { scalars.append(s) }
                } else if let s = Unicode.Scalar(unit) {
                    scalars.append(s)
                }
            default: scalars.append(Unicode.Scalar(escaped))  // \" \\ \/
            }
        }
        flush()
        return String(scalars)
    }
}
