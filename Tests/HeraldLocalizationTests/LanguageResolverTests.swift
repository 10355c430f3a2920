import PropertyBased
import Testing
@testable import HeraldLocalization

@Suite struct LanguageResolverTests {
    @Test(arguments: [
        ("en", "en"), ("fr-CA", "fr-CA"), ("pt_BR", "pt-BR"), ("zh-Hans-TW", "zh-Hans-TW"), ("ZH-hant-tw", "zh-Hant-TW"),
        ("es-419", "es-419"), ("en-US-u-ca-gregory", "en-US"), ("de-DE-1996", "de-DE"), ("English", "en"), ("iw", "he"),
        ("Base", "Base"), ("sr-Latn", "sr-Latn"),
    ])
    func parsing(_ text: String, _ canonical: String) {
        #expect(LanguageTag(parsing: text)?.description == canonical)
    }

    @Test(arguments: ["", "-", "1x", "e", "toolong-US", "en--US", "Base-US"])
    func unparsable(_ text: String) {
        #expect(LanguageTag(parsing: text) == nil)
    }

    /// Twelve catalog languages, as a real app ships them.
    static let names = ["en", "en-GB", "fr", "de", "es", "es-419", "pt-BR", "pt-PT", "zh-Hans", "zh-Hant", "zh-HK", "ja", "ar", "Base"]
    static let languages = names.map { LanguageTag(parsing: $0)! }

    func resolver(fallback: [String] = [], defaultLanguage: String = "en") throws -> LanguageResolver {
        try LanguageResolver(languages: Self.languages, defaultLanguage: defaultLanguage, fallback: fallback)
    }

    @Test(arguments: [
        ("fr-CA", ["fr", "en", "en-GB", "Base"]),
        ("fr", ["fr", "en", "en-GB", "Base"]),
        ("en-GB", ["en-GB", "en", "Base"]),
        ("en-AU", ["en", "en-GB", "Base"]),
        ("en", ["en", "en-GB", "Base"]),
        ("pt_BR", ["pt-BR", "pt-PT", "en", "en-GB", "Base"]),
        ("pt", ["pt-BR", "pt-PT", "en", "en-GB", "Base"]),
        ("pt-PT", ["pt-PT", "pt-BR", "en", "en-GB", "Base"]),
        ("es-MX", ["es", "es-419", "en", "en-GB", "Base"]),
        ("zh-Hans-TW", ["zh-Hans", "en", "en-GB", "Base"]),
        ("zh-TW", ["zh-Hant", "zh-HK", "en", "en-GB", "Base"]),
        ("zh-HK", ["zh-HK", "zh-Hant", "en", "en-GB", "Base"]),
        ("zh-Hant-HK", ["zh-HK", "zh-Hant", "en", "en-GB", "Base"]),
        ("zh-MO", ["zh-Hant", "zh-HK", "en", "en-GB", "Base"]),
        ("zh-CN", ["zh-Hans", "en", "en-GB", "Base"]),
        ("zh-SG", ["zh-Hans", "en", "en-GB", "Base"]),
        ("zh", ["zh-Hans", "en", "en-GB", "Base"]),
        ("zh-Hant", ["zh-Hant", "zh-HK", "en", "en-GB", "Base"]),
        ("ja-JP", ["ja", "en", "en-GB", "Base"]),
        ("sw", ["en", "en-GB", "Base"]),
        ("not a tag", ["en", "en-GB", "Base"]),
    ])
    func chains(_ tag: String, _ expected: [String]) throws {
        #expect(try resolver().describeChain(for: tag) == expected)
    }

    @Test func fallbackChainComesBeforeTheDefault() throws {
        let r = try resolver(fallback: ["es", "fr"], defaultLanguage: "en")
        #expect(r.describeChain(for: "ca-ES") == ["es", "es-419", "fr", "en", "en-GB", "Base"])
        #expect(r.describeChain(for: nil) == ["es", "es-419", "fr", "en", "en-GB", "Base"])
        #expect(r.describeChain(for: "de-AT") == ["de", "es", "es-419", "fr", "en", "en-GB", "Base"])
        #expect(r.describeChain(for: "es-AR") == ["es", "es-419", "fr", "en", "en-GB", "Base"])
        // Cached answers are the same answers.
        #expect(r.describeChain(for: "de-AT") == ["de", "es", "es-419", "fr", "en", "en-GB", "Base"])
    }

    @Test func defaultLanguageMustHaveACatalog() throws {
        #expect(throws: ResolverError.self) { try LanguageResolver(languages: [LanguageTag(language: "fr")], defaultLanguage: "en") }
        #expect(throws: ResolverError.self) { try LanguageResolver(languages: Self.languages, defaultLanguage: "??") }
        #expect(throws: ResolverError.self) { try LanguageResolver(languages: Self.languages, fallback: ["1"]) }
        // Base alone serves the default language.
        let r = try LanguageResolver(languages: [.base, LanguageTag(language: "fr")], defaultLanguage: "en")
        #expect(r.describeChain(for: "de") == ["Base"])
    }
}

@Suite("The localizer's string index")
struct StringIndexTests {
    @Test("property: after any insertions, every lookup agrees with a Dictionary keyed by the same UTF-8 bytes")
    func agreesWithDictionary() async {
        // Short keys over a small alphabet (so keys repeat and collide), some non-ASCII, lengths across the 8-byte steps.
        let alphabet: [Character] = ["a", "b", "-", "_", "é", "中", "Z", "0"]
        let key = Gen.int(in: 0...(alphabet.count - 1)).array(of: 0...20).map { String($0.map { alphabet[$0] }) }
        await propertyCheck(count: 200, input: key.array(of: 0...60)) { keys in
            var index = StringIndex<Int>()
            var reference: [[UInt8]: Int] = [:]
            for (n, k) in keys.enumerated() {
                index.set(k, n)
                reference[Array(k.utf8)] = n
            }
            #expect(index.count == reference.count)
            for k in keys { #expect(index[k] == reference[Array(k.utf8)]) }
            for probe in ["", "zz", "a-b_c-d-e", "中中中中中中"] where reference[Array(probe.utf8)] == nil {
                #expect(index[probe] == nil)
            }
        }
    }

    @Test("a catalog key looked up in another Unicode spelling is still found (String equality, as before)")
    func canonicalEquivalentKeyFound() throws {
        var table = StringTable(name: "Localizable")
        _ = table.set(try CatalogEntry(compiling: "x", origin: "t"), key: "caf\u{E9}", language: 0)
        #expect(table.keyID("cafe\u{301}") == table.keyID("caf\u{E9}") && table.keyID("caf\u{E9}") != nil)
    }
}
