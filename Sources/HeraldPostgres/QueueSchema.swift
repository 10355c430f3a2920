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

    /// The channel `NOTIFY` wakes idle workers on (sent by Herald's producers after they commit, and
    /// by any application that wants its rows claimed before the next `poll`).
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
        Migration(
            version: 5,
            description: "rows never updated: a cursor in (xid, id) order, one lease row per claim, outcomes appended to herald_outcomes",
            statements: [
                // First, so that every row is seen: a transaction that inserted before the migration
                // is waited for (its rows are then read below), and one that inserts during it waits
                // until it commits (its rows then get its own xid, after the cursor set below). Added
                // after release (a statement that changes no schema): without it, a row inserted by
                // a transaction still open when this migration began, and committed before the
                // ALTER below, fell behind the cursor unleased.
                "LOCK TABLE notifications IN SHARE ROW EXCLUSIVE MODE",
                """
                CREATE TABLE herald_outcomes (
                    id bigint PRIMARY KEY,
                    outcome text NOT NULL CHECK (outcome IN ('accepted', 'rejected', 'dropped', 'suppressed', 'failed')),
                    status int,
                    reason_code text,
                    reason text,
                    apns_id text,
                    possible_duplicate bool NOT NULL DEFAULT false,
                    attempts int NOT NULL,
                    owner text NOT NULL,
                    finished_at timestamptz NOT NULL DEFAULT now()
                )
                """,
                """
                CREATE TABLE herald_leases (
                    lease bigserial PRIMARY KEY,
                    ids bigint[] NOT NULL,
                    owner text NOT NULL,
                    expires timestamptz NOT NULL,
                    attempts int NOT NULL DEFAULT 1,
                    claim_token bigint,
                    -- Makes the owner part of a key: taking a lease over (changing its owner) then waits for an
                    -- outcome write under way (FOR KEY SHARE), while renewing it (changing only expires) does not.
                    UNIQUE (lease, owner)
                )
                """,
                "CREATE INDEX herald_leases_expires ON herald_leases (expires)",
                "CREATE TABLE herald_cursor (xid xid8 NOT NULL, id bigint NOT NULL)",
                // Finished rows keep their outcomes.
                """
                INSERT INTO herald_outcomes (id, outcome, status, reason_code, reason, apns_id, possible_duplicate, attempts, owner, finished_at)
                SELECT id, outcome, status, reason_code, reason, apns_id, possible_duplicate, attempts, coalesce(lease_owner, ''),
                       coalesce(finished_at, now())
                FROM notifications WHERE state = 'done'
                """,
                // Leased rows (their workers stopped for the migration) are taken back at once, as after a
                // crash: a second attempt, marked possible_duplicate.
                """
                INSERT INTO herald_leases (ids, owner, expires, attempts)
                SELECT ARRAY[id], coalesce(lease_owner, ''), '-infinity', attempts FROM notifications WHERE state = 'leased'
                """,
                // Queued rows wait in leases no one holds, 500 to a lease: the first claims take them.
                """
                INSERT INTO herald_leases (ids, owner, expires, attempts)
                SELECT array_agg(id ORDER BY id), '', '-infinity', 0
                FROM (SELECT id, (row_number() OVER (ORDER BY id) - 1) / 500 AS chunk FROM notifications WHERE state = 'queued') q
                GROUP BY chunk
                """,
                """
                ALTER TABLE notifications
                    DROP COLUMN state CASCADE, DROP COLUMN lease_owner, DROP COLUMN lease_expires, DROP COLUMN attempts,
                    DROP COLUMN outcome CASCADE, DROP COLUMN status, DROP COLUMN reason_code, DROP COLUMN reason, DROP COLUMN apns_id,
                    DROP COLUMN possible_duplicate, DROP COLUMN finished_at, DROP COLUMN claim_token
                """,
                // The inserting transaction's id: a claim takes only rows of transactions older than any
                // still running, in (xid, id) order, so no row can appear behind the cursor later. Rows
                // there now get 1, below every real transaction's, so that a transaction that took its
                // id before this one and inserts once it commits still lands after the cursor.
                "ALTER TABLE notifications ADD COLUMN xid xid8 NOT NULL DEFAULT '1'",
                "ALTER TABLE notifications ALTER COLUMN xid SET DEFAULT pg_current_xact_id()",
                "CREATE INDEX notifications_order ON notifications (xid, id)",
                // Every row there is now is in a lease or finished: the cursor starts after the last.
                "INSERT INTO herald_cursor (xid, id) SELECT '1', coalesce(max(id), 0) FROM notifications",
                // Each row as it stands, for people and tests: queued, leased (an unheld lease is queued) or done.
                """
                CREATE VIEW herald_rows AS
                SELECT n.id, n.body, n.enqueued_at,
                       CASE WHEN o.id IS NOT NULL THEN 'done' WHEN l.owner <> '' THEN 'leased' ELSE 'queued' END AS state,
                       coalesce(o.owner, nullif(l.owner, '')) AS lease_owner,
                       l.expires AS lease_expires,
                       coalesce(o.attempts, l.attempts, 0) AS attempts,
                       o.outcome, o.status, o.reason_code, o.reason, o.apns_id,
                       coalesce(o.possible_duplicate, false) AS possible_duplicate, o.finished_at
                FROM notifications n
                LEFT JOIN herald_outcomes o ON o.id = n.id
                LEFT JOIN (
                    SELECT DISTINCT ON (u.id) u.id, l.owner, l.expires, l.attempts
                    FROM herald_leases l CROSS JOIN unnest(l.ids) AS u(id)
                    ORDER BY u.id, l.lease DESC
                ) l ON l.id = n.id AND o.id IS NULL
                """,
            ]),
        Migration(
            version: 6,
            description: "herald_outcomes: one row per group of a write's rows with the same outcome under one lease; leases as ranges",
            statements: [
                // The view reads the old table: rebuilt below on the new one.
                "DROP VIEW herald_rows",
                "ALTER TABLE herald_outcomes RENAME TO herald_outcomes_v5",
                "ALTER INDEX herald_outcomes_pkey RENAME TO herald_outcomes_v5_pkey",
                // A write appends one row per lease and outcome among its rows (nearly always one: a
                // thousand rows accepted under one lease), not one per notification. The key makes a
                // write whose answer was lost, sent again, change nothing (its groups are there already).
                """
                CREATE TABLE herald_outcomes (
                    lease bigint NOT NULL,
                    first_id bigint NOT NULL,
                    ids bigint[] NOT NULL,
                    outcome text NOT NULL CHECK (outcome IN ('accepted', 'rejected', 'dropped', 'suppressed', 'failed')),
                    status int,
                    reason_code text,
                    reason text,
                    apns_ids text[],
                    possible_duplicate bool NOT NULL DEFAULT false,
                    attempts int NOT NULL,
                    owner text NOT NULL,
                    finished_at timestamptz NOT NULL DEFAULT now(),
                    PRIMARY KEY (lease, first_id),
                    CHECK (cardinality(ids) > 0 AND first_id = ids[1]),
                    CHECK (apns_ids IS NULL OR cardinality(apns_ids) = cardinality(ids))
                )
                """,
                // One row's outcome, found from its id (herald serve's GET): the group whose span holds it.
                "CREATE INDEX herald_outcomes_span ON herald_outcomes USING gist (\(outcomeSpan))",
                // Each outcome becomes a group of one, under the lease that holds its row if one does
                // (so a claim taking that lease over skips it), else under 0 (no lease has that number).
                """
                INSERT INTO herald_outcomes (lease, first_id, ids, outcome, status, reason_code, reason, apns_ids, possible_duplicate, attempts, owner, finished_at)
                SELECT DISTINCT ON (o.id) coalesce(l.lease, 0), o.id, ARRAY[o.id], o.outcome, o.status, o.reason_code, o.reason,
                       CASE WHEN o.apns_id IS NOT NULL THEN ARRAY[o.apns_id] END, o.possible_duplicate, o.attempts, o.owner, o.finished_at
                FROM herald_outcomes_v5 o
                LEFT JOIN (SELECT l.lease, u.id FROM herald_leases l CROSS JOIN unnest(l.ids) AS u(id)) l ON l.id = o.id
                ORDER BY o.id, l.lease DESC
                """,
                "DROP TABLE herald_outcomes_v5",
                // A claim's lease names its rows as a range in (xid, id) order, after the cursor as it
                // was up to where the claim left it: a fresh claim's rows are exactly that range (every
                // transaction in it had ended), and four numbers are cheaper to write and delete than
                // a thousand ids. Leases of rows given back (and from version 5) keep their ids.
                """
                ALTER TABLE herald_leases
                    ALTER COLUMN ids DROP NOT NULL,
                    ADD COLUMN lo_xid xid8, ADD COLUMN lo_id bigint, ADD COLUMN hi_xid xid8, ADD COLUMN hi_id bigint,
                    ADD CHECK ((ids IS NULL) = (hi_xid IS NOT NULL)),
                    ADD CHECK ((lo_xid IS NULL) = (hi_xid IS NULL) AND (lo_id IS NULL) = (hi_xid IS NULL) AND (hi_id IS NULL) = (hi_xid IS NULL))
                """,
                // A lease's rows, whichever way it names them.
                """
                CREATE FUNCTION herald_lease_rows(ids bigint[], lo_xid xid8, lo_id bigint, hi_xid xid8, hi_id bigint)
                RETURNS SETOF bigint LANGUAGE sql STABLE AS $$
                    SELECT unnest(ids)
                    UNION ALL
                    SELECT n.id FROM notifications n
                    WHERE hi_xid IS NOT NULL AND (n.xid, n.id) > (lo_xid, lo_id) AND (n.xid, n.id) <= (hi_xid, hi_id)
                $$
                """,
                """
                CREATE VIEW herald_rows AS
                SELECT n.id, n.body, n.enqueued_at,
                       CASE WHEN o.id IS NOT NULL THEN 'done' WHEN l.owner <> '' THEN 'leased' ELSE 'queued' END AS state,
                       coalesce(o.owner, nullif(l.owner, '')) AS lease_owner,
                       l.expires AS lease_expires,
                       coalesce(o.attempts, l.attempts, 0) AS attempts,
                       o.outcome, o.status, o.reason_code, o.reason, nullif(o.apns_id, '') AS apns_id,
                       coalesce(o.possible_duplicate, false) AS possible_duplicate, o.finished_at
                FROM notifications n
                LEFT JOIN (
                    SELECT u.id, u.apns_id, o.owner, o.attempts, o.outcome, o.status, o.reason_code, o.reason, o.possible_duplicate, o.finished_at
                    FROM herald_outcomes o CROSS JOIN LATERAL unnest(o.ids, o.apns_ids) AS u(id, apns_id)
                ) o ON o.id = n.id
                LEFT JOIN (
                    SELECT DISTINCT ON (u.id) u.id, l.owner, l.expires, l.attempts
                    FROM herald_leases l CROSS JOIN LATERAL herald_lease_rows(l.ids, l.lo_xid, l.lo_id, l.hi_xid, l.hi_id) AS u(id)
                    ORDER BY u.id, l.lease DESC
                ) l ON l.id = n.id AND o.id IS NULL
                """,
            ]),
        Migration(
            version: 7,
            description: "herald_outcomes: the arrays of ids stored uncompressed",
            statements: [
                // A group's ids (8 KB for a thousand) went through pglz on every write: 7% of the
                // database's CPU in a one-worker bench, to save a few bytes a row. Now stored as
                // they are: in the row up to a full page, out of line beyond. Existing rows stay
                // as they were; no table is rewritten.
                """
                ALTER TABLE herald_outcomes ALTER COLUMN ids SET STORAGE EXTERNAL, ALTER COLUMN apns_ids SET STORAGE EXTERNAL,
                    SET (toast_tuple_target = 8160)
                """,
            ]),
        Migration(
            version: 8,
            description: "herald_idempotency: POST /v1/notifications's Idempotency-Key, the rows a key made",
            statements: [
                // One row per key: the SHA-256 of the body it came with (hex) and the rows it made,
                // written in the transaction that inserts the rows, so a key and its rows commit
                // together. Keys older than the service's window are reused and deleted.
                """
                CREATE TABLE herald_idempotency (
                    key text PRIMARY KEY,
                    fingerprint text NOT NULL,
                    ids bigint[] NOT NULL,
                    created_at timestamptz NOT NULL DEFAULT now())
                """,
                "CREATE INDEX herald_idempotency_created ON herald_idempotency (created_at)",
            ]),
        snapshotClaims,
        quietInserts,
        shortClaims,
        lanes,
        scheduled,
        plans,
        transactionRows,
        noTableScans,
        fastLook,
        cachedCheck,
    ]

    /// The span of ids an outcome group covers (its ids are in ascending order), as its index has it.
    package static let outcomeSpan = "int8range(first_id, ids[cardinality(ids)], '[]')"

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
