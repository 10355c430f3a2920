import HeraldCore
import Logging
import PostgresNIO
import ServiceLifecycle
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
///
/// A swift-service-lifecycle `Service`: ``run()`` runs the connection pools
/// (and `LISTEN`, once a worker waits for work) until a graceful shutdown or
/// cancellation; nothing answers until it runs. Put it in the command's
/// `ServiceGroup` before the services that use it (it stops after them), or,
/// for a one-off use, ``start()`` it and ``close()`` it.
public final class PostgresQueue: Service, Sendable {
    public let configuration: PostgresQueueConfiguration
    /// This worker's `lease_owner`: host, process and a random part, unique per process.
    public let owner: String
    let client: PostgresClient
    /// The pool for the prepared claim and outcome write (``PostgresQueueConfiguration/plannedClient``).
    let planned: PostgresClient
    let logger: Logger
    /// Bumped by every `NOTIFY` on ``QueueSchema/channel``, and by this process's own producers (``wakeWorkers()``).
    let notifications = Atomic<Int>(0)
    /// Asks ``run()`` to send a `NOTIFY` (``wakeWorkers()``); holds at most one, so requests made
    /// while one is being sent become one more.
    let wakeRequests: (stream: AsyncStream<Void>, continuation: AsyncStream<Void>.Continuation)
    /// Rows inserted since ``analyzeIfGrown(by:)`` last looked at the table's statistics.
    let insertedSinceLook = Atomic<Int>(0)
    /// Asks ``run()`` to start listening (once: the first worker that waits).
    let listenRequests: (stream: AsyncStream<Void>, continuation: AsyncStream<Void>.Continuation)
    let listenRequested = Atomic<Bool>(false)
    /// Opened to stop ``run()``.
    let stopped = Latch()
    /// ``start()``'s task, for ``close()``.
    let started = Mutex<Task<Void, Never>?>(nil)
    /// The next claim's token; starts at random, so two queues given the same owner do not share tokens.
    let claimTokens = Atomic<Int64>(Int64.random(in: 1...(Int64.max / 2)))
    /// One claim's lease statement at a time from this queue (``claim(limit:inFlight:token:)``): a
    /// worker's claims ahead would otherwise queue on the cursor's row lock beside every other
    /// worker's, twice as many waiters for nothing (each takes its turn anyway).
    let leaseTurn = FlowGate(limit: 1)
    /// When idempotency keys past their window were last deleted (``forgetExpiredKeys(window:)``).
    let keySweep = Mutex<ContinuousClock.Instant?>(nil)
    /// Tests only: how many claims to come lose their answer after they commit (as a dropped connection would).
    package let loseClaimAnswers = Atomic<Int>(0)
    /// Tests only: the same for outcome writes.
    package let loseWriteAnswers = Atomic<Int>(0)
    /// Tests only: how many drops of finished leases to come fail before they reach the database.
    package let failDrops = Atomic<Int>(0)
    /// Tests only: ``wakeWorkers()`` sends no `NOTIFY` (the wake-up path off, to measure what it costs).
    package let quiet = Atomic<Bool>(false)

    /// The queue's handle; nothing connects until ``run()`` (or ``start()``).
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
        listenRequests = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        wakeRequests = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
    }

    /// Runs the pools, and `LISTEN` once asked for, until a graceful shutdown,
    /// ``close()`` or cancellation; then closes every connection. A queue
    /// already ``start()``ed (to migrate it before the service group starts)
    /// runs on in its own task: the group then only owns its stop.
    public func run() async {
        await withGracefulShutdownHandler {
            if started.withLock({ $0 }) == nil { await runPools() } else { await stopped.wait() }
        } onGracefulShutdown: {
            self.stopped.open()
        }
        await close()
    }

    func runPools() async {
        await withDiscardingTaskGroup { group in
            group.addTask { await self.client.run() }
            group.addTask { await self.planned.run() }
            group.addTask {
                for await _ in self.listenRequests.stream {
                    await self.listen()
                    return
                }
            }
            // Not cancelled with the rest: a wake-up asked for before the stop is still sent (herald
            // enqueue stops its queue as soon as its last rows are in), while the pools still run.
            let waking = Task { await self.sendWakeUps() }
            await stopped.wait()
            listenRequests.continuation.finish()
            wakeRequests.continuation.finish()
            await waking.value
            group.cancelAll()
        }
    }

    /// Tells idle workers that rows were committed: this process's own at once, others by a
    /// `NOTIFY` on ``QueueSchema/channel`` that ``run()`` sends from a session of its own, after
    /// the caller's transaction, so the caller neither waits for it nor takes the commit-time lock a
    /// `NOTIFY` in its own transaction would. At most one `NOTIFY` per `poll`: what is asked in
    /// between is sent when that `poll` is up (docs/scale-out.md, "Waking workers").
    public func wakeWorkers() {
        notifications.add(1, ordering: .releasing)
        if !quiet.load(ordering: .relaxed) { wakeRequests.continuation.yield() }
    }

    func sendWakeUps() async {
        for await _ in wakeRequests.stream {
            // One per row cost 16 one-row producers 31% of their rate, one per 20 ms each 22% (a debug
            // build, 2 cores); other workers look every `poll` anyway, and after a wake-up sooner.
            let next = ContinuousClock.now + configuration.poll
            do {
                // Bounded: a stop waits for the last one.
                try await answered(within: .seconds(5)) { [self] in
                    _ = try await client.query("SELECT pg_notify(\(QueueSchema.channel), '')", logger: logger).collect()
                }
            } catch {
                logger.debug("NOTIFY failed (idle workers find the rows at their next poll): \(QueueError.explain(error))")
            }
            while !stopped.isOpen && ContinuousClock.now < next { try? await Task.sleep(for: .milliseconds(10)) }
        }
    }

    /// Runs the queue in a task of its own, for a one-off use (a test, a command
    /// before its service group starts): ``close()`` stops it, not a graceful
    /// shutdown of the task that called this. Returns the queue.
    @discardableResult
    public func start() -> PostgresQueue {
        started.withLock { task in
            if task == nil { task = Task { await self.runPools() } }
        }
        return self
    }

    /// Stops ``run()`` (started here or in a service group): listening ends and the pools' connections close.
    public func close() async {
        stopped.open()
        await started.withLock { $0 }?.value
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
        // Still waiting after connectTimeout: if the server refuses new sessions, say so now rather
        // than after answerTimeout (the pool waits in silence while it cannot open one).
        let waited = configuration.connectTimeout
        let check: @Sendable () async -> Void = { [self] in
            guard let why = await sessionRefusal(), !Task.isCancelled else { return }
            logger.error("PostgreSQL \(configuration): \(what): no answer for \(waited), and a new session is refused: \(why) (still waiting)")
        }
        do {
            return try await answered(within: configuration.answerTimeout, meanwhile: (waited, check), body)
        } catch let e as NoAnswer {
            // The pool keeps a statement waiting while it cannot open a session, and says nothing of
            // why: a session of our own asks (the server's max_connections taken, a password changed…).
            let why = await sessionRefusal().map { "; a new session is refused: \($0)" } ?? ""
            throw QueueError("PostgreSQL \(configuration): \(what): \(e)\(why)", isOutage: true)
        } catch {
            throw QueueError("PostgreSQL \(configuration): \(what): \(QueueError.explain(error))", isOutage: QueueError.isOutage(error))
        }
    }

    /// Why the server refuses a new session now (`nil`: it accepts one, which is closed at once).
    func sessionRefusal() async -> String? {
        do {
            let connection = try await PostgresConnection.connect(configuration: configuration.connection, id: 0, logger: logger)
            try? await connection.close()
            return nil
        } catch {
            return QueueError.explain(error)
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
        } catch let e as PostgresTransactionError where e.closureError is QueueError {
            // A migration's own refusal (a newer schema), raised inside its transaction: as it is.
            throw e.closureError as! QueueError
        } catch {
            let why = QueueError.explain(error)
            if configuration.pooling == .session && why.contains("unsupported startup parameter") {
                throw QueueError(
                    "\(place): the server refused the session settings jit, plan_cache_mode and enable_bitmapscan (\(why)): a pooler such as PgBouncer? "
                        + "Set the queue's \"pooling\" to \"transaction\" (docs/scale-out.md, \"Behind PgBouncer\")")
            }
            throw QueueError("\(place): migrating the queue's schema: \(why)")
        }
    }

    /// The number of `NOTIFY`s seen so far, plus one each time listening (re)starts (starts listening on first use).
    package var notificationCount: Int {
        startListening()
        return notifications.load(ordering: .acquiring)
    }

    /// Runs `statement` on the pool for prepared statements: named, parsed and planned once per
    /// connection; behind a pooler in transaction pooling, where the next statement may reach
    /// another session that never saw it prepared, as an unnamed statement with the same text.
    func prepared<Statement: PostgresPreparedStatement>(_ statement: Statement) async throws
        -> AsyncThrowingMapSequence<PostgresRowSequence, Statement.Row>
    {
        guard configuration.pooling == .transaction else { return try await planned.execute(statement, logger: logger) }
        return try await planned.query(PostgresQuery(unsafeSQL: Statement.sql, binds: try statement.makeBindings()), logger: logger)
            .map { try statement.decodeRow($0) }
    }

    /// Asks ``run()`` to listen on ``QueueSchema/channel`` (once; later calls do nothing). Not behind
    /// a pooler in transaction pooling: the session that ran `LISTEN` goes back to its pool.
    package func startListening() {
        guard configuration.pooling == .session else { return }
        guard !listenRequested.exchange(true, ordering: .acquiringAndReleasing) else { return }
        listenRequests.continuation.yield()
    }

    /// Listens on a connection of its own until cancelled, again after any failure.
    func listen() async {
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
