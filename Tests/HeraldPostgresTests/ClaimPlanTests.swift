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
        #expect(settings.components(separatedBy: "enable_bitmapscan=off,jit=off,enable_seqscan=off,max_parallel_workers_per_gather=0").count == 5, "\(settings)")
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
        // One claim first (its sessions' statements prepared: the alert's row), and the ended
        // sessions' counts in the view.
        var rows = try await queue.claim(limit: 50, token: 2).rows.count
        try await Task.sleep(for: .milliseconds(1500))
        let before = try await read(cluster, db)
        for k in 0..<20 { rows += try await queue.claim(limit: 50, token: Int64(k + 3)).rows.count }
        await queue.close()
        try await Task.sleep(for: .milliseconds(1500))
        let after = try await read(cluster, db)
        let (index, heap) = (after.index - before.index, after.heap - before.heap)
        print("20 claims after the campaign was analyzed, \(rows) rows: \(index) index blocks, \(heap) heap blocks read")
        // The alert, and nothing else.
        #expect(rows == 1)
        // Through the primary key, every claim read the campaign for the alert's transaction: about
        // 35,000 index and 128,000 heap blocks for the 20; with the estimate, 1,200 and 125 alone
        // (3,900 index blocks once in a parallel run of the whole suite).
        #expect(index < 10_000, "\(index) index blocks for 20 claims")
        #expect(heap < 2_000, "\(heap) heap blocks for 20 claims")
    }

    @Test("Rows inserted that at least double the table make its statistics anew (the claim's plans a worker's sessions cached for the small table would read a campaign's every row): analyzed once after 20,000 rows into a table of 10, not after 10 more; 20 claims then read a few blocks each")
    func growthIsAnalyzed() async throws {
        let (cluster, db) = try await freshDatabase()
        let worker = try await openQueue(cluster, db, owner: "plans", lease: .seconds(3600), batch: 50)
        _ = try await cluster.psql(db, "ALTER TABLE notifications SET (autovacuum_enabled = false)")
        let analyzed = "SELECT analyze_count FROM pg_stat_user_tables WHERE relname = 'notifications'"
        func analyzes() async throws -> Int { try #require(Int(try await cluster.psql(db, analyzed))) }
        let fast = PostgresQueue.Placement(lane: .fast), bulk = PostgresQueue.Placement(lane: .bulk)
        // A small queue, claimed from: the worker's sessions plan the claim for it.
        let producer = try await openQueue(cluster, db, owner: "producer")
        #expect(try await producer.enqueue(requestLines(10).lines, placements: Array(repeating: fast, count: 10)) == 10)
        for k in 0..<10 { _ = try await worker.claim(limit: 50, token: Int64(k + 1)) }
        let before = try await analyzes()
        // A campaign: the table grew two thousandfold.
        let campaign = requestLines(20_000).lines
        #expect(try await producer.enqueue(campaign, placements: Array(repeating: bulk, count: campaign.count)) == campaign.count)
        #expect(try await analyzes() == before + 1, "no ANALYZE after the campaign")
        #expect(try await producer.enqueue(requestLines(10).lines, placements: Array(repeating: fast, count: 10)) == 10)
        #expect(try await analyzes() == before + 1, "an ANALYZE after 10 more rows")
        // The producer's sessions' counts (the COPY's index inserts) reach the view as they end.
        await producer.close()
        try await Task.sleep(for: .milliseconds(1500))
        let blocks = try await read(cluster, db)
        var rows = 0
        for k in 0..<20 { rows += try await worker.claim(limit: 50, token: Int64(k + 100)).rows.count }
        await worker.close()
        try await Task.sleep(for: .milliseconds(1500))
        let after = try await read(cluster, db)
        let (index, heap) = (after.index - blocks.index, after.heap - blocks.heap)
        print("20 claims after the campaign's ANALYZE, \(rows) rows: \(index) index blocks, \(heap) heap blocks read")
        #expect(rows == 1000)
        // With the plans cached for 10 rows (no ANALYZE): about 31,000 heap blocks, the campaign
        // read for each claim; with: about 300.
        #expect(index < 2_000, "\(index) index blocks for 20 claims of 50")
        #expect(heap < 5_000, "\(heap) heap blocks for 20 claims of 50")
    }

    @Test("At a batch's end the lane's rows left after the cursor are counted from the cursor on, not by a scan of the table (migration 16): 20 looks for the fast lane, each finding an alert, after its 20,000 earlier rows were claimed beside a 200,000-row campaign, the statistics made with both")
    func laneEndCountedFromTheCursor() async throws {
        let (cluster, db) = try await freshDatabase()
        let queue = try await openQueue(cluster, db, owner: "plans", lease: .seconds(3600), batch: 50)
        _ = try await cluster.psql(db, commands: [
            "ALTER TABLE notifications SET (autovacuum_enabled = false)",
            "INSERT INTO notifications (body, lane) SELECT 'campaign ' || g, 'bulk' FROM generate_series(1, 200000) g",
            "INSERT INTO notifications (body, lane) SELECT 'alert ' || g, 'fast' FROM generate_series(1, 20000) g",
            "ANALYZE notifications",
        ])
        let taken = try await cluster.psql(db, "SELECT sum(taken) FROM herald_claim_lease('other', 3600, 1, 1000000, 'fast')")
        #expect(taken == "20000")
        func look(_ token: Int64) async throws -> Int {
            _ = try await cluster.psql(db, "INSERT INTO notifications (body, lane) VALUES ('alert', 'fast')")
            return try await queue.claim(limit: 50, token: token, bulk: false, inFlight: { [] }, leased: { _ in }).rows.count
        }
        var rows = try await look(2)
        try await Task.sleep(for: .milliseconds(1500))
        let before = try await read(cluster, db)
        for k in 0..<20 { rows += try await look(Int64(k + 3)) }
        await queue.close()
        try await Task.sleep(for: .milliseconds(1500))
        let after = try await read(cluster, db)
        let (index, heap) = (after.index - before.index, after.heap - before.heap)
        print("20 looks for the fast lane, \(rows) rows: \(index) index blocks, \(heap) heap blocks read")
        #expect(rows == 21)
        // Counting by a scan of the table: its 1,600 pages for every look.
        #expect(index < 5_000, "\(index) index blocks for 20 looks")
        #expect(heap < 5_000, "\(heap) heap blocks for 20 looks")
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
