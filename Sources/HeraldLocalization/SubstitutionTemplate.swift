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
        /// The forms by ``PluralCategory/slot``, a missing one `other`'s: no hashing at render.
        let slots: [[FormatTemplate.Segment]]

        init(name: String, selector: FormatSpecifier, forms: [PluralCategory: [FormatTemplate.Segment]], sources: [PluralCategory: String]) {
            self.name = name
            self.selector = selector
            self.forms = forms
            self.sources = sources
            self.slots = PluralCategory.allCases.map { forms[$0] ?? forms[.other]! }
        }
    }

    public enum Part: Sendable, Hashable {
        case segment(FormatTemplate.Segment)
        /// The variable at this index of ``variables``.
        case variable(Int)
    }

    /// The format as written.
    public var source: String { storage.source }
    public var parts: [Part] { storage.parts }
    public var variables: [Variable] { storage.variables }
    /// The highest argument any part or form reads, plus one.
    public var argumentCount: Int { storage.argumentCount }

    /// The compiled form behind one reference: copying a template retains once.
    let storage: Storage

    final class Storage: Sendable {
        let source: String
        let parts: [Part]
        let variables: [Variable]
        let argumentCount: Int
        /// The render program: the format's ops, then each variable's six forms' ops.
        let program: Program

        init(source: String, parts: [Part], variables: [Variable], argumentCount: Int) {
            self.source = source
            self.parts = parts
            self.variables = variables
            self.argumentCount = argumentCount
            self.program = Program(parts: parts, variables: variables)
        }
    }

    /// What a render runs, flattened: literal bytes in one buffer, and ops
    /// that point into it, into the specifiers, or at a variable.
    final class Program: Sendable {
        struct Op: Sendable {
            /// 0: literal bytes `a..<a+b`; 1: argument by `specs[a]`; 2: variable `a`.
            var kind: UInt8
            var a: Int32
            var b: Int32
        }
        let bytes: [UInt8]
        let ops: [Op]
        let mainCount: Int
        let specs: [FormatSpecifier]
        /// `specs` as the fast render reads them (``SubstitutionTemplate/renderFast(_:ruleSet:_:)``).
        let fast: [FastSpec]
        /// Per variable: its selector (an index into `specs`) and whether it has a `zero` form.
        let selectors: [Int32]
        let hasZero: [Bool]
        /// Per variable, six (start, count) ranges of `ops`, one per ``PluralCategory/slot``.
        let forms: [(start: Int32, count: Int32)]
        /// Literal bytes of the format plus the longest form of each variable: the output's first estimate.
        let literalEstimate: Int

        init(parts: [Part], variables: [Variable]) {
            var bytes: [UInt8] = []
            var ops: [Op] = []
            var specs: [FormatSpecifier] = []
            var selectors: [Int32] = []
            var hasZero: [Bool] = []
            var forms: [(start: Int32, count: Int32)] = []
            func add(_ segment: FormatTemplate.Segment) {
                switch segment {
                case .literal(let l):
                    ops.append(Op(kind: 0, a: Int32(bytes.count), b: Int32(l.utf8.count)))
                    bytes += l.utf8
                case .argument(let a):
                    ops.append(Op(kind: 1, a: Int32(specs.count), b: 0))
                    specs.append(a)
                }
            }
            for part in parts {
                switch part {
                case .segment(let segment): add(segment)
                case .variable(let k): ops.append(Op(kind: 2, a: Int32(k), b: 0))
                }
            }
            let mainCount = ops.count
            var literalEstimate = bytes.count
            for v in variables {
                selectors.append(Int32(specs.count))
                specs.append(v.selector)
                hasZero.append(v.forms[.zero] != nil)
                var longest = 0
                for slot in v.slots {
                    let start = ops.count
                    let before = bytes.count
                    for segment in slot { add(segment) }
                    forms.append((Int32(start), Int32(ops.count - start)))
                    longest = max(longest, bytes.count - before)
                }
                literalEstimate += longest
            }
            self.bytes = bytes
            self.ops = ops
            self.mainCount = mainCount
            self.specs = specs
            let selectorSet = Set(selectors)
            self.fast = specs.enumerated().map { FastSpec($0.element, selector: selectorSet.contains(Int32($0.offset))) }
            self.selectors = selectors
            self.hasZero = hasZero
            self.forms = forms
            self.literalEstimate = literalEstimate
        }
    }

    public static func == (a: SubstitutionTemplate, b: SubstitutionTemplate) -> Bool {
        a.storage === b.storage || (a.source == b.source && a.variables == b.variables)
    }
    public func hash(into hasher: inout Hasher) {
        hasher.combine(source)
        hasher.combine(variables)
    }

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
        self.storage = Storage(source: format, parts: parts, variables: variables, argumentCount: maxIndex + 1)
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
        try render(arguments, ruleSet: PluralRules.ruleSet(of: language))
    }

    /// Renders with `arguments` under the plural rule set `ruleSet` (``PluralRules/ruleSet(of:)``,
    /// resolved once per catalog language by the localizer). Plain loops over
    /// the program's arrays, no closures: nothing captured, nothing boxed.
    func render(_ arguments: [String], ruleSet: UInt8) throws(FormatError) -> String {
        try checkArgumentCount(arguments.count)
        if let text = renderFast(arguments, ruleSet: ruleSet, storage.program) { return text }
        return try renderGeneral(arguments, ruleSet: ruleSet)
    }

    /// The render for every argument and specifier: C formatting where needed,
    /// and the error that names a wrong argument. The argument count is checked.
    func renderGeneral(_ arguments: [String], ruleSet: UInt8) throws(FormatError) -> String {
        let p = storage.program
        var estimate = p.literalEstimate
        for a in arguments { estimate += a.utf8.count + 8 }
        var out: [UInt8] = []
        out.reserveCapacity(estimate)
        for i in 0..<p.mainCount {
            let op = p.ops[i]
            guard op.kind == 2 else {
                try Self.run(op, p, arguments, printed: nil, &out)
                continue
            }
            let k = Int(op.a)
            let selector = Int(p.selectors[k])
            let argumentIndex = p.specs[selector].index
            let argument = arguments[argumentIndex]
            // A floating-point number is printed once: for its operands and for the form.
            var printed: String?
            var slot = PluralCategory.other.slot
            if let n = p.specs[selector].pluralOperands(of: argument, printed: &printed) {
                slot = PluralRules.form(for: n, ruleSet: ruleSet, hasZero: p.hasZero[k]).slot
            }
            let form = p.forms[k * 6 + slot]
            for j in Int(form.start)..<Int(form.start + form.count) {
                let formOp = p.ops[j]
                let reuse = printed != nil && formOp.kind == 1 && p.specs[Int(formOp.a)].index == argumentIndex
                    && p.specs[Int(formOp.a)].cFormat == p.specs[selector].cFormat
                try Self.run(formOp, p, arguments, printed: reuse ? printed : nil, &out)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// One op: literal bytes, or an argument as its specifier writes it (`printed` when already printed).
    @inline(__always)
    static func run(_ op: Program.Op, _ p: Program, _ arguments: [String], printed: String?, _ out: inout [UInt8]) throws(FormatError) {
        if op.kind == 0 {
            out.append(contentsOf: p.bytes[Int(op.a)..<Int(op.a + op.b)])
            return
        }
        if let printed {
            out.append(contentsOf: printed.utf8)
            return
        }
        // Fields read in place: copying a specifier would retain its text and C format.
        let s = Int(op.a)
        let argument = arguments[p.specs[s].index]
        if p.specs[s].conversion == .string, p.specs[s].width == nil, p.specs[s].precision == nil {
            out.append(contentsOf: argument.utf8)
        } else if p.specs[s].plain, let v = FormatSpecifier.parseInteger(argument), p.specs[s].integerRange.contains(v) {
            appendDecimal(v, to: &out)
        } else {
            var text = ""
            try p.specs[s].append(argument, to: &text)
            out.append(contentsOf: text.utf8)
        }
    }

    /// `v` in decimal digits.
    @inline(__always)
    static func appendDecimal(_ v: Int64, to out: inout [UInt8]) {
        let start = out.count
        out.append(contentsOf: repeatElement(0, count: ByteWriter.decimalLength(v)))
        out.withUnsafeMutableBufferPointer { _ = ByteWriter.writeDecimal(v, to: $0.baseAddress! + start) }
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
            integerRange: integerRange, unsignedMax: unsignedMax, plain: plain, cFormat: cFormat,
            fixedPrecision: fixedPrecision)
    }
}
