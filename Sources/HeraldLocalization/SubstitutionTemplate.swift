/// A value with variables, `%#@name@`: a `.stringsdict` entry's
/// `NSStringLocalizedFormatKey` with its plural rules, or a string catalog's
/// `substitutions`. "%#@files@ in %#@folders@" with `files` and `folders`
/// each choosing among their forms by their own argument.
///
/// - A variable takes an argument where it stands, as a specifier does
///   (`%#@files@` the next one, `%2$#@files@` the second), unless its
///   definition names one (`argNum` in a string catalog).
/// - The variable's argument is read as a number by its value type
///   (`NSStringFormatValueTypeKey`, `formatSpecifier`: `d`, `lld`, `f`, `@`…),
///   as ``FormatSpecifier/pluralOperands(of:)`` does; an explicit `zero` form
///   wins for 0, then the language's CLDR category, then `other`.
/// - In a form, unnumbered specifiers read the variable's argument and those
///   after it (the first `%d` of "%d files" is the variable's number);
///   numbered ones (`%3$@`) read that argument of the whole string. In a
///   string catalog's forms `%arg` is the variable's argument written with
///   its `formatSpecifier`.
public struct SubstitutionTemplate: Sendable, Hashable {
    /// One variable's definition, as read from a file.
    public struct Definition: Sendable, Hashable {
        /// The 1-based argument the variable reads, if the file names one.
        public var argument: Int?
        /// The value type without `%` (`d`, `lld`, `f`, `@`).
        public var valueType: String
        /// The forms' texts by category; `other` is required.
        public var forms: [PluralCategory: String]
        /// `%arg`, where the forms use it for the argument.
        public var placeholder: String?

        public init(argument: Int? = nil, valueType: String, forms: [PluralCategory: String], placeholder: String? = nil) {
            self.argument = argument
            self.valueType = valueType
            self.forms = forms
            self.placeholder = placeholder
        }
    }

    /// A compiled variable.
    public struct Variable: Sendable, Hashable {
        public let name: String
        /// How the variable's argument is read as a number; its `index` is the argument's.
        public let selector: FormatSpecifier
        /// Each form's segments; arguments by their index in the whole string.
        public let forms: [PluralCategory: [FormatTemplate.Segment]]
        /// Each form as written.
        public let sources: [PluralCategory: String]

        /// The form for `arguments` in `language`.
        func form(for arguments: [String], ruleSet: UInt8) -> [FormatTemplate.Segment] {
            guard let n = selector.pluralOperands(of: arguments[selector.index]) else { return forms[.other]! }
            if n.i == 0, n.t == 0, let zero = forms[.zero] { return zero }
            return forms[PluralRules.category(ruleSet: ruleSet, n)] ?? forms[.other]!
        }
    }

    public enum Part: Sendable, Hashable {
        case segment(FormatTemplate.Segment)
        /// The variable at this index of ``variables``.
        case variable(Int)
    }

    /// The format as written.
    public let source: String
    public let parts: [Part]
    public let variables: [Variable]
    /// The highest argument any part or form reads, plus one.
    public let argumentCount: Int

    /// Compiles `format` with the variables `definitions`. Errors name the
    /// variable and the form.
    public init(format: String, definitions: [String: Definition]) throws(FormatError) {
        // Each %#@name@ becomes a string specifier (%@ or %n$@) so the format
        // compiles as usual; `variableAt` remembers which specifiers they are.
        var rewritten: [UInt8] = []
        var variableAt: [Int: String] = [:]  // specifier ordinal → variable name
        let bytes = Array(format.utf8)
        var ordinal = 0
        var i = 0
        while i < bytes.count {
            guard bytes[i] == UInt8(ascii: "%") else {
                rewritten.append(bytes[i])
                i += 1
                continue
            }
            if i + 1 < bytes.count, bytes[i + 1] == UInt8(ascii: "%") {
                rewritten += [bytes[i], bytes[i + 1]]
                i += 2
                continue
            }
            if let (name, position, end) = Self.variableToken(bytes, at: i) {
                variableAt[ordinal] = name
                rewritten += Array((position.map { "%\($0)$@" } ?? "%@").utf8)
                ordinal += 1
                i = end
                continue
            }
            // An ordinary specifier: copy it through its conversion character.
            rewritten.append(bytes[i])
            i += 1
            while i < bytes.count, Self.specifierInner.contains(bytes[i]) {
                rewritten.append(bytes[i])
                i += 1
            }
            if i < bytes.count {
                rewritten.append(bytes[i])
                i += 1
            }
            ordinal += 1
        }
        guard !variableAt.isEmpty else { throw FormatError("\"\(format)\" has no variable (%#@name@)") }
        let base = try FormatTemplate(compiling: String(decoding: rewritten, as: UTF8.self))

        var parts: [Part] = []
        var variables: [Variable] = []
        var maxIndex = -1
        var seen = 0
        for segment in base.segments {
            guard case .argument(let spec) = segment else {
                parts.append(.segment(segment))
                continue
            }
            defer { seen += 1 }
            guard let name = variableAt[seen] else {
                parts.append(.segment(segment))
                maxIndex = max(maxIndex, spec.index)
                continue
            }
            guard let definition = definitions[name] else {
                throw FormatError("the variable \"\(name)\" (%#@\(name)@) is not defined")
            }
            let variable = try Self.compile(name: name, definition, tokenIndex: spec.index)
            maxIndex = max(maxIndex, variable.selector.index)
            for form in variable.forms.values {
                for case .argument(let a) in form { maxIndex = max(maxIndex, a.index) }
            }
            parts.append(.variable(variables.count))
            variables.append(variable)
        }
        self.source = format
        self.parts = parts
        self.variables = variables
        self.argumentCount = maxIndex + 1
    }

    /// Flags, width, precision, position and length characters of a specifier.
    static let specifierInner: Set<UInt8> = Set("0123456789$-+ #'.hlqLztj".utf8)

    /// `%#@name@` or `%n$#@name@` at `i`: the name, the position, and the index after the token.
    static func variableToken(_ b: [UInt8], at i: Int) -> (String, Int?, Int)? {
        var j = i + 1
        var position: Int?
        var digits = 0
        var n = 0
        while j < b.count, b[j] &- 0x30 < 10, digits < 3 {
            n = n * 10 + Int(b[j] &- 0x30)
            j += 1
            digits += 1
        }
        if digits > 0 {
            guard j < b.count, b[j] == UInt8(ascii: "$") else { return nil }
            position = n
            j += 1
        }
        guard j + 1 < b.count, b[j] == UInt8(ascii: "#"), b[j + 1] == UInt8(ascii: "@") else { return nil }
        j += 2
        let start = j
        while j < b.count, b[j] != UInt8(ascii: "@") {
            guard b[j] != UInt8(ascii: "%"), b[j] != UInt8(ascii: " ") else { return nil }
            j += 1
        }
        guard j < b.count, j > start else { return nil }
        return (String(decoding: b[start..<j], as: UTF8.self), position, j + 1)
    }

    static func compile(name: String, _ d: Definition, tokenIndex: Int) throws(FormatError) -> Variable {
        let index: Int
        if let argument = d.argument {
            guard (1...99).contains(argument) else { throw FormatError("the variable \"\(name)\": argument \(argument) is out of 1…99") }
            index = argument - 1
        } else {
            index = tokenIndex
        }
        let valueType = d.valueType.hasPrefix("%") ? String(d.valueType.dropFirst()) : d.valueType
        let selectorTemplate: FormatTemplate
        do {
            selectorTemplate = try FormatTemplate(compiling: "%" + (valueType.isEmpty ? "@" : valueType))
        } catch {
            throw FormatError("the variable \"\(name)\": value type \"\(d.valueType)\": \(error.message)")
        }
        guard selectorTemplate.specifiers.count == 1, let selector = selectorTemplate.specifiers.first, !selector.text.contains("$") else {
            throw FormatError("the variable \"\(name)\": value type \"\(d.valueType)\" is not one specifier (d, lld, f, @…)")
        }
        guard d.forms[.other] != nil else { throw FormatError("the variable \"\(name)\" needs an \"other\" form") }
        var forms: [PluralCategory: [FormatTemplate.Segment]] = [:]
        for (category, text) in d.forms {
            var source = text
            if let placeholder = d.placeholder { source = source.replacing(placeholder, with: "%" + (valueType.isEmpty ? "@" : valueType)) }
            if source.contains("#@") {
                throw FormatError("the variable \"\(name)\", form \"\(category)\": variables inside a form are not supported")
            }
            let template: FormatTemplate
            do {
                template = try FormatTemplate(compiling: source)
            } catch {
                throw FormatError("the variable \"\(name)\", form \"\(category)\": \(error.message)")
            }
            forms[category] = template.segments.map { segment in
                guard case .argument(let a) = segment, !a.text.contains("$") else { return segment }
                return .argument(a.reindexed(index + a.index))
            }
        }
        return Variable(
            name: name, selector: selector.reindexed(index), forms: forms, sources: d.forms)
    }

    public func checkArgumentCount(_ count: Int) throws(FormatError) {
        guard count == argumentCount else {
            throw FormatError("\"\(source)\" takes \(argumentCount) argument\(argumentCount == 1 ? "" : "s"), got \(count)")
        }
    }

    /// Renders with `arguments` in `language`.
    public func render(_ arguments: [String], language: LanguageTag) throws(FormatError) -> String {
        try checkArgumentCount(arguments.count)
        let ruleSet = PluralRules.ruleSet(of: language)
        var out = ""
        for part in parts {
            switch part {
            case .segment(.literal(let l)): out.append(l)
            case .segment(.argument(let a)): try a.append(arguments[a.index], to: &out)
            case .variable(let k):
                for segment in variables[k].form(for: arguments, ruleSet: ruleSet) {
                    switch segment {
                    case .literal(let l): out.append(l)
                    case .argument(let a): try a.append(arguments[a.index], to: &out)
                    }
                }
            }
        }
        return out
    }

    /// Every specifier of the format and of every form, variables' selectors included.
    public var specifiers: [FormatSpecifier] {
        var out: [FormatSpecifier] = []
        for part in parts {
            switch part {
            case .segment(.argument(let a)): out.append(a)
            case .segment(.literal): break
            case .variable(let k):
                let v = variables[k]
                out.append(v.selector)
                for category in PluralCategory.allCases {
                    for case .argument(let a) in v.forms[category] ?? [] { out.append(a) }
                }
            }
        }
        return out
    }
}

extension FormatSpecifier {
    /// The same specifier reading argument `index`.
    func reindexed(_ index: Int) -> FormatSpecifier {
        FormatSpecifier(
            index: index, conversion: conversion, text: text, leftAlign: leftAlign, width: width, precision: precision,
            integerRange: integerRange, unsignedMax: unsignedMax, plain: plain, cFormat: cFormat)
    }
}
