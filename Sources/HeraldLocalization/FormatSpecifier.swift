/// Why a template cannot be compiled or rendered with the given arguments.
public struct FormatError: Error, Sendable, Hashable, CustomStringConvertible {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// One conversion specifier of a template, e.g. `%2$@` or `%.2f`.
public struct FormatSpecifier: Sendable, Hashable {
    /// What the argument is converted to.
    public enum Conversion: Sendable, Hashable {
        /// `%@` and `%s` (and `%S`): the argument as it is.
        case string
        /// `%d`, `%i`: a signed decimal integer.
        case signed
        /// `%u`, `%o`, `%x`, `%X`: an unsigned integer in base 10, 8 or 16.
        case unsigned(UInt8)
        /// `%f %F %e %E %g %G %a %A`: a floating-point number.
        case float
    }

    /// The argument's 0-based position in `loc-args`.
    public let index: Int
    public let conversion: Conversion
    /// The specifier as written in the template, for messages.
    public let text: String
    /// Left-justify (`-`).
    let leftAlign: Bool
    let width: Int?
    let precision: Int?
    /// The inclusive range an integer argument must fall in (from the length modifier).
    let integerRange: ClosedRange<Int64>
    let unsignedMax: UInt64
    /// `%d`/`%i` with no flags, width or precision: written directly, no C formatting.
    let plain: Bool
    /// The C format for numbers that need `printf` semantics (flags, width, precision, floats).
    let cFormat: [CChar]
    /// For `%f`/`%.Nf` with no flags or width, the precision (6 when none is
    /// written); -1 otherwise. Such a specifier writes a short plain decimal
    /// argument by its digits (``FixedDecimal``), with no `strtod`/`snprintf`.
    let fixedPrecision: Int8
}
