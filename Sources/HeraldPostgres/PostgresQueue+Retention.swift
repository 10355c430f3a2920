import PostgresNIO

/// Retention: finished rows and their outcomes stay (the outcomes are the
/// record) until pruned; rows not finished are never touched.
extension PostgresQueue {
    /// Deletes rows finished before `age` ago, with their outcomes, `chunk` at a time (short
    /// transactions: claims and writes go on meanwhile); returns how many.
    public func prune(finishedBefore age: Duration, chunk: Int = 10_000) async throws(QueueError) -> Int {
        let seconds = age.inSeconds
        var total = 0
        while true {
            let deleted = try await named("pruning finished rows") { [self] in
                try await count(
                    """
                    WITH o AS (
                        DELETE FROM herald_outcomes WHERE id IN (
                            -- In id order: rows finish roughly in the order they were queued, so the
                            -- oldest outcomes come first without an index on finished_at (one less
                            -- index to update per outcome written).
                            SELECT id FROM herald_outcomes
                            WHERE finished_at < now() - make_interval(secs => \(seconds))
                            ORDER BY id LIMIT \(chunk))
                        RETURNING id
                    ), d AS (
                        DELETE FROM notifications WHERE id IN (SELECT id FROM o) RETURNING 1
                    ) SELECT count(*) FROM d
                    """)
            }
            total += deleted
            if deleted < chunk { return total }
        }
    }
}
