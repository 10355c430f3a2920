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
    /// Bumped by every `NOTIFY` on ``QueueSchema/channel``.
    let notifications = Atomic<Int>(0)
    /// Asks ``run()`` to start listening (once: the first worker that waits).
    let listenRequests: (stream: AsyncStream<Void>, continuation: AsyncStream<Void>.Continuation)
    let listenRequested = Atomic<Bool>(false)
    /// Opened to stop ``run()``.
    let stopped = Latch()
    /// ``start()``'s task, for ``close()``.
    let started = Mutex<Task<Void, Never>?>(nil)
    /// The next claim's token; starts at random, so two queues given the same owner do not share tokens.
    let claimTokens = Atomic<Int64>(Int64.random(in: 1...(Int64.max / 2)))
    /// When idempotency keys past their window were last deleted (``forgetExpiredKeys(window:)``).
    let keySweep = Mutex<ContinuousClock.Instant?>(nil)
    /// Tests only: how many claims to come lose their answer after they commit (as a dropped connection would).
    package let loseClaimAnswers = Atomic<Int>(0)
    /// Tests only: the same for outcome writes.
    package let loseWriteAnswers = Atomic<Int>(0)

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
    }

    /// Runs the pools, and `LISTEN` once asked for, until a graceful shutdown,
    /// ``close()`` or cancellation; then closes every connection. A queue
    /// already ``start()``ed (to migrate it before the service group starts)
    /// runs on in its own task: the group then only owns its stop.
    public func run() async {
        guard started.withLock({ $0 }) == nil else {
            await withGracefulShutdownHandler {
                await stopped.wait()
            } onGracefulShutdown: {
                self.stopped.open()
            }
            await close()
            return
        }
        await runPools()
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
            await withGracefulShutdownHandler {
                await stopped.wait()
            } onGracefulShutdown: {
                self.stopped.open()
            }
            listenRequests.continuation.finish()
            group.cancelAll()
        }
    }

    /// Runs the queue in a task of its own, for a one-off use (a test, a command
    /// without a service group): ``close()`` stops it. Returns the queue.
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

    /// Asks ``run()`` to listen on ``QueueSchema/channel`` (once; later calls do nothing).
    package func startListening() {
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
