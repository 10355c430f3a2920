/// One `"key" = "value";` entry of a `.strings` file.
public struct StringsEntry: Sendable, Hashable {
    public var key: String
    public var value: String
    /// The 1-based line the entry's key starts on.
    public var line: Int
    public init(key: String, value: String, line: Int) {
        self.key = key
        self.value = value
        self.line = line
    }
}

/// Reads the `.strings` format that Xcode and `genstrings` write (the
/// old-style property list "strings file").
///
/// Accepted:
/// - encodings: UTF-16 with a byte-order mark, little- or big-endian (what
///   `genstrings` writes), and UTF-8 with or without a byte-order mark; a file
///   without a mark whose first two bytes are one zero and one non-zero is
///   read as UTF-16 of that byte order;
/// - `/* block */` and `// line` comments anywhere between tokens;
/// - `"key" = "value";`, keys and values quoted or not (unquoted: letters,
///   digits and `_ $ + / : . -`), and `"key";` (the value is the key);
/// - an optional enclosing `{ … }` (the dictionary form of the same format);
/// - in quoted strings, the escapes `\" \' \\ \n \t \r \a \b \f \v`,
///   octal `\0`–`\377`, and `\U####` / `\u####` (1 to 4 hex digits) with a
///   high surrogate followed by `\U` low surrogate combined into one character.
///
/// Anything else (an unknown escape, an unpaired surrogate, a missing `;`,
/// an unterminated string or comment, invalid UTF-8 or UTF-16) is a
/// ``CatalogError`` naming the file, line and column. A key given twice keeps
/// the last value, as Foundation does.
public struct StringsFileParser {
    /// Parses a file's bytes; `file` is only used in errors.
    public static func parse(_ bytes: [UInt8], file: String) throws(CatalogError) -> [StringsEntry] {
        let scalars = try decode(bytes, file: file)
        var p = StringsFileParser(scalars: scalars, file: file)
        return try p.parseFile()
    }

    /// Decodes the bytes to Unicode scalars, choosing the encoding from the byte-order mark.
    public static func decode(_ bytes: [UInt8], file: String) throws(CatalogError) -> [Unicode.Scalar] {
        var out: [Unicode.Scalar] = []
        out.reserveCapacity(bytes.count)
        func fail(_ what: String) -> CatalogError {
            let (line, column) = position(in: out, at: out.count)
            return CatalogError(file: file, line: line, column: column, message: what)
        }
        let bom = bytes.count >= 2 && ((bytes[0] == 0xFF && bytes[1] == 0xFE) || (bytes[0] == 0xFE && bytes[1] == 0xFF))
        // Without a mark, text starting with an ASCII character and a zero byte (or the reverse) is UTF-16.
        let unmarked = !bom && bytes.count >= 2 && ((bytes[0] != 0) != (bytes[1] != 0))
        if bom || unmarked {
            let littleEndian = bom ? bytes[0] == 0xFF : bytes[1] == 0
            if bytes.count % 2 != 0 { throw CatalogError(file: file, message: "UTF-16 file has an odd number of bytes") }
            var units: [UInt16] = []
            units.reserveCapacity(bytes.count / 2)
            var i = bom ? 2 : 0
            while i < bytes.count {
                let a = UInt16(bytes[i]), b = UInt16(bytes[i + 1])
                units.append(littleEndian ? a | b << 8 : a << 8 | b)
                i += 2
            }
            var it = units.makeIterator()
            var decoder = UTF16()
            loop: while true {
                switch decoder.decode(&it) {
                case .scalarValue(let s): out.append(s)
                case .emptyInput: break loop
                case .error: throw fail("invalid UTF-16 (unpaired surrogate)")
                }
            }
        } else {
            var start = 0
            if bytes.count >= 3 && bytes[0] == 0xEF && bytes[1] == 0xBB && bytes[2] == 0xBF { start = 3 }
            var it = bytes[start...].makeIterator()
            var decoder = UTF8()
            loop: while true {
                switch decoder.decode(&it) {
                case .scalarValue(let s): out.append(s)
                case .emptyInput: break loop
                case .error: throw fail("invalid UTF-8 (a UTF-16 file needs a byte-order mark)")
                }
            }
        }
        return out
    }

    /// The 1-based line and column of `index` in `scalars` (`\n`, `\r\n` and `\r` end lines).
    static func position(in scalars: [Unicode.Scalar], at index: Int) -> (line: Int, column: Int) {
        var line = 1, column = 1
        var i = 0
        let end = min(index, scalars.count)
        while i < end {
            let s = scalars[i]
            if s == "\n" || (s == "\r" && !(i + 1 < scalars.count && scalars[i + 1] == "\n")) {
                line += 1
                column = 1
            } else if s != "\r" {
                column += 1
            }
            i += 1
        }
        return (line, column)
    }

    let s: [Unicode.Scalar]
    let file: String
    var i = 0
    /// A position whose line is known, moved forward as entries are read,
    /// so numbering entries costs one pass over the file in all.
    var lineMark = (index: 0, line: 1)

    init(scalars: [Unicode.Scalar], file: String) {
        self.s = scalars
        self.file = file
    }

    func error(_ message: String, at index: Int? = nil) -> CatalogError {
        let (line, column) = Self.position(in: s, at: index ?? i)
        return CatalogError(file: file, line: line, column: column, message: message)
    }

    var atEnd: Bool { i >= s.count }

    mutating func parseFile() throws(CatalogError) -> [StringsEntry] {
        var entries: [StringsEntry] = []
        try skipTrivia()
        var braced = false
        if !atEnd && s[i] == "{" {
            braced = true
            i += 1
        }
        while true {
            try skipTrivia()
            if atEnd {
                if braced { throw error("missing \"}\" at the end of the file") }
                break
            }
            if braced && s[i] == "}" {
                i += 1
                try skipTrivia()
                if !atEnd { throw error("unexpected text after \"}\"") }
                break
            }
            let keyStart = i
            let key = try token(what: "a key")
            try skipTrivia()
            var value = key
            if !atEnd && s[i] == "=" {
                i += 1
                try skipTrivia()
                value = try token(what: "a value after \"=\"")
                try skipTrivia()
            }
            guard !atEnd, s[i] == ";" else {
                throw error(atEnd ? "missing \";\" at the end of the file" : "expected \";\" after the entry, found \(describe(s[i]))")
            }
            i += 1
            entries.append(StringsEntry(key: key, value: value, line: line(at: keyStart)))
        }
        return entries
    }

    /// The line of `index`, for indices that only increase from call to call.
    mutating func line(at index: Int) -> Int {
        var (j, line) = lineMark
        while j < index {
            if s[j] == "\n" || (s[j] == "\r" && !(j + 1 < s.count && s[j + 1] == "\n")) { line += 1 }
            j += 1
        }
        lineMark = (j, line)
        return line
    }

    func describe(_ c: Unicode.Scalar) -> String {
        switch c {
        case "\n": return "a line break"
        case "\t": return "a tab"
        default: return c.value < 0x20 ? "U+\(String(c.value, radix: 16, uppercase: true))" : "\"\(Character(c))\""
        }
    }

    /// Skips white space and comments.
    mutating func skipTrivia() throws(CatalogError) {
        while !atEnd {
            let c = s[i]
            if c == " " || c == "\t" || c == "\n" || c == "\r" || c == "\u{FEFF}" || c == "\u{0B}" || c == "\u{0C}" || c == "\u{2028}" || c == "\u{2029}" {
                i += 1
            } else if c == "/" && i + 1 < s.count && s[i + 1] == "*" {
                let start = i
                i += 2
                while true {
                    if i + 1 >= s.count { throw error("unterminated /* comment", at: start) }
                    if s[i] == "*" && s[i + 1] == "/" { i += 2; break }
                    i += 1
                }
            } else if c == "/" && i + 1 < s.count && s[i + 1] == "/" {
                while !atEnd && s[i] != "\n" && s[i] != "\r" { i += 1 }
            } else {
                return
            }
        }
    }

    static func isUnquotedCharacter(_ c: Unicode.Scalar) -> Bool {
        switch c {
        case "a"..."z", "A"..."Z", "0"..."9", "_", "$", "+", "/", ":", ".", "-": return true
        default: return false
        }
    }

    mutating func token(what: String) throws(CatalogError) -> String {
        if atEnd { throw error("expected \(what), found the end of the file") }
        if s[i] == "\"" { return try quoted() }
        let start = i
        while !atEnd && Self.isUnquotedCharacter(s[i]) {
            // `//` or `/*` starts a comment, not part of the token.
            if s[i] == "/" && i + 1 < s.count && (s[i + 1] == "/" || s[i + 1] == "*") { break }
            i += 1
        }
        if i == start { throw error("expected \(what), found \(describe(s[i]))") }
        var out = String.UnicodeScalarView()
        out.append(contentsOf: s[start..<i])
        return String(out)
    }

    mutating func quoted() throws(CatalogError) -> String {
        let open = i
        i += 1
        var out = String.UnicodeScalarView()
        while true {
            guard !atEnd else { throw error("unterminated string (opened here)", at: open) }
            let c = s[i]
            if c == "\"" {
                i += 1
                return String(out)
            }
            if c != "\\" {
                out.append(c)
                i += 1
                continue
            }
            let escapeStart = i
            i += 1
            guard !atEnd else { throw error("unterminated string (opened here)", at: open) }
            let e = s[i]
            i += 1
            switch e {
            case "\"": out.append("\"")
            case "'": out.append("'")
            case "\\": out.append("\\")
            case "n": out.append("\n")
            case "t": out.append("\t")
            case "r": out.append("\r")
            case "a": out.append("\u{07}")
            case "b": out.append("\u{08}")
            case "f": out.append("\u{0C}")
            case "v": out.append("\u{0B}")
            case "\n": out.append("\n")  // a backslash before a line break continues the line
            case "0"..."7":
                var v = e.value - 0x30
                var n = 1
                while n < 3, !atEnd, ("0"..."7").contains(s[i]) {
                    v = v * 8 + (s[i].value - 0x30)
                    i += 1
                    n += 1
                }
                guard v <= 0xFF else { throw error("octal escape out of range (max \\377)", at: escapeStart) }
                out.append(Unicode.Scalar(UInt8(v)))
            case "U", "u":
                let unit = try hexUnit(escapeStart)
                if (0xD800...0xDBFF).contains(unit) {
                    // A high surrogate must be followed by an escaped low surrogate.
                    let lowStart = i
                    guard i + 1 < s.count, s[i] == "\\", s[i + 1] == "U" || s[i + 1] == "u" else {
                        throw error("unpaired high surrogate \\U\(hex(unit)) (expected a \\U low surrogate next)", at: escapeStart)
                    }
                    i += 2
                    let low = try hexUnit(lowStart)
                    guard (0xDC00...0xDFFF).contains(low) else {
                        throw error("high surrogate \\U\(hex(unit)) followed by \\U\(hex(low)), not a low surrogate", at: lowStart)
                    }
                    let v = 0x10000 + ((UInt32(unit) - 0xD800) << 10) + (UInt32(low) - 0xDC00)
                    out.append(Unicode.Scalar(v)!)
                } else if (0xDC00...0xDFFF).contains(unit) {
                    throw error("unpaired low surrogate \\U\(hex(unit))", at: escapeStart)
                } else {
                    out.append(Unicode.Scalar(unit)!)
                }
            default:
                throw error("unknown escape \"\\\(Character(e))\"", at: escapeStart)
            }
        }
    }

    func hex(_ v: UInt16) -> String {
        let h = String(v, radix: 16, uppercase: true)
        return String(repeating: "0", count: max(0, 4 - h.count)) + h
    }

    /// 1 to 4 hex digits after `\U`.
    mutating func hexUnit(_ escapeStart: Int) throws(CatalogError) -> UInt16 {
        var v: UInt16 = 0
        var n = 0
        while n < 4, !atEnd, let d = Self.hexValue(s[i]) {
            v = v << 4 | UInt16(d)
            i += 1
            n += 1
        }
        if n == 0 { throw error("\\U must be followed by hex digits", at: escapeStart) }
        return v
    }

    static func hexValue(_ c: Unicode.Scalar) -> UInt8? {
        switch c {
        case "0"..."9": return UInt8(c.value - 0x30)
        case "a"..."f": return UInt8(c.value - 0x61 + 10)
        case "A"..."F": return UInt8(c.value - 0x41 + 10)
        default: return nil
        }
    }
}
