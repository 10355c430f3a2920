import GRDB
import HeraldCore

/// One registration or unregistration.
public struct TokenEvent: Sendable, Hashable {
    public enum Kind: Sendable, Hashable { case registered, unregistered }
    public var token: DeviceToken
    public var topic: String?
    public var kind: Kind
    public var time: UInt32
    public var source: TokenEventSource

    public init(token: DeviceToken, topic: String?, kind: Kind, time: UInt32, source: TokenEventSource) {
        self.token = token
        self.topic = topic
        self.kind = kind
        self.time = time
        self.source = source
    }
}

/// One row of the store.
public struct TokenRecord: Sendable, Hashable {
    public var token: DeviceToken
    /// `nil`: every topic.
    public var topic: String?
    public var registeredAt: UInt32?
    public var registeredSource: String?
    public var unregisteredAt: UInt32?
    public var unregisteredSource: String?

    /// Whether requests to this token for this topic are suppressed (on this row alone).
    public var isSuppressed: Bool { unregisteredAt.map { (registeredAt ?? 0) <= $0 } ?? false }
}

/// What `herald tokens stats` shows.
public struct TokenStoreStatistics: Sendable {
    public var rows = 0
    public var suppressed = 0
    public var byTopic: [(topic: String, rows: Int)] = []
    public var fileBytes = 0
}

/// The token store cannot be opened, read or written.
public struct TokenStoreError: Error, Sendable, Hashable, CustomStringConvertible {
    public let path: String
    public let message: String

    public init(path: String, message: String) {
        self.path = path
        self.message = message
    }

    init(path: String, _ error: any Error, doing what: String? = nil) {
        self.path = path
        let prefix = what.map { $0 + ": " } ?? ""
        if let e = error as? TokenStoreError {
            message = prefix + e.message
        } else if let e = error as? DatabaseError {
            var m = "SQLite error \(e.resultCode.rawValue): \(e.message ?? "\(e.resultCode)")"
            switch e.resultCode {
            case .SQLITE_CORRUPT, .SQLITE_NOTADB: m += " (the file is corrupt)"
            case .SQLITE_BUSY, .SQLITE_LOCKED: m += " (another process holds the store)"
            case .SQLITE_FULL: m += " (the disk is full)"
            case .SQLITE_READONLY: m += " (read-only)"
            default: break
            }
            message = prefix + m
        } else {
            message = prefix + "\(error)"
        }
    }

    public var description: String { "token store \(path): \(message)" }
}
