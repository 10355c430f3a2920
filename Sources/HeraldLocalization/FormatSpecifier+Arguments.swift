/// What one argument of a template must be, from its specifier: text (`%@`,
/// `%s`), a signed integer (`%d`, `%ld`…), an unsigned one (`%u`, `%x`…) or a
/// floating-point number (`%f`, `%g`…).
public struct ArgumentKind: Sendable, Hashable, CustomStringConvertible {
    public let name: String
    public init(name: String) { self.name = name }

    public static let text = ArgumentKind(name: "text")
    public static let integer = ArgumentKind(name: "integer")
    public static let unsigned = ArgumentKind(name: "unsigned integer")
    public static let float = ArgumentKind(name: "number")

    public var description: String { name }
}

extension FormatSpecifier {
    /// The kind of argument the specifier reads.
    public var argumentKind: ArgumentKind {
        switch conversion {
        case .string: return .text
        case .signed: return .integer
        case .unsigned: return .unsigned
        case .float: return .float
        }
    }

    /// The argument of at most `maxLength` characters that this specifier
    /// renders longest, for worst-case payload sizes:
    ///
    /// - text: `maxLength` characters of 4 UTF-8 bytes each (😀), the most a
    ///   printable character takes in a payload;
    /// - a signed integer: the most negative value of at most `maxLength`
    ///   characters within the specifier's range (`-2147483648` for `%d`,
    ///   `-999` for `%d` and 4 characters);
    /// - an unsigned integer: the largest such value (`4294967295`, `9999`);
    /// - a floating-point number: `-` and nines, written without an exponent.
    public func worstCaseArgument(maxLength: Int) -> String {
        let n = max(0, maxLength)
        func negativeNines() -> String { n <= 1 ? String(repeating: "9", count: n) : "-" + String(repeating: "9", count: n - 1) }
        switch conversion {
        case .string:
            return String(repeating: "\u{1F600}", count: n)
        case .signed:
            let lowest = String(integerRange.lowerBound)
            return lowest.count <= n ? lowest : negativeNines()
        case .unsigned:
            let highest = String(unsignedMax)
            return highest.count <= n ? highest : String(repeating: "9", count: n)
        case .float:
            return negativeNines()
        }
    }
}

extension FormatTemplate {
    /// The argument specifiers, in the order written.
    public var specifiers: [FormatSpecifier] {
        segments.compactMap { if case .argument(let a) = $0 { a } else { nil } }
    }
}

extension CatalogEntry {
    /// The specifiers of every form of the value (all plural forms), in the
    /// order written; empty for an invalid value.
    public var specifiers: [FormatSpecifier] {
        switch value {
        case .format(let t): return t.specifiers
        case .plural(let p):
            return PluralCategory.allCases.flatMap { p.forms[$0]?.specifiers ?? [] }
        case .substituted(let s): return s.specifiers
        case .invalid: return []
        }
    }

    /// The kind of each argument by position (`text` where no specifier reads
    /// it), or a message when one position is read as two different kinds.
    public func argumentKinds() -> Result<[ArgumentKind], FormatError> {
        var kinds = [ArgumentKind?](repeating: nil, count: argumentCount ?? 0)
        for s in specifiers {
            if let seen = kinds[s.index], seen != s.argumentKind {
                return .failure(FormatError("argument \(s.index + 1) is read as \(seen) and as \(s.argumentKind) (\(s.text))"))
            }
            kinds[s.index] = s.argumentKind
        }
        return .success(kinds.map { $0 ?? .text })
    }
}
