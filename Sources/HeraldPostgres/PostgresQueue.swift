import HeraldCore
import Logging
import PostgresNIO
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// One worker's handle on the queue: a connection pool (postgres-nio's
/// `PostgresClient`, which reconnects), the worker's name (its `lease_owner`)
/// and the protocol's statements. Each statement is one round trip and checks
/// what it changed.
///
/// The protocol (`docs/scale-out.md`): a worker **claims** the oldest
/// queued rows, and rows whose lease expired under another worker, with
/// `FOR UPDATE SKIP LOCKED` (so workers never wait for each other nor claim
/// the same row), leasing them to itself until `now() + lease` and counting an
/// attempt; it **renews** its leases while they are in flight; it **finishes**
/// a batch of rows in one `UPDATE`, writing each outcome and releasing the row
/// only where it still holds the lease, so a worker whose lease was taken over
/// never overwrites the new holder's outcome.
public final class PostgresQueue: Sendable {
    public let configuration: PostgresQueueConfiguration
    /// This worker's `lease_owner`: host, process and a random part, unique per process.
    public let owner: String
    let client: PostgresClient
    let runner: Task<Void, Never>
    let logger: Logger
    /// Bumped by every `NOTIFY` on ``QueueSchema/channel``.
    let notifications = Atomic<Int>(0)
    let listener = Mutex<Task<Void, Never>?>(nil)
    /// The next claim's token; starts at random, so two queues given the same owner do not share tokens.
    let claimTokens = Atomic<Int64>(Int64.random(in: 1...(Int64.max / 2)))
    /// Tests only: how many claims to come lose their answer after they commit (as a dropped connection would).
    package let loseClaimAnswers = Atomic<Int>(0)

    /// Starts the pool (connections are made on first use).
    public init(configuration: PostgresQueueConfiguration, owner: String? = nil, logger: Logger? = nil) {
        self.configuration = configuration
        self.owner = owner ?? Self.defaultOwner()
        self.logger = logger ?? Logger(label: "herald.postgres", factory: { _ in SwiftLogNoOpLogHandler() })
        let client = PostgresClient(configuration: configuration.client, backgroundLogger: self.logger)
        self.client = client
        runner = Task { await client.run() }
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

    /// Inserts request lines as queued rows, in one statement; returns how many were inserted.
    public func enqueue(_ bodies: [String]) async throws(QueueError) -> Int {
        let inserted = try await named("enqueueing \(bodies.count) rows") { [self] in
            try await count(
                "WITH i AS (INSERT INTO notifications (body) SELECT unnest(\(bodies)::text[]) RETURNING 1) SELECT count(*) FROM i")
        }
        guard inserted == bodies.count else {
            throw QueueError("PostgreSQL \(configuration): enqueueing: \(inserted) of \(bodies.count) rows were inserted")
        }
        return inserted
    }

    /// A claimed row: its id, its request line and how many times it was claimed (more than once: another worker had it).
    public struct Claimed: Sendable, Hashable {
        public var id: Int64
        public var body: String
        public var attempts: Int
    }

    /// Claims up to `limit` rows, oldest first: queued ones, and leased ones
    /// whose lease expired: under another worker, or under this one when it
    /// no longer has them in flight (`inFlight`: its outcome write was lost
    /// or given up), so a worker alone on the queue takes those back too.
    ///
    /// The rows are marked with `token` (``nextClaimToken()``): if the claim's
    /// answer is lost, ``recoverClaims(_:)`` finds them again, so this worker
    /// sends them once instead of claiming them twice when their lease runs out.
    public func claim(limit: Int, inFlight: [Int64] = [], token: Int64 = 0) async throws(QueueError) -> [Claimed] {
        let lease = configuration.lease.inSeconds
        let rows = try await named("claiming rows") { [self] in
            let result = try await client.query(
                """
                WITH expired AS (
                    SELECT id FROM notifications
                    WHERE state = 'leased' AND lease_expires < now()
                      AND (lease_owner IS DISTINCT FROM \(owner) OR NOT id = ANY(\(inFlight)::bigint[]))
                    ORDER BY lease_expires LIMIT \(limit) FOR UPDATE SKIP LOCKED
                ), queued AS (
                    SELECT id FROM notifications WHERE state = 'queued' ORDER BY id LIMIT \(limit) FOR UPDATE SKIP LOCKED
                ), picked AS (
                    SELECT id FROM expired UNION ALL SELECT id FROM queued ORDER BY id LIMIT \(limit)
                )
                UPDATE notifications n
                SET state = 'leased', lease_owner = \(owner), lease_expires = now() + make_interval(secs => \(lease)),
                    attempts = n.attempts + 1, claim_token = \(token)
                FROM picked WHERE n.id = picked.id
                RETURNING n.id, n.body, n.attempts
                """, logger: logger)
            return try await Self.claimed(result, capacity: limit)
        }
        var lose = loseClaimAnswers.load(ordering: .relaxed)
        while lose > 0 {
            let (done, seen) = loseClaimAnswers.compareExchange(expected: lose, desired: lose - 1, ordering: .relaxed)
            if done { throw QueueError("PostgreSQL \(configuration): claiming rows: the answer was lost (a test's fault)", isOutage: true) }
            lose = seen
        }
        return rows
    }

    /// A token for the next claim, unique to this queue.
    public func nextClaimToken() -> Int64 { claimTokens.wrappingAdd(1, ordering: .relaxed).newValue }

    /// The rows that claims with these tokens leased to this worker and that
    /// it still holds (a claim whose answer was lost: it may have committed),
    /// their leases renewed. Rows another worker took since are not among them.
    public func recoverClaims(_ tokens: [Int64]) async throws(QueueError) -> [Claimed] {
        guard !tokens.isEmpty else { return [] }
        let lease = configuration.lease.inSeconds
        return try await named("finding the rows of \(tokens.count) unanswered claims") { [self] in
            let result = try await client.query(
                """
                UPDATE notifications SET lease_expires = now() + make_interval(secs => \(lease))
                WHERE state = 'leased' AND lease_owner = \(owner) AND claim_token = ANY(\(tokens)::bigint[])
                RETURNING id, body, attempts
                """, logger: logger)
            return try await Self.claimed(result, capacity: 0)
        }
    }

    /// Claimed rows from a statement's answer, oldest first.
    static func claimed(_ result: PostgresRowSequence, capacity: Int) async throws -> [Claimed] {
        var rows: [Claimed] = []
        rows.reserveCapacity(capacity)
        for try await (id, body, attempts) in result.decode((Int64, String, Int).self) {
            rows.append(Claimed(id: id, body: body, attempts: attempts))
        }
        rows.sort { $0.id < $1.id }
        return rows
    }

    /// Extends the lease of these rows where this worker still holds them; returns how many it does.
    /// Only rows in flight are renewed: one whose outcome was written (or given up) is left to expire,
    /// so a write lost by the database is claimed again by someone. Rows locked by a statement under
    /// way (this worker's own outcome write, another's claim) are skipped, not waited for: a slow
    /// write must not hold up the renewal of every other row until their leases run out.
    @discardableResult
    public func renewLeases(_ ids: [Int64]) async throws(QueueError) -> Int {
        guard !ids.isEmpty else { return 0 }
        let lease = configuration.lease.inSeconds
        return try await named("renewing \(ids.count) leases") { [self] in
            try await count(
                """
                WITH r AS (
                    UPDATE notifications SET lease_expires = now() + make_interval(secs => \(lease))
                    WHERE id IN (SELECT id FROM notifications
                                 WHERE id = ANY(\(ids)::bigint[]) AND state = 'leased' AND lease_owner = \(owner)
                                 FOR UPDATE SKIP LOCKED)
                    RETURNING 1
                ) SELECT count(*) FROM r
                """)
        }
    }

    /// Whether anything is left for this worker to wait for: queued rows, or rows leased by others
    /// (they end, or their lease expires and they become this worker's to claim).
    public func hasWorkLeft(inFlight: [Int64] = []) async throws(QueueError) -> Bool {
        try await named("looking for work left") { [self] in
            try await count(
                """
                SELECT (EXISTS (SELECT 1 FROM notifications WHERE state = 'queued')
                     OR EXISTS (SELECT 1 FROM notifications WHERE state = 'leased'
                                AND (lease_owner IS DISTINCT FROM \(owner) OR NOT id = ANY(\(inFlight)::bigint[]))))::int
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
