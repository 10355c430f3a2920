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
        let (rows, blocks) = try await twentyClaims(cluster, db, queue, from: 2)
        #expect(rows == 1000)
        // A few blocks per claim in the index (the cursor's probes, the lease's range), a few per
        // row in the heap (each row's visibility and body). Walking the backlog: about 700 index
        // blocks a claim; a bitmap of the batch: its 1,500 heap pages a claim.
        expectFew("20 claims", rows: rows, read: blocks, under: (index: 2_000, heap: 12_000))
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
        let first = try await queue.claim(limit: 50, token: 2).rows.count
        let (rows, blocks) = try await twentyClaims(cluster, db, queue, from: 3)
        // The alert, and nothing else.
        #expect(first + rows == 1)
        // Through the primary key, every claim read the campaign for the alert's transaction: about
        // 35,000 index and 128,000 heap blocks for the 20; with the estimate, 1,200 and 125 alone
        // (3,900 index blocks once in a parallel run of the whole suite).
        expectFew("20 claims after the campaign was analyzed", rows: rows, read: blocks, under: (index: 10_000, heap: 2_000))
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
        let (rows, blocks) = try await twentyClaims(cluster, db, worker, from: 100)
        #expect(rows == 1000)
        // With the plans cached for 10 rows (no ANALYZE): about 31,000 heap blocks, the campaign
        // read for each claim; with: about 300.
        expectFew("20 claims after the campaign's ANALYZE", rows: rows, read: blocks, under: (index: 2_000, heap: 5_000))
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
        let blocks = try await blocksRead(cluster, db, closing: queue) {
            for k in 0..<20 { rows += try await look(Int64(k + 3)) }
        }
        #expect(rows == 21)
        // Counting by a scan of the table: its 1,600 pages for every look.
        expectFew("20 looks for the fast lane", rows: rows, read: blocks, under: (index: 5_000, heap: 5_000))
    }

    /// Index and heap blocks read from `notifications` by `run`, counted once the sessions ended
    /// before it have reported theirs, and after `queue` (whose sessions ran it) is closed: each
    /// session's counts reach the view when it ends, or at most once a second.
    func blocksRead(_ cluster: PostgresCluster, _ db: String, closing queue: PostgresQueue, _ run: () async throws -> Void) async throws -> (index: Int, heap: Int) {
        try await Task.sleep(for: .milliseconds(1500))
        let before = try await read(cluster, db)
        try await run()
        await queue.close()
        try await Task.sleep(for: .milliseconds(1500))
        let after = try await read(cluster, db)
        return (after.index - before.index, after.heap - before.heap)
    }

    /// 20 claims of 50 rows by `queue` (their tokens from `token` on), which is closed after: the
    /// rows they took and the blocks they read.
    func twentyClaims(_ cluster: PostgresCluster, _ db: String, _ queue: PostgresQueue, from token: Int64) async throws -> (rows: Int, blocks: (index: Int, heap: Int)) {
        var rows = 0
        let blocks = try await blocksRead(cluster, db, closing: queue) {
            for k in 0..<20 { rows += try await queue.claim(limit: 50, token: token + Int64(k)).rows.count }
        }
        return (rows, blocks)
    }

    /// Says what `what` read, and expects it under `bound`.
    func expectFew(_ what: String, rows: Int, read: (index: Int, heap: Int), under bound: (index: Int, heap: Int), sourceLocation: SourceLocation = #_sourceLocation) {
        print("\(what), \(rows) rows: \(read.index) index blocks, \(read.heap) heap blocks read")
        #expect(read.index < bound.index, "\(read.index) index blocks for \(what)", sourceLocation: sourceLocation)
        #expect(read.heap < bound.heap, "\(read.heap) heap blocks for \(what)", sourceLocation: sourceLocation)
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
