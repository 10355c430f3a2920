import CHeraldFormat

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// How one argument string becomes text: string conversions as they are,
/// numeric ones parsed and printed with C `printf` semantics.
extension FormatSpecifier {
    /// Appends the converted argument.
    func append(_ argument: String, to out: inout String) throws(FormatError) {
        switch conversion {
        case .string:
            var s = Substring(argument)
            if let precision, s.count > precision { s = s.prefix(precision) }
            let pad = max(0, (width ?? 0) - s.count)
            if pad > 0 && !leftAlign { out.append(String(repeating: " ", count: pad)) }
            out.append(contentsOf: s)
            if pad > 0 && leftAlign { out.append(String(repeating: " ", count: pad)) }
        case .signed:
            guard let v = Self.parseInteger(argument) else {
                throw FormatError("argument \(index + 1) \"\(argument)\" is not an integer, as \(text) needs")
            }
            guard integerRange.contains(v) else {
                throw FormatError("argument \(index + 1) \"\(argument)\" is out of the range of \(text) (\(integerRange.lowerBound)…\(integerRange.upperBound))")
            }
            if plain { out.append(String(v)) } else { out.append(cString(Int64(v))) }
        case .unsigned:
            let v: UInt64
            if let u = Self.parseUnsigned(argument) {
                v = u
            } else if let negative = Self.parseInteger(argument), negative < 0 {
                throw FormatError("argument \(index + 1) \"\(argument)\" is out of the range of \(text) (0…\(unsignedMax))")
            } else {
                throw FormatError("argument \(index + 1) \"\(argument)\" is not an integer, as \(text) needs")
            }
            guard v <= unsignedMax else {
                throw FormatError("argument \(index + 1) \"\(argument)\" is out of the range of \(text) (0…\(unsignedMax))")
            }
            out.append(cString(v))
        case .float:
            let trimmed = Self.trim(argument)
            guard let v = Double(trimmed), v.isFinite else {
                throw FormatError("argument \(index + 1) \"\(argument)\" is not a number, as \(text) needs")
            }
            out.append(cString(v))
        }
    }

    static func trim(_ s: String) -> Substring {
        var sub = Substring(s)
        while sub.first == " " { sub = sub.dropFirst() }
        while sub.last == " " { sub = sub.dropLast() }
        return sub
    }

    /// An optional sign and decimal digits, surrounding spaces ignored; `nil` otherwise or on overflow.
    static func parseInteger(_ s: String) -> Int64? {
        if let result = s.utf8.withContiguousStorageIfAvailable({ parseInteger($0) }) { return result }
        return Array(s.utf8).withUnsafeBufferPointer { parseInteger($0) }
    }

    /// The same, from UTF-8 bytes.
    static func parseInteger(_ u: UnsafeBufferPointer<UInt8>) -> Int64? {
        var i = 0, end = u.count
        while i < end, u[i] == 0x20 { i += 1 }
        while end > i, u[end - 1] == 0x20 { end -= 1 }
        var negative = false
        if i < end, u[i] == UInt8(ascii: "-") || u[i] == UInt8(ascii: "+") {
            negative = u[i] == UInt8(ascii: "-")
            i += 1
        }
        guard i < end else { return nil }
        var v: Int64 = 0
        while i < end {
            let d = u[i] &- 0x30
            guard d < 10 else { return nil }
            let (m, o1) = v.multipliedReportingOverflow(by: 10)
            let (a, o2) = negative ? m.subtractingReportingOverflow(Int64(d)) : m.addingReportingOverflow(Int64(d))
            guard !o1, !o2 else { return nil }
            v = a
            i += 1
        }
        return v
    }

    /// Optional `+` and decimal digits, surrounding spaces ignored; `nil` otherwise, for negatives or on overflow.
    static func parseUnsigned(_ s: String) -> UInt64? {
        var sub = trim(s)
        if sub.first == "+" { sub = sub.dropFirst() }
        guard !sub.isEmpty, sub.utf8.allSatisfy({ $0 &- 0x30 < 10 }) else { return nil }
        return UInt64(sub)
    }

    func cString(_ value: some CFormattable) -> String {
        // Numbers print in well under 128 bytes unless the width says otherwise.
        let fast: String? = withUnsafeTemporaryAllocation(of: CChar.self, capacity: 128) { buffer in
            let n = cFormat.withUnsafeBufferPointer { f in value.format(into: buffer.baseAddress!, buffer.count, f.baseAddress!) }
            guard n >= 0, Int(n) < buffer.count else { return nil }
            return UnsafeRawBufferPointer(start: buffer.baseAddress!, count: Int(n)).withMemoryRebound(to: UInt8.self) {
                String(decoding: $0, as: UTF8.self)
            }
        }
        if let fast { return fast }
        var buffer = [CChar](repeating: 0, count: 128)
        var n = Int32(0)
        repeat {
            buffer = [CChar](repeating: 0, count: max(buffer.count * 2, Int(n) + 1))
            n = cFormat.withUnsafeBufferPointer { f in value.format(into: &buffer, buffer.count, f.baseAddress!) }
        } while n >= 0 && Int(n) >= buffer.count
        return String(decoding: buffer.prefix(max(0, Int(n))).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// A number C's `printf` formats: each type calls its own typed `snprintf`
/// (`CHeraldFormat`), so no `va_list` of existentials is built per number.
protocol CFormattable {
    func format(into buffer: UnsafeMutablePointer<CChar>, _ size: Int, _ format: UnsafePointer<CChar>) -> Int32
}

extension Int64: CFormattable {
    func format(into buffer: UnsafeMutablePointer<CChar>, _ size: Int, _ format: UnsafePointer<CChar>) -> Int32 {
        herald_format_int64(buffer, size, format, CLongLong(self))
    }
}

extension UInt64: CFormattable {
    func format(into buffer: UnsafeMutablePointer<CChar>, _ size: Int, _ format: UnsafePointer<CChar>) -> Int32 {
        herald_format_uint64(buffer, size, format, CUnsignedLongLong(self))
    }
}

extension Double: CFormattable {
    func format(into buffer: UnsafeMutablePointer<CChar>, _ size: Int, _ format: UnsafePointer<CChar>) -> Int32 {
        herald_format_double(buffer, size, format, self)
    }
}

extension FormatSpecifier {
    /// The number `argument` is for plural rules, as this specifier writes it:
    /// an integer conversion by its value; a floating-point one by its printed
    /// digits (`%.1f` of "1" is "1.0": one fraction digit, English "other");
    /// `%@` by the argument's own text ("1.50"). `nil` when it is not a number.
    func pluralOperands(of argument: String) -> PluralOperands? {
        var printed: String?
        return pluralOperands(of: argument, printed: &printed)
    }

    /// The same, and for a floating-point conversion the text it printed
    /// (`nil` otherwise), so that a caller writing the number need not print it again.
    func pluralOperands(of argument: String, printed: inout String?) -> PluralOperands? {
        switch conversion {
        case .signed:
            return Self.parseInteger(argument).map { PluralOperands($0) }
        case .unsigned:
            return Self.parseUnsigned(argument).map { PluralOperands(magnitude: $0) }
        case .float:
            var text = ""
            guard (try? append(argument, to: &text)) != nil else { return nil }
            printed = text
            return PluralOperands(parsing: Self.trim(text)) ?? PluralOperands(parsing: Self.trim(argument))
        case .string:
            return PluralOperands(parsing: Self.trim(argument))
        }
    }
}
