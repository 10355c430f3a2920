extension QueueSchema {
    /// The largest `(xid, id)`: "no upper bound" for the range of `herald_batch` (below).
    package static let lastPosition = "'18446744073709551615'::xid8, 9223372036854775807::bigint"

    /// Puts the cursor before every row there is (the tests and benchmarks that empty or replay the queue).
    package static let rewind = "UPDATE herald_cursor SET done = '1:1:', target = '1:1:', xid = '0', id = 0"

    /// Migration 9: claims bounded by two snapshots, as PgQ does, instead of by the oldest
    /// transaction still running. docs/scale-out.md ("The claim") gives the argument.
    static let snapshotClaims = Migration(
        version: 9,
        description: "claims by snapshot: rows are claimable as soon as they commit, whatever else is open",
        statements: [
            // Every row is seen, as in migration 5: inserting transactions are waited for, and
            // inserts wait until this commits (their transactions then land in the snapshot's
            // in-progress list or after it, and the first batch takes them).
            "LOCK TABLE notifications IN SHARE ROW EXCLUSIVE MODE",
            // The rows of one batch: those of transactions visible in `hi` and not in `lo` (the
            // transactions that committed between the two snapshots), after `(after_xid,
            // after_id)` and up to `(upto_xid, upto_id)` in (xid, id) order, at most `lim` (null:
            // all). Two index scans: transactions `lo` listed as running, one by one, then
            // everything from `lo`'s xmax on. Scanning from `lo`'s xmin instead would read again
            // every row claimed since the oldest transaction `lo` saw running began.
            """
            CREATE FUNCTION herald_batch(lo pg_snapshot, hi pg_snapshot, after_xid xid8, after_id bigint, upto_xid xid8, upto_id bigint, lim bigint)
            RETURNS TABLE (xid xid8, id bigint, body text) LANGUAGE sql STABLE AS $$
                SELECT b.xid, b.id, b.body FROM (
                    (SELECT n.xid, n.id, n.body
                     FROM pg_snapshot_xip(lo) AS x(xid)
                     CROSS JOIN LATERAL (
                         SELECT n.xid, n.id, n.body FROM notifications n
                         WHERE n.xid = x.xid AND (n.xid, n.id) > (after_xid, after_id) AND (n.xid, n.id) <= (upto_xid, upto_id)
                         ORDER BY n.xid, n.id LIMIT lim) n
                     WHERE pg_visible_in_snapshot(x.xid, hi)
                     ORDER BY n.xid, n.id LIMIT lim)
                    UNION ALL
                    (SELECT n.xid, n.id, n.body FROM notifications n
                     WHERE (n.xid, n.id) > (greatest(after_xid, pg_snapshot_xmax(lo)),
                                            CASE WHEN after_xid >= pg_snapshot_xmax(lo) THEN after_id ELSE 0 END)
                       AND (n.xid, n.id) <= (upto_xid, upto_id) AND n.xid < pg_snapshot_xmax(hi) AND pg_visible_in_snapshot(n.xid, hi)
                     ORDER BY n.xid, n.id LIMIT lim)
                ) b
                ORDER BY b.xid, b.id LIMIT lim
            $$
            """,
            // The cursor: every row of a transaction visible in `done` is claimed; of those visible
            // in `target` and not in `done` (the batch being claimed), those up to `(xid, id)`.
            "ALTER TABLE herald_cursor ADD COLUMN done pg_snapshot, ADD COLUMN target pg_snapshot",
            // Rows after the old cursor wait in leases no one holds, 500 to a lease (as migration 5
            // left queued rows): the first claims take them.
            """
            INSERT INTO herald_leases (ids, owner, expires, attempts)
            SELECT array_agg(id ORDER BY id), '', '-infinity', 0
            FROM (SELECT n.id, (row_number() OVER (ORDER BY n.xid, n.id) - 1) / 500 AS chunk
                  FROM notifications n, herald_cursor k WHERE (n.xid, n.id) > (k.xid, k.id)) q
            GROUP BY chunk
            """,
            // Every row there is now is claimed: the first batch begins after them.
            "UPDATE herald_cursor SET done = pg_current_snapshot(), target = pg_current_snapshot(), xid = '0', id = 0",
            "ALTER TABLE herald_cursor ALTER COLUMN done SET NOT NULL, ALTER COLUMN target SET NOT NULL",
            // Rows no claim has taken yet (committed ones: the statement's own snapshot is the upper bound).
            """
            CREATE FUNCTION herald_unclaimed(lim bigint) RETURNS TABLE (xid xid8, id bigint, body text) LANGUAGE sql STABLE AS $$
                SELECT b.xid, b.id, b.body FROM herald_cursor k, LATERAL (
                    (SELECT * FROM herald_batch(k.done, k.target, k.xid, k.id, \(lastPosition), lim))
                    UNION ALL
                    (SELECT * FROM herald_batch(k.target, pg_current_snapshot(), '0', 0, \(lastPosition), lim))
                ) b
                LIMIT lim
            $$
            """,
            // A claim's lease names its batch (`lo_snap`, `hi_snap`) and its place in it: the rows
            // of that batch after `(lo_xid, lo_id)` up to `(hi_xid, hi_id)`. Without the snapshots
            // (leases from before this version), the range alone.
            """
            ALTER TABLE herald_leases ADD COLUMN lo_snap pg_snapshot, ADD COLUMN hi_snap pg_snapshot,
                ADD CHECK ((lo_snap IS NULL) = (hi_snap IS NULL) AND (lo_snap IS NULL OR hi_xid IS NOT NULL))
            """,
            "DROP VIEW herald_rows",
            "DROP FUNCTION herald_lease_rows(bigint[], xid8, bigint, xid8, bigint)",
            """
            CREATE FUNCTION herald_lease_rows(ids bigint[], lo_xid xid8, lo_id bigint, hi_xid xid8, hi_id bigint, lo_snap pg_snapshot, hi_snap pg_snapshot)
            RETURNS SETOF bigint LANGUAGE sql STABLE AS $$
                SELECT unnest(ids)
                UNION ALL
                SELECT n.id FROM notifications n
                WHERE hi_xid IS NOT NULL AND lo_snap IS NULL AND (n.xid, n.id) > (lo_xid, lo_id) AND (n.xid, n.id) <= (hi_xid, hi_id)
                UNION ALL
                SELECT b.id FROM herald_batch(lo_snap, hi_snap, lo_xid, lo_id, hi_xid, hi_id, NULL) b WHERE lo_snap IS NOT NULL
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
                FROM herald_leases l
                CROSS JOIN LATERAL herald_lease_rows(l.ids, l.lo_xid, l.lo_id, l.hi_xid, l.hi_id, l.lo_snap, l.hi_snap) AS u(id)
                ORDER BY u.id, l.lease DESC
            ) l ON l.id = n.id AND o.id IS NULL
            """,
            // A claim's new rows: up to `lim` of the batch being claimed, in a lease of their own.
            // It looks before it locks: a claim that finds nothing neither queues behind a claim in
            // progress nor writes. When the batch is all claimed, the next one is every transaction
            // committed since: its snapshot is taken by a statement that begins after the cursor's
            // lock is held, so after the claim that stored the last one committed, and it sees
            // every transaction that one saw.
            """
            CREATE FUNCTION herald_claim_rows(claimer text, lease_secs float8, token bigint, lim bigint)
            RETURNS TABLE (lease bigint, attempts int, ids bigint[], bodies text[]) LANGUAGE plpgsql AS $$
            #variable_conflict use_column
            DECLARE
                k herald_cursor;
            BEGIN
                IF NOT EXISTS (SELECT 1 FROM herald_unclaimed(1)) THEN
                    RETURN;
                END IF;
                SELECT * INTO k FROM herald_cursor FOR UPDATE;
                IF NOT EXISTS (SELECT 1 FROM herald_batch(k.done, k.target, k.xid, k.id, \(lastPosition), 1)) THEN
                    UPDATE herald_cursor SET done = target, target = pg_current_snapshot(), xid = '0', id = 0 RETURNING * INTO k;
                END IF;
                RETURN QUERY
                WITH picked AS (
                    SELECT * FROM herald_batch(k.done, k.target, k.xid, k.id, \(lastPosition), lim)
                ), last AS (
                    SELECT p.xid, p.id FROM picked p ORDER BY p.xid DESC, p.id DESC LIMIT 1
                ), moved AS (
                    UPDATE herald_cursor SET xid = p.xid, id = p.id FROM last p RETURNING 1
                ), fresh AS (
                    INSERT INTO herald_leases (lo_xid, lo_id, hi_xid, hi_id, lo_snap, hi_snap, owner, expires, claim_token)
                    SELECT k.xid, k.id, p.xid, p.id, k.done, k.target, claimer, now() + make_interval(secs => lease_secs), token
                    FROM last p
                    RETURNING lease, attempts
                )
                -- Both arrays in one pass over the rows, so ids[k] is bodies[k]'s row; unsorted: the
                -- worker puts the rows in order.
                SELECT f.lease, f.attempts, a.ids, a.bodies
                FROM fresh f, (SELECT array_agg(p.id) AS ids, array_agg(p.body) AS bodies FROM picked p) a;
            END
            $$
            """,
        ])

    /// Migration 10: no `NOTIFY` from the inserting transaction.
    static let quietInserts = Migration(
        version: 10,
        description: "notifications: no NOTIFY trigger; Herald's own producers wake workers after they commit, others are found by polling",
        statements: [
            // A transaction with a pending NOTIFY takes a database-wide lock at commit (to keep the
            // notifications in commit order): every producer's one-row transaction queued on it.
            // Sixteen one-row producers ran at 0.30 of their rate without the trigger, 0.84-0.94
            // with one that notified only when no other transaction was notifying. Herald's own
            // producers send one NOTIFY after they commit, from a session of their own, coalesced
            // (PostgresQueue.wakeWorkers()); idle workers also look again every `poll`.
            "DROP TRIGGER notifications_enqueued ON notifications",
            "DROP FUNCTION herald_notify_enqueued()",
        ])

    /// Migration 11: a claim holds the cursor only to find its last row, move the cursor and insert
    /// its lease; its rows are read after it commits.
    static let shortClaims = Migration(
        version: 11,
        description: "claims: the cursor is held only to find the claim's last row and insert its lease; rows are read after it commits",
        statements: [
            // Claims serialize on the cursor's row, and `herald_claim_rows` held it while it read the
            // batch's rows with their bodies and built their arrays. Worse, `herald_batch` reads up
            // to `lim` rows of *each* transaction `lo` saw running before it sorts them and keeps
            // `lim`: with producers' transactions open at each batch's start (8 producers, 5,000
            // rows each), a 2,000-row claim read and sorted up to 16,000 rows while every other
            // claim waited (on 16 cores, 8 workers: 110k rows/s, against 537k for the same claim
            // on a queue filled beforehand). `herald_batch_end` finds where the next `lim` rows of
            // a batch end reading no more than them: `lo`'s running transactions in xid order (all
            // below `lo`'s xmax, so before the rest), each read only as far as the rows still
            // wanted, then the rest of the batch, in one index scan that stops there.
            // `herald_batch` read every row of each of `lo`'s running transactions that lies behind
            // the place it starts from, to find none (an index scan on `xid = x` and a row
            // comparison starts at the transaction's first row): transactions wholly behind it are
            // now skipped, and the one it is in is entered at its place.
            """
            CREATE OR REPLACE FUNCTION herald_batch(lo pg_snapshot, hi pg_snapshot, after_xid xid8, after_id bigint, upto_xid xid8, upto_id bigint, lim bigint)
            RETURNS TABLE (xid xid8, id bigint, body text) LANGUAGE sql STABLE AS $$
                SELECT b.xid, b.id, b.body FROM (
                    (SELECT n.xid, n.id, n.body
                     FROM pg_snapshot_xip(lo) AS x(xid)
                     CROSS JOIN LATERAL (
                         SELECT n.xid, n.id, n.body FROM notifications n
                         WHERE n.xid = x.xid AND n.id > CASE WHEN x.xid = after_xid THEN after_id ELSE '-9223372036854775808'::bigint END
                           AND (n.xid, n.id) <= (upto_xid, upto_id)
                         ORDER BY n.xid, n.id LIMIT lim) n
                     WHERE x.xid >= after_xid AND pg_visible_in_snapshot(x.xid, hi)
                     ORDER BY n.xid, n.id LIMIT lim)
                    UNION ALL
                    (SELECT n.xid, n.id, n.body FROM notifications n
                     WHERE (n.xid, n.id) > (greatest(after_xid, pg_snapshot_xmax(lo)),
                                            CASE WHEN after_xid >= pg_snapshot_xmax(lo) THEN after_id ELSE 0 END)
                       AND (n.xid, n.id) <= (upto_xid, upto_id) AND n.xid < pg_snapshot_xmax(hi) AND pg_visible_in_snapshot(n.xid, hi)
                     ORDER BY n.xid, n.id LIMIT lim)
                ) b
                ORDER BY b.xid, b.id LIMIT lim
            $$
            """,
            """
            CREATE FUNCTION herald_batch_end(lo pg_snapshot, hi pg_snapshot, after_xid xid8, after_id bigint, lim bigint)
            RETURNS TABLE (xid xid8, id bigint) LANGUAGE plpgsql STABLE AS $$
            DECLARE
                running xid8;
                wanted bigint := lim;
                got bigint;
                last_id bigint;
                end_xid xid8;
                end_id bigint;
            BEGIN
                FOR running IN
                    SELECT r.x FROM pg_snapshot_xip(lo) AS r(x)
                    WHERE r.x >= after_xid AND pg_visible_in_snapshot(r.x, hi) ORDER BY r.x
                LOOP
                    SELECT count(*), max(t.id) INTO got, last_id FROM (
                        SELECT n.id FROM notifications n
                        WHERE n.xid = running AND n.id > CASE WHEN running = after_xid THEN after_id ELSE '-9223372036854775808'::bigint END
                        ORDER BY n.xid, n.id LIMIT wanted) t;
                    IF got > 0 THEN
                        end_xid := running;
                        end_id := last_id;
                        wanted := wanted - got;
                        IF wanted = 0 THEN
                            RETURN QUERY SELECT end_xid, end_id;
                            RETURN;
                        END IF;
                    END IF;
                END LOOP;
                RETURN QUERY
                SELECT t.xid, t.id FROM (
                    SELECT n.xid, n.id FROM notifications n
                    WHERE (n.xid, n.id) > (greatest(after_xid, pg_snapshot_xmax(lo)),
                                           CASE WHEN after_xid >= pg_snapshot_xmax(lo) THEN after_id ELSE 0 END)
                      AND n.xid < pg_snapshot_xmax(hi) AND pg_visible_in_snapshot(n.xid, hi)
                    ORDER BY n.xid, n.id LIMIT wanted) t
                UNION ALL
                SELECT end_xid, end_id WHERE end_xid IS NOT NULL
                ORDER BY 1 DESC, 2 DESC LIMIT 1;
            END
            $$
            """,
            // The new rows of a claim: it looks before it locks (a claim that finds nothing neither
            // queues behind one in progress nor writes); locked, it finds where its rows end, or, the
            // batch all claimed, opens the next one (every transaction committed since: its
            // snapshot is taken by a statement that begins after the cursor's lock is held, so after
            // the claim that stored the last one committed, and it sees every transaction that one
            // saw); it moves the cursor there and inserts the lease (the batch's snapshots and the
            // range of places taken), and answers its id. The caller commits, then reads the rows
            // (PostgresQueue.claim), with no lock held.
            "DROP FUNCTION herald_claim_rows(text, float8, bigint, bigint)",
            """
            CREATE FUNCTION herald_claim_lease(claimer text, lease_secs float8, token bigint, lim bigint)
            RETURNS TABLE (lease bigint) LANGUAGE plpgsql AS $$
            #variable_conflict use_column
            DECLARE
                k herald_cursor;
                e record;
            BEGIN
                IF NOT EXISTS (SELECT 1 FROM herald_unclaimed(1)) THEN
                    RETURN;
                END IF;
                SELECT * INTO k FROM herald_cursor FOR UPDATE;
                SELECT * INTO e FROM herald_batch_end(k.done, k.target, k.xid, k.id, lim);
                IF NOT FOUND THEN
                    UPDATE herald_cursor SET done = target, target = pg_current_snapshot(), xid = '0', id = 0 RETURNING * INTO k;
                    SELECT * INTO e FROM herald_batch_end(k.done, k.target, k.xid, k.id, lim);
                    IF NOT FOUND THEN
                        RETURN;
                    END IF;
                END IF;
                UPDATE herald_cursor SET xid = e.xid, id = e.id;
                RETURN QUERY
                INSERT INTO herald_leases (lo_xid, lo_id, hi_xid, hi_id, lo_snap, hi_snap, owner, expires, claim_token)
                VALUES (k.xid, k.id, e.xid, e.id, k.done, k.target, claimer, now() + make_interval(secs => lease_secs), token)
                RETURNING lease;
            END
            $$
            """,
        ])
}
