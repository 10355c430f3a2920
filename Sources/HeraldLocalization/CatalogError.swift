/// A catalog that cannot be read: names the file and, when the problem is in
/// its text, the line and column (1-based; columns count Unicode scalars).
///
/// `description` has the compiler-like form `path:line:column: message`.
public struct CatalogError: Error, Sendable, Hashable, CustomStringConvertible {
    public let file: String
    /// 1-based line, or 0 when the error is about the file as a whole.
    public let line: Int
    /// 1-based column, or 0 when the error is about the file as a whole.
    public let column: Int
    public let message: String

    public init(file: String, line: Int = 0, column: Int = 0, message: String) {
        self.file = file
        self.line = line
        self.column = column
        self.message = message
    }

    public var description: String {
        line > 0 ? "\(file):\(line):\(column): \(message)" : "\(file): \(message)"
    }
}
