import HeraldCore
import NIOCore
import PostgresNIO

/// The queue's statements beside the claim and the finish: enqueueing, leases, what is left.
extension PostgresQueue {
    /// Inserts request lines as queued rows, in one `COPY` (a third cheaper for the database than an
    /// `INSERT` of the same rows: the queue's end-to-end rate is bounded by the database's CPU); returns
    /// how many were inserted: all of them, or an error (the `COPY` is one statement). Idle workers
    /// are woken once it has committed (``wakeWorkers()``). Each row's lane and `send-at` are
    /// `placements`' (one per body), else its request's (``Placement/init(of:)``); a row with a
    /// `send-at` is held in `herald_scheduled` (schema 13) until then, inserted in the same
    /// transaction.
    public func enqueue(_ bodies: [String], placements: [Placement]? = nil) async throws(QueueError) -> Int {
        guard !bodies.isEmpty else { return 0 }
        let placements = placements ?? bodies.map(Placement.init(of:))
        guard placements.count == bodies.count else { throw QueueError("\(placements.count) placements for \(bodies.count) rows") }
        let held = placements.indices.filter { placements[$0].sendAt != nil }
        try await named("enqueueing \(bodies.count) rows") { [self] in
            @Sendable func copy(_ connection: PostgresConnection) async throws {
                guard held.count < bodies.count else { return }
                try await connection.copyFrom(table: "notifications", columns: ["body", "lane"], logger: logger) { writer in
                    var buffer = ByteBufferAllocator().buffer(capacity: 64 * 1024)
                    for (body, placement) in zip(bodies, placements) where placement.sendAt == nil {
                        Self.appendCopyText(body, to: &buffer, then: placement.lane)
                        if buffer.readableBytes >= 60 * 1024 {
                            try await writer.write(buffer)
                            buffer.clear()
                        }
                    }
                    if buffer.readableBytes > 0 { try await writer.write(buffer) }
                }
            }
            if held.isEmpty {
                try await client.withConnection { try await copy($0) }
            } else {
                try await client.withTransaction(logger: logger) { connection in
                    try await copy(connection)
                    try await insertScheduled(held.map { (nil, bodies[$0], placements[$0]) }, on: connection)
                }
            }
        }
        await committed(bodies.count)
        return bodies.count
    }

    /// After a producer's transaction committed `count` rows: the table's statistics made anew if
    /// it grew enough (``analyzeIfGrown(by:)``), then the workers woken (``wakeWorkers()``).
    func committed(_ count: Int) async {
        await analyzeIfGrown(by: count)
        wakeWorkers()
    }

    /// Rows inserted by this process, counted until ``analyzeIfGrown(by:)`` looks at the table.
    static let growthLook = 10_000

    /// Makes the table's statistics anew when the rows this process inserted since it last looked
    /// (at least ``growthLook``) are as many as the last `ANALYZE` counted (`reltuples`): the table
    /// at least doubled. The plans every worker's sessions cached for the claim's functions were
    /// made for the smaller table (a generic plan is not made again as a table grows, only when
    /// its statistics change), and chose paths that read every row of a campaign committed since:
    /// a sequential scan to count the fast lane's few rows, the primary key for a transaction's
    /// rows, 17-50 ms a claim and a look (the lanes bench through the queue, after the warm-up's
    /// claims on a 10-row table: alerts 100-250 ms from enqueue to outcome in about one run of
    /// three). PostgreSQL's advice after a bulk load, and what autovacuum does only at its next
    /// round (a minute). Before the wake-up: the workers it wakes plan with the new statistics
    /// (the caller waits for the `ANALYZE`, a sample of the table: under 0.1 s here for 100,000
    /// and for 1,000,000 rows, once a doubling). A role that does not own the table is only
    /// warned; a failure is logged.
    func analyzeIfGrown(by inserted: Int) async {
        let total = insertedSinceLook.add(inserted, ordering: .relaxed).newValue
        guard total >= Self.growthLook else { return }
        insertedSinceLook.subtract(total, ordering: .relaxed)
        do {
            var counted = 0.0
            let rows = try await client.query("SELECT reltuples::float8 FROM pg_class WHERE oid = 'notifications'::regclass", logger: logger)
            for try await r in rows.decode(Double.self) { counted = r }
            guard Double(total) >= counted else { return }
            _ = try await client.query("ANALYZE notifications", logger: logger).collect()
        } catch {
            logger.debug("ANALYZE after \(total) rows inserted failed (autovacuum analyzes the table at its next round): \(QueueError.explain(error))")
        }
    }

    /// Where a row goes: its lane, and its `send-at` (milliseconds since the epoch) when it is held until then.
    public struct Placement: Sendable, Hashable {
        public var lane: Lane
        public var sendAt: Int64?
        public init(lane: Lane, sendAt: Int64? = nil) {
            self.lane = lane
            self.sendAt = sendAt
        }
        /// The request's lane and `send-at`.
        public init(_ request: NotificationRequest) { self.init(lane: request.effectiveLane, sendAt: request.sendAt) }
        /// A request line's: its request's (a line that does not decode goes in the fast lane, now:
        /// the worker that claims it drops it with the reason at once).
        public init(of body: String) {
            var body = body
            let request = body.withUTF8 { bytes in try? RequestDecoder().decode(line: UnsafeRawBufferPointer(bytes)) }
            self = request.map(Placement.init) ?? Placement(lane: .fast)
        }
    }

    /// Inserts rows held until their `send-at` (ids given, or drawn from the notifications' sequence).
    func insertScheduled(_ rows: [(id: Int64?, body: String, placement: Placement)], on connection: PostgresConnection) async throws {
        guard !rows.isEmpty else { return }
        let ids = rows.map { $0.id ?? -1 }, bodies = rows.map(\.body), lanes = rows.map { $0.placement.lane.description }
        let times = rows.map { $0.placement.sendAt ?? 0 }
        var inserted = 0
        for try await n in try await connection.query(
            """
            WITH i AS (
                INSERT INTO herald_scheduled (id, body, lane, send_at)
                SELECT CASE WHEN u.id < 0 THEN nextval(pg_get_serial_sequence('notifications', 'id')) ELSE u.id END,
                       u.body, u.lane::herald_lane, to_timestamp(u.ms / 1000.0)
                FROM unnest(\(ids)::bigint[], \(bodies)::text[], \(lanes)::text[], \(times)::bigint[]) AS u(id, body, lane, ms)
                RETURNING 1)
            SELECT count(*) FROM i
            """, logger: logger
        ).decode(Int.self) { inserted = n }
        guard inserted == rows.count else { throw QueueError("\(inserted) of \(rows.count) scheduled rows were inserted") }
    }

    /// `text`, a tab and `lane`, as one line of `COPY`'s text format (`body`, `lane`).
    static func appendCopyText(_ text: String, to buffer: inout ByteBuffer, then lane: Lane) {
        appendCopyText(text, to: &buffer, ending: UInt8(ascii: "\t"))
        buffer.writeString(lane.description)
        buffer.writeInteger(UInt8(ascii: "\n"))
    }

    /// `text` as one line of `COPY`'s text format: backslash, tab, newline and carriage return escaped.
    package static func appendCopyText(_ text: String, to buffer: inout ByteBuffer, ending: UInt8 = UInt8(ascii: "\n")) {
        var text = text
        text.withUTF8 { bytes in
            var start = 0
            for (i, b) in bytes.enumerated() where b == UInt8(ascii: "\\") || b == UInt8(ascii: "\t") || b == UInt8(ascii: "\n") || b == UInt8(ascii: "\r") {
                buffer.writeBytes(UnsafeBufferPointer(rebasing: bytes[start..<i]))
                switch b {
                case UInt8(ascii: "\t"): buffer.writeStaticString("\\t")
                case UInt8(ascii: "\n"): buffer.writeStaticString("\\n")
                case UInt8(ascii: "\r"): buffer.writeStaticString("\\r")
                default: buffer.writeStaticString("\\\\")
                }
                start = i + 1
            }
            buffer.writeBytes(UnsafeBufferPointer(rebasing: bytes[start...]))
        }
        buffer.writeInteger(ending)
    }

    /// Deletes these leases where this worker holds them (their rows are all finished).
    public func dropLeases(_ leases: [Int64]) async throws(QueueError) {
        if Self.takeOne(failDrops) { throw QueueError("PostgreSQL \(configuration): dropping \(leases.count) finished leases: the connection was lost (a test's fault)", isOutage: true) }
        guard !leases.isEmpty else { return }
        _ = try await named("dropping \(leases.count) finished leases") { [self] in
            try await count(
                "WITH d AS (DELETE FROM herald_leases WHERE lease = ANY(\(leases)::bigint[]) AND owner = \(owner) RETURNING 1) SELECT count(*) FROM d")
        }
    }

    /// Extends these leases where this worker still holds them; returns how many it does. Only
    /// leases in flight are renewed: one whose outcomes were written (or given up) is left to
    /// expire, so a write lost by the database is claimed again by someone. An outcome write under
    /// way does not hold renewal up (it locks its leases `FOR KEY SHARE`); a lease another worker's
    /// claim is taking over at that moment is skipped, not waited for.
    @discardableResult
    public func renewLeases(_ leases: [Int64]) async throws(QueueError) -> Int {
        guard !leases.isEmpty else { return 0 }
        let lease = configuration.lease.inSeconds
        return try await named("renewing \(leases.count) leases") { [self] in
            try await count(
                """
                WITH r AS (
                    UPDATE herald_leases SET expires = now() + make_interval(secs => \(lease))
                    WHERE lease IN (SELECT lease FROM herald_leases
                                    WHERE lease = ANY(\(leases)::bigint[]) AND owner = \(owner)
                                    FOR NO KEY UPDATE SKIP LOCKED)
                    RETURNING 1
                ) SELECT count(*) FROM r
                """)
        }
    }

    /// Whether anything is left for this worker to wait for: rows no claim has taken (committed
    /// ones), or leases held by others or by no one (they end, or their time runs
    /// out and they become this worker's to take over).
    public func hasWorkLeft(inFlight: [Int64] = []) async throws(QueueError) -> Bool {
        try await named("looking for work left") { [self] in
            try await count(
                """
                SELECT (EXISTS (SELECT 1 FROM \(unescaped: Self.unclaimed(limit: 1)))
                     OR EXISTS (SELECT 1 FROM herald_scheduled WHERE cancelled_at IS NULL AND send_at <= now())
                     OR EXISTS (SELECT 1 FROM herald_leases WHERE owner <> \(owner) OR NOT lease = ANY(\(inFlight)::bigint[])))::int
                """) > 0
        }
    }

    /// Runs a statement whose one row's first column is a count.
    func count(_ query: PostgresQuery) async throws -> Int {
        var n = 0
        for try await v in try await client.query(query, logger: logger).decode(Int.self) { n = v }
        return n
    }
}
