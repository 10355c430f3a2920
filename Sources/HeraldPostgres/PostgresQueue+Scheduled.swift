import HeraldCore
import PostgresNIO

/// Scheduled sends in the queue (schema 13): rows held in `herald_scheduled` until their
/// `send-at`, then moved to `notifications` under the same id by whichever worker looks first;
/// cancellable until then.
extension PostgresQueue {
    /// Moves up to `limit` rows whose `send-at` has come (the server's clock) to `notifications`,
    /// in time order, in one statement: each is in one table or the other whatever fails or is
    /// killed. Workers moving at once take different rows (`SKIP LOCKED`). Returns how many moved;
    /// wakes idle workers when any did.
    @discardableResult
    public func releaseDue(limit: Int = 5_000) async throws(QueueError) -> Int {
        let moved = try await named("moving scheduled rows whose time has come") { [self] in
            try await count(
                """
                WITH due AS (
                    DELETE FROM herald_scheduled WHERE id IN (
                        SELECT id FROM herald_scheduled WHERE cancelled_at IS NULL AND send_at <= now()
                        ORDER BY send_at LIMIT \(limit) FOR UPDATE SKIP LOCKED)
                    RETURNING id, body, lane, enqueued_at, send_at
                ), moved AS (
                    INSERT INTO notifications (id, body, lane, enqueued_at)
                    SELECT id, body, lane, enqueued_at FROM due ORDER BY send_at, id
                    RETURNING 1
                )
                SELECT count(*) FROM moved
                """)
        }
        if moved > 0 { wakeWorkers() }
        return moved
    }

    /// Scheduled rows whose time has not come.
    public func scheduledCount() async throws(QueueError) -> Int {
        try await named("counting scheduled rows") { [self] in
            try await count("SELECT count(*) FROM herald_scheduled WHERE cancelled_at IS NULL")
        }
    }

    /// What ``cancel(_:)`` found.
    public enum Cancelled: Sendable, Hashable {
        /// Cancelled now: it will not be sent; its outcome is written.
        case cancelled
        /// Not held: sent, on its way, decided, or no such row (``row(_:)`` says which).
        case notHeld
    }

    /// Cancels scheduled row `id` if its time has not come: marked cancelled and its outcome
    /// (`cancelled`, `reason`) written in the same transaction, so a worker's release, which
    /// locks the rows it moves, either moved it first (then it is not cancelled) or never will.
    public func cancel(_ id: Int64, reason: OutcomeReason) async throws(QueueError) -> Cancelled {
        try await named("cancelling row \(id)") { [self] in
            try await count(
                """
                WITH c AS (
                    UPDATE herald_scheduled SET cancelled_at = now()
                    WHERE id = \(id) AND cancelled_at IS NULL AND send_at > now()
                    RETURNING id
                ), o AS (
                    INSERT INTO herald_outcomes (lease, first_id, ids, outcome, reason_code, reason, attempts, owner)
                    SELECT 0, id, ARRAY[id], 'cancelled', \(reason.code.name), \(reason.message), 0, \(owner) FROM c
                    RETURNING 1
                )
                SELECT count(*) FROM o
                """) == 1 ? .cancelled : .notHeld
        }
    }

    /// Row `id` when it is not in `notifications`: held for its `send-at` (`scheduled`), or
    /// cancelled (`done`, its outcome); nil when it is in neither.
    func heldRow(_ id: Int64) async throws -> Row? {
        var found: Row?
        let rows = try await client.query(
            """
            SELECT CASE WHEN o.outcome IS NOT NULL THEN 'done' ELSE 'scheduled' END, o.outcome, o.reason_code, o.reason,
                   (extract(epoch FROM s.send_at) * 1000)::bigint
            FROM herald_scheduled s
            LEFT JOIN herald_outcomes o ON o.lease = 0 AND o.first_id = s.id
            WHERE s.id = \(id)
            """, logger: logger)
        for try await (state, outcome, code, reason, sendAt) in rows.decode((String, String?, String?, String?, Int64).self) {
            found = Row(
                state: state, outcome: outcome, status: nil, reasonCode: code, reason: reason, apnsID: nil, possibleDuplicate: false, attempts: 0,
                sendAt: sendAt)
        }
        return found
    }
}
