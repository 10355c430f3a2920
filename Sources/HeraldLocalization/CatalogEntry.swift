/// A compiled catalog value: what a key renders to in one language.
public struct CatalogEntry: Sendable, Hashable {
    public enum Value: Sendable, Hashable {
        /// One template.
        case format(FormatTemplate)
        /// Plural forms (from a string catalog's `variations.plural`).
        case plural(PluralTemplate)
        /// A format with variables (`%#@name@`): a `.stringsdict` entry, a string catalog's `substitutions`.
        case substituted(SubstitutionTemplate)
        /// The value could not be compiled; using it is an error with this message.
        case invalid(String)
    }

    public let value: Value
    /// Where the value comes from, `file:line` (or `file` and the key path), for messages.
    public let origin: String

    public init(value: Value, origin: String) {
        self.value = value
        self.origin = origin
    }

    /// Compiles `text`, keeping a compile error as an ``Value/invalid(_:)`` value.
    public init(compiling text: String, origin: String) {
        do {
            self.value = .format(try FormatTemplate(compiling: text))
        } catch {
            self.value = .invalid(error.message)
        }
        self.origin = origin
    }

    /// The number of arguments the value takes (the most any of its forms takes).
    public var argumentCount: Int? {
        switch value {
        case .format(let t): return t.argumentCount
        case .plural(let p): return p.argumentCount
        case .substituted(let s): return s.argumentCount
        case .invalid: return nil
        }
    }

    /// Checks that `count` arguments fit.
    public func checkArgumentCount(_ count: Int) throws(FormatError) {
        switch value {
        case .format(let t): try t.checkArgumentCount(count)
        case .plural(let p): try p.checkArgumentCount(count)
        case .substituted(let s): try s.checkArgumentCount(count)
        case .invalid(let message): throw FormatError("invalid template (\(message))")
        }
    }

    /// Renders with `arguments` under the plural rule set `ruleSet` (the localizer resolves it once per language).
    @usableFromInline
    func render(_ arguments: [String], ruleSet: UInt8) throws(FormatError) -> String {
        switch value {
        case .format(let t): return try t.render(arguments)
        case .plural(let p): return try p.render(arguments, ruleSet: ruleSet)
        case .substituted(let s): return try s.render(arguments, ruleSet: ruleSet)
        case .invalid(let message): throw FormatError("invalid template (\(message))")
        }
    }

    /// Renders the value with `arguments` in `language` (which picks plural forms).
    @inlinable
    public func render(_ arguments: [String], language: LanguageTag) throws(FormatError) -> String {
        // A plain template needs no plural rules: no language look-up for it.
        if case .format(let t) = value { return try t.render(arguments) }
        return try render(arguments, ruleSet: PluralRules.ruleSet(of: language))
    }
}

/// Plural forms of one value. The form is chosen by the selecting argument
/// (the first numeric specifier of the `other` form, else its first argument)
/// as that specifier writes it (``FormatSpecifier/pluralOperands(of:)``): an
/// explicit `zero` form wins for 0, then the language's CLDR category
/// (``PluralRules``), then `other`. A selecting argument that is not a number
/// uses `other`.
public struct PluralTemplate: Sendable, Hashable {
    public let forms: [PluralCategory: FormatTemplate]
    /// The specifier whose argument picks the form.
    public let selector: FormatSpecifier
    public var selectorIndex: Int { selector.index }
    public let argumentCount: Int

    public init(forms: [PluralCategory: FormatTemplate]) throws(FormatError) {
        guard let other = forms[.other] else { throw FormatError("plural variations need an \"other\" form") }
        var selector: FormatSpecifier?
        for case .argument(let a) in other.segments where a.conversion != .string {
            selector = a
            break
        }
        if selector == nil {
            for case .argument(let a) in other.segments {
                selector = a
                break
            }
        }
        guard let selector else { throw FormatError("plural variations but the \"other\" form takes no argument") }
        self.forms = forms
        self.selector = selector
        self.argumentCount = forms.values.map(\.argumentCount).max() ?? 0
    }

    public func checkArgumentCount(_ count: Int) throws(FormatError) {
        guard count == argumentCount else {
            throw FormatError("the plural template takes \(argumentCount) argument\(argumentCount == 1 ? "" : "s"), got \(count)")
        }
    }

    /// The form for `arguments` in `language`.
    public func form(for arguments: [String], language: LanguageTag) -> FormatTemplate {
        form(for: arguments, ruleSet: PluralRules.ruleSet(of: language))
    }

    func form(for arguments: [String], ruleSet: UInt8) -> FormatTemplate {
        guard selectorIndex < arguments.count, let n = selector.pluralOperands(of: arguments[selectorIndex]) else {
            return forms[.other]!
        }
        return forms[PluralRules.form(for: n, ruleSet: ruleSet, hasZero: forms[.zero] != nil)] ?? forms[.other]!
    }

    public func render(_ arguments: [String], language: LanguageTag) throws(FormatError) -> String {
        try render(arguments, ruleSet: PluralRules.ruleSet(of: language))
    }

    func render(_ arguments: [String], ruleSet: UInt8) throws(FormatError) -> String {
        try checkArgumentCount(arguments.count)
        // A form may use fewer arguments than the others ("one" often writes the number out).
        return try form(for: arguments, ruleSet: ruleSet).renderUnchecked(arguments)
    }
}
