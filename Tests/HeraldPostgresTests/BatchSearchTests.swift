import Foundation
import HeraldPostgres
import HeraldTestSupport
import Testing

/// The functions that find a batch's rows (`herald_batch`, `herald_batch_end`, schemas 11 and 12) against
/// the batch's definition written plainly: the rows of one lane's transactions visible in `hi` and not
/// in `lo`, after a place, in `(xid, id)` order. Rows get their `xid` by hand here, so any snapshots can be
/// written out; the functions read only the column and the snapshots.
@Suite("Finding a batch's rows: herald_batch and herald_batch_end against the batch's definition", .enabled(if: PostgresCluster.binaries != nil, Comment(rawValue: PostgresCluster.absent)))
struct BatchSearchTests {
    @Test("random snapshots, places, limits and upper bounds: the same rows, and the same last row, as the definition", arguments: [1, 2, 3] as [Int])
    func agreesWithTheDefinition(seed: Int) async throws {
        let (cluster, db) = try await freshDatabase()
        let queue = PostgresQueue(configuration: queueConfiguration(cluster, db)).start()
        try await queue.migrate()
        await queue.close()
        let answer = try await cluster.psql(db, commands: [
            "SELECT setseed(0.\(seed)1)",
            // Transactions 1000-1079, each with 0 to 12 rows (ids in insertion order, as a sequence gives them).
            """
            INSERT INTO notifications (xid, body, lane)
            SELECT x::text::xid8, 'row', (CASE WHEN random() < 0.5 THEN 'fast' ELSE 'bulk' END)::herald_lane
            FROM generate_series(1000, 1079) x, generate_series(1, 12) k
            WHERE k <= (hashint4(x * \(seed)) & 15) - 3 ORDER BY random()
            """,
            "CREATE TEMP TABLE answers (kind text, n int)",
            """
            DO $$
            DECLARE
                lo pg_snapshot; hi pg_snapshot; lo_min int; lo_max int; hi_max int;
                ax xid8; aid bigint; ux xid8; uid bigint; lim bigint;
                gx xid8; gid bigint; gn bigint; wx xid8; wid bigint; wn bigint; ln herald_lane;
            BEGIN
                FOR i IN 1..300 LOOP
                    lo_min := 1000 + (random() * 50)::int;
                    lo_max := lo_min + (random() * 20)::int;
                    hi_max := lo_max + (random() * 25)::int;
                    lo := format('%s:%s:%s', lo_min, lo_max, (SELECT coalesce(string_agg(x::text, ',' ORDER BY x), '')
                                                              FROM generate_series(lo_min, lo_max - 1) x WHERE random() < 0.4))::pg_snapshot;
                    hi := format('%s:%s:%s', lo_min, hi_max, (SELECT coalesce(string_agg(x::text, ',' ORDER BY x), '')
                                                              FROM generate_series(lo_min, hi_max - 1) x WHERE random() < 0.15))::pg_snapshot;
                    IF random() < 0.25 THEN
                        ax := '0'; aid := 0;
                    ELSE
                        SELECT n.xid, n.id INTO ax, aid FROM notifications n ORDER BY random() LIMIT 1;
                    END IF;
                    SELECT n.xid, n.id INTO ux, uid FROM notifications n ORDER BY random() LIMIT 1;
                    lim := 1 + (random() * 40)::int;
                    ln := (CASE WHEN random() < 0.5 THEN 'fast' ELSE 'bulk' END)::herald_lane;

                    -- Where the next `lim` rows end, and how many they are.
                    gx := NULL; gid := NULL; gn := NULL;
                    SELECT e.xid, e.id, e.passed INTO gx, gid, gn FROM herald_batch_end(lo, hi, ax, aid, lim, ln) e;
                    SELECT r.xid, r.id, count(*) OVER () INTO wx, wid, wn FROM (
                        SELECT n.xid, n.id FROM notifications n
                        WHERE n.lane = ln AND (n.xid, n.id) > (ax, aid) AND pg_visible_in_snapshot(n.xid, hi) AND NOT pg_visible_in_snapshot(n.xid, lo)
                        ORDER BY n.xid, n.id LIMIT lim) r
                    ORDER BY r.xid DESC, r.id DESC LIMIT 1;
                    INSERT INTO answers VALUES (CASE WHEN (gx, gid, gn) IS NOT DISTINCT FROM (wx, wid, wn) THEN 'end ok' ELSE 'end wrong' END, 1);
                    INSERT INTO answers VALUES ('end found', CASE WHEN wx IS NULL THEN 0 ELSE 1 END);

                    -- The rows themselves, up to an upper bound, limited or not.
                    INSERT INTO answers
                    SELECT CASE WHEN got IS NOT DISTINCT FROM want THEN 'rows ok' ELSE 'rows wrong' END, coalesce(cardinality(want), 0)
                    FROM (SELECT (SELECT array_agg(b.id ORDER BY b.xid, b.id) FROM herald_batch(lo, hi, ax, aid, ux, uid, l, ln) b) AS got,
                                 (SELECT array_agg(s.id ORDER BY s.xid, s.id) FROM (
                                     SELECT n.xid, n.id FROM notifications n
                                     WHERE n.lane = ln AND (n.xid, n.id) > (ax, aid) AND (n.xid, n.id) <= (ux, uid)
                                       AND pg_visible_in_snapshot(n.xid, hi) AND NOT pg_visible_in_snapshot(n.xid, lo)
                                     ORDER BY n.xid, n.id LIMIT l) s) AS want
                          FROM (VALUES (lim), (NULL::bigint)) v(l)) c;
                END LOOP;
            END $$
            """,
            "SELECT string_agg(kind || '=' || total, ', ' ORDER BY kind) FROM (SELECT kind, sum(n) AS total FROM answers GROUP BY kind) t",
        ])
        // "end found=…, end ok=…, rows ok=…" (and "end wrong", "rows wrong" if any)
        var counts: [String: Int] = [:]
        for pair in answer.split(separator: ",") {
            let p = pair.split(separator: "=")
            if p.count == 2 { counts[p[0].trimmingCharacters(in: .whitespaces)] = Int(p[1]) ?? -1 }
        }
        print("batch search, seed \(seed): \(answer)")
        #expect(counts["end wrong"] == nil && counts["rows wrong"] == nil, "\(answer)")
        // The cases were not all empty: most found rows, and the rows compared were many.
        #expect((counts["end found"] ?? 0) > 100 && (counts["rows ok"] ?? 0) > 1000, "\(answer)")
    }

    @Test("eight transactions running when the batch opened, 5,000 rows each: finding where 2,000 rows end reads about 2,000 index entries, not 2,000 of each")
    func readsOnlyWhatItTakes() async throws {
        let (cluster, db) = try await freshDatabase()
        let queue = PostgresQueue(configuration: queueConfiguration(cluster, db)).start()
        try await queue.migrate()
        await queue.close()
        let lo = "2000:2010:2000,2001,2002,2003,2004,2005,2006,2007", hi = "2010:2010:"
        // In a transaction of its own each, so the count (the index entries returned in this
        // transaction) is that search's alone.
        func entriesRead(_ search: String) async throws -> Int {
            let out = try await cluster.psql(db, commands: [
                "BEGIN", search,
                "SELECT pg_stat_get_xact_tuples_returned('notifications_order'::regclass)",
                "COMMIT",
            ])
            return Int(out.split(separator: "\n").last ?? "") ?? -1
        }
        // A table of the size a queue has when this matters, its statistics taken (with a few
        // hundred rows the planner reads a whole transaction's rows and sorts them, rightly).
        try await cluster.psql(db, commands: [
            // The bulk lane's rows beside them, in the same transactions: the fast lane's search skips them.
            "INSERT INTO notifications (xid, body, lane) SELECT x::text::xid8, 'row', l::herald_lane FROM generate_series(2000, 2007) x, generate_series(1, 5000) k, (VALUES ('fast'), ('bulk')) v(l)",
            "VACUUM ANALYZE notifications",
        ])
        let end = try await cluster.psql(db, "SELECT xid, id, passed FROM herald_batch_end('\(lo)', '\(hi)', '0', 0, 2000, 'fast')")
        let first = try await cluster.psql(db, "SELECT xid, id FROM notifications WHERE xid = '2000' AND lane = 'fast' ORDER BY id OFFSET 1999 LIMIT 1")
        let searched = try await entriesRead("SELECT * FROM herald_batch_end('\(lo)', '\(hi)', '0', 0, 2000, 'fast')")
        let listed = try await entriesRead("SELECT max(b.id) FROM herald_batch('\(lo)', '\(hi)', '0', 0, \(QueueSchema.lastPosition), 2000, 'fast') b")
        print("batch search: herald_batch_end read \(searched) index entries, herald_batch \(listed), to find the 2,000th row \(end)")
        #expect(end == first + "|2000")
        #expect(searched <= 2100, "herald_batch_end read \(searched) index entries for 2,000 rows")
        // What herald_claim_rows did to find the same place (versions 9 and 10): 2,000 of each transaction.
        #expect(listed >= 15_000, "herald_batch read \(listed)")
    }
}
