import HeraldCore
import PostgresNIO

/// What `herald serve` needs of the queue when it is its intake: rows with
/// their ids, how many wait, and one row's outcome.
extension PostgresQueue {
    /// Inserts request lines as queued rows and returns their ids, in the
    /// lines' order: the ids are taken from the table's sequence first, then
    /// the rows inserted with them, in one transaction.
    /// Each row's lane and `send-at` are `placements`' (one per body), else its request's.
    public func enqueueReturningIDs(_ bodies: [String], placements: [Placement]? = nil) async throws(QueueError) -> [Int64] {
        guard !bodies.isEmpty else { return [] }
        let ids = try await named("enqueueing \(bodies.count) rows") { [self] in
            try await client.withTransaction(logger: logger) { connection in try await insertRows(bodies, placements: placements, on: connection) }
        }
        await committed(bodies.count)
        return ids
    }

    /// Takes ids from the sequence for `bodies` and inserts them as queued rows (in the caller's
    /// transaction), each in its lane (`placements`, else its request's); a row with a `send-at`
    /// is held in `herald_scheduled` under its id.
    func insertRows(_ bodies: [String], placements: [Placement]?, on connection: PostgresConnection) async throws -> [Int64] {
        let placements = placements ?? bodies.map(Placement.init(of:))
        guard placements.count == bodies.count else { throw QueueError("\(placements.count) placements for \(bodies.count) rows") }
        let now = placements.indices.filter { placements[$0].sendAt == nil }
        let lanes = now.map { placements[$0].lane.description }
        var ids: [Int64] = []
        ids.reserveCapacity(bodies.count)
        for try await id in try await connection.query(
            "SELECT nextval(pg_get_serial_sequence('notifications', 'id')) FROM generate_series(1, \(bodies.count))", logger: logger
        ).decode(Int64.self) { ids.append(id) }
        var inserted = 0
        for try await n in try await connection.query(
            """
            WITH i AS (
                INSERT INTO notifications (id, body, lane)
                SELECT * FROM unnest(\(now.map { ids[$0] })::bigint[], \(now.map { bodies[$0] })::text[], \(lanes)::text[]::herald_lane[])
                RETURNING 1)
            SELECT count(*) FROM i
            """,
            logger: logger
        ).decode(Int.self) { inserted = n }
        guard inserted == now.count else { throw QueueError("\(inserted) of \(now.count) rows were inserted") }
        try await insertScheduled(
            placements.indices.filter { placements[$0].sendAt != nil }.map { (ids[$0], bodies[$0], placements[$0]) }, on: connection)
        return ids
    }

    /// Rows waiting to be claimed.
    public func queuedCount() async throws(QueueError) -> Int {
        try await named("counting queued rows") { [self] in
            // Rows after the cursor, and rows in leases no one holds (given back, or from before version 5).
            try await count(
                """
                SELECT (SELECT count(*) FROM \(unescaped: Self.unclaimed()))
                     + (SELECT count(*) FROM herald_leases l, \(unescaped: Self.leaseRows(of: "l")) WHERE l.owner = '')
                """)
        }
    }

    /// Since when the longest-waiting row has waited to be claimed (epoch milliseconds; nil when
    /// none waits): the earliest `enqueued_at` of each lane's next row and of the rows in leases
    /// no one holds (given back, or run out: their worker gone). A held row (`send-at` to come)
    /// is not waiting.
    public func oldestWaiting() async throws(QueueError) -> Int64? {
        try await named("reading the oldest waiting row") { [self] in
            var since: Int64?
            let rows = try await client.query(
                """
                SELECT (extract(epoch FROM min(w.at)) * 1000)::bigint FROM (
                    SELECT n.enqueued_at AS at FROM herald_cursor k
                    CROSS JOIN LATERAL \(unescaped: Self.unclaimed(limit: 1, lane: "k.lane")) u
                    JOIN notifications n ON n.id = u.id
                    UNION ALL
                    SELECT n.enqueued_at FROM herald_leases l
                    CROSS JOIN LATERAL \(unescaped: Self.leaseRows(of: "l")) AS r(id)
                    JOIN notifications n ON n.id = r.id
                    WHERE l.owner = '' OR l.expires < now()
                ) w
                """, logger: logger)
            for try await v in rows.decode(Int64?.self) { since = v }
            return since
        }
    }

    /// One row as the service reports it.
    public struct Row: Sendable, Hashable {
        /// `queued`, `leased` or `done`; `scheduled` while it waits for its `send-at`.
        public var state: String
        public var outcome: String?
        public var status: Int?
        public var reasonCode: String?
        public var reason: String?
        public var apnsID: String?
        public var possibleDuplicate: Bool
        public var attempts: Int
        /// A held row's (or a cancelled one's) `send-at`, epoch milliseconds.
        public var sendAt: Int64? = nil
    }

    /// Row `id`, or `nil` when there is none.
    public func row(_ id: Int64) async throws(QueueError) -> Row? {
        try await named("reading row \(id)") { [self] in
            var found: Row?
            let rows = try await client.query(
                """
                SELECT CASE WHEN o.outcome IS NOT NULL THEN 'done' WHEN l.owner <> '' THEN 'leased' ELSE 'queued' END,
                       o.outcome, o.status, o.reason_code, o.reason, nullif(o.apns_ids[array_position(o.ids, n.id)], ''),
                       coalesce(o.possible_duplicate, false), coalesce(o.attempts, l.attempts, 0)
                FROM notifications n
                LEFT JOIN LATERAL (
                    -- Through the span index: the groups whose ids run across this one.
                    SELECT * FROM herald_outcomes WHERE \(unescaped: QueueSchema.outcomeSpan) @> n.id AND n.id = ANY(ids) LIMIT 1
                ) o ON true
                LEFT JOIN LATERAL (
                    -- The lease holding it: the range test written out (a few comparisons per lease, where
                    -- leaseRows(of:) would list each range's rows).
                    SELECT owner, attempts FROM herald_leases
                    WHERE n.id = ANY(ids)
                       OR (hi_xid IS NOT NULL AND (n.xid, n.id) > (lo_xid, lo_id) AND (n.xid, n.id) <= (hi_xid, hi_id)
                           AND (lo_snap IS NULL OR (pg_visible_in_snapshot(n.xid, hi_snap) AND NOT pg_visible_in_snapshot(n.xid, lo_snap))))
                    ORDER BY lease DESC LIMIT 1
                ) l ON o.outcome IS NULL
                WHERE n.id = \(id)
                """, logger: logger)
            for try await (state, outcome, status, code, reason, apnsID, duplicate, attempts)
                in rows.decode((String, String?, Int?, String?, String?, String?, Bool, Int).self)
            {
                found = Row(
                    state: state, outcome: outcome, status: status, reasonCode: code, reason: reason, apnsID: apnsID,
                    possibleDuplicate: duplicate, attempts: attempts)
            }
            // Not in `notifications`: held for its send-at, or cancelled there.
            if let found { return found }
            return try await heldRow(id)
        }
    }
}

extension PostgresQueue {
    /// Rows in `state` (`queued`, `leased` or `done`).
    public func rowCount(state: String) async throws(QueueError) -> Int {
        try await named("counting \(state) rows") { [self] in
            // Finished rows are counted in their own table: cheap enough to poll.
            try await count(
                state == "done"
                    ? "SELECT coalesce(sum(cardinality(ids)), 0) FROM herald_outcomes" : "SELECT count(*) FROM herald_rows WHERE state = \(state)")
        }
    }

    /// For `herald bench queue`, watching workers in other processes: the rows whose outcomes are
    /// written, and the seconds since the last was written (the server's clock).
    package func benchOutcomesWritten() async throws(QueueError) -> (rows: Int, secondsSinceLast: Double) {
        try await named("counting outcomes") { [self] in
            var answer = (0, 0.0)
            let rows = try await client.query(
                """
                SELECT coalesce(sum(cardinality(ids)), 0)::bigint,
                       coalesce(extract(epoch FROM clock_timestamp() - max(finished_at)), 0)::float8
                FROM herald_outcomes
                """, logger: logger)
            for try await (n, lag) in rows.decode((Int, Double).self) { answer = (n, max(0, lag)) }
            return answer
        }
    }

    /// For `herald bench lanes --via queue`: of the rows after `id`, the bulk lane's accepted ones
    /// and the seconds from their transaction's start to their last outcome, and each fast-lane
    /// row's milliseconds from its enqueue to its outcome's row (the server's clock, both).
    package func benchLaneTimes(after id: Int64) async throws(QueueError) -> (bulkRows: Int, bulkSpan: Double, fastMs: [Double]) {
        try await named("reading the lanes' times") { [self] in
            var answer = (0, 0.0, [Double]())
            let bulk = try await client.query(
                """
                SELECT count(*)::bigint, coalesce(extract(epoch FROM max(finished_at) - min(enqueued_at)), 0)::float8
                FROM herald_rows WHERE id > \(id) AND lane = 'bulk' AND outcome = 'accepted'
                """, logger: logger)
            for try await (n, span) in bulk.decode((Int, Double).self) { (answer.0, answer.1) = (n, span) }
            let fast = try await client.query(
                """
                SELECT (extract(epoch FROM finished_at - enqueued_at) * 1000)::float8
                FROM herald_rows WHERE id > \(id) AND lane = 'fast' AND outcome = 'accepted'
                """, logger: logger)
            for try await ms in fast.decode(Double.self) { answer.2.append(ms) }
            return answer
        }
    }

    /// For `herald bench queue`: how many owners have written outcomes.
    package func benchOutcomeOwners() async throws(QueueError) -> Int {
        try await named("counting workers") { [self] in
            var answer = 0
            for try await n in try await client.query("SELECT count(DISTINCT owner)::bigint FROM herald_outcomes", logger: logger).decode(Int.self) { answer = n }
            return answer
        }
    }

    /// For `herald bench queue`: the process id of a session's backend (where the server runs).
    package func benchBackendProcess() async throws(QueueError) -> Int32 {
        try await named("asking the server's process") { [self] in
            var answer: Int32 = 0
            for try await n in try await client.query("SELECT pg_backend_pid()", logger: logger).decode(Int32.self) { answer = n }
            return answer
        }
    }

    /// Empties the table, for benchmarks: every row, whatever its state.
    package func removeEveryRow() async throws(QueueError) {
        try await named("emptying the queue") { [self] in
            _ = try await client.query("TRUNCATE notifications, herald_outcomes, herald_leases, herald_scheduled", logger: logger).collect()
            _ = try await client.query(PostgresQuery(unsafeSQL: QueueSchema.rewind), logger: logger).collect()
        }
    }
}
