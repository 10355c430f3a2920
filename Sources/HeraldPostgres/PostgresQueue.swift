import HeraldCore
import Logging
import PostgresNIO
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// One worker's handle on the queue: a connection pool (postgres-nio's
/// `PostgresClient`, which reconnects), the worker's name (its lease owner)
/// and the protocol's statements. Each statement is one round trip and checks
/// what it changed.
///
/// The protocol (`docs/scale-out.md`; schema version 5): rows in
/// `notifications` are never updated. A worker **claims** the rows after a
/// cursor, in `(xid, id)` order, inserting one lease row for them, and takes
/// over leases whose time ran out, with `FOR UPDATE SKIP LOCKED` (so workers
/// never wait for each other nor take the same lease); it **renews** its
/// leases while their rows are in flight; it **finishes** rows by appending
/// their outcomes, in one statement per batch, only under leases it still
/// holds, deleting the leases it has finished, so a worker whose lease was
/// taken over never writes over the new holder's outcome.
public final class PostgresQueue: Sendable {
    public let configuration: PostgresQueueConfiguration
    /// This worker's `lease_owner`: host, process and a random part, unique per process.
    public let owner: String
    let client: PostgresClient
    /// The pool for the prepared claim and outcome write (``PostgresQueueConfiguration/plannedClient``).
    let planned: PostgresClient
    let runner: Task<Void, Never>
    let logger: Logger
    /// Bumped by every `NOTIFY` on ``QueueSchema/channel``.
    let notifications = Atomic<Int>(0)
    let listener = Mutex<Task<Void, Never>?>(nil)
    /// The next claim's token; starts at random, so two queues given the same owner do not share tokens.
    let claimTokens = Atomic<Int64>(Int64.random(in: 1...(Int64.max / 2)))
    /// When idempotency keys past their window were last deleted (``forgetExpiredKeys(window:)``).
    let keySweep = Mutex<ContinuousClock.Instant?>(nil)
    /// Tests only: how many claims to come lose their answer after they commit (as a dropped connection would).
    package let loseClaimAnswers = Atomic<Int>(0)
    /// Tests only: the same for outcome writes.
    package let loseWriteAnswers = Atomic<Int>(0)

    /// Starts the pool (connections are made on first use).
    public init(configuration: PostgresQueueConfiguration, owner: String? = nil, logger: Logger? = nil) {
        self.configuration = configuration
        self.owner = owner ?? Self.defaultOwner()
        self.logger = logger ?? Logger(label: "herald.postgres", factory: { _ in SwiftLogNoOpLogHandler() })
        // The pool's own messages at warning and above: at info it reports each connection it fails to
        // make, including those cut short by close(), after a command's summary was printed; an
        // outage is reported by the worker itself ("…; retrying in …").
        var background = self.logger
        background.logLevel = max(background.logLevel, .warning)
        let client = PostgresClient(configuration: configuration.client, backgroundLogger: background)
        let planned = PostgresClient(configuration: configuration.plannedClient, backgroundLogger: background)
        self.client = client
        self.planned = planned
        runner = Task {
            await withDiscardingTaskGroup { group in
                group.addTask { await client.run() }
                group.addTask { await planned.run() }
            }
        }
    }

    /// Stops listening and closes the pool's connections.
    public func close() async {
        listener.withLock { $0 }?.cancel()
        await listener.withLock { $0 }?.value
        runner.cancel()
        await runner.value
    }

    static func defaultOwner() -> String {
        var name = [CChar](repeating: 0, count: 256)
        let host = gethostname(&name, name.count) == 0
            ? String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : "host"
        return "\(host):\(getpid()):\(UInt32.random(in: 0...UInt32.max))"
    }

    /// Runs `body`, turning a failure into a ``QueueError`` naming the database and `what`.
    /// A statement with no answer after ``PostgresQueueConfiguration/answerTimeout`` fails
    /// as an outage (and is left behind): postgres-nio 1.33 can leave a query waiting forever
    /// when the server cuts its connection under it (a restart while an outcome write was
    /// being sent), and a worker must not stop for good on that.
    func named<T: Sendable>(_ what: String, _ body: @escaping @Sendable () async throws -> T) async throws(QueueError) -> T {
        do {
            return try await answered(within: configuration.answerTimeout, body)
        } catch let e as NoAnswer {
            throw QueueError("PostgreSQL \(configuration): \(what): \(e)", isOutage: true)
        } catch {
            throw QueueError("PostgreSQL \(configuration): \(what): \(QueueError.explain(error))", isOutage: QueueError.isOutage(error))
        }
    }

    /// Brings the schema to the newest version (see ``QueueSchema``).
    @discardableResult
    public func migrate() async throws(QueueError) -> QueueSchema.Result {
        let place = "PostgreSQL \(configuration)"
        do {
            // On a connection of its own rather than the pool's: a server that cannot be reached fails
            // here after connectTimeout, where the pool would keep trying for a minute.
            let connection = try await PostgresConnection.connect(configuration: configuration.connection, id: 0, logger: logger)
            do {
                let result = try await QueueSchema.migrate(connection, where: place, logger: logger)
                try? await connection.close()
                return result
            } catch {
                try? await connection.close()
                throw error
            }
        } catch let e as QueueError {
            throw e
        } catch {
            throw QueueError("\(place): migrating the queue's schema: \(QueueError.explain(error))")
        }
    }

    /// Inserts request lines as queued rows, in one `COPY` (a third cheaper for the database than an
    /// `INSERT` of the same rows: the queue's end-to-end rate is bounded by the database's CPU); returns
    /// how many were inserted: all of them, or an error (the `COPY` is one statement).
    public func enqueue(_ bodies: [String]) async throws(QueueError) -> Int {
        guard !bodies.isEmpty else { return 0 }
        try await named("enqueueing \(bodies.count) rows") { [self] in
            try await client.withConnection { connection in
                try await connection.copyFrom(table: "notifications", columns: ["body"], logger: logger) { writer in
                    var buffer = ByteBufferAllocator().buffer(capacity: 64 * 1024)
                    for body in bodies {
                        Self.appendCopyText(body, to: &buffer)
                        if buffer.readableBytes >= 60 * 1024 {
                            try await writer.write(buffer)
                            buffer.clear()
                        }
                    }
                    if buffer.readableBytes > 0 { try await writer.write(buffer) }
                }
            }
        }
        return bodies.count
    }

    /// `text` as one line of `COPY`'s text format: backslash, tab, newline and carriage return escaped.
    package static func appendCopyText(_ text: String, to buffer: inout ByteBuffer) {
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
        buffer.writeInteger(UInt8(ascii: "\n"))
    }

    /// A claimed row: its id, its request line, its lease (the claim that holds it) and how many
    /// times it was claimed (more than once: another worker had it).
    public struct Claimed: Sendable, Hashable {
        public var id: Int64
        public var body: String
        public var lease: Int64
        public var attempts: Int
    }

    /// What a claim took: rows, and the leases it took over whose rows were all finished already
    /// (their holder wrote every outcome, then lost the lease before releasing it): the caller
    /// drops those with ``dropLeases(_:)``.
    public struct Claim: Sendable {
        public var rows: [Claimed]
        public var emptyLeases: [Int64]
    }

    /// Claims up to `limit` new rows, oldest first, in a lease of their own, and takes over a few
    /// leases whose time ran out: under another worker, or under this one when it no longer has
    /// them in flight (`inFlight`, lease ids: their outcome write was lost or given up), so a
    /// worker alone on the queue takes those back too. Of a lease taken over, only the rows with
    /// no outcome yet come back, their attempt counted.
    ///
    /// New rows are those after the cursor (`herald_cursor`) in `(xid, id)` order, of
    /// transactions older than any still running: every row committed later lies after them, so
    /// the cursor never passes one. Rows are never updated; a claim inserts one lease row.
    ///
    /// The lease is marked with `token` (``nextClaimToken()``): if the claim's answer is lost,
    /// ``recoverClaims(_:)`` finds it again, so this worker sends its rows once instead of
    /// claiming them twice when the lease runs out.
    public func claim(limit: Int, inFlight: [Int64] = [], token: Int64 = 0) async throws(QueueError) -> Claim {
        let statement = ClaimStatement(owner: owner, lease: configuration.lease.inSeconds, token: token, inFlight: inFlight, limit: Int64(limit))
        let claim = try await named("claiming rows") { [self] in
            try await Self.claimed(try await planned.execute(statement, logger: logger), capacity: limit)
        }
        if Self.takeOne(loseClaimAnswers) { throw QueueError("PostgreSQL \(configuration): claiming rows: the answer was lost (a test's fault)", isOutage: true) }
        return claim
    }

    /// Takes one from `counter` if it is above zero (the tests' lost answers).
    static func takeOne(_ counter: borrowing Atomic<Int>) -> Bool {
        var n = counter.load(ordering: .relaxed)
        while n > 0 {
            let (done, seen) = counter.compareExchange(expected: n, desired: n - 1, ordering: .relaxed)
            if done { return true }
            n = seen
        }
        return false
    }

    /// A token for the next claim, unique to this queue.
    public func nextClaimToken() -> Int64 { claimTokens.wrappingAdd(1, ordering: .relaxed).newValue }

    /// The rows of the leases that claims with these tokens gave this worker and that it still
    /// holds (a claim whose answer was lost: it may have committed), their leases renewed. Leases
    /// another worker took since are not among them.
    public func recoverClaims(_ tokens: [Int64]) async throws(QueueError) -> Claim {
        guard !tokens.isEmpty else { return Claim(rows: [], emptyLeases: []) }
        let lease = configuration.lease.inSeconds
        return try await named("finding the rows of \(tokens.count) unanswered claims") { [self] in
            let result = try await client.query(
                """
                WITH got AS (
                    UPDATE herald_leases SET expires = now() + make_interval(secs => \(lease))
                    WHERE owner = \(owner) AND claim_token = ANY(\(tokens)::bigint[])
                    RETURNING *
                )
                \(unescaped: Self.unfinishedRows(of: "got"))
                """, logger: logger)
            return try await Self.claimed(result, capacity: 0)
        }
    }

    /// A `SELECT` answering, for each lease of the CTE `leases` (rows of `herald_leases`), one row as
    /// ``claimed(_:capacity:)`` reads it: its rows with no outcome yet, ids and bodies as arrays
    /// (null when none is left). For leases taken over or found again: some of their rows may be done.
    static func unfinishedRows(of leases: String) -> String {
        """
        SELECT l.lease, l.attempts, array_agg(n.id ORDER BY n.id) FILTER (WHERE n.id IS NOT NULL),
               array_agg(n.body ORDER BY n.id) FILTER (WHERE n.id IS NOT NULL)
        FROM \(leases) l
        LEFT JOIN LATERAL (
            -- Outcomes of a lease's rows are written under that lease.
            SELECT u.id FROM \(leaseRows(of: "l")) AS u(id)
            EXCEPT SELECT unnest(o.ids) FROM herald_outcomes o WHERE o.lease = l.lease
        ) r ON true
        LEFT JOIN notifications n ON n.id = r.id
        GROUP BY l.lease, l.attempts
        """
    }

    /// The rows of the lease `lease` (a row of `herald_leases`, or of a CTE returning its columns),
    /// whichever way it names them: its range or its ids (`herald_lease_rows`, schema 6).
    package static func leaseRows(of lease: String) -> String {
        "herald_lease_rows(\(lease).ids, \(lease).lo_xid, \(lease).lo_id, \(lease).hi_xid, \(lease).hi_id)"
    }

    /// The rows after the cursor whose values come from `cursor` (a table or CTE with `xid, id`).
    /// As sub-selects the values reach the `(xid, id)` index scan as parameters; as a join,
    /// PostgreSQL would scan the index from its start and filter.
    package static func afterCursor(_ cursor: String) -> String {
        "(n.xid, n.id) > ((SELECT xid FROM \(cursor)), (SELECT id FROM \(cursor)))"
    }

    /// Claimed rows from a statement's answer: a row per lease (`lease, attempts, ids, bodies`; a
    /// lease with no row left comes with null arrays), so that a claim's thousand rows cost one
    /// row's decoding, not a thousand. Oldest first.
    static func claimed(_ result: PostgresRowSequence, capacity: Int) async throws -> Claim {
        try await claimed(result.decode(ClaimRow.self), capacity: capacity)
    }

    /// A row of a claim's answer: `lease, attempts, ids, bodies`.
    typealias ClaimRow = (Int64, Int, [Int64]?, [String]?)

    static func claimed<Rows: AsyncSequence>(_ result: Rows, capacity: Int) async throws -> Claim where Rows.Element == ClaimRow {
        var rows: [Claimed] = []
        rows.reserveCapacity(capacity)
        var empty: [Int64] = []
        for try await (lease, attempts, ids, bodies) in result {
            var any = false
            if let ids, let bodies {
                for (id, body) in zip(ids, bodies) {
                    rows.append(Claimed(id: id, body: body, lease: lease, attempts: attempts))
                    any = true
                }
            }
            if !any { empty.append(lease) }
        }
        rows.sort { $0.id < $1.id }
        return Claim(rows: rows, emptyLeases: empty.sorted())
    }

    /// Deletes these leases where this worker holds them (their rows are all finished).
    public func dropLeases(_ leases: [Int64]) async throws(QueueError) {
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

    /// Whether anything is left for this worker to wait for: rows after the cursor (committed or
    /// still being inserted), or leases held by others or by no one (they end, or their time runs
    /// out and they become this worker's to take over).
    public func hasWorkLeft(inFlight: [Int64] = []) async throws(QueueError) -> Bool {
        try await named("looking for work left") { [self] in
            try await count(
                """
                SELECT (EXISTS (SELECT 1 FROM notifications n WHERE \(unescaped: Self.afterCursor("herald_cursor")))
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

    /// The number of `NOTIFY`s seen so far, plus one each time listening (re)starts (starts listening on first use).
    package var notificationCount: Int {
        startListening()
        return notifications.load(ordering: .acquiring)
    }

    /// Listens on ``QueueSchema/channel`` on a connection of its own, again after any failure.
    package func startListening() {
        listener.withLock { task in
            guard task == nil else { return }
            // Holds the queue until close() cancels it.
            task = Task { [client, logger] in
                while !Task.isCancelled {
                    do {
                        try await client.withConnection { connection in
                            try await connection.listen(on: QueueSchema.channel) { events in
                                // A wake-up once listening, in case rows came while no one listened.
                                self.notifications.add(1, ordering: .releasing)
                                for try await _ in events { self.notifications.add(1, ordering: .releasing) }
                            }
                        }
                    } catch {
                        logger.debug("LISTEN failed: \(QueueError.explain(error))")
                    }
                    try? await Task.sleep(for: .milliseconds(500))
                }
            }
        }
    }

    /// Waits until a `NOTIFY` arrives, `timeout` passes or `stop()` is true, checking every few milliseconds.
    /// `since`: the count read before the caller looked for work, so a `NOTIFY` that came in between is not missed.
    func waitForNotification(timeout: Duration, since: Int? = nil, stop: () -> Bool) async {
        let seen = since ?? notificationCount
        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        while clock.now < deadline && !stop() && notifications.load(ordering: .acquiring) == seen {
            try? await Task.sleep(for: .milliseconds(10))
        }
    }
}

/// No answer came in time.
struct NoAnswer: Error, CustomStringConvertible {
    let timeout: Duration
    var description: String { "no answer from the server in \(timeout) (given up; retried as after a lost connection)" }
}

/// `body`'s result, or ``NoAnswer`` once `timeout` has passed without one: `body`
/// then runs on in a task of its own, cancelled, and its result is dropped.
/// Cancelling the caller cancels `body` and returns at once (`CancellationError`),
/// whether or not `body` heeds it.
func answered<T: Sendable>(within timeout: Duration, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    let race = AnswerRace<T>()
    return try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { continuation in
            race.waiting.withLock { $0 = continuation }
            // Cancelled before the handler could see a caller to resume.
            if Task.isCancelled {
                race.waiting.withLock { $0.take() }?.resume(throwing: CancellationError())
                return
            }
            let timer = Task {
                guard (try? await Task.sleep(for: timeout)) != nil, let c = race.waiting.withLock({ $0.take() }) else { return }
                race.tasks.withLock { $0.work }?.cancel()
                c.resume(throwing: NoAnswer(timeout: timeout))
            }
            let work = Task {
                let result: Result<T, any Error>
                do { result = .success(try await body()) } catch { result = .failure(error) }
                guard let c = race.waiting.withLock({ $0.take() }) else { return }
                race.tasks.withLock { $0.timer }?.cancel()
                c.resume(with: result)
            }
            race.tasks.withLock { $0 = (work, timer) }
        }
    } onCancel: {
        let (work, timer) = race.tasks.withLock { $0 }
        work?.cancel()
        timer?.cancel()
        race.waiting.withLock { $0.take() }?.resume(throwing: CancellationError())
    }
}

/// The caller waiting in ``answered(within:_:)``, resumed once by whichever ends first, and the two tasks.
final class AnswerRace<T: Sendable>: Sendable {
    let waiting = Mutex<CheckedContinuation<T, any Error>?>(nil)
    let tasks = Mutex<(work: Task<Void, Never>?, timer: Task<Void, Never>?)>((nil, nil))
}

extension PostgresQueue {
    /// The claim (``PostgresQueue/claim(limit:inFlight:token:)``) as a prepared statement, on the pool
    /// of generic plans: parsed and planned once per connection. Planned anew on every claim, it
    /// took about 0.8 ms of a 1,000-row claim's 3-4 ms.
    struct ClaimStatement: PostgresPreparedStatement {
        static let sql = """
            WITH taken AS (
                UPDATE herald_leases l
                SET owner = $1, expires = now() + make_interval(secs => $2), attempts = l.attempts + 1, claim_token = $3
                WHERE l.lease IN (SELECT lease FROM herald_leases
                                  WHERE expires < now() AND (owner <> $1 OR NOT lease = ANY($4::bigint[]))
                                  ORDER BY expires LIMIT 2 FOR UPDATE SKIP LOCKED)
                RETURNING l.*
            ), c AS (
                -- Locked only when a row waits after it: a claim that finds nothing neither queues
                -- behind a claim in progress (idle workers all claim on each NOTIFY) nor writes (a
                -- row lock takes a transaction id, and a WAL flush at commit).
                SELECT k.xid, k.id FROM herald_cursor k
                WHERE EXISTS (SELECT 1 FROM notifications n
                              WHERE (n.xid, n.id) > (k.xid, k.id) AND n.xid < pg_snapshot_xmin(pg_current_snapshot()))
                FOR UPDATE
            ), picked AS (
                SELECT n.xid, n.id, n.body FROM notifications n
                WHERE \(PostgresQueue.afterCursor("c")) AND n.xid < pg_snapshot_xmin(pg_current_snapshot())
                ORDER BY n.xid, n.id LIMIT $5
            ), last AS (
                SELECT xid, id FROM picked ORDER BY xid DESC, id DESC LIMIT 1
            ), moved AS (
                UPDATE herald_cursor SET xid = p.xid, id = p.id FROM last p RETURNING 1
            ), fresh AS (
                -- The rows picked are exactly those after the cursor up to the last of them.
                INSERT INTO herald_leases (lo_xid, lo_id, hi_xid, hi_id, owner, expires, claim_token)
                SELECT c.xid, c.id, p.xid, p.id, $1, now() + make_interval(secs => $2), $3
                FROM c, last p
                RETURNING lease, attempts
            )
            -- Both arrays in one pass over the rows, so ids[k] is bodies[k]'s row; unsorted, since
            -- claimed() puts the rows in order. An ORDER BY inside each aggregate read the rows
            -- twice and sorted them twice: pgbench timed the select of 1,000 rows at 2.1-2.3 ms
            -- that way, 1.5-1.6 ms in one pass (sorted once).
            SELECT f.lease, f.attempts, a.ids, a.bodies
            FROM fresh f, (SELECT array_agg(id) AS ids, array_agg(body) AS bodies FROM picked) a
            UNION ALL
            \(PostgresQueue.unfinishedRows(of: "taken"))
            """
        static let bindingDataTypes: [PostgresDataType] = [.text, .float8, .int8, .int8Array, .int8]
        typealias Row = ClaimRow

        var owner: String
        var lease: Double
        var token: Int64
        var inFlight: [Int64]
        var limit: Int64

        func makeBindings() throws -> PostgresBindings {
            var b = PostgresBindings(capacity: 5)
            b.append(owner)
            b.append(lease)
            b.append(token)
            b.append(inFlight)
            b.append(limit)
            return b
        }

        func decodeRow(_ row: PostgresRow) throws -> Row { try row.decode(Row.self) }
    }
}
