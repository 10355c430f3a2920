/// CLDR plural categories.
public enum PluralCategory: String, Sendable, Hashable, CaseIterable {
    case zero, one, two, few, many, other

    /// The category's place in `allCases`, for tables indexed by category.
    var slot: Int {
        switch self {
        case .zero: 0
        case .one: 1
        case .two: 2
        case .few: 3
        case .many: 4
        case .other: 5
        }
    }
}

/// A number as CLDR's plural rules see it (UTS #35, "Plural Operand Meanings"),
/// read from its decimal text so that visible fraction digits count: "1" and
/// "1.0" are different numbers here (English: "1 hour", "1.0 hours").
///
/// - `i`: the integer digits; `v`/`w`: the number of visible fraction digits
///   with/without trailing zeros; `f`/`t`: the fraction digits as an integer
///   with/without trailing zeros; `c`/`e`: the compact exponent (always 0: the
///   text is a plain decimal). `n` (the absolute value) is `i` plus the
///   fraction, so a rule on `n` holds for integers only where `t` is 0.
/// - `i`, `f` and `t` are kept exactly below 10^18; a longer value keeps its
///   low 18 digits and adds 10^18, so that it stays unequal to every value a
///   rule names and its remainders by the powers of ten the rules use (10 to
///   10^6) are right.
public struct PluralOperands: Sendable, Hashable {
    public var i: UInt64
    public var v: UInt64
    public var w: UInt64
    public var f: UInt64
    public var t: UInt64
    public var c: UInt64 { 0 }
    public var e: UInt64 { 0 }

    public init(i: UInt64, v: UInt64 = 0, w: UInt64 = 0, f: UInt64 = 0, t: UInt64 = 0) {
        self.i = i
        self.v = v
        self.w = w
        self.f = f
        self.t = t
    }

    /// The operands of an integer.
    public init(_ n: Int64) {
        self.init(magnitude: n.magnitude)
    }

    /// The operands of an integer's magnitude, kept as `i` is (see above).
    init(magnitude: UInt64) {
        self.init(i: magnitude < Self.limit ? magnitude : Self.limit + magnitude % Self.limit)
    }

    static let limit: UInt64 = 1_000_000_000_000_000_000

    /// Reads `[+-]digits[.digits]` (at least one digit, ASCII). `nil` for
    /// anything else: a word, a thousands separator, an exponent, spaces.
    public init?(parsing text: some StringProtocol) {
        var utf8 = Substring(text).utf8[...]
        if let first = utf8.first, first == UInt8(ascii: "-") || first == UInt8(ascii: "+") { utf8 = utf8.dropFirst() }
        var integer = Accumulator()
        var fraction = Accumulator()
        var significant = Accumulator()  // t: the fraction without its trailing zeros
        var fractionDigits: UInt64 = 0
        var significantFractionDigits: UInt64 = 0
        var pendingZeros = 0
        var inFraction = false
        var digits = 0
        for byte in utf8 {
            if byte == UInt8(ascii: "."), !inFraction {
                inFraction = true
                continue
            }
            guard byte &- UInt8(ascii: "0") < 10 else { return nil }
            let d = UInt64(byte &- UInt8(ascii: "0"))
            digits += 1
            guard inFraction else {
                integer.add(d)
                continue
            }
            fraction.add(d)
            fractionDigits += 1
            if d == 0 {
                pendingZeros += 1
            } else {
                for _ in 0..<pendingZeros { significant.add(0) }
                pendingZeros = 0
                significant.add(d)
                significantFractionDigits = fractionDigits
            }
        }
        guard digits > 0 else { return nil }
        self.init(i: integer.value, v: fractionDigits, w: significantFractionDigits, f: fraction.value, t: significant.value)
    }

    /// A decimal number's digits as `PluralOperands` keeps them (see above).
    struct Accumulator {
        var low: UInt64 = 0
        var high = false
        mutating func add(_ digit: UInt64) {
            var next = low &* 10 &+ digit
            if next >= PluralOperands.limit {
                high = true
                next %= PluralOperands.limit
            }
            low = next
        }
        var value: UInt64 { high ? PluralOperands.limit + low : low }
    }
}

/// CLDR's cardinal plural rules for every language CLDR defines, generated
/// from CLDR's data (`CLDR/generate.py`, `PluralRules+CLDR.swift`).
///
/// A language tag picks its rules by its language, except where CLDR gives a
/// region its own (European Portuguese and the places that follow it:
/// `pt-PT`, `pt-AO`…). A language CLDR has no rules for has only `other`.
public enum PluralRules {
    /// The rule set of `tag`.
    @usableFromInline
    static func ruleSet(of tag: LanguageTag) -> UInt8 {
        if languagesWithTagRules.contains(tag.language) {
            if let script = tag.script, let region = tag.region,
                let set = ruleSetOfTag["\(tag.language)-\(script)-\(region)"]
            {
                return set
            }
            if let region = tag.region, let set = ruleSetOfTag["\(tag.language)-\(region)"] { return set }
            if let script = tag.script, let set = ruleSetOfTag["\(tag.language)-\(script)"] { return set }
        }
        return ruleSetOfLanguage[tag.language] ?? 0
    }

    /// The form a plural value with `hasZero` (an explicit `zero` form) shows
    /// for `operands` under `ruleSet`: `zero` for the number 0 where the value
    /// has that form, in every language as on the device; else the CLDR category.
    static func form(for operands: PluralOperands, ruleSet: UInt8, hasZero: Bool) -> PluralCategory {
        operands.i == 0 && operands.t == 0 && hasZero ? .zero : category(ruleSet: ruleSet, operands)
    }

    /// The category of `operands` in `language`.
    public static func category(of operands: PluralOperands, language: LanguageTag) -> PluralCategory {
        category(ruleSet: ruleSet(of: language), operands)
    }

    /// The category of the integer `n` in `language`.
    public static func category(of n: Int64, language: LanguageTag) -> PluralCategory {
        category(ruleSet: ruleSet(of: language), PluralOperands(n))
    }

    /// The categories `language` distinguishes, in CLDR's order (`other` last):
    /// the forms a plural string in that language needs.
    public static func categories(of language: LanguageTag) -> [PluralCategory] {
        categoriesOfRuleSet[Int(ruleSet(of: language))]
    }
}
