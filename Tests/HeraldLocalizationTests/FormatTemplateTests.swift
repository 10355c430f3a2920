import Foundation
import PropertyBased
import Testing
@testable import HeraldLocalization

@Suite struct FormatTemplateTests {
    /// The seeds' example (payload guide, "Localized Formatted Strings").
    @Test func seedsExampleSequential() throws {
        let t = try FormatTemplate(compiling: "%@ and %@ have invited you to play Monopoly")
        #expect(t.argumentCount == 2)
        #expect(try t.render(["Jenna", "Frank"]) == "Jenna and Frank have invited you to play Monopoly")
    }

    @Test func seedsExamplePositional() throws {
        let t = try FormatTemplate(compiling: "%2$@ and %1$@ have invited you to play Monopoly")
        #expect(t.argumentCount == 2)
        #expect(try t.render(["Jenna", "Frank"]) == "Frank and Jenna have invited you to play Monopoly")
    }

    @Test func percentEscape() throws {
        let t = try FormatTemplate(compiling: "100%% sure, %@%%")
        #expect(t.argumentCount == 1)
        #expect(try t.render(["50"]) == "100% sure, 50%")
        #expect(try FormatTemplate(compiling: "%%").render([]) == "%")
        #expect(try FormatTemplate(compiling: "%%%%").render([]) == "%%")
        #expect(try FormatTemplate(compiling: "no specifiers").render([]) == "no specifiers")
        #expect(try FormatTemplate(compiling: "").render([]) == "")
    }

    @Test(arguments: [
        // template, args, expected
        ("%d points", ["42"], "42 points"),
        ("%i points", ["-7"], "-7 points"),
        ("%u items", ["4000000000"], "4000000000 items"),
        ("%ld / %lld", ["2147483648", "-9223372036854775808"], "2147483648 / -9223372036854775808"),
        ("%qd", ["5"], "5"),
        ("%f", ["3.5"], "3.500000"),
        ("%.2f €", ["3.14159"], "3.14 €"),
        ("%.0f%%", ["99.5"], "100%"),
        ("%s and %@", ["a", "b"], "a and b"),
        ("%2$d of %1$d", ["10", "3"], "3 of 10"),
        ("%1$.1f°, %2$s", ["21.25", "sunny"], "21.2°, sunny"),
        ("%05d", ["42"], "00042"),
        ("%+d", ["42"], "+42"),
        ("%-4d|", ["7"], "7   |"),
        ("%x %X %o", ["255", "255", "8"], "ff FF 10"),
        ("%e", ["1234.5"], "1.234500e+03"),
        ("%g", ["0.0001"], "0.0001"),
        ("%d", [" +12 "], "12"),
        ("%5@|%-5@|", ["ab", "cd"], "   ab|cd   |"),
        ("%.3@", ["abcdef"], "abc"),
        ("%1$@ %1$@", ["echo"], "echo echo"),
        ("%lu", ["18446744073709551615"], "18446744073709551615"),
        ("¡%@! 日本 %@ 🎉", ["Hola", "語"], "¡Hola! 日本 語 🎉"),
    ])
    func conversions(_ template: String, _ args: [String], _ expected: String) throws {
        #expect(try FormatTemplate(compiling: template).render(args) == expected)
    }

    @Test(arguments: [
        ("%@ and %@", ["Jenna"], "takes 2 arguments, got 1"),
        ("%@", ["a", "b"], "takes 1 argument, got 2"),
        ("plain", ["a"], "takes 0 arguments, got 1"),
        ("%2$@ only", ["a"], "takes 2 arguments, got 1"),
        ("%d", ["abc"], "\"abc\" is not an integer"),
        ("%d", ["3.5"], "\"3.5\" is not an integer"),
        ("%d", ["2147483648"], "out of the range of %d"),
        ("%hhd", ["128"], "out of the range of %hhd"),
        ("%u", ["-1"], "out of the range of %u"),
        ("%lld", ["99999999999999999999"], "is not an integer"),
        ("%f", ["pi"], "\"pi\" is not a number"),
        ("%f", ["inf"], "is not a number"),
        ("%f", [""], "is not a number"),
    ])
    func renderErrors(_ template: String, _ args: [String], _ message: String) throws {
        let t = try FormatTemplate(compiling: template)
        #expect {
            try t.render(args)
        } throws: { error in
            (error as? FormatError)?.message.contains(message) == true
        }
    }

    @Test(arguments: [
        ("trailing %", "lone \"%\""),
        ("%1$@ and %@", "cannot be mixed"),
        ("%@ and %2$@", "cannot be mixed"),
        ("%0$@", "positions start at 1"),
        ("%*d", "width from the arguments"),
        ("%.*f", "precision from the arguments"),
        ("%n", "%n is not allowed"),
        ("%k", "unsupported conversion"),
        ("%p", "unsupported conversion"),
        ("%hf", "integer length modifier"),
        ("%Ld", "L is for floating-point"),
        ("%ll", "ends inside the specifier"),
    ])
    func compileErrors(_ template: String, _ message: String) {
        #expect {
            try FormatTemplate(compiling: template)
        } throws: { error in
            (error as? FormatError)?.message.contains(message) == true
        }
    }

    /// "% o" is a valid printf specifier (space flag, octal) taking an argument:
    /// catalogs must write "50%% off", as on the device.
    @Test func percentBeforeLetterIsASpecifier() throws {
        #expect(try FormatTemplate(compiling: "50% off").argumentCount == 1)
        #expect(try FormatTemplate(compiling: "50%% off").render([]) == "50% off")
    }

    @Test func segmentsAreCompiledOnce() throws {
        let t = try FormatTemplate(compiling: "Hi %1$@, %2$d new")
        #expect(t.segments.count == 5)
        #expect(t.segments.last == .literal(" new"))
        guard case .literal("Hi ") = t.segments[0], case .argument(let a) = t.segments[1], case .literal(", ") = t.segments[2],
            case .argument(let b) = t.segments[3]
        else {
            Issue.record("unexpected segments \(t.segments)")
            return
        }
        #expect(a.index == 0 && a.conversion == .string && a.text == "%1$@")
        #expect(b.index == 1 && b.conversion == .signed && b.text == "%2$d")
    }

    /// Plain string templates are concatenation, whatever the arguments contain (even "%").
    @Test func propertyConcatenation() async {
        let arg = Gen<UInt32>.value(in: 0x20...0x2FFF).map { Character(Unicode.Scalar($0)!) }.string(of: 0...12)
        let text = Gen<UInt32>.value(in: 0x20...0x2FFF).map { Character(Unicode.Scalar($0 == 0x25 ? 0x26 : $0)!) }.string(of: 0...12)
        await propertyCheck(input: arg, arg, text) { a, b, lit in
            let seq = try FormatTemplate(compiling: lit + "%@" + lit + "%@")
            #expect(try seq.render([a, b]) == lit + a + lit + b)
            let pos = try FormatTemplate(compiling: "%2$@" + lit + "%1$@")
            #expect(try pos.render([a, b]) == b + lit + a)
        }
    }

    /// Numeric conversions agree with Foundation's `String(format:)` on the parsed number.
    @Test func propertyNumbersMatchFoundation() async {
        await propertyCheck(input: Gen.int(in: Int(Int32.min)...Int(Int32.max)), Gen.int(in: 0...6), Gen.int(in: -100000...100000)) { n, places, cents in
            #expect((try? FormatTemplate(compiling: "%d").render([String(n)])) == String(format: "%d", Int32(n)))
            #expect((try? FormatTemplate(compiling: "%08ld").render([String(n)])) == String(format: "%08ld", n))
            let d = Double(cents) / 7.0
            let spec = "%.\(places)f"
            #expect((try? FormatTemplate(compiling: spec).render(["\(d)"])) == String(format: spec, d))
        }
    }

    @Test func pluralForms() throws {
        let p = try PluralTemplate(forms: [
            .one: FormatTemplate(compiling: "%lld unread message"),
            .other: FormatTemplate(compiling: "%lld unread messages"),
            .zero: FormatTemplate(compiling: "No unread messages"),
        ])
        let en = LanguageTag(language: "en")
        #expect(try p.render(["1"], language: en) == "1 unread message")
        #expect(try p.render(["5"], language: en) == "5 unread messages")
        #expect(try p.render(["0"], language: en) == "No unread messages")
        let ru = try PluralTemplate(forms: [
            .one: FormatTemplate(compiling: "%d сообщение"),
            .few: FormatTemplate(compiling: "%d сообщения"),
            .many: FormatTemplate(compiling: "%d сообщений"),
            .other: FormatTemplate(compiling: "%d сообщения"),
        ])
        let r = LanguageTag(language: "ru")
        #expect(try ru.render(["21"], language: r) == "21 сообщение")
        #expect(try ru.render(["3"], language: r) == "3 сообщения")
        #expect(try ru.render(["11"], language: r) == "11 сообщений")
        #expect(throws: FormatError.self) { try p.render([], language: en) }
    }
}
