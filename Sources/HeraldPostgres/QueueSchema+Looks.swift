extension QueueSchema {
    /// Migration 17: the fast lane's look in one round trip. docs/scale-out.md ("The fast lane's
    /// looker").
    ///
    /// A worker with rows in flight looks for the fast lane's new rows every few milliseconds. As
    /// three statements (has the lane's newest row changed; lease its new rows; read them) an
    /// alert paid three round trips to a database kept busy by the campaign beside it, each
    /// 5-10 ms at the 99th percentile on two busy cores. `herald_look_fast` does all three:
    /// when the fast lane's newest committed row is still `seen` (its transaction's id; -1 looks
    /// whatever it is) it answers only that, about as cheaply as the bare `SELECT`; otherwise it
    /// leases the lane's new rows (`herald_claim_lease`, committed with the statement) and answers
    /// them as the claim's read does, one row per lease (none: nulls). A look whose answer is lost
    /// is found again by its token, as a claim is.
    static let fastLook = Migration(
        version: 17,
        description: "herald_look_fast: a worker's look for the fast lane's rows in one statement",
        statements: [
            """
            CREATE FUNCTION herald_look_fast(claimer text, lease_secs float8, token bigint, lim bigint, seen bigint)
            RETURNS TABLE (newest bigint, lease bigint, attempts int, ids bigint[], bodies text[]) LANGUAGE plpgsql AS $$
            #variable_conflict use_column
            DECLARE
                n bigint;
                got bigint;
            BEGIN
                SELECT coalesce(max(f.xid)::text::bigint, 0) INTO n FROM notifications f WHERE f.lane = 'fast';
                IF n <> seen THEN
                    SELECT c.lease INTO got FROM herald_claim_lease(claimer, lease_secs, token, lim, 'fast') c;
                END IF;
                IF got IS NULL THEN
                    RETURN QUERY SELECT n, NULL::bigint, NULL::int, NULL::bigint[], NULL::text[];
                ELSE
                    RETURN QUERY
                    SELECT n, l.lease, l.attempts, a.ids, a.bodies
                    FROM herald_leases l CROSS JOIN LATERAL (
                        SELECT array_agg(b.id) AS ids, array_agg(b.body) AS bodies
                        FROM herald_batch(l.lo_snap, l.hi_snap, l.lo_xid, l.lo_id, l.hi_xid, l.hi_id, NULL, l.lane) b
                    ) a
                    WHERE l.lease = got;
                END IF;
            END
            $$
            """,
            // As the claim's functions (migrations 14 and 16): the index's order, whatever the statistics.
            """
            ALTER FUNCTION herald_look_fast(text, float8, bigint, bigint, bigint)
            SET enable_bitmapscan = off SET jit = off SET enable_seqscan = off SET max_parallel_workers_per_gather = 0
            """,
        ])
}
