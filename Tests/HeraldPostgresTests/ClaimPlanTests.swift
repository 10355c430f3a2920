import Foundation
import HeraldCore
import HeraldTestSupport
import Testing

@testable import HeraldPostgres

/// Migration 14 and the worker's session settings: a claim's cost follows the rows it takes, not the
/// backlog behind them, whatever the statistics say. Counted in blocks (`pg_statio_user_tables`),
/// not timed: a claim that walks the backlog reads it.
@Suite("Claims read what they take", .enabled(if: PostgresCluster.binaries != nil, Comment(rawValue: PostgresCluster.absent)))
struct ClaimPlanTests {
    @Test("20 claims of 50 rows from a 200,000-row campaign committed in one transaction, the statistics made before it on 1,000 rows: the index and heap blocks read are a few per row claimed, not the backlog (a row comparison's upper bound walked every entry after the lease's rows; stale statistics read the whole batch through a bitmap)")
    func claimsFollowTheirRows() async throws {
        let (cluster, db) = try await freshDatabase()
        let queue = try await openQueue(cluster, db, owner: "plans", lease: .seconds(3600), batch: 50)
        // Statistics of a small queue, as before a campaign's COPY: 1,000 rows in 50 transactions,
        // analyzed, then gone. No autovacuum: the statistics stay those while the claims run.
        _ = try await cluster.psql(db, "ALTER TABLE notifications SET (autovacuum_enabled = false)")
        _ = try await cluster.psql(db, commands: (0..<50).map { _ in "INSERT INTO notifications (body, lane) SELECT 'x', 'bulk' FROM generate_series(1, 20)" })
        _ = try await cluster.psql(db, commands: ["ANALYZE notifications", "TRUNCATE notifications", QueueSchema.rewind])
        // The campaign: one transaction.
        _ = try await cluster.psql(db, "INSERT INTO notifications (body, lane) SELECT 'campaign ' || g, 'bulk' FROM generate_series(1, 200000) g")
        // One claim first: the sessions are open and their statements prepared.
        _ = try await queue.claim(limit: 50, token: 1)
        try await Task.sleep(for: .milliseconds(1500))
        let before = try await read(cluster, db)
        var rows = 0
        for k in 0..<20 { rows += try await queue.claim(limit: 50, token: Int64(k + 2)).rows.count }
        // Each session's counts reach the view when it ends.
        await queue.close()
        try await Task.sleep(for: .milliseconds(1500))
        let after = try await read(cluster, db)
        let (index, heap) = (after.index - before.index, after.heap - before.heap)
        print("20 claims, \(rows) rows: \(index) index blocks, \(heap) heap blocks read")
        #expect(rows == 1000)
        // A few blocks per claim in the index (the cursor's probes, the lease's range), a few per
        // row in the heap (each row's visibility and body). Walking the backlog: about 700 index
        // blocks a claim; a bitmap of the batch: its 1,500 heap pages a claim.
        #expect(index < 2_000, "\(index) index blocks for 20 claims of 50")
        #expect(heap < 12_000, "\(heap) heap blocks for 20 claims of 50")
        let settings = try await cluster.psql(db, "SELECT string_agg(proname || ' ' || array_to_string(proconfig, ','), '; ' ORDER BY proname, proconfig) FROM pg_proc WHERE proname IN ('herald_claim_lease', 'herald_batch_end', 'herald_unclaimed')")
        #expect(settings.components(separatedBy: "enable_bitmapscan=off,jit=off").count == 5, "\(settings)")
    }

    @Test("Statistics made on a campaign committed in one transaction (xid one-valued) and a transaction that ran while the cursor's batch opened: 20 claims read a few blocks, not the campaign through the primary key for that transaction's rows (migration 15)")
    func claimsAfterTheCampaignWasAnalyzed() async throws {
        let (cluster, db) = try await freshDatabase()
        let queue = try await openQueue(cluster, db, owner: "plans", lease: .seconds(3600), batch: 50)
        _ = try await cluster.psql(db, "ALTER TABLE notifications SET (autovacuum_enabled = false)")
        // The campaign, then the statistics: every row sampled has the campaign's transaction id.
        _ = try await cluster.psql(db, commands: [
            "INSERT INTO notifications (body, lane) SELECT 'campaign ' || g, 'bulk' FROM generate_series(1, 200000) g",
            "ANALYZE notifications",
        ])
        // An alert's transaction, begun after the campaign's and running while another worker claims
        // the whole campaign: the cursor's next batch opens at a snapshot that has it running.
        let release = temporaryDirectory() + "/commit"
        async let alert = cluster.psql(db, commands: [
            "BEGIN", "INSERT INTO notifications (body, lane) VALUES ('alert', 'fast')",
            "\\! while [ ! -e \(release) ]; do sleep 0.05; done", "COMMIT",
        ])
        let running = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND backend_xid IS NOT NULL AND state = 'idle in transaction'"
        while try await cluster.psql(db, running) != "1" { try await Task.sleep(for: .milliseconds(20)) }
        let taken = try await cluster.psql(db, "SELECT sum(taken) FROM herald_claim_lease('other', 3600, 1, 1000000, 'bulk')")
        FileManager.default.createFile(atPath: release, contents: nil)
        _ = try await alert
        #expect(taken == "200000")
        let before = try await read(cluster, db)
        var rows = 0
        for k in 0..<20 { rows += try await queue.claim(limit: 50, token: Int64(k + 2)).rows.count }
        await queue.close()
        try await Task.sleep(for: .milliseconds(1500))
        let after = try await read(cluster, db)
        let (index, heap) = (after.index - before.index, after.heap - before.heap)
        print("20 claims after the campaign was analyzed, \(rows) rows: \(index) index blocks, \(heap) heap blocks read")
        // The alert, and nothing else.
        #expect(rows == 1)
        // Through the primary key, every claim read the campaign for the alert's transaction: about
        // 560 index and 2,000 heap blocks a claim (11,000 and 41,000 for the 20).
        #expect(index < 2_000, "\(index) index blocks for 20 claims")
        #expect(heap < 2_000, "\(heap) heap blocks for 20 claims")
    }

    /// Index and heap blocks read from `notifications` so far (a session's counts reach the view when it ends).
    func read(_ cluster: PostgresCluster, _ db: String) async throws -> (index: Int, heap: Int) {
        let v = try await cluster.psql(db, Self.blocks).split(separator: "|").compactMap { Int($0) }
        try #require(v.count == 2, "\(v)")
        return (v[0], v[1])
    }

    static let blocks = """
        SELECT coalesce(idx_blks_hit, 0) + coalesce(idx_blks_read, 0), heap_blks_hit + heap_blks_read
        FROM pg_statio_user_tables WHERE relname = 'notifications'
        """
}
