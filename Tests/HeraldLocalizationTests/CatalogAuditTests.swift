import HeraldCore
import Testing
@testable import HeraldLocalization

@Suite struct CatalogAuditTests {
    static let en = LanguageTag(language: "en"), fr = LanguageTag(language: "fr"), de = LanguageTag(language: "de")

    /// A catalog from `(language, key, value)` rows, each row's origin `<language>:<row>`.
    static func catalog(_ rows: [(LanguageTag, String, String)]) -> StringCatalog {
        var c = StringCatalog()
        for (i, (language, key, value)) in rows.enumerated() {
            c.add(CatalogEntry(compiling: value, origin: "\(language):\(i + 1)"), key: key, language: language)
        }
        return c
    }

    @Test func agreeingLanguagesGiveSignatures() {
        let audit = CatalogAudit(
            Self.catalog([
                (Self.en, "INVITE", "%@ and %@ invite you"), (Self.fr, "INVITE", "%2$@ et %1$@ vous invitent"),
                (Self.en, "SCORE", "%1$@ has %2$d points, %3$u left, %4$.1f%%"), (Self.fr, "SCORE", "%1$@ a %2$d points, %3$u, %4$.1f%%"),
                (Self.en, "HELLO", "Hello"), (Self.fr, "HELLO", "Bonjour"),
            ]), reference: Self.en)
        #expect(audit.problems.isEmpty)
        #expect(audit.signatures.map(\.key) == ["INVITE", "SCORE", "HELLO"])
        #expect(audit.signatures[0].arguments == [.text, .text])
        #expect(audit.signatures[1].arguments == [.text, .integer, .unsigned, .float])
        #expect(audit.signatures[1].text == "%1$@ has %2$d points, %3$u left, %4$.1f%%")
        #expect(audit.signatures[2].arguments.isEmpty)
        #expect(audit.signatures[2].languages == [Self.en, Self.fr])
    }

    @Test func problemsNameTheKeyTheLanguageAndTheOrigin() {
        let audit = CatalogAudit(
            Self.catalog([
                (Self.en, "A", "%@ and %@"), (Self.fr, "A", "%@ et %y"),  // bad specifier
                (Self.en, "B", "only in en"),  // missing in fr
                (Self.en, "C", "%@ and %@"), (Self.fr, "C", "%@"),  // count
                (Self.en, "D", "%d points"), (Self.fr, "D", "%@ points"),  // kind
                (Self.en, "E", "%1$@ %1$d"),  // one position, two kinds (and missing in fr)
            ]), reference: Self.en, untranslated: ["E"])
        let found = audit.problems.map { "\($0.code) \($0.language) \($0.origin): \($0.message)" }
        #expect(
            found == [
                "invalid-value fr fr:2: \"A\" in fr: \"%y\": unsupported conversion (write \"%%\" for a percent sign)",
                "missing-translation fr en:3: \"B\" has no fr translation (Localizable table)",
                "argument-mismatch fr fr:5: \"C\" takes 1 argument (text) in fr but 2 arguments (text, text) in en (en:4)",
                "argument-mismatch fr fr:7: \"D\" reads argument 1 as text in fr but as integer in en (en:6)",
                "argument-mismatch en en:8: \"E\" in en: argument 1 is read as text and as integer (%1$d)",
            ])
        // Keys with a problem in the reference language get no signature.
        #expect(audit.signatures.map(\.key) == ["A", "B", "C", "D"])
    }

    @Test func baseAndLanguagesWithoutTheTableAreNotMissing() {
        var c = Self.catalog([(Self.en, "A", "a"), (Self.de, "A", "a")])
        c.add(CatalogEntry(compiling: "base only", origin: "base:1"), key: "B", language: .base)
        c.add(CatalogEntry(compiling: "other table", origin: "fr:1"), key: "X", language: Self.fr, table: "Other")
        let audit = CatalogAudit(c, reference: Self.en)
        #expect(audit.problems.isEmpty)
    }

    @Test func pluralFormsShareTheirArguments() throws {
        let forms: [PluralCategory: FormatTemplate] = [
            .one: try FormatTemplate(compiling: "one message from %2$@"),
            .other: try FormatTemplate(compiling: "%1$lld messages from %2$@"),
        ]
        let plural = CatalogEntry(value: .plural(try PluralTemplate(forms: forms)), origin: "en.xcstrings")
        #expect(try plural.argumentKinds().get() == [.integer, .text])
        #expect(plural.specifiers.map(\.text) == ["%2$@", "%1$lld", "%2$@"])
    }

    @Test(arguments: [
        // specifier, maximum length, worst-case argument
        ("%d", 4, "-999"), ("%d", 11, "-2147483648"), ("%d", 30, "-2147483648"), ("%d", 1, "9"),
        ("%lld", 30, "-9223372036854775808"), ("%hhd", 10, "-128"), ("%u", 20, "4294967295"), ("%u", 3, "999"),
        ("%lx", 40, "18446744073709551615"), ("%.2f", 5, "-9999"), ("%@", 2, "\u{1F600}\u{1F600}"), ("%s", 0, ""),
    ])
    func worstCaseArguments(_ specifier: String, _ length: Int, _ expected: String) throws {
        let spec = try #require(try FormatTemplate(compiling: specifier).specifiers.first)
        let argument = spec.worstCaseArgument(maxLength: length)
        #expect(argument == expected)
        #expect(argument.count <= length)
        // The worst case is always an argument the specifier accepts.
        #expect(throws: Never.self) { try FormatTemplate(compiling: specifier).render([argument]) }
    }

    @Test func localizedKeysFillTheAlert() {
        let alert = Alert(body: LocalizedKey("INVITE", arguments: ["Jenna", "Frank"]), title: LocalizedKey("INVITE_TITLE"))
        #expect(alert.locKey == "INVITE")
        #expect(alert.locArgs == ["Jenna", "Frank"])
        #expect(alert.titleLocKey == "INVITE_TITLE")
        #expect(alert.titleLocArgs == nil)
        #expect(alert.subtitleLocKey == nil && alert.body == nil)
        #expect(LocalizedKey("K", arguments: ["1"]).description == "K(1)")
    }
}
