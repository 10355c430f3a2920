extension QueueSchema {
    /// Migration 13: scheduled sends. docs/scale-out.md ("Scheduled sends (version 13)").
    static let scheduled = Migration(
        version: 13,
        description: "herald_scheduled: rows held until their send-at, cancellable until then; the outcome cancelled",
        statements: [
            // A row whose send-at is to come waits here, not in `notifications`: a claim's cursor
            // passes every committed row in order, and cannot leave one behind for later. Its id
            // is drawn from the notifications' sequence (what serve answers), and kept when a
            // worker moves it to `notifications` at its time. A cancelled one stays, marked, with
            // its outcome in herald_outcomes (lease 0: no lease has that number).
            """
            CREATE TABLE herald_scheduled (
                id bigint PRIMARY KEY DEFAULT nextval(pg_get_serial_sequence('notifications', 'id')),
                body text NOT NULL,
                lane herald_lane NOT NULL DEFAULT 'fast',
                send_at timestamptz NOT NULL,
                enqueued_at timestamptz NOT NULL DEFAULT now(),
                cancelled_at timestamptz
            )
            """,
            // The rows still to send, by time: what the workers' release reads.
            "CREATE INDEX herald_scheduled_due ON herald_scheduled (send_at) WHERE cancelled_at IS NULL",
            // The outcome `cancelled`: the check on outcome kinds (named by PostgreSQL when the
            // table was made) is replaced by one that names it.
            """
            DO $$
            DECLARE c text;
            BEGIN
                FOR c IN SELECT conname FROM pg_constraint
                         WHERE conrelid = 'herald_outcomes'::regclass AND contype = 'c' AND pg_get_constraintdef(oid) LIKE '%suppressed%'
                LOOP
                    EXECUTE format('ALTER TABLE herald_outcomes DROP CONSTRAINT %I', c);
                END LOOP;
            END
            $$
            """,
            """
            ALTER TABLE herald_outcomes ADD CONSTRAINT herald_outcomes_outcome
                CHECK (outcome IN ('accepted', 'rejected', 'dropped', 'suppressed', 'failed', 'cancelled'))
            """,
            "DROP VIEW herald_rows",
            // Scheduled rows too: `scheduled` until their time, then as any row (a cancelled one done).
            """
            CREATE VIEW herald_rows AS
            SELECT n.id, n.body, n.enqueued_at,
                   CASE WHEN o.id IS NOT NULL THEN 'done' WHEN n.held THEN 'scheduled' WHEN l.owner <> '' THEN 'leased' ELSE 'queued' END AS state,
                   coalesce(o.owner, nullif(l.owner, '')) AS lease_owner,
                   l.expires AS lease_expires,
                   coalesce(o.attempts, l.attempts, 0) AS attempts,
                   o.outcome, o.status, o.reason_code, o.reason, nullif(o.apns_id, '') AS apns_id,
                   coalesce(o.possible_duplicate, false) AS possible_duplicate, o.finished_at, n.lane, n.send_at
            FROM (
                SELECT id, body, enqueued_at, lane, NULL::timestamptz AS send_at, false AS held FROM notifications
                UNION ALL
                SELECT id, body, enqueued_at, lane, send_at, cancelled_at IS NULL FROM herald_scheduled
            ) n
            LEFT JOIN (
                SELECT u.id, u.apns_id, o.owner, o.attempts, o.outcome, o.status, o.reason_code, o.reason, o.possible_duplicate, o.finished_at
                FROM herald_outcomes o CROSS JOIN LATERAL unnest(o.ids, o.apns_ids) AS u(id, apns_id)
            ) o ON o.id = n.id
            LEFT JOIN (
                SELECT DISTINCT ON (u.id) u.id, l.owner, l.expires, l.attempts
                FROM herald_leases l
                CROSS JOIN LATERAL herald_lease_rows(l.ids, l.lo_xid, l.lo_id, l.hi_xid, l.hi_id, l.lo_snap, l.hi_snap, l.lane) AS u(id)
                ORDER BY u.id, l.lease DESC
            ) l ON l.id = n.id AND o.id IS NULL
            """,
        ])
}
