import Foundation
import GRDB
import GRDBSQLite
import HeraldCore
import Logging
import Synchronization

/// The persistent token store: one SQLite database (WAL mode) with a row per
/// token and topic, and in front of it a ``SuppressionIndex`` in memory, so
/// the suppression stage never waits on the disk.
///
/// **What survives a crash.** Every change is a committed transaction before
/// the call returns (WAL with `synchronous = NORMAL`: a killed process loses
/// nothing committed; a power cut may lose the last transactions). SQLite
/// recovers a write-ahead log left by a process that died on the next open.
///
/// **What is refused, never overwritten.** A file that is not an SQLite
/// database (an old JSON Lines journal: `herald tokens import` reads those), an
/// SQLite database that is not a Herald token store, one written by a newer
/// Herald (its schema version), a corrupt one, one another process keeps
/// locked past the busy timeout: each is a ``TokenStoreError`` naming the file.
///
/// **A write that fails** (a full disk…) is reported once on standard error,
/// kept in ``failure`` (so `herald send` ends with an error), and the change
/// holds in memory for this run.
///
/// **Memory.** Only tokens with an unregistration (for some topic) are held in
/// the index, with every topic of theirs, 24 bytes a slot; a registration of a
/// token with none only goes to the database.
public final class SQLiteTokenStore: TokenStore {
    /// The schema this Herald writes; a store with a newer one is refused.
    public static let schemaVersion = 1
    /// `PRAGMA application_id`: "HRLD".
    static let applicationID: Int32 = 0x4852_4C44

    public let path: String
    let logger: Logger
    /// One connection: look-ups never touch it (they are answered from the index), so nothing waits on another reader.
    let pool: DatabaseQueue
    let index: Mutex<SuppressionIndex>
    /// Serializes changes, so the index and the database see them in one order.
    let changes = Mutex(())
    let failureState = Mutex<TokenStoreError?>(nil)
    /// How the store came up: rows read into memory, and how long it took.
    public let startup: Startup

    public struct Startup: Sendable, Hashable {
        public var rowsLoaded: Int
        public var seconds: Double
        public var indexBytes: Int
    }

    /// Opens (or creates) the store at `path`; `logger` gets the first write
    /// failure (the store then keeps changes in memory for the run).
    public init(path: String, busyTimeout: Duration = .seconds(5), logger: Logger = Logger(label: "herald.tokens")) throws(TokenStoreError) {
        self.path = path
        self.logger = logger
        let started = ContinuousClock.now
        try Self.checkHeader(path)
        let existed = FileManager.default.fileExists(atPath: path)
        try Self.ownerOnly(path, exists: existed)
        var readOnly = Configuration()
        readOnly.busyMode = .timeout(TimeInterval(busyTimeout.components.seconds))
        readOnly.readonly = true
        var configuration = Configuration()
        configuration.busyMode = readOnly.busyMode
        // WAL set here rather than by GRDB's DatabasePool, which writes (and drops) a table on every
        // open to seed the log: a store is only written to by what Herald learns.
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA journal_mode = WAL")
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
            // 64 MiB of page cache (SQLite's default is 2): imports of millions of rows stay in memory.
            try db.execute(sql: "PRAGMA cache_size = -65536")
        }
        var loaded = 0
        var idx = SuppressionIndex()
        do {
            // Looked at, and its index loaded, read-only first: a database that is not ours, or
            // a corrupt one, is refused before anything (even switching it to WAL mode) could
            // change it. (The index is loaded once, as it always was: what another process
            // writes afterwards is not seen by this one.)
            if existed {
                let queue = try DatabaseQueue(path: path, configuration: readOnly)
                try queue.read { db in
                    try Self.check(db, path: path)
                    loaded = try Self.loadIndex(db, into: &idx, path: path)
                }
                try queue.close()
            }
            pool = try DatabaseQueue(path: path, configuration: configuration)
            try pool.write { db in try Self.migrate(db, path: path) }
        } catch let e as TokenStoreError {
            throw e
        } catch {
            throw TokenStoreError(path: path, error)
        }
        index = Mutex(idx)
        let elapsed = ContinuousClock.now - started
        startup = Startup(
            rowsLoaded: loaded, seconds: Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18,
            indexBytes: idx.memoryBytes)
    }

    // MARK: - TokenStore

    public func registered(_ token: DeviceToken, topic: String?, at time: UInt32, source: TokenEventSource) {
        apply([TokenEvent(token: token, topic: topic, kind: .registered, time: time, source: source)])
    }

    public func unregistered(_ token: DeviceToken, topic: String?, at time: UInt32, source: TokenEventSource) {
        apply([TokenEvent(token: token, topic: topic, kind: .unregistered, time: time, source: source)])
    }

    public func isSuppressed(_ token: DeviceToken, topic: String?) -> Bool {
        index.withLock { $0.isSuppressed(token, topic: topic) }
    }

    public var failure: (any Error)? { failureState.withLock { $0 } }

    /// Records `events` in one transaction, then in memory.
    public func apply(_ events: [TokenEvent]) {
        guard !events.isEmpty else { return }
        changes.withLock { _ in
            var loadedRows: [(DeviceToken, String?, UInt32?, UInt32?)] = []
            do {
                try pool.write { db in
                    for e in events { try Self.upsert(e, db) }
                    // A token new to the index comes in with every topic the database has for it.
                    let newlyDead = index.withLock { idx in
                        Set(events.filter { $0.kind == .unregistered && !idx.contains($0.token) }.map(\.token))
                    }
                    for token in newlyDead {
                        let rows = try Row.fetchAll(
                            db.cachedStatement(sql: "SELECT topic, registered_at, unregistered_at FROM tokens WHERE token = ?"),
                            arguments: [Self.blob(token)])
                        for r in rows {
                            let topic: String = r[0]
                            loadedRows.append((token, topic.isEmpty ? nil : topic, (r[1] as Int64?).map(UInt32.init(clamping:)), (r[2] as Int64?).map(UInt32.init(clamping:))))
                        }
                    }
                }
            } catch {
                let e = TokenStoreError(path: path, error, doing: "cannot record \(events.count) token event(s)")
                let first = failureState.withLock { f -> Bool in
                    defer { f = f ?? e }
                    return f == nil
                }
                if first { logger.error("\(e); changes are kept in memory for this run only") }
                // In memory, as given: this run still suppresses what it learned.
                index.withLock { idx in
                    for e in events {
                        idx.update(e.token, topic: e.topic, registered: e.kind == .registered ? e.time : nil, dead: e.kind == .unregistered ? e.time : nil)
                    }
                }
                return
            }
            index.withLock { idx in
                for (token, topic, registered, dead) in loadedRows { idx.update(token, topic: topic, registered: registered, dead: dead) }
                for e in events where idx.contains(e.token) {
                    idx.update(e.token, topic: e.topic, registered: e.kind == .registered ? e.time : nil, dead: e.kind == .unregistered ? e.time : nil)
                }
            }
        }
    }

    /// Removes what is stored for `token` (for `topic`, or every topic).
    @discardableResult
    public func forget(_ token: DeviceToken, topic: String?) throws(TokenStoreError) -> Int {
        try changes.withLock { _ throws(TokenStoreError) -> Int in
            let removed: Int
            do {
                removed = try pool.write { db in
                    if let topic {
                        try db.execute(sql: "DELETE FROM tokens WHERE token = ? AND topic = ?", arguments: [Self.blob(token), topic])
                    } else {
                        try db.execute(sql: "DELETE FROM tokens WHERE token = ?", arguments: [Self.blob(token)])
                    }
                    return db.changesCount
                }
            } catch {
                throw TokenStoreError(path: path, error, doing: "cannot forget a token")
            }
            index.withLock { $0.forget(token, topic: topic ?? nil) }
            return removed
        }
    }

    // MARK: - Reading

    /// Every row, streamed in token order (memory stays flat however large the
    /// store); filtered by topic and token when given.
    public func forEach(topic: String? = nil, token: DeviceToken? = nil, _ body: (TokenRecord) throws -> Void) throws {
        var sql = "SELECT token, topic, registered_at, registered_source, unregistered_at, unregistered_source FROM tokens"
        var conditions: [String] = []
        var arguments: StatementArguments = []
        if let token {
            conditions.append("token = ?")
            _ = arguments.append(contentsOf: [Self.blob(token)])
        }
        if let topic {
            conditions.append("topic = ?")
            _ = arguments.append(contentsOf: [topic])
        }
        if !conditions.isEmpty { sql += " WHERE " + conditions.joined(separator: " AND ") }
        sql += " ORDER BY token, topic"
        let path = self.path
        try pool.read { db in
            let statement = try db.makeStatement(sql: sql)
            try statement.setArguments(arguments)
            try Self.forEachRow(statement, path: path) { s in
                try body(TokenRecord(
                    token: Self.token(s, 0), topic: Self.topic(s, 1), registeredAt: Self.time(s, 2), registeredSource: Self.text(s, 3),
                    unregisteredAt: Self.time(s, 4), unregisteredSource: Self.text(s, 5)))
            }
        }
    }

    /// Counts: rows, tokens, suppressed pairs, by topic.
    public func statistics() throws(TokenStoreError) -> TokenStoreStatistics {
        do {
            return try pool.read { db in
                var s = TokenStoreStatistics()
                s.rows = try Int.fetchOne(db, sql: "SELECT count(*) FROM tokens") ?? 0
                s.suppressed = try Int.fetchOne(
                    db, sql: "SELECT count(*) FROM tokens WHERE unregistered_at IS NOT NULL AND coalesce(registered_at, 0) <= unregistered_at") ?? 0
                for row in try Row.fetchAll(db, sql: "SELECT topic, count(*) FROM tokens GROUP BY topic ORDER BY topic") {
                    s.byTopic.append((row[0], row[1]))
                }
                s.fileBytes = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
                return s
            }
        } catch {
            throw TokenStoreError(path: path, error)
        }
    }

    /// Bytes the in-memory index holds.
    public var indexBytes: Int { index.withLock { $0.memoryBytes } }

    // MARK: - SQL

    /// Reads every row of every token that has an unregistration somewhere
    /// (what decides suppression) into `idx`; returns the number of rows.
    static func loadIndex(_ db: Database, into idx: inout SuppressionIndex, path: String) throws -> Int {
        let sql = """
            SELECT token, topic, registered_at, unregistered_at FROM tokens
            WHERE token IN (SELECT token FROM tokens WHERE unregistered_at IS NOT NULL)
            """
        var loaded = 0
        try forEachRow(try db.makeStatement(sql: sql), path: path) { s in
            idx.update(token(s, 0), topic: topic(s, 1), registered: time(s, 2), dead: time(s, 3))
            loaded += 1
        }
        return loaded
    }

    /// Refuses a database that is not a Herald token store, or is one from a newer Herald.
    /// Returns whether it is empty (new).
    @discardableResult
    static func check(_ db: Database, path: String) throws -> Bool {
        let version = try Int.fetchOne(db, sql: "PRAGMA user_version") ?? 0
        let application = try Int32.fetchOne(db, sql: "PRAGMA application_id") ?? 0
        let tables = try Int.fetchOne(db, sql: "SELECT count(*) FROM sqlite_master") ?? 0
        if version == 0 && application == 0 && tables == 0 { return true }
        guard application == applicationID else {
            throw TokenStoreError(path: path, message: "an SQLite database, but not a Herald token store (application id \(application)); refusing to change it")
        }
        guard version <= schemaVersion else {
            throw TokenStoreError(
                path: path, message: "written by a newer Herald (schema \(version); this one knows up to \(schemaVersion)); refusing to change it")
        }
        return false
    }

    static func migrate(_ db: Database, path: String) throws {
        if try check(db, path: path) {
            try db.execute(sql: """
                CREATE TABLE tokens (
                    token BLOB NOT NULL,
                    topic TEXT NOT NULL,
                    registered_at INTEGER,
                    registered_source TEXT,
                    unregistered_at INTEGER,
                    unregistered_source TEXT,
                    PRIMARY KEY (token, topic)
                ) WITHOUT ROWID;
                CREATE INDEX tokens_unregistered ON tokens(token) WHERE unregistered_at IS NOT NULL;
                PRAGMA application_id = \(applicationID);
                PRAGMA user_version = \(schemaVersion);
                """)
        }
    }

    static func upsert(_ e: TokenEvent, _ db: Database) throws {
        let (at, source) = e.kind == .registered ? ("registered_at", "registered_source") : ("unregistered_at", "unregistered_source")
        let statement = try db.cachedStatement(
            sql: """
                INSERT INTO tokens (token, topic, \(at), \(source)) VALUES (?, ?, ?, ?)
                ON CONFLICT (token, topic) DO UPDATE SET \(at) = excluded.\(at), \(source) = excluded.\(source)
                WHERE \(at) IS NULL OR excluded.\(at) >= \(at)
                """)
        try statement.execute(arguments: [blob(e.token), e.topic ?? "", Int64(e.time), e.source.rawValue])
    }

    /// A file that exists and is not empty must start with SQLite's header.
    /// The store holds device tokens: its file, and the `-wal` and `-shm` files SQLite makes
    /// beside it with the same mode, are readable by their owner only (0600), as the recorder's
    /// logs and the outcomes file are. A new store is created so; an existing one that others
    /// could read is narrowed to 0600.
    static func ownerOnly(_ path: String, exists: Bool) throws(TokenStoreError) {
        if !exists {
            let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            if fd < 0 && errno != EEXIST {
                throw TokenStoreError(path: path, message: "cannot create it: \(String(cString: strerror(errno)))")
            }
            if fd >= 0 { close(fd) }
        }
        for file in [path, path + "-wal", path + "-shm"] {
            var info = stat()
            guard stat(file, &info) == 0, info.st_mode & 0o077 != 0 else { continue }
            if chmod(file, info.st_mode & 0o700) != 0 {
                throw TokenStoreError(path: file, message: "others can read it and it cannot be made owner-only: \(String(cString: strerror(errno)))")
            }
        }
    }

    static func checkHeader(_ path: String) throws(TokenStoreError) {
        guard let handle = FileHandle(forReadingAtPath: path) else { return }
        defer { try? handle.close() }
        let head = (try? handle.read(upToCount: 16)) ?? Data()
        guard !head.isEmpty, Array(head) != Array("SQLite format 3\0".utf8) else { return }
        let hint = head.first == UInt8(ascii: "{") ? " (a JSON Lines token journal? `herald tokens import` reads it into a store)" : ""
        throw TokenStoreError(path: path, message: "not an SQLite database\(hint); refusing to change it")
    }

    static func blob(_ token: DeviceToken) -> Data { Data(token.bytes) }

    /// Steps `statement`, handing each row to `body`; SQLite's errors become ``TokenStoreError``s.
    static func forEachRow(_ statement: Statement, path: String, _ body: (SQLiteStatement) throws -> Void) throws {
        let s = statement.sqliteStatement
        sqlite3_reset(s)
        while true {
            let rc = sqlite3_step(s)
            if rc == SQLITE_DONE { return }
            guard rc == SQLITE_ROW else {
                let db = sqlite3_db_handle(s)
                let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "error \(rc)"
                throw TokenStoreError(path: path, message: "reading: SQLite error \(rc): \(message)\(rc == SQLITE_CORRUPT || rc == SQLITE_NOTADB ? " (the file is corrupt)" : "")")
            }
            try body(s)
        }
    }

    static func token(_ s: SQLiteStatement, _ column: Int32) -> DeviceToken {
        let n = Int(sqlite3_column_bytes(s, column))
        guard n > 0, let p = sqlite3_column_blob(s, column) else { return DeviceToken(bytes: []) }
        return DeviceToken(copying: UnsafeRawBufferPointer(start: p, count: n))
    }

    static func topic(_ s: SQLiteStatement, _ column: Int32) -> String? {
        let t = text(s, column)
        return t?.isEmpty == false ? t : nil
    }

    static func text(_ s: SQLiteStatement, _ column: Int32) -> String? {
        guard sqlite3_column_type(s, column) != SQLITE_NULL, let p = sqlite3_column_text(s, column) else { return nil }
        return String(cString: p)
    }

    static func time(_ s: SQLiteStatement, _ column: Int32) -> UInt32? {
        sqlite3_column_type(s, column) == SQLITE_NULL ? nil : UInt32(clamping: sqlite3_column_int64(s, column))
    }
}
