import HeraldCore
import PostgresNIO

/// A queue failure, naming the database and what was being done.
public struct QueueError: Error, Sendable, CustomStringConvertible {
    public let message: String
    /// Whether the database was away (no connection, the connection lost, the server shutting
    /// down or not yet accepting sessions) rather than answering the statement with an error.
    public let isOutage: Bool
    public init(_ message: String, isOutage: Bool = false) {
        self.message = message
        self.isOutage = isOutage
    }
    public var description: String { message }

    /// Whether `error` means the database was away rather than refusing the statement:
    /// a connection-level failure, or SQLSTATE class 08 (connection exception), 57P
    /// (shutdown, crash, cannot connect now) or 53 (insufficient resources).
    static func isOutage(_ error: any Error) -> Bool {
        if let e = error as? QueueError { return e.isOutage }
        guard let e = error as? PSQLError else { return false }
        guard let state = e.serverInfo?[.sqlState] else { return e.serverInfo == nil }
        return state.hasPrefix("08") || state.hasPrefix("57P") || state.hasPrefix("53")
    }

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

extension BackoffPolicy {
    /// Between attempts while the queue's database is away (claims, the token store's writes):
    /// 50 ms, doubling, at most 5 s.
    static let queueDatabase = BackoffPolicy(initial: .milliseconds(50), maximum: .seconds(5))
    /// Between attempts at writing a batch of outcomes back: at most 2 s, so that outcomes are
    /// written soon after the database is back (their rows' leases are running).
    static let queueOutcomes = BackoffPolicy(initial: .milliseconds(50), maximum: .seconds(2))
}
