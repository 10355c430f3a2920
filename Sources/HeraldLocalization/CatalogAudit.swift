/// One thing wrong with a catalog that loading alone does not catch.
public struct CatalogProblem: Sendable, Hashable, CustomStringConvertible {
    /// What kind of problem it is.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        public let name: String
        public init(name: String) { self.name = name }
        /// A value that does not compile (a bad specifier…).
        public static let invalidValue = Code(name: "invalid-value")
        /// A key that a language lacks while others have it.
        public static let missingTranslation = Code(name: "missing-translation")
        /// A value whose arguments differ from the reference language's, or that reads one position as two kinds.
        public static let argumentMismatch = Code(name: "argument-mismatch")
        /// A plural value without a form its language's CLDR rules need (it would say `other` instead).
        public static let missingPluralForm = Code(name: "missing-plural-form")
        public var description: String { name }
    }

    public let code: Code
    public let table: String
    public let key: String
    /// The language at fault (for a missing translation, the one that lacks it).
    public let language: LanguageTag
    /// The entry at fault, as ``CatalogEntry/origin`` (`file:line`, or the
    /// file and key path); for a missing translation, the entry of a language
    /// that has the key.
    public let origin: String
    public let message: String

    public var description: String { "\(origin): \(message)" }
}

/// What a key takes, agreed on by its languages.
public struct KeySignature: Sendable, Hashable {
    public let table: String
    public let key: String
    /// One kind per argument, by position.
    public let arguments: [ArgumentKind]
    /// The reference language's text (a plural value's `other` form).
    public let text: String
    /// The languages that have the key, in catalog order.
    public let languages: [LanguageTag]
    /// A name per argument where the reference value gives one: `count` for
    /// the number a plural value's form is chosen by, a variable's name
    /// (`files` of `%#@files@`) for the number its form is chosen by.
    public let names: [String?]
}

/// Checks that every language of a catalog agrees on each key, as a build
/// should before the keys are used:
///
/// - every entry compiles (no bad specifier);
/// - every language (but `Base`) that has keys in a table has each key that
///   another language (but `Base`) has, except those listed as not to be
///   translated;
/// - each language's value takes as many arguments as the reference
///   language's, of the same kinds (text, integer, unsigned, number), and
///   reads no position as two kinds;
/// - each plural value (and each variable of a `%#@name@` value) has every
///   form its language's CLDR rules distinguish (Russian: one, few, many,
///   other); a missing one would show the `other` form.
///
/// ```swift
/// let audit = CatalogAudit(try StringCatalog.load(path: "Catalogs"))
/// for p in audit.problems { print(p) }
/// // Catalogs/fr.lproj/Localizable.strings:4: "SCORE" takes 1 argument (text) in fr but 2 arguments (text, integer) in en (…)
/// for s in audit.signatures { … }          // the keys with their argument kinds
/// ```
public struct CatalogAudit: Sendable {
    public private(set) var signatures: [KeySignature] = []
    public private(set) var problems: [CatalogProblem] = []

    /// - Parameters:
    ///   - reference: the language the others are compared with (the
    ///     development language); where a key lacks it, the first language
    ///     (in catalog order) that has the key.
    ///   - untranslated: keys no language needs to have (a string catalog's
    ///     `"shouldTranslate": false`).
    public init(_ catalog: StringCatalog, reference: LanguageTag? = nil, untranslated: Set<String> = []) {
        for name in catalog.tables.keys.sorted() {
            audit(catalog.tables[name]!, catalog.languages, reference: reference, untranslated: untranslated)
        }
    }

    mutating func audit(_ table: StringTable, _ languages: [LanguageTag], reference: LanguageTag?, untranslated: Set<String>) {
        let ids = languages.indices
        let translated = ids.filter { !languages[$0].isBase && table.count(language: $0) > 0 }
        let preferred = reference.flatMap { languages.firstIndex(of: $0) }
        for (keyID, key) in table.keys.enumerated() {
            let present = ids.filter { table.entry(keyID: keyID, language: $0) != nil }
            guard let refID = preferred.flatMap({ present.contains($0) ? $0 : nil }) ?? present.first else { continue }
            let ref = table.entry(keyID: keyID, language: refID)!
            func problem(_ code: CatalogProblem.Code, _ language: Int, _ origin: String, _ message: String) {
                problems.append(
                    CatalogProblem(code: code, table: table.name, key: key, language: languages[language], origin: origin, message: message))
            }
            // A key only in Base is every language's; one in a language should be in all of them.
            if !untranslated.contains(key) && present.contains(where: { !languages[$0].isBase }) {
                for missing in translated where !present.contains(missing) {
                    problem(.missingTranslation, missing, ref.origin, "\"\(key)\" has no \(languages[missing]) translation (\(table.name) table)")
                }
            }
            var refKinds: [ArgumentKind]?
            for id in present {
                let entry = id == refID ? ref : table.entry(keyID: keyID, language: id)!
                if case .invalid(let message) = entry.value {
                    problem(.invalidValue, id, entry.origin, "\"\(key)\" in \(languages[id]): \(message)")
                    continue
                }
                if !languages[id].isBase {
                    for missing in Self.missingPluralForms(entry, language: languages[id]) {
                        problem(.missingPluralForm, id, entry.origin, "\"\(key)\" in \(languages[id]): \(missing)")
                    }
                }
                switch entry.argumentKinds() {
                case .failure(let error):
                    problem(.argumentMismatch, id, entry.origin, "\"\(key)\" in \(languages[id]): \(error.message)")
                case .success(let kinds) where id == refID:
                    refKinds = kinds
                case .success(let kinds):
                    guard case .success(let expected) = ref.argumentKinds(), let differ = Self.compare(kinds, expected) else { continue }
                    let message = "\"\(key)\" \(differ.0) in \(languages[id]) but \(differ.1) in \(languages[refID]) (\(ref.origin))"
                    problem(.argumentMismatch, id, entry.origin, message)
                }
            }
            if let refKinds {
                let tags = present.map { languages[$0] }
                signatures.append(
                    KeySignature(
                        table: table.name, key: key, arguments: refKinds, text: Self.text(of: ref), languages: tags,
                        names: Self.argumentNames(of: ref, count: refKinds.count)))
            }
        }
    }

    /// How `kinds` and `expected` differ, said of each, or `nil` when they agree.
    static func compare(_ kinds: [ArgumentKind], _ expected: [ArgumentKind]) -> (String, String)? {
        if kinds.count != expected.count { return ("takes \(describe(kinds))", describe(expected)) }
        for (i, (a, b)) in zip(kinds, expected).enumerated() where a != b {
            return ("reads argument \(i + 1) as \(a)", "as \(b)")
        }
        return nil
    }

    static func describe(_ kinds: [ArgumentKind]) -> String {
        switch kinds.count {
        case 0: return "no arguments"
        case 1: return "1 argument (\(kinds[0]))"
        default: return "\(kinds.count) arguments (\(kinds.map(\.name).joined(separator: ", ")))"
        }
    }

    static func text(of entry: CatalogEntry) -> String {
        switch entry.value {
        case .format(let t): return t.source
        case .plural(let p): return p.forms[.other]?.source ?? ""
        case .substituted(let s): return s.source
        case .invalid: return ""
        }
    }

    /// The names of the arguments that choose plural forms (see ``KeySignature/names``).
    static func argumentNames(of entry: CatalogEntry, count: Int) -> [String?] {
        var names = [String?](repeating: nil, count: count)
        switch entry.value {
        case .plural(let p) where p.selectorIndex < count:
            names[p.selectorIndex] = "count"
        case .substituted(let s):
            for v in s.variables where v.selector.index < count && names[v.selector.index] == nil {
                names[v.selector.index] = v.name
            }
        default:
            break
        }
        return names
    }

    /// What forms `entry` lacks that `language`'s plural rules need, said per
    /// value or variable; empty when it has them all (or is not plural).
    static func missingPluralForms(_ entry: CatalogEntry, language: LanguageTag) -> [String] {
        let needed = PluralRules.categories(of: language)
        func lacking(_ have: some Collection<PluralCategory>) -> String? {
            let missing = needed.filter { !have.contains($0) }
            guard !missing.isEmpty else { return nil }
            let names = missing.map(\.rawValue).joined(separator: ", ")
            let all = needed.map(\.rawValue).joined(separator: ", ")
            return "no \(names) form\(missing.count == 1 ? "" : "s") (\(language) has \(all); the other form would show)"
        }
        switch entry.value {
        case .plural(let p):
            return lacking(p.forms.keys).map { ["the plural forms have \($0)"] } ?? []
        case .substituted(let s):
            return s.variables.compactMap { v in lacking(v.forms.keys).map { "the variable \"\(v.name)\" has \($0)" } }
        case .format, .invalid:
            return []
        }
    }
}
