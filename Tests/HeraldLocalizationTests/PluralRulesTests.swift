import Foundation
import HeraldCore
import HeraldLocalization
import HeraldTestSupport
import Testing

@Suite struct PluralRulesTests {
    /// CLDR's operands from a number's text (UTS #35's own examples, plus long ones).
    @Test(arguments: [
        ("1", PluralOperands(i: 1)),
        ("1.0", PluralOperands(i: 1, v: 1, w: 0, f: 0, t: 0)),
        ("1.00", PluralOperands(i: 1, v: 2, w: 0, f: 0, t: 0)),
        ("1.3", PluralOperands(i: 1, v: 1, w: 1, f: 3, t: 3)),
        ("1.30", PluralOperands(i: 1, v: 2, w: 1, f: 30, t: 3)),
        ("1.03", PluralOperands(i: 1, v: 2, w: 2, f: 3, t: 3)),
        ("1.230", PluralOperands(i: 1, v: 3, w: 2, f: 230, t: 23)),
        ("-0.5", PluralOperands(i: 0, v: 1, w: 1, f: 5, t: 5)),
        ("+12.", PluralOperands(i: 12)),
        (".5", PluralOperands(i: 0, v: 1, w: 1, f: 5, t: 5)),
        // 25 integer digits: the low 18 kept, 10^18 added (unequal to anything a rule names; its remainders right).
        ("1234567123456789012345678", PluralOperands(i: 1_000_000_000_000_000_000 + 123_456_789_012_345_678)),
        ("0.1000000000000000000002", PluralOperands(i: 0, v: 22, w: 22, f: 1_000_000_000_000_000_002, t: 1_000_000_000_000_000_002)),
    ])
    func operands(_ text: String, _ expected: PluralOperands) {
        #expect(PluralOperands(parsing: text) == expected, "\(text)")
    }

    @Test(arguments: ["", "-", ".", "1,5", "1.2.3", "1e3", " 1", "one", "１"])
    func notNumbers(_ text: String) {
        #expect(PluralOperands(parsing: text) == nil, "\(text)")
    }

    /// Spot checks that do not need Babel: the rules' well-known cases.
    @Test func knownCategories() {
        func c(_ n: String, _ tag: String) -> PluralCategory {
            PluralRules.category(of: PluralOperands(parsing: n)!, language: LanguageTag(parsing: tag)!)
        }
        #expect(c("1", "en") == .one)
        #expect(c("1.0", "en") == .other)  // visible fraction digits: "1.0 hours"
        #expect(c("1.5", "fr") == .one)  // French: i = 0,1
        #expect(c("1000000", "fr") == .many)  // "1 000 000 de messages"
        #expect(c("1", "pt") == .one)
        #expect(c("0", "pt") == .one)  // Brazilian: i = 0..1
        #expect(c("0", "pt-PT") == .other)  // European Portuguese: i = 1 and v = 0
        #expect(c("0", "pt-AO") == .other)  // follows pt-PT
        #expect(c("22", "ru") == .few)
        #expect(c("11", "ru") == .many)
        #expect(c("1.5", "ru") == .other)
        #expect(c("22", "pl") == .few)
        #expect(c("0", "ar") == .zero)
        #expect(c("102", "ar") == .other)
        #expect(c("111", "ar") == .many)
        #expect(c("5", "ja") == .other)
        #expect(c("21", "cy") == .other)
        #expect(c("0.1", "lv") == .one)
        #expect(c("1", "xx") == .other)  // no CLDR rules: other only
        #expect(PluralRules.categories(of: LanguageTag(parsing: "ar")!) == [.zero, .one, .two, .few, .many, .other])
        #expect(PluralRules.categories(of: LanguageTag(parsing: "ja")!) == [.other])
        #expect(PluralRules.categories(of: LanguageTag(parsing: "ru-RU")!) == [.one, .few, .many, .other])
    }

    /// A plural value picks its form by the number as its specifier writes it.
    @Test func formBySpecifier() throws {
        let en = LanguageTag(parsing: "en")!
        let hours = try PluralTemplate(forms: [
            .one: FormatTemplate(compiling: "%.1f hour"), .other: FormatTemplate(compiling: "%.1f hours"),
        ])
        #expect(try hours.render(["1"], language: en) == "1.0 hours")
        let count = try PluralTemplate(forms: [
            .one: FormatTemplate(compiling: "%d message"), .other: FormatTemplate(compiling: "%d messages"),
        ])
        #expect(try count.render(["1"], language: en) == "1 message")
        #expect(try count.render(["2"], language: en) == "2 messages")
        let text = try PluralTemplate(forms: [
            .one: FormatTemplate(compiling: "%@ hour"), .other: FormatTemplate(compiling: "%@ hours"),
        ])
        #expect(try text.render(["1"], language: en) == "1 hour")
        #expect(try text.render(["1.0"], language: en) == "1.0 hours")
        #expect(try text.render(["soon"], language: en) == "soon hours")
        let fr = LanguageTag(parsing: "fr")!
        #expect(try text.render(["1.5"], language: fr) == "1.5 hour")
    }
}

/// Herald's generated rules against Babel's (PyPI; CLDR's data, its own
/// evaluator): every locale Babel knows, the integers 0–1,000, and 3,000
/// random decimals from a seed (`HERALD_PLURAL_SEED` repeats a run).
@Suite(.enabled(if: interopVenvPossible, "needs python3 with venv for Babel (Tests/Interop/setup.sh)"))
struct PluralRulesBabelTests {
    static let letters: [UInt8: PluralCategory] = [
        UInt8(ascii: "z"): .zero, UInt8(ascii: "o"): .one, UInt8(ascii: "t"): .two,
        UInt8(ascii: "f"): .few, UInt8(ascii: "m"): .many, UInt8(ascii: "x"): .other,
    ]

    @Test func babelAgrees() async throws {
        let seed = ProcessInfo.processInfo.environment["HERALD_PLURAL_SEED"].flatMap(UInt64.init) ?? UInt64.random(in: 1...UInt64.max)
        var rng = SeededGenerator(seed: seed)
        var numbers = (0...1000).map(String.init)
        numbers += ["1000000", "2000000", "1000001", "100000", "1100000", "21000", "1000000000000", "123456789012345678901"]
        // Fractions with leading zeros (Babel 2.19.0 misreads their operands; babel_plurals.py corrects it).
        numbers += ["0.0014", "0.05", "0.00", "0.011", "0.0111", "-0.001", "0.012"]
        for _ in 0..<3000 { numbers.append(Self.randomDecimal(&rng)) }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("herald-plurals-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("numbers.txt")
        try Data(numbers.joined(separator: "\n").utf8).write(to: file)
        let script = repositoryRoot().appendingPathComponent("Tests/Interop/babel_plurals.py").path
        let output = try await runCommand(try await interopPython(), [script, file.path])

        let operands = numbers.map { PluralOperands(parsing: $0) }
        #expect(operands.allSatisfy { $0 != nil })
        // 1,147 locales by 4,000 numbers: compared on a thread of its own, so the
        // parallel run's other tests keep the cooperative pool.
        let known = operands.compactMap { $0 }
        try #require(known.count == numbers.count)
        let texts = numbers
        let (locales, differing, differences) = try await offPool { () throws -> (Int, Int, [String]) in
            var locales = 0, differing = 0
            var differences: [String] = []
            for line in output.split(separator: "\n") {
                let fields = line.split(separator: "\t", omittingEmptySubsequences: false)
                guard fields.count == 2, fields[1].utf8.count == texts.count else {
                    throw BabelOutputError(line: String(line.prefix(80)), expected: texts.count)
                }
                let identifier = String(fields[0])
                guard let tag = LanguageTag(parsing: identifier) else {
                    differences.append("\(identifier): not a language tag to Herald")
                    continue
                }
                locales += 1
                for (k, letter) in fields[1].utf8.enumerated() {
                    let herald = PluralRules.category(of: known[k], language: tag)
                    let babel = Self.letters[letter]
                    if herald != babel {
                        differing += 1
                        if differences.count < 20 {
                            differences.append("\(identifier) \(texts[k]): Herald \(herald), Babel \(babel.map { "\($0)" } ?? "\(Character(Unicode.Scalar(letter)))")")
                        }
                    }
                }
            }
            return (locales, differing, differences)
        }
        #expect(locales > 700, "Babel listed \(locales) locales")
        #expect(differences.isEmpty, "seed \(seed) (HERALD_PLURAL_SEED): \(differing) differences:\n\(differences.joined(separator: "\n"))")
    }

    struct BabelOutputError: Error, CustomStringConvertible {
        let line: String
        let expected: Int
        var description: String { "babel_plurals.py wrote \(line) (a locale, a tab and \(expected) letters expected)" }
    }

    /// The committed `PluralRules+CLDR.swift` is what the pinned Babel's data generates.
    @Test func generatedFileIsCurrent() async throws {
        let script = repositoryRoot().appendingPathComponent("Sources/HeraldLocalization/CLDR/generate.py").path
        let r = try await runProcess(URL(fileURLWithPath: try await interopPython()), [script, "--check"])
        #expect(r.status == 0, "\(r.stdout)\(r.stderr)")
    }

    /// Integer parts from small to past 10^6 (where French and Cornish rules
    /// look), 0–4 fraction digits, trailing zeros often, a sign now and then.
    static func randomDecimal(_ rng: inout SeededGenerator) -> String {
        let integer: UInt64
        switch rng.next() % 6 {
        case 0, 1: integer = rng.next() % 30
        case 2: integer = rng.next() % 1000
        case 3: integer = rng.next() % 200_000
        case 4: integer = (rng.next() % 20) * 1_000_000 + (rng.next() % 3 == 0 ? 0 : rng.next() % 1_000_000)
        default: integer = rng.next() % 10_000_000_000
        }
        var text = (rng.next() % 10 == 0 ? "-" : "") + String(integer)
        let places = Int(rng.next() % 5)
        if places > 0 {
            text += "."
            for p in 0..<places {
                let zero = rng.next() % 3 == 0 && p > 0
                text += zero ? "0" : String(rng.next() % 10)
            }
        }
        return text
    }
}
