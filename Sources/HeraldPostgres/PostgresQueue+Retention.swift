import PostgresNIO

/// Retention: finished rows stay in the table (their outcomes are the
/// record) until pruned; queued and leased rows are never touched.
extension PostgresQueue {
    /// Deletes rows finished before `age` ago, `chunk` at a time (short
    /// transactions: claims and writes go on meanwhile); returns how many.
    public func prune(finishedBefore age: Duration, chunk: Int = 10_000) async throws(QueueError) -> Int {
        let seconds = age.inSeconds
        var total = 0
        while true {
            let deleted = try await named("pruning finished rows") { [self] in
                try await count(
                    """
                    WITH d AS (
                        DELETE FROM notifications WHERE id IN (
                            SELECT id FROM notifications
                            WHERE state = 'done' AND finished_at < now() - make_interval(secs => \(seconds))
                            ORDER BY finished_at LIMIT \(chunk))
                        RETURNING 1
                    ) SELECT count(*) FROM d
                    """)
            }
            total += deleted
            if deleted < chunk { return total }
        }
    }
}
