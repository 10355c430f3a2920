import HeraldCore
import PostgresNIO
import Synchronization

/// `POST /v1/notifications` with an `Idempotency-Key`, when the queue is the
/// service's intake: the key, the SHA-256 of the body it came with and the
/// rows it made are one row of `herald_idempotency`, written in the
/// transaction that inserts the rows. So a key holds across restarts and
/// across every service sharing the database: a retry finds the rows of the
/// first try, or waits for its transaction and then finds them.
extension PostgresQueue {
    /// What became of a keyed batch.
    public enum KeyedEnqueue: Sendable, Hashable {
        /// New: the rows were inserted with these ids.
        case enqueued([Int64])
        /// The key was used with this body before, within the window: its rows, nothing inserted.
        case replayed([Int64])
        /// The key was used with another body within the window: nothing inserted.
        case conflict
    }

    /// The rows a key made with this body within `window`, or `.conflict` for
    /// another body; `nil` when the key is unknown (or older). A read only:
    /// a retry is answered even when the queue is full.
    public func lookUp(idempotencyKey key: String, fingerprint: String, window: Duration) async throws(QueueError) -> KeyedEnqueue? {
        let seconds = window.inSeconds
        return try await named("looking up an idempotency key") { [self] in
            var found: KeyedEnqueue?
            for try await (f, ids) in try await client.query(
                "SELECT fingerprint, ids FROM herald_idempotency WHERE key = \(key) AND created_at >= now() - make_interval(secs => \(seconds))",
                logger: logger
            ).decode((String, [Int64]).self) {
                found = f == fingerprint ? .replayed(ids) : .conflict
            }
            return found
        }
    }

    /// Inserts `bodies` as queued rows under `key`, unless the key was used
    /// within `window`: then the first use's rows (same `fingerprint`) or
    /// `.conflict`. A key older than the window is taken as new. Two services
    /// given one key at once: the second waits for the first's transaction.
    public func enqueueReturningIDs(
        _ bodies: [String], placements: [Placement]? = nil, idempotencyKey key: String, fingerprint: String, window: Duration
    ) async throws(QueueError) -> KeyedEnqueue {
        let seconds = window.inSeconds
        let result = try await named("enqueueing \(bodies.count) rows under an idempotency key") { [self] in
            try await client.withTransaction(logger: logger) { connection -> KeyedEnqueue in
                // Claims the key (new, or past the window), or finds it taken; a concurrent
                // claim of the same key waits here until that transaction ends.
                var claimed = false
                for try await _ in try await connection.query(
                    """
                    INSERT INTO herald_idempotency AS k (key, fingerprint, ids) VALUES (\(key), \(fingerprint), '{}')
                    ON CONFLICT (key) DO UPDATE SET fingerprint = excluded.fingerprint, ids = '{}', created_at = now()
                        WHERE k.created_at < now() - make_interval(secs => \(seconds))
                    RETURNING 1
                    """, logger: logger
                ).decode(Int.self) { claimed = true }
                guard claimed else {
                    var found = KeyedEnqueue.conflict
                    for try await (f, ids) in try await connection.query(
                        "SELECT fingerprint, ids FROM herald_idempotency WHERE key = \(key)", logger: logger
                    ).decode((String, [Int64]).self) {
                        found = f == fingerprint ? .replayed(ids) : .conflict
                    }
                    return found
                }
                let ids = try await insertRows(bodies, placements: placements, on: connection)
                try await connection.query("UPDATE herald_idempotency SET ids = \(ids) WHERE key = \(key)", logger: logger)
                return .enqueued(ids)
            }
        }
        if case .enqueued = result { await committed(bodies.count) }
        await forgetExpiredKeys(window: window)
        return result
    }

    /// Deletes keys past the window, at most once a minute per process; a
    /// failure is logged (the keys stay, and are reused when met again).
    func forgetExpiredKeys(window: Duration) async {
        let now = ContinuousClock.now
        let due = keySweep.withLock { last -> Bool in
            if let l = last, now - l < .seconds(60) { return false }
            last = now
            return true
        }
        guard due else { return }
        let seconds = window.inSeconds
        do {
            try await named("deleting idempotency keys past the window") { [self] in
                try await client.query(
                    "DELETE FROM herald_idempotency WHERE created_at < now() - make_interval(secs => \(seconds))", logger: logger)
            }
        } catch {
            logger.warning("\(error); they stay until the next sweep")
        }
    }
}
