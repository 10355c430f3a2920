import Foundation
import HeraldCore
@testable import HeraldPostgres
import HeraldTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Scheduled sends in the queue (schema 13): held in `herald_scheduled` until their `send-at`,
/// moved to `notifications` under the same id by a worker, cancellable until then.
@Suite("Scheduled sends in the queue: held until their time, across a SIGKILL, cancellable", .enabled(if: PostgresCluster.binaries != nil, Comment(rawValue: PostgresCluster.absent)))
struct ScheduledQueueTests {
    static func line(_ i: Int, at: Int64?, expiry: Int? = nil) -> String {
        #"{"id":\#(i),"token":"\#(goodToken)","alert":"s\#(i)""# + (at.map { #","send-at":\#($0)"# } ?? "")
            + (expiry.map { #","expiry":\#($0)"# } ?? "") + "}"
    }

    static func nowMilliseconds() -> Int64 { Int64(Date().timeIntervalSince1970 * 1000) }

    @Test("held rows are scheduled (GET says scheduled, with the send-at), cancelled ones done cancelled with their outcome written once; a row sent already is not cancelled; prune removes a cancelled row with its outcome")
    func cancelAndState() async throws {
        let (cluster, db) = try await freshDatabase()
        let queue = try await openQueue(cluster, db)
        let intake = PostgresIntake(queue: queue, capacity: 1000, idempotencyWindow: .seconds(60)) { _ in }
        let later = Self.nowMilliseconds() + 3_600_000
        let ids = try await queue.enqueueReturningIDs([Self.line(1, at: later), Self.line(2, at: nil), Self.line(3, at: later)])
        #expect(ids == [1, 2, 3])
        await #expect(try tally(cluster, db) == ["scheduled|-": 2, "queued|-": 1])
        #expect(try await queue.scheduledCount() == 2)
        #expect(try await queue.queuedCount() == 1)
        #expect(await intake.state(of: 1) == .scheduled(sendAt: later))
        #expect(await intake.state(of: 2) == .pending)
        guard case .cancelled(let record) = await intake.cancel(1) else { Issue.record("not cancelled"); return }
        #expect(record.outcome.kind == .cancelled)
        guard case .notCancelled(.decided(let again)) = await intake.cancel(1) else { Issue.record("cancelled twice"); return }
        #expect(again.outcome.kind == .cancelled)
        guard case .notCancelled(.pending) = await intake.cancel(2) else { Issue.record("a queued row was cancelled"); return }
        guard case .notCancelled(.unknown) = await intake.cancel(99) else { Issue.record("an unknown row"); return }
        await #expect(try tally(cluster, db) == ["done|cancelled": 1, "scheduled|-": 1, "queued|-": 1])
        let row = try await queue.row(1)
        #expect(row?.state == "done" && row?.outcome == "cancelled" && row?.reasonCode == "cancelled", "\(String(describing: row))")
        #expect(try await queue.scheduledCount() == 1)
        #expect(try await queue.prune(finishedBefore: .seconds(0)) == 1)
        #expect(try await queue.row(1) == nil)
        await queue.close()
    }

    @Test("the oldest waiting row (the operator's page, issue 31): none in an empty queue or while rows are only held; the earliest enqueued_at of the lanes' next rows; an expired lease's rows wait again; none once everything is claimed")
    func oldestWaiting() async throws {
        let (cluster, db) = try await freshDatabase()
        let queue = try await openQueue(cluster, db)
        #expect(try await queue.oldestWaiting() == nil)
        _ = try await queue.enqueueReturningIDs([Self.line(1, at: Self.nowMilliseconds() + 3_600_000)])
        #expect(try await queue.oldestWaiting() == nil, "a held row does not wait yet")
        let bulk = #"{"token":"\#(goodToken)","alert":"b","priority":5}"#
        let bulkIDs = try await queue.enqueueReturningIDs([bulk, bulk], placements: [.init(lane: .bulk, sendAt: nil), .init(lane: .bulk, sendAt: nil)])
        try await Task.sleep(for: .milliseconds(50))
        let fastIDs = try await queue.enqueueReturningIDs([Self.line(4, at: nil)])
        // The rows' own times, as the database wrote them.
        func enqueuedAt(_ ids: [Int64]) async throws -> Int64? {
            let text = try await cluster.psql(
                db, "SELECT (extract(epoch FROM min(enqueued_at)) * 1000)::bigint FROM notifications WHERE id IN (\(ids.map(String.init).joined(separator: ",")))")
            return Int64(text)
        }
        let bulkAt = try #require(try await enqueuedAt(bulkIDs)), fastAt = try #require(try await enqueuedAt(fastIDs))
        #expect(bulkAt < fastAt, "the bulk rows were queued first")
        let oldest = try #require(try await queue.oldestWaiting())
        #expect(oldest == bulkAt, "the bulk rows' time, not the fast lane's later row: \(oldest) vs \(bulkAt) (fast \(fastAt))")
        // A claim of everything: none waits.
        var claim = try await queue.claim(limit: 10)
        #expect(claim.rows.count == 3)
        #expect(try await queue.oldestWaiting() == nil)
        // Its worker died: once its lease runs out the rows wait again, since their enqueueing.
        _ = try await cluster.psql(db, "UPDATE herald_leases SET expires = now() - interval '1 second'")
        let again = try #require(try await queue.oldestWaiting())
        #expect(again == oldest, "\(again) vs \(oldest)")
        claim = try await queue.claim(limit: 10)
        #expect(claim.rows.count == 3, "taken over")
        #expect(try await queue.oldestWaiting() == nil)
        await queue.close()
    }

    // A wall-clock bound (within a second of its time): run apart by .ci/run, after the parallel
    // run (`HERALD_TIMING_APART=1` skips it there: under its load one row was 2.3 s late).
    @Test(
        "herald work SIGKILLed before their time and started again: 40 scheduled rows each done within a second after its send-at, none before; a cancelled one never sent; one whose expiry passed while it waited dropped expired; rows sent now meanwhile",
        .enabled(if: ProcessInfo.processInfo.environment["HERALD_TIMING_APART"] != "1", "run apart by .ci/run: a wall-clock bound"))
    func acrossASigkill() async throws {
        let (cluster, db) = try await freshDatabase()
        let config = try configurationFile(cluster, db, lease: 5)
        let queue = try await openQueue(cluster, db)
        let t0 = Self.nowMilliseconds() + 5_000
        // Through COPY (herald enqueue's path) and through serve's insert, 20 each, at two times.
        _ = try await queue.enqueue((0..<20).map { Self.line($0, at: t0 + Int64($0 % 4) * 250) } + [Self.line(100, at: nil)])
        let other = try await queue.enqueueReturningIDs((20..<40).map { Self.line($0, at: t0 + 2_000 + Int64($0 % 4) * 250) })
        let cancelled = try await queue.enqueueReturningIDs([Self.line(50, at: t0 + 1_000)])[0]
        _ = try await queue.enqueueReturningIDs([Self.line(60, at: t0 + 1_500, expiry: Int(t0 / 1000))])
        #expect(other.count == 20)
        await #expect(try tally(cluster, db) == ["scheduled|-": 42, "queued|-": 1])

        func work() throws -> Process {
            let p = Process()
            p.executableURL = try heraldExecutable()
            p.arguments = ["work", "--config", config]
            p.standardError = FileHandle.nullDevice
            p.standardOutput = FileHandle.nullDevice
            try startProcess { try p.run() }
            return p
        }
        let first = try work()
        try await Task.sleep(for: .seconds(2))
        kill(first.processIdentifier, SIGKILL)
        first.waitUntilExit()
        #expect(try await queue.cancel(cancelled, reason: OutcomeReason(.cancelled, "cancelled by the test")) == .cancelled)
        // Row 100 (to send now) went out with the first worker, or goes with the second.
        let killed = try await tally(cluster, db)
        #expect(killed["scheduled|-"] == 41 && killed["done|cancelled"] == 1, "\(killed)")
        try await Task.sleep(for: .seconds(1))
        let second = try work()
        defer { if second.isRunning { kill(second.processIdentifier, SIGKILL) } }
        let deadline = ContinuousClock.now + .seconds(120)
        while try await cluster.psql(db, "SELECT count(*) FROM herald_rows WHERE state = 'done'") != "43", ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(100))
        }
        kill(second.processIdentifier, SIGINT)
        // The worker drains before it exits: waited for on a thread of its own.
        try await offPool { second.waitUntilExit() }
        #expect(second.terminationStatus == 0)
        await #expect(try tally(cluster, db) == ["done|accepted": 41, "done|cancelled": 1, "done|dropped": 1])
        // Each scheduled row's outcome (written after it was sent) from its send-at, in milliseconds.
        let spread = try await cluster.psql(db, """
            SELECT min(d)::int || '|' || max(d)::int FROM (
                SELECT extract(epoch FROM finished_at) * 1000 - (body::jsonb->>'send-at')::bigint AS d
                FROM herald_rows WHERE outcome = 'accepted' AND body::jsonb ? 'send-at') s
            """).split(separator: "|").compactMap { Int($0) }
        print("scheduled sends across a SIGKILL: outcomes written \(spread) ms after their send-at (min|max)")
        #expect(spread.count == 2 && spread[0] >= 0 && spread[1] < 1_000, "\(spread)")
        let expired = try await cluster.psql(db, "SELECT reason_code FROM herald_rows WHERE outcome = 'dropped'")
        #expect(expired == "expired")
        await queue.close()
    }
}
