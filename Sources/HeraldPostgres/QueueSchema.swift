import Logging
import PostgresNIO

/// The queue's schema, as numbered migrations.
///
/// `herald_schema` holds one row per applied migration (`version`,
/// `applied_at`, `description`); the database's version is the largest. Each
/// migration runs in a transaction of its own, under a transaction-level
/// advisory lock, so workers starting together apply it once. A database whose
/// version is newer than the code refuses to start: an older worker would not
/// know what the newer columns mean.
///
/// Migrations are only ever added, never edited: a database at version N has
/// exactly migrations 1…N applied.
public enum QueueSchema {
    /// One migration: statements run in order in one transaction.
    public struct Migration: Sendable {
        public let version: Int
        public let description: String
        public let statements: [String]
    }

    /// The channel `NOTIFY` wakes idle workers on.
    public static let channel = "herald_notifications"

    /// Every migration, in order.
    public static let migrations: [Migration] = [
        Migration(
            version: 1, description: "notifications: the outbox, leases and outcomes",
            statements: [
                """
                CREATE TABLE notifications (
                    id bigserial PRIMARY KEY,
                    body text NOT NULL,
                    enqueued_at timestamptz NOT NULL DEFAULT now(),
                    state text NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'leased', 'done')),
                    lease_owner text,
                    lease_expires timestamptz,
                    attempts int NOT NULL DEFAULT 0,
                    outcome text CHECK (outcome IN ('accepted', 'rejected', 'dropped', 'suppressed', 'failed')),
                    status int,
                    reason_code text,
                    reason text,
                    apns_id text,
                    possible_duplicate bool NOT NULL DEFAULT false,
                    finished_at timestamptz,
                    CHECK ((state = 'done') = (outcome IS NOT NULL))
                )
                """,
                // Claiming reads the oldest queued rows: an index of those alone stays small however long the table grows.
                "CREATE INDEX notifications_queued ON notifications (id) WHERE state = 'queued'",
                // Expired leases and lease renewal read the leased rows alone.
                "CREATE INDEX notifications_leased ON notifications (lease_expires) WHERE state = 'leased'",
                """
                CREATE FUNCTION herald_notify_enqueued() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN
                    PERFORM pg_notify('\(channel)', '');
                    RETURN NULL;
                END
                $$
                """,
                // One NOTIFY per INSERT statement (not per row); PostgreSQL folds repeats within a transaction.
                """
                CREATE TRIGGER notifications_enqueued AFTER INSERT ON notifications
                FOR EACH STATEMENT EXECUTE FUNCTION herald_notify_enqueued()
                """,
            ]),
        Migration(
            version: 2, description: "herald_tokens: the token store shared by every worker",
            statements: [
                """
                CREATE TABLE herald_tokens (
                    token bytea NOT NULL,
                    topic text NOT NULL,
                    registered_at bigint,
                    registered_source text,
                    unregistered_at bigint,
                    unregistered_source text,
                    updated_at timestamptz NOT NULL DEFAULT clock_timestamp(),
                    PRIMARY KEY (token, topic)
                )
                """,
                // Loading the index reads the tokens with an unregistration; refreshing reads recent changes.
                "CREATE INDEX herald_tokens_unregistered ON herald_tokens (token) WHERE unregistered_at IS NOT NULL",
                "CREATE INDEX herald_tokens_updated ON herald_tokens (updated_at)",
            ]),
        Migration(
            version: 3, description: "notifications: finished rows by age, for herald prune",
            statements: ["CREATE INDEX notifications_finished ON notifications (finished_at) WHERE state = 'done'"]),
        Migration(
            version: 4, description: "notifications: the claim that leased a row, so a claim whose answer was lost is found again",
            statements: ["ALTER TABLE notifications ADD COLUMN claim_token bigint"]),
    ]

    /// The newest version this code knows.
    public static var latestVersion: Int { migrations.last?.version ?? 0 }

    /// What ``migrate(_:logger:)`` did.
    public struct Result: Sendable, Hashable {
        /// The version found, and the version left.
        public var from: Int
        public var to: Int
        public init(from: Int, to: Int) {
            self.from = from
            self.to = to
        }
    }

    /// Brings the database to ``latestVersion``; refuses one that is newer.
    static func migrate(_ connection: PostgresConnection, where place: String, logger: Logger) async throws -> Result {
        var from: Int?
        var to = 0
        for migration in migrations {
            let (current, applied) = try await connection.withTransaction(logger: logger) { connection in
                // Serialises workers starting together; released at COMMIT.
                _ = try await connection.query("SELECT pg_advisory_xact_lock(\(lockKey))", logger: logger).collect()
                _ = try await connection.query(
                    """
                    CREATE TABLE IF NOT EXISTS herald_schema (
                        version int PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now(), description text NOT NULL)
                    """, logger: logger
                ).collect()
                var current = 0
                for try await v in try await connection.query("SELECT coalesce(max(version), 0) FROM herald_schema", logger: logger).decode(Int.self) {
                    current = v
                }
                if current > latestVersion {
                    throw QueueError(
                        "\(place): the queue's schema is at version \(current), newer than this herald knows (\(latestVersion)); "
                            + "run a herald at least as new as the one that migrated it")
                }
                guard current < migration.version else { return (current, false) }
                for statement in migration.statements {
                    _ = try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger).collect()
                }
                _ = try await connection.query(
                    "INSERT INTO herald_schema (version, description) VALUES (\(migration.version), \(migration.description))", logger: logger
                ).collect()
                return (current, true)
            }
            if from == nil { from = current }
            to = applied ? migration.version : current
        }
        return Result(from: from ?? 0, to: to)
    }

    /// The advisory lock key migrations take (an arbitrary constant: "herald" in ASCII).
    static let lockKey = 0x6865_7261_6C64
}
