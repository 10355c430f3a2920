import PostgresNIO

/// Retention: finished rows and their outcomes stay (the outcomes are the
/// record) until pruned; rows not finished are never touched.
extension PostgresQueue {
    /// Deletes rows finished before `age` ago, with their outcomes, about `chunk` rows at a time
    /// (short transactions: claims and writes go on meanwhile); returns how many.
    public func prune(finishedBefore age: Duration, chunk: Int = 10_000) async throws(QueueError) -> Int {
        let seconds = age.inSeconds
        var total = 0
        while true {
            let (groups, deleted) = try await named("pruning finished rows") { [self] in
                var answer = (0, 0)
                let rows = try await client.query(
                    """
                    WITH o AS (
                        DELETE FROM herald_outcomes WHERE (lease, first_id) IN (
                            -- Outcome groups in key order, as many as hold about `chunk` rows: groups
                            -- are written roughly in lease order, so the oldest come first without an
                            -- index on finished_at (one less index to update per write).
                            SELECT lease, first_id FROM (
                                SELECT lease, first_id, sum(cardinality(ids)) OVER (ORDER BY lease, first_id) - cardinality(ids) AS before
                                FROM (SELECT lease, first_id, ids FROM herald_outcomes
                                      WHERE finished_at < now() - make_interval(secs => \(seconds))
                                      ORDER BY lease, first_id LIMIT \(chunk)) s
                            ) t WHERE before < \(chunk))
                        RETURNING ids
                    ), d AS (
                        DELETE FROM notifications WHERE id IN (SELECT unnest(ids) FROM o) RETURNING 1
                    ), c AS (
                        -- Cancelled scheduled rows (schema 13) go with their outcome.
                        DELETE FROM herald_scheduled WHERE id IN (SELECT unnest(ids) FROM o) RETURNING 1
                    ) SELECT (SELECT count(*) FROM o), (SELECT count(*) FROM d) + (SELECT count(*) FROM c)
                    """, logger: logger)
                for try await (g, d) in rows.decode((Int, Int).self) { answer = (g, d) }
                return answer
            }
            total += deleted
            if groups == 0 { return total }
        }
    }
}
