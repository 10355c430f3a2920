extension QueueSchema {
    /// Migration 12: a lane per row (`fast`, `bulk`) and a cursor per lane, so that a claim takes
    /// the fast lane's rows first. docs/scale-out.md ("Lanes") gives the rule.
    static let lanes = Migration(
        version: 12,
        description: "notifications: a lane per row and a cursor per lane; claims take the fast lane first",
        statements: [
            // Every row is seen, as in migrations 5 and 9: inserts wait until this commits.
            "LOCK TABLE notifications IN SHARE ROW EXCLUSIVE MODE",
            // An enum, not text: the index's first column is compared on every entry a claim reads,
            // and text compares by collation (C.UTF-8 is not C to PostgreSQL: strcoll per entry,
            // a claim about 0.7x as fast in `herald bench queue`); an enum compares as a number.
            "CREATE TYPE herald_lane AS ENUM ('fast', 'bulk')",
            // A row inserted without a lane (an application's own INSERT, a herald older than
            // this) is sent in the fast lane, as a request with no priority is.
            "ALTER TABLE notifications ADD COLUMN lane herald_lane NOT NULL DEFAULT 'fast'",
            // A lane's rows in (xid, id) order: the claim's scans begin with `lane = …`.
            "DROP INDEX notifications_order",
            "CREATE INDEX notifications_order ON notifications (lane, xid, id)",
            // Every row there is now is the fast lane's: the cursor there is its cursor, and the bulk
            // lane's begins after every transaction there is (none has inserted a bulk row).
            "ALTER TABLE herald_cursor ADD COLUMN lane herald_lane NOT NULL DEFAULT 'fast' UNIQUE",
            "INSERT INTO herald_cursor (done, target, xid, id, lane) VALUES (pg_current_snapshot(), pg_current_snapshot(), '0', 0, 'bulk')",
            "ALTER TABLE herald_cursor ALTER COLUMN lane DROP DEFAULT",
            // A lease's range is in its lane's order: leases there now are the fast lane's.
            "ALTER TABLE herald_leases ADD COLUMN lane herald_lane NOT NULL DEFAULT 'fast'",
            // herald_batch (migration 11) within one lane.
            """
            CREATE FUNCTION herald_batch(lo pg_snapshot, hi pg_snapshot, after_xid xid8, after_id bigint, upto_xid xid8, upto_id bigint, lim bigint, want_lane herald_lane)
            RETURNS TABLE (xid xid8, id bigint, body text) LANGUAGE sql STABLE AS $$
                SELECT b.xid, b.id, b.body FROM (
                    (SELECT n.xid, n.id, n.body
                     FROM pg_snapshot_xip(lo) AS x(xid)
                     CROSS JOIN LATERAL (
                         SELECT n.xid, n.id, n.body FROM notifications n
                         WHERE n.lane = want_lane AND n.xid = x.xid
                           AND n.id > CASE WHEN x.xid = after_xid THEN after_id ELSE '-9223372036854775808'::bigint END
                           AND (n.xid, n.id) <= (upto_xid, upto_id)
                         ORDER BY n.xid, n.id LIMIT lim) n
                     WHERE x.xid >= after_xid AND pg_visible_in_snapshot(x.xid, hi)
                     ORDER BY n.xid, n.id LIMIT lim)
                    UNION ALL
                    (SELECT n.xid, n.id, n.body FROM notifications n
                     WHERE n.lane = want_lane
                       AND (n.xid, n.id) > (greatest(after_xid, pg_snapshot_xmax(lo)),
                                            CASE WHEN after_xid >= pg_snapshot_xmax(lo) THEN after_id ELSE 0 END)
                       AND (n.xid, n.id) <= (upto_xid, upto_id) AND n.xid < pg_snapshot_xmax(hi) AND pg_visible_in_snapshot(n.xid, hi)
                     ORDER BY n.xid, n.id LIMIT lim)
                ) b
                ORDER BY b.xid, b.id LIMIT lim
            $$
            """,
            // herald_batch_end (migration 11) within one lane, answering also how many rows it passed.
            """
            CREATE FUNCTION herald_batch_end(lo pg_snapshot, hi pg_snapshot, after_xid xid8, after_id bigint, lim bigint, want_lane herald_lane)
            RETURNS TABLE (xid xid8, id bigint, passed bigint) LANGUAGE plpgsql STABLE AS $$
            DECLARE
                running xid8;
                wanted bigint := lim;
                got bigint;
                last_id bigint;
                end_xid xid8;
                end_id bigint;
                tail record;
            BEGIN
                IF lim <= 0 THEN
                    RETURN;
                END IF;
                FOR running IN
                    SELECT r.x FROM pg_snapshot_xip(lo) AS r(x)
                    WHERE r.x >= after_xid AND pg_visible_in_snapshot(r.x, hi) ORDER BY r.x
                LOOP
                    SELECT count(*), max(t.id) INTO got, last_id FROM (
                        SELECT n.id FROM notifications n
                        WHERE n.lane = want_lane AND n.xid = running
                          AND n.id > CASE WHEN running = after_xid THEN after_id ELSE '-9223372036854775808'::bigint END
                        ORDER BY n.xid, n.id LIMIT wanted) t;
                    IF got > 0 THEN
                        end_xid := running;
                        end_id := last_id;
                        wanted := wanted - got;
                        IF wanted = 0 THEN
                            RETURN QUERY SELECT end_xid, end_id, lim;
                            RETURN;
                        END IF;
                    END IF;
                END LOOP;
                -- The rest of the batch: the `wanted`-th row if there is one (an index scan that stops
                -- there, no sort: a window counting the rows made the claim a third slower), else all
                -- of it (counted, and its last row read backwards).
                SELECT t.xid, t.id INTO tail FROM notifications t
                WHERE t.lane = want_lane
                  AND (t.xid, t.id) > (greatest(after_xid, pg_snapshot_xmax(lo)),
                                       CASE WHEN after_xid >= pg_snapshot_xmax(lo) THEN after_id ELSE 0 END)
                  AND t.xid < pg_snapshot_xmax(hi) AND pg_visible_in_snapshot(t.xid, hi)
                ORDER BY t.xid, t.id OFFSET wanted - 1 LIMIT 1;
                IF FOUND THEN
                    RETURN QUERY SELECT tail.xid, tail.id, lim;
                    RETURN;
                END IF;
                SELECT count(*) INTO got FROM notifications t
                WHERE t.lane = want_lane
                  AND (t.xid, t.id) > (greatest(after_xid, pg_snapshot_xmax(lo)),
                                       CASE WHEN after_xid >= pg_snapshot_xmax(lo) THEN after_id ELSE 0 END)
                  AND t.xid < pg_snapshot_xmax(hi) AND pg_visible_in_snapshot(t.xid, hi);
                IF got > 0 THEN
                    SELECT t.xid, t.id INTO tail FROM notifications t
                    WHERE t.lane = want_lane
                      AND (t.xid, t.id) > (greatest(after_xid, pg_snapshot_xmax(lo)),
                                           CASE WHEN after_xid >= pg_snapshot_xmax(lo) THEN after_id ELSE 0 END)
                      AND t.xid < pg_snapshot_xmax(hi) AND pg_visible_in_snapshot(t.xid, hi)
                    ORDER BY t.xid DESC, t.id DESC LIMIT 1;
                    RETURN QUERY SELECT tail.xid, tail.id, lim - wanted + got;
                ELSIF end_xid IS NOT NULL THEN
                    RETURN QUERY SELECT end_xid, end_id, lim - wanted;
                END IF;
            END
            $$
            """,
            // Rows of one lane no claim has taken yet, and of every lane (the service's count).
            """
            CREATE FUNCTION herald_unclaimed(lim bigint, want_lane herald_lane) RETURNS TABLE (xid xid8, id bigint, body text) LANGUAGE sql STABLE AS $$
                SELECT b.xid, b.id, b.body FROM herald_cursor k, LATERAL (
                    (SELECT * FROM herald_batch(k.done, k.target, k.xid, k.id, \(lastPosition), lim, k.lane))
                    UNION ALL
                    (SELECT * FROM herald_batch(k.target, pg_current_snapshot(), '0', 0, \(lastPosition), lim, k.lane))
                ) b
                WHERE k.lane = want_lane
                LIMIT lim
            $$
            """,
            """
            CREATE OR REPLACE FUNCTION herald_unclaimed(lim bigint) RETURNS TABLE (xid xid8, id bigint, body text) LANGUAGE sql STABLE AS $$
                SELECT b.xid, b.id, b.body FROM herald_cursor k, LATERAL (
                    (SELECT * FROM herald_batch(k.done, k.target, k.xid, k.id, \(lastPosition), lim, k.lane))
                    UNION ALL
                    (SELECT * FROM herald_batch(k.target, pg_current_snapshot(), '0', 0, \(lastPosition), lim, k.lane))
                ) b
                LIMIT lim
            $$
            """,
            // herald_claim_lease (migration 11) in one lane's cursor, answering how many rows the
            // lease holds. No rows wanted, none taken: a search for none finds no end, which would
            // otherwise read as "the batch is all claimed".
            """
            CREATE FUNCTION herald_claim_lease(claimer text, lease_secs float8, token bigint, lim bigint, want_lane herald_lane)
            RETURNS TABLE (lease bigint, taken bigint) LANGUAGE plpgsql AS $$
            #variable_conflict use_column
            DECLARE
                k herald_cursor;
                e record;
            BEGIN
                IF lim <= 0 OR NOT EXISTS (SELECT 1 FROM herald_unclaimed(1, want_lane)) THEN
                    RETURN;
                END IF;
                SELECT * INTO k FROM herald_cursor c WHERE c.lane = want_lane FOR UPDATE;
                SELECT * INTO e FROM herald_batch_end(k.done, k.target, k.xid, k.id, lim, want_lane);
                IF NOT FOUND THEN
                    UPDATE herald_cursor c SET done = c.target, target = pg_current_snapshot(), xid = '0', id = 0
                    WHERE c.lane = want_lane RETURNING * INTO k;
                    SELECT * INTO e FROM herald_batch_end(k.done, k.target, k.xid, k.id, lim, want_lane);
                    IF NOT FOUND THEN
                        RETURN;
                    END IF;
                END IF;
                UPDATE herald_cursor c SET xid = e.xid, id = e.id WHERE c.lane = want_lane;
                RETURN QUERY
                INSERT INTO herald_leases (lo_xid, lo_id, hi_xid, hi_id, lo_snap, hi_snap, owner, expires, claim_token, lane)
                VALUES (k.xid, k.id, e.xid, e.id, k.done, k.target, claimer, now() + make_interval(secs => lease_secs), token, want_lane)
                RETURNING lease, e.passed;
            END
            $$
            """,
            "DROP FUNCTION herald_claim_lease(text, float8, bigint, bigint)",
            "DROP FUNCTION herald_batch_end(pg_snapshot, pg_snapshot, xid8, bigint, bigint)",
            // A lease's rows within its lane.
            """
            CREATE FUNCTION herald_lease_rows(ids bigint[], lo_xid xid8, lo_id bigint, hi_xid xid8, hi_id bigint, lo_snap pg_snapshot, hi_snap pg_snapshot, want_lane herald_lane)
            RETURNS SETOF bigint LANGUAGE sql STABLE AS $$
                SELECT unnest(ids)
                UNION ALL
                SELECT n.id FROM notifications n
                WHERE hi_xid IS NOT NULL AND lo_snap IS NULL AND n.lane = want_lane
                  AND (n.xid, n.id) > (lo_xid, lo_id) AND (n.xid, n.id) <= (hi_xid, hi_id)
                UNION ALL
                SELECT b.id FROM herald_batch(lo_snap, hi_snap, lo_xid, lo_id, hi_xid, hi_id, NULL, want_lane) b WHERE lo_snap IS NOT NULL
            $$
            """,
            "DROP VIEW herald_rows",
            "DROP FUNCTION herald_lease_rows(bigint[], xid8, bigint, xid8, bigint, pg_snapshot, pg_snapshot)",
            "DROP FUNCTION herald_batch(pg_snapshot, pg_snapshot, xid8, bigint, xid8, bigint, bigint)",
            """
            CREATE VIEW herald_rows AS
            SELECT n.id, n.body, n.enqueued_at,
                   CASE WHEN o.id IS NOT NULL THEN 'done' WHEN l.owner <> '' THEN 'leased' ELSE 'queued' END AS state,
                   coalesce(o.owner, nullif(l.owner, '')) AS lease_owner,
                   l.expires AS lease_expires,
                   coalesce(o.attempts, l.attempts, 0) AS attempts,
                   o.outcome, o.status, o.reason_code, o.reason, nullif(o.apns_id, '') AS apns_id,
                   coalesce(o.possible_duplicate, false) AS possible_duplicate, o.finished_at, n.lane
            FROM notifications n
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
