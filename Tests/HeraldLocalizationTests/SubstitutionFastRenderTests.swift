import CHeraldFormat
import HeraldCore
import PropertyBased
import Testing

@testable import HeraldLocalization

#if canImport(Glibc)
import Glibc
#endif

/// The fast render of substituted strings (no `printf`, no intermediate
/// strings) against the general one and against C's `printf` itself.
@Suite struct SubstitutionFastRenderTests {
    /// A decimal text of kind `kind` from two digit lists: plain ones, and
    /// every kind the fast path must leave to `printf`: leading zeros, `+`,
    /// spaces, an exponent, a bare point, many digits, a word.
    static func decimal(_ kind: Int, _ a: [Int], _ b: [Int]) -> String {
        let x = a.map(String.init).joined(), y = b.map(String.init).joined()
        switch kind {
        case 0: return "0." + x
        case 1: return "-\(x).\(y.prefix(3))"
        case 2: return "0\(x).\(y.prefix(2))"
        case 3: return "+" + x
        case 4: return " \(x) "
        case 5: return x + "e2"
        case 6: return x + "."
        case 7: return "\(x).\(y)"
        case 8: return "1" + y
        case 9: return "-0"
        case 10: return "one"
        default: return "\(x.drop { $0 == "0" }.isEmpty ? "0" : String(x.drop { $0 == "0" })).\(y.prefix(2))"
        }
    }

    static let kinds = Gen.int(in: 0...11)
    static let shortDigits = Gen.int(in: 0...9).array(of: 1...8)
    static let longDigits = Gen.int(in: 0...9).array(of: 1...18)

    /// `%.Nf` of a decimal the fast path takes prints exactly what `printf`
    /// prints of `strtod` of it, and its operands are the printed text's.
    @Test func fixedDecimalIsPrintf() async {
        await propertyCheck(count: 3000, input: Self.kinds, Self.shortDigits, Self.longDigits, Gen.int(in: 0...8)) { kind, a, b, precision in
            let text = Self.decimal(kind, a, b)
            var bytes = Array(text.utf8)
            bytes.withUnsafeMutableBufferPointer { m in
                let u = UnsafeBufferPointer(m)
                guard let fixed = FixedDecimal(u, precision: precision) else { return }
                var out = [UInt8](repeating: 0, count: 64)
                let written = out.withUnsafeMutableBufferPointer { b -> String? in
                    var w = ByteWriter(b)
                    return fixed.write(u, precision: precision, to: &w) ? w.string() : nil
                }
                let format = Array("%.\(precision)f".utf8CString)
                var c = [CChar](repeating: 0, count: 128)
                let n = format.withUnsafeBufferPointer { f in Double(text)!.format(into: &c, c.count, f.baseAddress!) }
                let printed = String(decoding: c.prefix(Int(n)).map { UInt8(bitPattern: $0) }, as: UTF8.self)
                #expect(written == printed, "\(text) with %.\(precision)f")
                #expect(fixed.operands(u, precision: precision) == PluralOperands(parsing: printed), "\(text) with %.\(precision)f")
            }
            _ = bytes.count
        }
    }

    /// The fast path takes the plain decimals it is meant for.
    @Test func fixedDecimalTakesPlainDecimals() {
        for (text, precision) in [("12.5", 1), ("0", 1), ("-0.25", 2), ("3", 0), ("0.05", 2), ("99999999999999", 1)] {
            let taken = Array(text.utf8).withUnsafeBufferPointer { FixedDecimal($0, precision: precision) != nil }
            #expect(taken, "\(text) with %.\(precision)f")
        }
        for (text, precision) in [("12.55", 1), ("012", 1), ("+1", 1), ("1e3", 1), ("1.", 1), ("999999999999999", 1), ("1.5", 0)] {
            let taken = Array(text.utf8).withUnsafeBufferPointer { FixedDecimal($0, precision: precision) != nil }
            #expect(!taken, "\(text) with %.\(precision)f")
        }
    }

    static let templates: [SubstitutionTemplate] = [
        try! SubstitutionTemplate(
            format: "%@: %#@files@ in %#@folders@",
            definitions: [
                "files": .init(valueType: "d", forms: [.zero: "no files", .one: "%d file", .few: "%d files (few)", .other: "%d files"]),
                "folders": .init(valueType: "lld", forms: [.one: "one folder", .many: "%lld folders (many)", .other: "%lld folders"]),
            ]),
        try! SubstitutionTemplate(
            format: "%2$#@hours@ for %1$@",
            definitions: ["hours": .init(valueType: ".1f", forms: [.one: "%.1f hour", .few: "%.1f hours (few)", .other: "%.1f hours"])]),
        try! SubstitutionTemplate(
            format: "%#@n@ / %#@m@",
            definitions: [
                "n": .init(valueType: "@", forms: [.one: "%@ item", .other: "%@ items"]),
                "m": .init(valueType: "hd", forms: [.one: "%5hd row", .other: "%hd rows %.2f"]),
            ]),
        try! SubstitutionTemplate(
            format: "%#@e@!",
            definitions: ["e": .init(valueType: "e", forms: [.one: "%e one", .other: "%e other, %@"])]),
    ]

    /// An argument of kind `kind`: a small or a large integer (from `a`), a name, or a decimal text.
    static func argument(_ kind: Int, _ a: [Int], _ b: [Int]) -> String {
        switch kind {
        case 0...11: return decimal(kind, a, b)
        case 12: return "Ann Lee"
        case 13, 14: return String((a.first ?? 0) - 3)
        default: return String(a.reduce(0) { $0 * 10 + $1 } - 5)
        }
    }

    /// Every template, language and argument list: the render (fast where it
    /// can) gives what the general render gives, text or error.
    @Test func fastIsGeneral() async {
        let rules = ["en", "fr", "ar", "ru", "pl", "ja", "lv", "cy"].map { PluralRules.ruleSet(of: LanguageTag(parsing: $0)!) }
        await propertyCheck(
            count: 3000, input: Gen.int(in: 0...(Self.templates.count - 1)), Gen.int(in: 0...(rules.count - 1)),
            Gen.int(in: 0...17).array(of: 3...3), Self.shortDigits, Self.longDigits
        ) { t, r, kinds, a, b in
            let template = Self.templates[t]
            let args = kinds.prefix(template.argumentCount).enumerated().map { Self.argument($0.element, Array(a.dropFirst($0.offset)), b) }
            let render = Result { () throws(FormatError) in try template.render(args, ruleSet: rules[r]) }
            let general = Result { () throws(FormatError) in try template.renderGeneral(args, ruleSet: rules[r]) }
            #expect(render == general, "\(template.source) with \(args)")
        }
    }

    /// An output longer than the fast path's buffer comes from the general render, whole.
    @Test func longOutput() throws {
        let t = try SubstitutionTemplate(format: "%@ %#@n@", definitions: ["n": .init(valueType: "d", forms: [.one: "%d thing", .other: "%d things"])])
        let long = String(repeating: "é", count: SubstitutionTemplate.fastCapacity)
        let en = LanguageTag(parsing: "en")!
        #expect(try t.render([long, "2"], language: en) == long + " 2 things")
    }
}
