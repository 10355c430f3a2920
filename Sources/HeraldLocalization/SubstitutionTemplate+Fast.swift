/// The render of a substituted string without C formatting, intermediate
/// strings or heap buffers: the output is written into a stack buffer and
/// becomes a `String` once. It takes what real catalogs use (`%@`, `%d`/`%lld`
/// and `%.Nf` with plain decimal arguments, integer and fixed-point selectors);
/// anything else (a width, `%e`, an argument to report as wrong, an output
/// past the buffer) returns `nil` and the general render runs instead, so
/// both give the same text and the general one gives every error.
extension SubstitutionTemplate {
    /// Bytes of output the fast render writes at most.
    static let fastCapacity = 1024

    func renderFast(_ arguments: [String], ruleSet: UInt8, _ p: Program) -> String? {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: Self.fastCapacity) { buffer -> String? in
            var out = ByteWriter(buffer)
            let done = p.bytes.withUnsafeBufferPointer { literals -> Bool in
                for i in 0..<p.mainCount {
                    let op = p.ops[i]
                    guard op.kind == 2 else {
                        guard Self.runFast(op, p, literals, arguments, &out) else { return false }
                        continue
                    }
                    let k = Int(op.a)
                    guard let slot = Self.fastSlot(variable: k, p, arguments, ruleSet: ruleSet) else { return false }
                    let form = p.forms[k * 6 + slot]
                    for j in Int(form.start)..<Int(form.start + form.count) {
                        guard Self.runFast(p.ops[j], p, literals, arguments, &out) else { return false }
                    }
                }
                return true
            }
            return done ? out.string() : nil
        }
    }

    /// The form slot of variable `k`, its selector read from the argument's bytes.
    @inline(__always)
    static func fastSlot(variable k: Int, _ p: Program, _ arguments: [String], ruleSet: UInt8) -> Int? {
        let selector = p.fast[Int(p.selectors[k])]
        let argument = arguments[Int(selector.argument)]
        let operands: PluralOperands?
        switch selector.kind {
        case FastSpec.integer:
            operands = argument.utf8.withContiguousStorageIfAvailable { FormatSpecifier.parseInteger($0) }?.map { PluralOperands($0) }
        case FastSpec.fixed:
            // Not a plain decimal: the general render prints it with `printf`.
            guard
                let fixed = argument.utf8.withContiguousStorageIfAvailable({ u in
                    FixedDecimal(u, precision: Int(selector.precision)).map { $0.operands(u, precision: Int(selector.precision)) }
                }), let fixed
            else { return nil }
            operands = fixed
        case FastSpec.string:
            operands = PluralOperands(parsing: FormatSpecifier.trim(argument))
        default:
            return nil
        }
        guard let operands else { return PluralCategory.other.slot }
        return PluralRules.form(for: operands, ruleSet: ruleSet, hasZero: p.hasZero[k]).slot
    }

    /// One op into `out`; `false` when it needs the general render.
    @inline(__always)
    static func runFast(
        _ op: Program.Op, _ p: Program, _ literals: UnsafeBufferPointer<UInt8>, _ arguments: [String], _ out: inout ByteWriter
    ) -> Bool {
        if op.kind == 0 {
            return out.append(UnsafeBufferPointer(rebasing: literals[Int(op.a)..<Int(op.a + op.b)]))
        }
        let spec = p.fast[Int(op.a)]
        let written = arguments[Int(spec.argument)].utf8.withContiguousStorageIfAvailable { u -> Bool in
            switch spec.kind {
            case FastSpec.string:
                return out.append(u)
            case FastSpec.integer:
                guard let v = FormatSpecifier.parseInteger(u), v >= spec.low, v <= spec.high else { return false }
                return out.appendDecimal(v)
            case FastSpec.fixed:
                guard let d = FixedDecimal(u, precision: Int(spec.precision)) else { return false }
                return d.write(u, precision: Int(spec.precision), to: &out)
            default:
                return false
            }
        }
        return written ?? false
    }
}

/// What the fast render needs of one specifier, with nothing reference-counted in it.
struct FastSpec: Sendable {
    static let none: UInt8 = 0
    /// `%@`/`%s` with no width or precision (as a selector: the argument's text is the number).
    static let string: UInt8 = 1
    /// `%d`/`%i` with no flags, width or precision, in `low...high` (as a selector: any `%d`).
    static let integer: UInt8 = 2
    /// `%.Nf` with no flags or width (``FormatSpecifier/fixedPrecision``).
    static let fixed: UInt8 = 3

    var kind: UInt8
    var precision: Int8
    var argument: Int32
    var low: Int64
    var high: Int64

    init(_ s: FormatSpecifier, selector: Bool) {
        argument = Int32(s.index)
        precision = s.fixedPrecision
        low = s.integerRange.lowerBound
        high = s.integerRange.upperBound
        switch s.conversion {
        case .string where selector || (s.width == nil && s.precision == nil): kind = Self.string
        case .signed where selector || s.plain: kind = Self.integer
        case .float where s.fixedPrecision >= 0: kind = Self.fixed
        default: kind = Self.none
        }
    }
}

/// A plain decimal argument (`3`, `-12.5`, `0.25`) that `%.Nf` prints as its
/// own digits padded with zeros to N places: at most N fraction digits, no
/// leading zeros, no sign but `-`, no spaces or exponent, and few enough
/// digits that the double read from it is within half a unit of the Nth
/// place (integer digits + N ≤ 15, as 10^15 × 2^-53 < 0.5), so `printf`
/// rounds it back to exactly these digits.
struct FixedDecimal {
    static let maxPrecision = 15
    static let maxDigits = 15

    let negative: Bool
    let integer: Range<Int>
    let fraction: Range<Int>

    init?(_ u: UnsafeBufferPointer<UInt8>, precision: Int) {
        var i = 0
        negative = i < u.count && u[i] == UInt8(ascii: "-")
        if negative { i += 1 }
        let integerStart = i
        while i < u.count, u[i] &- 0x30 < 10 { i += 1 }
        integer = integerStart..<i
        guard !integer.isEmpty, integer.count == 1 || u[integerStart] != UInt8(ascii: "0") else { return nil }
        var fractionStart = i
        if i < u.count {
            guard u[i] == UInt8(ascii: "."), precision > 0 else { return nil }
            i += 1
            fractionStart = i
            while i < u.count, u[i] &- 0x30 < 10 { i += 1 }
            guard i == u.count, i > fractionStart, i - fractionStart <= precision else { return nil }
        }
        fraction = fractionStart..<i
        let integerDigits = integer.count == 1 && u[integerStart] == UInt8(ascii: "0") ? 0 : integer.count
        guard integerDigits + precision <= Self.maxDigits else { return nil }
    }

    /// The text `printf("%.Nf")` gives: the digits, then zeros to `precision` places.
    func write(_ u: UnsafeBufferPointer<UInt8>, precision: Int, to out: inout ByteWriter) -> Bool {
        let length = (negative ? 1 : 0) + integer.count + (precision > 0 ? 1 + precision : 0)
        guard out.reserve(length) else { return false }
        if negative { out.put(UInt8(ascii: "-")) }
        for k in integer { out.put(u[k]) }
        guard precision > 0 else { return true }
        out.put(UInt8(ascii: "."))
        for k in fraction { out.put(u[k]) }
        for _ in fraction.count..<precision { out.put(UInt8(ascii: "0")) }
        return true
    }

    /// CLDR's operands of that text (as ``PluralOperands/init(parsing:)`` reads it).
    func operands(_ u: UnsafeBufferPointer<UInt8>, precision: Int) -> PluralOperands {
        var i: UInt64 = 0
        for k in integer { i = i * 10 + UInt64(u[k] &- 0x30) }
        var f: UInt64 = 0, t: UInt64 = 0, w: UInt64 = 0
        for (n, k) in fraction.enumerated() {
            let d = UInt64(u[k] &- 0x30)
            f = f * 10 + d
            if d != 0 { w = UInt64(n + 1) }
        }
        t = f
        for _ in w..<UInt64(fraction.count) { t /= 10 }
        for _ in fraction.count..<precision { f *= 10 }
        return PluralOperands(i: i, v: UInt64(precision), w: w, f: f, t: t)
    }
}

/// Bytes written into a fixed buffer; every write says whether it fitted.
struct ByteWriter {
    let base: UnsafeMutablePointer<UInt8>
    let capacity: Int
    var count = 0

    init(_ buffer: UnsafeMutableBufferPointer<UInt8>) {
        base = buffer.baseAddress!
        capacity = buffer.count
    }

    @inline(__always)
    func reserve(_ n: Int) -> Bool { count + n <= capacity }

    /// One byte, after ``reserve(_:)`` said it fits.
    @inline(__always)
    mutating func put(_ byte: UInt8) {
        base[count] = byte
        count += 1
    }

    @inline(__always)
    mutating func append(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard reserve(bytes.count) else { return false }
        if let source = bytes.baseAddress { (base + count).update(from: source, count: bytes.count) }
        count += bytes.count
        return true
    }

    /// `v` in decimal digits.
    @inline(__always)
    mutating func appendDecimal(_ v: Int64) -> Bool {
        guard reserve(Self.decimalLength(v)) else { return false }
        count += Self.writeDecimal(v, to: base + count)
        return true
    }

    /// The bytes `v` takes in decimal, its sign included.
    @inline(__always)
    static func decimalLength(_ v: Int64) -> Int {
        var digits = 1
        var rest = v.magnitude
        while rest >= 10 {
            rest /= 10
            digits += 1
        }
        return digits + (v < 0 ? 1 : 0)
    }

    /// Writes `v` in decimal at `out` (``decimalLength(_:)`` bytes) and returns how many.
    @inline(__always)
    static func writeDecimal(_ v: Int64, to out: UnsafeMutablePointer<UInt8>) -> Int {
        let length = decimalLength(v)
        if v < 0 { out[0] = UInt8(ascii: "-") }
        var m = v.magnitude
        var k = length - 1
        repeat {
            out[k] = UInt8(truncatingIfNeeded: m % 10) + 0x30
            m /= 10
            k -= 1
        } while m > 0
        return length
    }

    func string() -> String { String(decoding: UnsafeBufferPointer(start: base, count: count), as: UTF8.self) }
}
