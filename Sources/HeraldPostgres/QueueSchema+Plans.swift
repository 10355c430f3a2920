extension QueueSchema {
    /// Migration 14: the claim's functions planned the same whatever the statistics say.
    /// docs/scale-out.md ("Plans that do not follow the statistics").
    ///
    /// Each of these finds rows past a position in the index's order (`lane, xid, id`), a few
    /// thousand at most. Planned with statistics made before a large `COPY` (autovacuum analyzes a
    /// minute or more later), the planner expected one row where a million were, and read them all
    /// through a bitmap and sorted them: 0.8 s for the claim's "is anything left" check, as long
    /// again for the batch's end, on every claim (a 1,000,000-row `herald work --drain` ran 1,530
    /// rows a second until the table was analyzed). Without bitmap scans the index's order is the
    /// only cheap way to a `LIMIT`. No JIT either: the same misestimates crossed `jit_above_cost`
    /// and compiled each statement's expressions, 300-600 ms against a few milliseconds' work. (The
    /// worker's sessions start with both settings too; these carry them where a pooler's sessions
    /// cannot, `pooling` "transaction".)
    static let plans = Migration(
        version: 14,
        description: "the claim's functions: no bitmap scans, no JIT, whatever the statistics",
        statements: [
            // herald_batch (migration 12) with upper bounds a B-tree ends its scan at. PostgreSQL
            // 15 ends a scan at a row comparison's upper bound ((xid, id) <= (…, …)) only by its
            // first column: within one transaction's rows it read on to that transaction's last.
            // Reading a lease's 2,000 rows of a campaign committed at once walked every entry of
            // the campaign after them (4,500 index pages, 60-130 ms a claim with 900,000 behind:
            // a drain quadratic in its backlog). Split where the range starts and ends, each part
            // is bounded by a column of its own: the first transaction's ids after the start, the
            // transactions between, the last one's ids up to the end. Transactions running when
            // the batch opened keep their bounds as before (each is read to its own last row at
            // most; bounded on both sides by `id` alone, the primary key looked the cheaper path
            // to them, and read every row). The same rows in the same order.
            """
            CREATE OR REPLACE FUNCTION herald_batch(lo pg_snapshot, hi pg_snapshot, after_xid xid8, after_id bigint, upto_xid xid8, upto_id bigint, lim bigint, want_lane herald_lane)
            RETURNS TABLE (xid xid8, id bigint, body text) LANGUAGE sql STABLE AS $$
                SELECT b.xid, b.id, b.body FROM (
                    -- Transactions running at `lo` that committed by `hi`: each its ids in the range.
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
                    -- Transactions from `lo`'s xmax on, committed by `hi`: where the range starts,
                    -- the first one's ids after the start ...
                    (SELECT n.xid, n.id, n.body FROM notifications n
                     WHERE n.lane = want_lane AND n.xid = greatest(after_xid, pg_snapshot_xmax(lo))
                       AND n.id > CASE WHEN after_xid >= pg_snapshot_xmax(lo) THEN after_id ELSE 0 END
                       AND n.id <= CASE WHEN greatest(after_xid, pg_snapshot_xmax(lo)) = upto_xid THEN upto_id ELSE 9223372036854775807 END
                       AND greatest(after_xid, pg_snapshot_xmax(lo)) <= upto_xid AND greatest(after_xid, pg_snapshot_xmax(lo)) < pg_snapshot_xmax(hi)
                       AND pg_visible_in_snapshot(n.xid, hi)
                     ORDER BY n.xid, n.id LIMIT lim)
                    UNION ALL
                    -- ... the transactions between ...
                    (SELECT n.xid, n.id, n.body FROM notifications n
                     WHERE n.lane = want_lane AND n.xid > greatest(after_xid, pg_snapshot_xmax(lo)) AND n.xid < upto_xid
                       AND n.xid < pg_snapshot_xmax(hi) AND pg_visible_in_snapshot(n.xid, hi)
                     ORDER BY n.xid, n.id LIMIT lim)
                    UNION ALL
                    -- ... and where it ends, the last one's ids up to the end.
                    (SELECT n.xid, n.id, n.body FROM notifications n
                     WHERE n.lane = want_lane AND n.xid = upto_xid AND n.id <= upto_id
                       AND upto_xid > greatest(after_xid, pg_snapshot_xmax(lo)) AND upto_xid < pg_snapshot_xmax(hi) AND pg_visible_in_snapshot(n.xid, hi)
                     ORDER BY n.xid, n.id LIMIT lim)
                ) b
                ORDER BY b.xid, b.id LIMIT lim
            $$
            """,
            "ALTER FUNCTION herald_claim_lease(text, float8, bigint, bigint, herald_lane) SET enable_bitmapscan = off SET jit = off",
            "ALTER FUNCTION herald_batch_end(pg_snapshot, pg_snapshot, xid8, bigint, bigint, herald_lane) SET enable_bitmapscan = off SET jit = off",
            "ALTER FUNCTION herald_unclaimed(bigint, herald_lane) SET enable_bitmapscan = off SET jit = off",
            "ALTER FUNCTION herald_unclaimed(bigint) SET enable_bitmapscan = off SET jit = off",
        ])
}

extension QueueSchema {
    /// Migration 15: the planner told that a transaction holds few of the queue's rows, whatever
    /// the last `ANALYZE` saw. docs/scale-out.md ("Plans that do not follow the statistics").
    ///
    /// Analyzed while a campaign committed at once fills the table, `xid` has one value: a
    /// transaction's rows (`n.xid = x.xid`, for each transaction that was running when a claim's
    /// batch opened) then look like the whole table, and the planner read them through the
    /// primary key from the first id, filtering every row of the campaign: 50 ms and 2,600 blocks
    /// per claim on 200,000 rows, for every claim and every look for the fast lane while such a
    /// transaction stays in the cursor's snapshot (the lanes bench through the queue: claims of
    /// 60-180 ms, alerts 200-450 ms late, after autovacuum analyzed the campaign). A fixed
    /// estimate of twenty rows a transaction keeps the index on (`lane, xid, id`), the right
    /// path for any transaction's size: 1.6 ms and 48 blocks.
    static let transactionRows = Migration(
        version: 15,
        description: "notifications: a transaction's rows estimated few, whatever the last ANALYZE saw",
        statements: [
            "ALTER TABLE notifications ALTER COLUMN xid SET (n_distinct = -0.05)",
            // The estimate is read from the statistics ANALYZE writes: made now (a sample of the table).
            "ANALYZE notifications (xid)",
        ])
}

extension QueueSchema {
    /// Migration 16: the claim's functions never scan the whole table, nor in parallel.
    /// docs/scale-out.md ("Plans that do not follow the statistics").
    ///
    /// At a batch's end the claim counts the rows of its lane left after the cursor. Planned with
    /// the fast lane's share of a million-row table (an alert every 10 ms beside a campaign), the
    /// estimate was tens of thousands of rows where the cursor had a handful or none after it, and
    /// PostgreSQL counted them with a parallel sequential scan of the table: 230-500 ms for a
    /// claim or a look for the fast lane, alerts up to 740 ms late (the lanes bench through the
    /// queue with 1,000,000). Without sequential scans the index on (`lane, xid, id`) from the
    /// cursor on is the way, as every other statement of these functions already takes.
    static let noTableScans = Migration(
        version: 16,
        description: "the claim's functions: no sequential or parallel scans, whatever the statistics",
        statements: [
            "ALTER FUNCTION herald_claim_lease(text, float8, bigint, bigint, herald_lane) SET enable_seqscan = off SET max_parallel_workers_per_gather = 0",
            "ALTER FUNCTION herald_batch_end(pg_snapshot, pg_snapshot, xid8, bigint, bigint, herald_lane) SET enable_seqscan = off SET max_parallel_workers_per_gather = 0",
            "ALTER FUNCTION herald_unclaimed(bigint, herald_lane) SET enable_seqscan = off SET max_parallel_workers_per_gather = 0",
            "ALTER FUNCTION herald_unclaimed(bigint) SET enable_seqscan = off SET max_parallel_workers_per_gather = 0",
        ])
}

extension QueueSchema {
    /// Migration 18: the lane's "anything new?" check planned once a session.
    /// docs/scale-out.md ("Plans that do not follow the statistics").
    ///
    /// `herald_unclaimed(lim, lane)`, which every claim and every fast-lane look that finds a
    /// change runs to see whether a lane has rows after its cursor, was an SQL function with
    /// settings of its own (migration 14): PostgreSQL cannot inline such a function, and plans
    /// its body (the two halves of `herald_batch`, inlined) on every call. The planning was
    /// nine tenths of its cost: 0.77 ms a call, against 0.08 for the same query prepared once
    /// (`pgbench`, the lanes bench's database after a 100,000-row run). In PL/pgSQL the
    /// statement's plan is kept for the session, and `plan_cache_mode` keeps it generic (the
    /// settings that hold it to the index's order are kept): 0.10 ms a call. The same query,
    /// the same rows.
    static let cachedCheck = Migration(
        version: 18,
        description: "herald_unclaimed(lim, lane): planned once a session, not on every call",
        statements: [
            """
            CREATE OR REPLACE FUNCTION herald_unclaimed(lim bigint, want_lane herald_lane) RETURNS TABLE (xid xid8, id bigint, body text) LANGUAGE plpgsql STABLE AS $$
            #variable_conflict use_column
            BEGIN
                RETURN QUERY
                SELECT b.xid, b.id, b.body FROM herald_cursor k, LATERAL (
                    (SELECT * FROM herald_batch(k.done, k.target, k.xid, k.id, \(lastPosition), lim, k.lane))
                    UNION ALL
                    (SELECT * FROM herald_batch(k.target, pg_current_snapshot(), '0', 0, \(lastPosition), lim, k.lane))
                ) b
                WHERE k.lane = want_lane
                LIMIT lim;
            END
            $$
            """,
            // CREATE OR REPLACE cleared the function's settings: migrations 14 and 16's again, and the plan kept generic.
            """
            ALTER FUNCTION herald_unclaimed(bigint, herald_lane)
            SET enable_bitmapscan = off SET jit = off SET enable_seqscan = off SET max_parallel_workers_per_gather = 0
            SET plan_cache_mode = force_generic_plan
            """,
        ])
}
