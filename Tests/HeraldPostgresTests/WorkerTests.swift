import Foundation
import HeraldCore
@testable import HeraldPostgres
import HeraldTestSupport
import Testing

@Suite("Workers on the PostgreSQL queue: claim, lease, outcome", .enabled(if: PostgresCluster.binaries != nil, Comment(rawValue: PostgresCluster.absent)))
struct WorkerTests {
    @Test("two workers drain one queue at once: every row done with one outcome, none claimed by both, malformed rows dropped with their reason")
    func twoWorkers() async throws {
        let (cluster, db) = try await freshDatabase()
        let a = try await openQueue(cluster, db, owner: "worker-a", batch: 100)
        let b = try await openQueue(cluster, db, owner: "worker-b", batch: 100)
        let (lines, malformed) = requestLines(6000, malformedEvery: 50)
        for chunk in stride(from: 0, to: lines.count, by: 1000) {
            #expect(try await a.enqueue(Array(lines[chunk ..< min(chunk + 1000, lines.count)])) == min(1000, lines.count - chunk))
        }
        async let runA = drainWorker(a)
        async let runB = drainWorker(b)
        let (ra, rb) = try await (runA, runB)
        await a.close()
        await b.close()

        #expect(ra.snapshot.isBalanced && rb.snapshot.isBalanced)
        #expect(ra.snapshot.entered + rb.snapshot.entered == 6000, "\(ra.snapshot) / \(rb.snapshot)")
        #expect(ra.report.written + rb.report.written == 6000 && ra.report.leaseLost + rb.report.leaseLost == 0)
        #expect(ra.report.possibleDuplicates + rb.report.possibleDuplicates == 0 && ra.report.unmapped + rb.report.unmapped == 0)
        await #expect(try tally(cluster, db) == ["done|accepted": 6000 - malformed, "done|dropped": malformed])
        // Claimed once each (attempts is counted by the claim itself), by one of the two, and that worker wrote the outcome.
        await #expect(try cluster.psql(db, "SELECT count(*) FROM herald_rows WHERE attempts <> 1 OR possible_duplicate") == "0")
        let owners = try await cluster.psql(db, "SELECT lease_owner || '=' || count(*) FROM herald_rows GROUP BY lease_owner ORDER BY lease_owner").split(separator: "\n")
        #expect(owners.allSatisfy { $0.hasPrefix("worker-a=") || $0.hasPrefix("worker-b=") }, "\(owners)")
        await #expect(try cluster.psql(db, "SELECT count(*) FROM herald_rows WHERE lease_owner = 'worker-a'") == "\(ra.snapshot.entered)")
        // Each malformed row names itself and what is wrong; the rows behind it were sent.
        let reasons = try await cluster.psql(db, "SELECT id || ':' || reason_code || ':' || reason FROM herald_rows WHERE outcome = 'dropped' ORDER BY id LIMIT 3")
            .split(separator: "\n")
        #expect(reasons.count == 3)
        for r in reasons {
            let parts = r.split(separator: ":", maxSplits: 2)
            #expect(parts.count == 3 && parts[1] == "invalid-request" && parts[2].hasPrefix("row \(parts[0]): "), "\(r)")
        }
        await #expect(try cluster.psql(db, "SELECT count(*) FROM herald_rows WHERE outcome = 'dropped' AND reason IS NULL") == "0")
    }

    @Test("a claim whose answer is lost after it committed: its rows are found again by its token and sent once, not claimed twice")
    func lostClaimAnswer() async throws {
        let (cluster, db) = try await freshDatabase()
        let queue = try await openQueue(cluster, db, owner: "forgetful", batch: 50)
        #expect(try await queue.enqueue(requestLines(500).lines) == 500)

        // The statement: a claim's rows are found by its token, by the worker that claimed them only.
        let token = queue.nextClaimToken()
        let claimed = try await claimSoon(queue, limit: 20, token: token)
        let other = try await openQueue(cluster, db, owner: "other", batch: 50)
        #expect(try await other.recoverClaims([token]).rows.isEmpty)
        await other.close()
        let found = try await queue.recoverClaims([token, queue.nextClaimToken()]).rows
        #expect(found == claimed && found.map(\.id) == Array(1...20) && found.allSatisfy { $0.attempts == 1 })
        // Back to the start: no lease, the cursor before the first row.
        try await cluster.psql(db, "DELETE FROM herald_leases; " + QueueSchema.rewind)

        // The worker: three claims commit and lose their answer (the lease is 30 s: waiting it out would take that long).
        queue.loseClaimAnswers.store(3, ordering: .relaxed)
        let problems = ProblemLog()
        let clock = ContinuousClock(), start = clock.now
        let run = try await drainWorker(queue, problems: problems)
        await queue.close()
        #expect(clock.now - start < .seconds(25), "the lost claims' rows waited for their lease to expire")
        #expect(problems.all.count == 3 && problems.all.allSatisfy { $0.contains("the answer was lost") }, "\(problems.all)")
        #expect(run.snapshot.isBalanced && run.snapshot.entered == 500)
        #expect(run.report.written == 500 && run.report.leaseLost == 0 && run.report.possibleDuplicates == 0)
        await #expect(try tally(cluster, db) == ["done|accepted": 500])
        await #expect(try cluster.psql(db, "SELECT count(*) FROM herald_rows WHERE attempts <> 1 OR possible_duplicate") == "0")
    }

    @Test("a dead worker's expired lease is reclaimed by another, marked possible_duplicate; the dead worker's late write changes nothing")
    func expiredLeaseReclaimed() async throws {
        let (cluster, db) = try await freshDatabase()
        // A lease far longer than the test (it is expired below by hand): with 30 s, once, in the parallel
        // run on 2 cores, more than 30 s passed before the live worker's claim, which then rightly took it over.
        let dead = try await openQueue(cluster, db, owner: "dead-worker", lease: .seconds(600), batch: 30)
        #expect(try await dead.enqueue(requestLines(100).lines) == 100)
        let held = try await claimSoon(dead, limit: 30)
        #expect(held.map(\.id) == Array(1...30) && held.allSatisfy { $0.attempts == 1 })
        // A live lease is left alone: a second worker takes only the queued rows.
        let live = try await openQueue(cluster, db, owner: "live-worker", batch: 500)
        let first = try await claimSoon(live, limit: 500)
        #expect(first.map(\.id) == Array(31...100))
        // Rows 31… queued again: their lease gone, the cursor back after row 30 (one INSERT: one xid).
        try await cluster.psql(db, "DELETE FROM herald_leases WHERE owner = 'live-worker'; UPDATE herald_cursor SET id = 30")
        // The dead worker's lease runs out.
        try await cluster.psql(db, "UPDATE herald_leases SET expires = now() - interval '1 second' WHERE owner = 'dead-worker'")

        let run = try await drainWorker(live)
        #expect(run.snapshot.entered == 100 && run.snapshot.isBalanced)
        #expect(run.report.written == 100 && run.report.possibleDuplicates == 30 && run.report.leaseLost == 0)
        await #expect(try cluster.psql(db, "SELECT string_agg(DISTINCT attempts || ':' || possible_duplicate, ',') FROM herald_rows WHERE id <= 30") == "2:true")
        await #expect(try cluster.psql(db, "SELECT string_agg(DISTINCT attempts || ':' || possible_duplicate, ',') FROM herald_rows WHERE id > 30") == "1:false")
        await #expect(try cluster.psql(db, "SELECT count(*) FROM herald_rows WHERE state = 'done' AND lease_owner = 'live-worker'") == "100")

        // The dead worker comes back and writes what it had: nothing changes, and it is told so.
        let result = try await dead.finish(finished(held, Array(repeating: .failed("late"), count: held.count)))
        #expect(result.written == 0)
        await #expect(try cluster.psql(db, "SELECT count(*) FROM herald_rows WHERE outcome = 'failed'") == "0")
        await dead.close()
        await live.close()
    }

    @Test("an idle worker is woken by NOTIFY when rows arrive, and a worker's leases are renewed while it holds them")
    func notifyAndRenewal() async throws {
        let (cluster, db) = try await freshDatabase()
        let queue = try await openQueue(cluster, db, owner: "renewer", lease: .seconds(3))
        // Listening (the first count is the listener saying it listens) before anything is queued.
        queue.startListening()
        let clock = ContinuousClock()
        let deadline = clock.now + .seconds(10)
        while queue.notificationCount == 0 && clock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        let seen = queue.notificationCount
        #expect(seen > 0, "not listening after 10 s")
        #expect(try await queue.enqueue(requestLines(5).lines) == 5)
        while queue.notificationCount == seen && clock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        #expect(queue.notificationCount > seen, "no NOTIFY seen after the INSERT")

        let held = try await claimSoon(queue, limit: 10)
        #expect(held.count == 5)
        let before = try await cluster.psql(db, "SELECT max(expires) FROM herald_leases")
        try await Task.sleep(for: .milliseconds(1100))
        // One claim, one lease; a lease that is not there is not counted.
        #expect(try await queue.renewLeases(Array(Set(held.map(\.lease))) + [999_999]) == 1)
        let after = try await cluster.psql(db, "SELECT max(expires) FROM herald_leases")
        #expect(after > before, "\(before) → \(after)")
        await queue.close()
    }

    @Test("a claim that finds nothing does not wait for the cursor (it does not lock it): idle workers do not queue behind a claim in progress")
    func emptyClaimLeavesCursor() async throws {
        let (cluster, db) = try await freshDatabase()
        let queue = try await openQueue(cluster, db, owner: "idle")
        #expect(try await queue.enqueue(requestLines(3).lines) == 3)
        #expect(try await claimSoon(queue, limit: 10).count == 3)
        // Another session holds the cursor (as a claim in progress does) for 6 s.
        let holder = Task { try await cluster.psql(db, "BEGIN; SELECT * FROM herald_cursor FOR UPDATE; SELECT pg_sleep(6); COMMIT") }
        defer { holder.cancel() }
        let clock = ContinuousClock()
        let deadline = clock.now + .seconds(10)
        let locked = "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation WHERE c.relname = 'herald_cursor' AND l.mode = 'RowShareLock' AND l.granted"
        while try await cluster.psql(db, locked) == "0" && clock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        let started = clock.now
        let claim = try await queue.claim(limit: 10)
        let waited = clock.now - started
        #expect(claim.rows.isEmpty && claim.emptyLeases.isEmpty)
        #expect(waited < .seconds(3), "an empty claim waited \(waited) for the cursor")
        _ = try await holder.value
        // A row queued now is claimed as before (the cursor is locked then, and moved).
        #expect(try await queue.enqueue(requestLines(1).lines) == 1)
        #expect(try await claimSoon(queue, limit: 10).count == 1)
        await queue.close()
    }

    @Test("a worker alone takes back its own expired rows once it no longer has them in flight (an outcome write lost), never one it still has")
    func ownExpiredRows() async throws {
        let (cluster, db) = try await freshDatabase()
        let queue = try await openQueue(cluster, db, owner: "solo")
        #expect(try await queue.enqueue(requestLines(10).lines) == 10)
        let held = try await claimSoon(queue, limit: 10)
        #expect(held.count == 10)
        // The lease ran out (say its outcome write was lost with the database's last transactions).
        _ = try await cluster.psql(db, "UPDATE herald_leases SET expires = now() - interval '1 second'")
        #expect(try await queue.claim(limit: 10, inFlight: Array(Set(held.map(\.lease)))).rows.isEmpty, "still in flight here: not claimed twice")
        let run = try await drainWorker(queue)
        #expect(run.snapshot.entered == 10 && run.report.written == 10 && run.report.possibleDuplicates == 10, "\(run.report)")
        await #expect(try tally(cluster, db) == ["done|accepted": 10])
        await queue.close()
    }

    // Stop 43's parallel run: herald work through an outage longer than a lease entered 101,000 rows
    // for 100,000, one claim's rows twice. A claim ahead had read the leases held when it started;
    // it reached the database after the outage, took over a lease claimed meanwhile (run out, as
    // nothing was renewed), and its rows reached the book after that lease's outcomes were written
    // and it had left the book: nothing stopped them going out again.
    @Test("a worker's claims never take over a lease another of its claims took: one waiting for its turn reads the leases held once its turn comes, and a claim whose rows could not be read keeps its lease this worker's until found again")
    func claimsPassOverOwnLeases() async throws {
        let (cluster, db) = try await freshDatabase()
        // Leases run out only when the test says so (a 30 s lease ran out by itself in CI's parallel
        // run, where opening the twin below took that long: the twin's claim then took over leases
        // this worker held, as it should, and the test read that as the fault it looks for).
        let queue = try await openQueue(cluster, db, owner: "turns", lease: .seconds(3600), batch: 10)
        #expect(try await queue.enqueue(requestLines(30).lines) == 30)
        let problems = ProblemLog()
        let (source, _) = queue.worker(drain: true) { problems.add($0) }
        // A claim whose answer is lost (after the rows were read): its lease is this worker's, its rows unknown here.
        queue.loseClaimAnswers.store(1, ordering: .relaxed)
        var lost = false
        for _ in 0..<300 where !lost {
            do {
                #expect(try await source.claimBatch().isEmpty)
                try await Task.sleep(for: .milliseconds(50))
            } catch { lost = true }
        }
        #expect(lost)
        // An outage longer than a lease: every lease has run out.
        try await cluster.psql(db, "UPDATE herald_leases SET expires = now() - interval '1 second'")
        let next = try await source.claimBatch()
        #expect(next.map(\.id) == Array(11...20) && next.allSatisfy { $0.attempts == 1 }, "\(next.map { ($0.id, $0.attempts) })")
        let found = try await source.recoverUnansweredClaims()
        #expect(found.map(\.id) == Array(1...10) && found.allSatisfy { $0.attempts == 1 }, "\(found.map { ($0.id, $0.attempts) })")

        // A claim waiting for its turn while a lease of this worker's (here another queue's with the
        // same owner) reaches the book, then runs out.
        let twin = try await openQueue(cluster, db, owner: "turns", lease: .seconds(3600), batch: 10)
        await queue.leaseTurn.acquire(1)
        let waiting = Task { try await source.claimBatch() }
        try await Task.sleep(for: .milliseconds(300))
        let third = await source.noted(PostgresQueue.Claim(rows: try await claimSoon(twin, limit: 10), emptyLeases: []), tokens: [])
        #expect(third.map(\.id) == Array(21...30))
        try await cluster.psql(db, "UPDATE herald_leases SET expires = now() - interval '1 second'")
        queue.leaseTurn.remove(1)
        let late = try await waiting.value
        #expect(late.isEmpty, "\(late.map { ($0.id, $0.attempts) })")
        await #expect(try cluster.psql(db, "SELECT max(attempts) FROM herald_leases") == "1")
        #expect(problems.all.isEmpty, "\(problems.all)")
        #expect(source.book.held == 30)
        await twin.close()
        await queue.close()
    }

    // Claims run ahead with the leases held when they start. Under an outage longer than a lease,
    // one could reach the database after a lease claimed since had run out, take it over as this
    // worker's own lease out of flight, and send its rows a second time.
    @Test("a claim started before this worker held a lease, and run after that lease ran out, takes it over: its rows, in flight here already, are not sent again")
    func staleClaimTakesOwnLease() async throws {
        let (cluster, db) = try await freshDatabase()
        let queue = try await openQueue(cluster, db, owner: "ahead", batch: 10)
        #expect(try await queue.enqueue(requestLines(20).lines) == 20)
        let problems = ProblemLog()
        let (source, writer) = queue.worker(drain: true) { problems.add($0) }
        let held = await source.noted(PostgresQueue.Claim(rows: try await claimSoon(queue, limit: 10), emptyLeases: []), tokens: [])
        #expect(held.count == 10)
        try await cluster.psql(db, "UPDATE herald_leases SET expires = now() - interval '1 second'")
        // Started before the first claim was noted: it knows of no lease held here.
        let stale = try await queue.claim(limit: 10, inFlight: [], token: queue.nextClaimToken())
        #expect(stale.rows.count == 20, "the lease taken over and 10 new rows: \(stale.rows.count)")
        let sent = await source.noted(stale, tokens: [])
        #expect(sent.count == 10 && Set(sent.map(\.id)).isDisjoint(with: held.map(\.id)), "\(sent.map(\.id))")
        #expect(problems.all.count == 1 && problems.all[0].contains("not sent again"), "\(problems.all)")
        #expect(source.book.held == 20)
        // Written once, as claimed once: the takeover sent nothing twice, so nothing is marked.
        source.book.hold(held, from: 0)
        writer.start()
        writer.observe(held.indices.map { OutcomeRecord(sequence: UInt64($0), line: nil, id: nil, token: nil, outcome: .accepted) })
        let report = await writer.finish()
        #expect(report.written == 10 && report.possibleDuplicates == 0, "\(report)")
        await #expect(try cluster.psql(db, "SELECT count(*) FILTER (WHERE attempts = 1 AND NOT possible_duplicate) FROM herald_rows WHERE state = 'done'") == "10")
        await queue.close()
    }

    @Test("an outcome write whose answer is lost after it committed is sent again: it adds nothing, its rows count as written (not lost), and rows it gave back are not given back twice")
    func lostWriteAnswer() async throws {
        let (cluster, db) = try await freshDatabase()
        let queue = try await openQueue(cluster, db, owner: "forgetful-writer", batch: 100)
        #expect(try await queue.enqueue(requestLines(503).lines) == 503)

        // The statement: a release and an outcome, committed, then sent again as after a lost answer.
        let held = try await claimSoon(queue, limit: 3)
        #expect(held.count == 3 && Set(held.map(\.lease)).count == 1)
        let outcomes: [Outcome] = [.failed(OutcomeReason(.abandoned, "a second signal")), .accepted, .accepted]
        let first = try await queue.finish(finished(held, outcomes))
        let again = try await queue.finish(finished(held, outcomes))
        #expect(first.written == 2 && first.released == 1, "\(first)")
        #expect(again.written == 2 && again.released == 0, "\(again)")
        // The row given back is in one lease, not two.
        await #expect(try cluster.psql(db, "SELECT count(*) FROM herald_leases l, \(PostgresQueue.leaseRows(of: "l")) AS u(id) WHERE u.id = \(held[0].id)") == "1")
        try await cluster.psql(db, "DELETE FROM herald_outcomes; DELETE FROM herald_leases; " + QueueSchema.rewind)

        // The worker: three writes commit and lose their answer; each is retried, and counted once.
        queue.loseWriteAnswers.store(3, ordering: .relaxed)
        let problems = ProblemLog()
        let run = try await drainWorker(queue, problems: problems)
        await queue.close()
        #expect(problems.all.filter { $0.contains("the answer was lost") }.count == 3, "\(problems.all)")
        #expect(run.snapshot.isBalanced && run.snapshot.entered == 503)
        #expect(run.report.written == 503 && run.report.leaseLost == 0 && run.report.notWritten == 0, "\(run.report)")
        await #expect(try tally(cluster, db) == ["done|accepted": 503])
    }

    // A wall-clock bound (the drain within 12 s, where the lease runs out at 15): run apart by
    // .ci/run. In one parallel run, where its set-up alone took over two minutes, the drain took 15.4 s.
    @Test("a finished lease whose drop fails is dropped again with the worker's next renewal, not left until it runs out and a claim takes it over",
        .enabled(if: ProcessInfo.processInfo.environment["HERALD_TIMING_APART"] != "1", "run apart by .ci/run: a wall-clock bound"))
    func failedDropRetried() async throws {
        let (cluster, db) = try await freshDatabase()
        // Another worker wrote every outcome of its lease and lost it before dropping it.
        let before = try await openQueue(cluster, db, owner: "gone", lease: .seconds(1))
        #expect(try await before.enqueue(requestLines(10).lines) == 10)
        let held = try await claimSoon(before, limit: 10)
        #expect(try await before.finish(finished(held, Array(repeating: .accepted, count: held.count))).written == 10)
        await before.close()
        await #expect(try cluster.psql(db, "SELECT count(*) FROM herald_leases") == "1")
        try await Task.sleep(for: .seconds(1.5))
        // This worker's claim takes the finished lease over, and its drop fails. A 15 s lease: renewed
        // (and the failed drop retried) every 5 s; left to run out, the drain would take 15 s more.
        let queue = try await openQueue(cluster, db, owner: "dropper", lease: .seconds(15))
        #expect(try await queue.enqueue(requestLines(5).lines) == 5)
        queue.failDrops.store(1, ordering: .relaxed)
        let problems = ProblemLog()
        let clock = ContinuousClock(), start = clock.now
        let run = try await drainWorker(queue, problems: problems)
        let took = clock.now - start
        await queue.close()
        #expect(problems.all.count == 1 && problems.all.allSatisfy { $0.contains("dropping them again with the next renewal") }, "\(problems.all)")
        #expect(run.report.written == 5)
        #expect(took < .seconds(12), "the drain took \(took): the lease ran out before it was dropped")
        await #expect(try cluster.psql(db, "SELECT count(*) FROM herald_leases") == "0")
        await #expect(try tally(cluster, db) == ["done|accepted": 15])
    }

    @Test("rows that failed only because the worker stopped (a second signal, the drain deadline) go back to the queue unsent; other failures end their rows")
    func releasedOnStop() async throws {
        let (cluster, db) = try await freshDatabase()
        let queue = try await openQueue(cluster, db, owner: "stopping")
        #expect(try await queue.enqueue(requestLines(3).lines) == 3)
        let held = try await claimSoon(queue, limit: 3)
        #expect(held.count == 3)
        let outcomes: [Outcome] = [
            .failed(OutcomeReason(.abandoned, "a second signal")), .failed(OutcomeReason(.shutdownDeadline, "the drain deadline")),
            .failed(OutcomeReason(.gatewayUnreachable, "the gateway is down")),
        ]
        let result = try await queue.finish(finished(held, outcomes))
        #expect(result.written == 1 && result.released == 2 && result.possibleDuplicates == 0)
        await #expect(try tally(cluster, db) == ["done|failed": 1, "queued|-": 2])
        await #expect(try cluster.psql(db, "SELECT count(*) FROM herald_rows WHERE state = 'queued' AND lease_owner IS NULL AND finished_at IS NULL") == "2")
        await queue.close()
    }
}

