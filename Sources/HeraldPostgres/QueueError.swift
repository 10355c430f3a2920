import PostgresNIO

/// A queue failure, naming the database and what was being done.
public struct QueueError: Error, Sendable, CustomStringConvertible {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }

    /// `error` (usually a `PSQLError`) as a sentence: PostgreSQL's own message,
    /// SQLSTATE, detail and hint, or the connection failure. postgres-nio's
    /// `description` hides all of these; its `debugDescription` would show the
    /// query's bound values (device tokens), so neither is used.
    static func explain(_ error: any Error) -> String {
        if let e = error as? QueueError { return e.message }
        guard let e = error as? PSQLError else { return "\(error)" }
        if let info = e.serverInfo {
            var text = info[.message] ?? "server error"
            if let state = info[.sqlState] { text += " (SQLSTATE \(state))" }
            // Integrity violations' DETAIL quotes the row (a request, its device token): left out.
            if let detail = info[.detail], !(info[.sqlState] ?? "").hasPrefix("23") { text += "; \(detail)" }
            if let hint = info[.hint] { text += "; hint: \(hint)" }
            return text
        }
        switch e.code {
        case .connectionError: return "cannot connect" + (e.underlying.map { ": \($0)" } ?? "")
        case .serverClosedConnection: return "the server closed the connection" + (e.underlying.map { ": \($0)" } ?? "")
        case .poolClosed: return "the connection pool is closed"
        default: return "\(e.code)" + (e.underlying.map { ": \($0)" } ?? "")
        }
    }
}
