#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A localized format string compiled once into literal and argument
/// segments, so rendering never re-parses it.
///
/// The specifiers are those of `String(format:)` as the device applies them
/// to `loc-args`: `%@`, positional `%n$@`, `%%`, and the numeric ones found in
/// real catalogs — `%d %i %u %o %x %X` with the length modifiers
/// `hh h l ll q z t j`, `%f %F %e %E %g %G %a %A`, `%s` — with flags
/// (`- + space 0 # '`), width and precision, plain or positional.
///
/// `loc-args` are always strings. A string conversion (`%@`, `%s`) inserts the
/// argument as it is. A numeric conversion reads the string as a number:
/// integers as an optional sign and decimal digits (surrounding spaces
/// ignored), within the range of the length modifier (`%d` is 32-bit, `%ld`
/// and `%lld` 64-bit; `%u` refuses negatives); floating-point conversions
/// accept any finite decimal number (`3`, `-0.5`, `1e3`). The number is then
/// printed with C `printf` semantics, so `%.2f` of `"3.14159"` is `3.14` and
/// `%05d` of `"42"` is `00042`. An argument that is not such a number is a
/// ``FormatError`` — never a garbled message.
///
/// Positional and sequential specifiers cannot be mixed in one template;
/// `*` widths are refused (the arguments are strings); `%n`, `%p` and
/// unknown conversions are errors.
public struct FormatTemplate: Sendable, Hashable, CustomStringConvertible {
    public enum Segment: Sendable, Hashable {
        case literal(String)
        case argument(FormatSpecifier)
    }

    /// The template as written.
    public var source: String { storage.source }
    public var segments: [Segment] { storage.segments }
    /// How many arguments the template takes: the highest position it refers to.
    public var argumentCount: Int { storage.argumentCount }
    /// The rendered text when the template has no specifiers (`%%` already unescaped).
    var constant: String? { storage.constant }
    /// Every argument segment is a plain `%@`/`%s` or a plain `%d`/`%i`: rendering
    /// is concatenation of bytes (``pieces``).
    var onlyPlainStrings: Bool { storage.onlyPlainStrings }
    /// UTF-8 bytes of all literal segments.
    var literalUTF8Count: Int { storage.literalUTF8Count }
    /// For plain templates, the render program: every literal's bytes in one
    /// buffer, and pieces "literal, then argument" of plain integers, so a
    /// render copies bytes without touching any reference-counted part.
    var literalBytes: [UInt8] { storage.literalBytes }
    var pieces: [Piece] { storage.pieces }

    /// The compiled form behind one reference: copying a template retains once.
    let storage: Storage

    final class Storage: Sendable {
        let source: String
        let segments: [Segment]
        let argumentCount: Int
        let constant: String?
        let onlyPlainStrings: Bool
        let literalUTF8Count: Int
        let literalBytes: [UInt8]
        let pieces: [Piece]
        init(
            source: String, segments: [Segment], argumentCount: Int, constant: String?, onlyPlainStrings: Bool,
            literalUTF8Count: Int, literalBytes: [UInt8], pieces: [Piece]
        ) {
            self.source = source
            self.segments = segments
            self.argumentCount = argumentCount
            self.constant = constant
            self.onlyPlainStrings = onlyPlainStrings
            self.literalUTF8Count = literalUTF8Count
            self.literalBytes = literalBytes
            self.pieces = pieces
        }
    }

    public static func == (a: FormatTemplate, b: FormatTemplate) -> Bool { a.storage === b.storage || a.source == b.source }
    public func hash(into hasher: inout Hasher) { hasher.combine(source) }

    struct Piece: Sendable, Hashable {
        var start: Int32
        var count: Int32
        /// The argument after the literal, or -1.
        var argument: Int32
        /// For a plain integer argument, its range; `nil` for a string argument.
        var integerRange: ClosedRange<Int64>? = nil
    }

    public var description: String { source }

    static let empty = try! FormatTemplate(compiling: "")

    /// Compiles a template.
    public init(compiling source: String) throws(FormatError) {
        let bytes = Array(source.utf8)
        var segments: [Segment] = []
        var literal: [UInt8] = []
        var maxIndex = -1
        var sequential = 0
        var sawPositional = false, sawSequential = false
        var i = 0
        func flushLiteral() {
            if !literal.isEmpty {
                segments.append(.literal(String(decoding: literal, as: UTF8.self)))
                literal.removeAll(keepingCapacity: true)
            }
        }
        while i < bytes.count {
            let b = bytes[i]
            if b != UInt8(ascii: "%") {
                literal.append(b)
                i += 1
                continue
            }
            let start = i
            i += 1
            guard i < bytes.count else { throw FormatError("template ends with a lone \"%\" (write \"%%\" for a percent sign)") }
            if bytes[i] == UInt8(ascii: "%") {
                literal.append(b)
                i += 1
                continue
            }
            var spec = try Self.parseSpecifier(bytes, &i, start: start)
            if let position = spec.position {
                guard position >= 1 else { throw FormatError("\"\(spec.text)\": positions start at 1") }
                guard position <= 99 else { throw FormatError("\"\(spec.text)\": position \(position) is too large") }
                sawPositional = true
                spec.index = position - 1
            } else {
                sawSequential = true
                spec.index = sequential
                sequential += 1
            }
            if sawPositional && sawSequential {
                throw FormatError("\"\(spec.text)\": positional (%n$@) and sequential (%@) specifiers cannot be mixed")
            }
            maxIndex = max(maxIndex, spec.index)
            flushLiteral()
            segments.append(.argument(spec.make()))
        }
        flushLiteral()
        let argumentCount = maxIndex + 1
        var literalCount = 0
        var onlyPlain = true
        for s in segments {
            switch s {
            case .literal(let l): literalCount += l.utf8.count
            case .argument(let a):
                if !((a.conversion == .string && a.width == nil && a.precision == nil) || a.plain) { onlyPlain = false }
            }
        }
        var bytesOut: [UInt8] = []
        var piecesOut: [Piece] = []
        if onlyPlain {
            var pending = Piece(start: 0, count: 0, argument: -1)
            for s in segments {
                switch s {
                case .literal(let l):
                    pending.start = Int32(bytesOut.count)
                    bytesOut.append(contentsOf: l.utf8)
                    pending.count = Int32(l.utf8.count)
                case .argument(let a):
                    pending.argument = Int32(a.index)
                    if a.conversion == .signed { pending.integerRange = a.integerRange }
                    piecesOut.append(pending)
                    pending = Piece(start: Int32(bytesOut.count), count: 0, argument: -1)
                }
            }
            if pending.count > 0 { piecesOut.append(pending) }
        }
        var constant: String? = nil
        if argumentCount == 0 {
            if case .literal(let l)? = segments.first { constant = l } else { constant = "" }
        }
        storage = Storage(
            source: source, segments: segments, argumentCount: argumentCount, constant: constant, onlyPlainStrings: onlyPlain,
            literalUTF8Count: literalCount, literalBytes: bytesOut, pieces: piecesOut)
    }

    /// A specifier as parsed, before its index is assigned.
    struct ParsedSpecifier {
        var position: Int?
        var index = 0
        var flags: [UInt8] = []
        var width: Int?
        var precision: Int?
        var length = ""
        var conversion: UInt8 = 0
        var text: String

        func make() -> FormatSpecifier {
            let conv: FormatSpecifier.Conversion
            switch conversion {
            case UInt8(ascii: "@"), UInt8(ascii: "s"), UInt8(ascii: "S"): conv = .string
            case UInt8(ascii: "d"), UInt8(ascii: "i"): conv = .signed
            case UInt8(ascii: "u"): conv = .unsigned(10)
            case UInt8(ascii: "o"): conv = .unsigned(8)
            case UInt8(ascii: "x"), UInt8(ascii: "X"): conv = .unsigned(16)
            default: conv = .float
            }
            let range: ClosedRange<Int64>
            let umax: UInt64
            switch length {
            case "hh": range = Int64(Int8.min)...Int64(Int8.max); umax = UInt64(UInt8.max)
            case "h": range = Int64(Int16.min)...Int64(Int16.max); umax = UInt64(UInt16.max)
            case "": range = Int64(Int32.min)...Int64(Int32.max); umax = UInt64(UInt32.max)
            default: range = Int64.min...Int64.max; umax = UInt64.max
            }
            // The C format: numbers are passed as 64-bit integers or doubles.
            var c: [UInt8] = [UInt8(ascii: "%")] + flags
            if let width { c += Array(String(width).utf8) }
            if let precision { c += [UInt8(ascii: ".")] + Array(String(precision).utf8) }
            switch conv {
            case .signed, .unsigned: c += [UInt8(ascii: "l"), UInt8(ascii: "l"), conversion]
            case .float: c.append(conversion)
            case .string: break
            }
            c.append(0)
            let plain = conv == .signed && flags.isEmpty && width == nil && precision == nil
            let fixed = (conversion == UInt8(ascii: "f") || conversion == UInt8(ascii: "F")) && flags.isEmpty && width == nil
                && (length == "" || length == "l") && (precision ?? 6) <= FixedDecimal.maxPrecision
            return FormatSpecifier(
                index: index, conversion: conv, text: text, leftAlign: flags.contains(UInt8(ascii: "-")),
                width: width, precision: precision, integerRange: range, unsignedMax: umax, plain: plain,
                cFormat: c.map { CChar(bitPattern: $0) }, fixedPrecision: fixed ? Int8(precision ?? 6) : -1)
        }
    }

    static func parseSpecifier(_ b: [UInt8], _ i: inout Int, start: Int) throws(FormatError) -> ParsedSpecifier {
        func number() -> Int? {
            var n = 0, digits = 0
            while i < b.count, b[i] >= 0x30, b[i] <= 0x39, digits < 6 {
                n = n * 10 + Int(b[i] - 0x30)
                i += 1
                digits += 1
            }
            return digits > 0 ? n : nil
        }
        func text() -> String { String(decoding: b[start..<min(i + 1, b.count)], as: UTF8.self) }
        var p = ParsedSpecifier(text: "")
        // Position: digits followed by `$`.
        let save = i
        if let n = number(), i < b.count, b[i] == UInt8(ascii: "$") {
            p.position = n
            i += 1
        } else {
            i = save
        }
        while i < b.count, [UInt8(ascii: "-"), UInt8(ascii: "+"), UInt8(ascii: " "), UInt8(ascii: "0"), UInt8(ascii: "#"), UInt8(ascii: "'")].contains(b[i]) {
            if !p.flags.contains(b[i]) { p.flags.append(b[i]) }
            i += 1
        }
        if i < b.count, b[i] == UInt8(ascii: "*") {
            throw FormatError("\"\(text())\": a width from the arguments (*) is not supported, loc-args are strings")
        }
        p.width = number()
        if i < b.count, b[i] == UInt8(ascii: ".") {
            i += 1
            if i < b.count, b[i] == UInt8(ascii: "*") {
                throw FormatError("\"\(text())\": a precision from the arguments (.*) is not supported, loc-args are strings")
            }
            p.precision = number() ?? 0
        }
        // Length modifiers.
        if i < b.count {
            switch b[i] {
            case UInt8(ascii: "h"), UInt8(ascii: "l"):
                let c = b[i]
                i += 1
                if i < b.count, b[i] == c {
                    i += 1
                    p.length = c == UInt8(ascii: "h") ? "hh" : "ll"
                } else {
                    p.length = c == UInt8(ascii: "h") ? "h" : "l"
                }
            case UInt8(ascii: "q"), UInt8(ascii: "L"), UInt8(ascii: "z"), UInt8(ascii: "t"), UInt8(ascii: "j"):
                p.length = String(UnicodeScalar(b[i]))
                i += 1
            default: break
            }
        }
        guard i < b.count else { throw FormatError("template ends inside the specifier \"\(text())\"") }
        p.conversion = b[i]
        p.text = text()
        switch b[i] {
        case UInt8(ascii: "@"), UInt8(ascii: "s"), UInt8(ascii: "S"):
            if !p.length.isEmpty && p.length != "l" { throw FormatError("\"\(p.text)\": length modifier on a string conversion") }
        case UInt8(ascii: "d"), UInt8(ascii: "i"), UInt8(ascii: "u"), UInt8(ascii: "o"), UInt8(ascii: "x"), UInt8(ascii: "X"):
            if p.length == "L" { throw FormatError("\"\(p.text)\": L is for floating-point conversions") }
        case UInt8(ascii: "f"), UInt8(ascii: "F"), UInt8(ascii: "e"), UInt8(ascii: "E"), UInt8(ascii: "g"), UInt8(ascii: "G"), UInt8(ascii: "a"), UInt8(ascii: "A"):
            if !p.length.isEmpty && p.length != "l" && p.length != "L" { throw FormatError("\"\(p.text)\": integer length modifier on a floating-point conversion") }
        case UInt8(ascii: "n"):
            throw FormatError("\"\(p.text)\": %n is not allowed")
        default:
            throw FormatError("\"\(p.text)\": unsupported conversion (write \"%%\" for a percent sign)")
        }
        i += 1
        return p
    }

    /// Checks that `count` arguments fit the template.
    public func checkArgumentCount(_ count: Int) throws(FormatError) {
        guard count == argumentCount else {
            throw FormatError(
                "the template \"\(source)\" takes \(argumentCount) argument\(argumentCount == 1 ? "" : "s"), got \(count)")
        }
    }

    /// Renders the template with `arguments` (the request's `loc-args`).
    @inlinable
    public func render(_ arguments: [String]) throws(FormatError) -> String {
        try checkArgumentCount(arguments.count)
        return try renderUnchecked(arguments)
    }

    /// The byte program: `nil` when an integer argument is not valid (the
    /// general path then reports why). A canonical integer is never longer than
    /// the argument it was read from, so the arguments' lengths bound the size.
    func renderPieces(_ arguments: [String], capacity literalCapacity: Int) -> String? {
        var capacity = literalCapacity
        for p in pieces where p.argument >= 0 {
            let a = arguments[Int(p.argument)]
            capacity += a.utf8.count
            if let range = p.integerRange {
                guard let v = FormatSpecifier.parseInteger(a), range.contains(v) else { return nil }
            }
        }
        return String(unsafeUninitializedCapacity: capacity) { out in
            var o = 0
            literalBytes.withUnsafeBufferPointer { lit in
                for p in pieces {
                    if p.count > 0 {
                        (out.baseAddress! + o).initialize(from: lit.baseAddress! + Int(p.start), count: Int(p.count))
                        o += Int(p.count)
                    }
                    guard p.argument >= 0 else { continue }
                    let a = arguments[Int(p.argument)]
                    if p.integerRange != nil {
                        o += ByteWriter.writeDecimal(FormatSpecifier.parseInteger(a)!, to: out.baseAddress! + o)
                        continue
                    }
                    let utf8 = a.utf8
                    let copied: Int? = utf8.withContiguousStorageIfAvailable { src in
                        if let base = src.baseAddress { (out.baseAddress! + o).initialize(from: base, count: src.count) }
                        return src.count
                    }
                    if let copied {
                        o += copied
                    } else {
                        for b in utf8 { out[o] = b; o += 1 }
                    }
                }
            }
            return o
        }
    }

    @usableFromInline
    func renderUnchecked(_ arguments: [String]) throws(FormatError) -> String {
        if let constant { return constant }
        let capacity = literalUTF8Count
        if onlyPlainStrings, let text = renderPieces(arguments, capacity: capacity) { return text }
        var out = ""
        out.reserveCapacity(capacity + 16 * argumentCount)
        for segment in segments {
            switch segment {
            case .literal(let l): out.append(l)
            case .argument(let a): try a.append(arguments[a.index], to: &out)
            }
        }
        return out
    }
}
