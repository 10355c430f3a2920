import HeraldCore
import HeraldStore
import NIOCore
import Logging
import PostgresNIO
import ServiceLifecycle
import Synchronization

/// The token store on PostgreSQL, shared by every worker on one database,
/// with the SQLite store's semantics (`docs/feedback.md`): a row per token and
/// topic; a registration or unregistration only ever moves its time forward;
/// a request is suppressed while the token's unregistration is at or after
/// its registration.
///
/// **In front, memory.** As with ``SQLiteTokenStore``, suppression is
/// answered from a ``SuppressionIndex`` (tokens with an unregistration for
/// some topic, with every topic of theirs), so the suppression stage never
/// waits on the network. A change made here is in this index at once; it
/// reaches the database through a writer task (one statement per batch of
/// changes, merged per token and topic), and the other workers' indexes
/// through their refresh (every `refreshInterval`): each reads the rows changed
/// since its last look (`updated_at`, re-reading an overlap so a transaction
/// that committed late is not missed; a re-read row changes nothing).
///
/// **Failures.** A write that fails is kept and tried again (the database is
/// waited for, as the queue is); ``failure`` holds the first error while
/// changes are waiting, and ``close()`` reports what could not be written.
///
/// A swift-service-lifecycle `Service`: ``run()`` writes and refreshes until
/// a graceful shutdown or ``close()``, then writes what is pending (for at
/// most `closeTimeout`). Put it in the command's `ServiceGroup` after the
/// queue, or ``start()`` it and ``close()`` it.
public final class PostgresTokenStore: TokenStore, Service {
    let queue: PostgresQueue
    let index = Mutex(SuppressionIndex())
    struct Pending {
        var events: [TokenEvent] = []
        var waiter: CheckedContinuation<Void, Never>?
        var writing = 0
        var closed = false
    }
    let pending = Mutex(Pending())
    let failureState = Mutex<QueueError?>(nil)
    /// The newest `updated_at` (microseconds since 2000, PostgreSQL's clock) this worker has read.
    let seen = Mutex<Int64>(0)
    let refreshInterval: Duration
    /// ``start()``'s task.
    let started = Mutex<Task<Void, Never>?>(nil)
    /// Opened to stop ``run()``; `closing` is how long it may still write then.
    let stopping = Latch()
    let closing = Mutex<Duration>(.seconds(10))
    let running = Atomic<Bool>(false)
    let ended = Latch()
    /// Changes that could not be written, counted once ``run()`` has stopped.
    let notWritten = Atomic<Int>(0)
    /// Rows read into the index when the store opened.
    public let rowsLoaded: Int

    /// How far back each refresh re-reads, for transactions that committed after a later one was read.
    static let overlapMicroseconds: Int64 = 10_000_000

    /// Opens the store on `queue`'s database (migrated by `queue.migrate()`), reading into memory every row
    /// of every token with an unregistration. Nothing is written until ``run()`` (or ``start()``).
    public init(queue: PostgresQueue, refreshInterval: Duration = .seconds(1)) async throws(QueueError) {
        self.queue = queue
        self.refreshInterval = refreshInterval
        let loaded = try await queue.named("loading the token store") { [queue] () async throws -> (SuppressionIndex, Int, Int64) in
            var idx = SuppressionIndex()
            var n = 0
            var newest: Int64 = 0
            let rows = try await queue.client.query(
                """
                SELECT token, topic, registered_at, unregistered_at, (extract(epoch FROM updated_at - '2000-01-01'::timestamptz) * 1000000)::bigint
                FROM herald_tokens WHERE token IN (SELECT token FROM herald_tokens WHERE unregistered_at IS NOT NULL)
                """, logger: queue.logger)
            for try await (token, topic, registered, dead, updated) in rows.decode((ByteBuffer, String, Int64?, Int64?, Int64).self) {
                idx.update(Self.token(token), topic: topic.isEmpty ? nil : topic, registered: registered.map(Self.time), dead: dead.map(Self.time))
                n += 1
                newest = max(newest, updated)
            }
            if newest == 0 {
                for try await now in try await queue.client.query(
                    "SELECT (extract(epoch FROM now() - '2000-01-01'::timestamptz) * 1000000)::bigint", logger: queue.logger
                ).decode(Int64.self) { newest = now }
            }
            return (idx, n, newest)
        }
        index.withLock { $0 = loaded.0 }
        rowsLoaded = loaded.1
        seen.withLock { $0 = loaded.2 }
    }

    /// Writes changes as they come and refreshes the index from the other
    /// workers' changes, until a graceful shutdown or ``close()``; then writes
    /// what is pending, for at most the close's timeout (10 s by default).
    /// A store already ``start()``ed runs on in its own task: the group then
    /// only owns its stop.
    public func run() async {
        await withGracefulShutdownHandler {
            if started.withLock({ $0 }) == nil { await runLoops() } else { await stopping.wait() }
        } onGracefulShutdown: {
            self.stopping.open()
        }
        await close(timeout: closing.withLock { $0 })
    }

    func runLoops() async {
        running.store(true, ordering: .releasing)
        defer { ended.open() }
        await withDiscardingTaskGroup { group in
            group.addTask { await self.writeLoop() }
            group.addTask { await self.refreshLoop() }
            await stopping.wait()
            await writePending(for: closing.withLock { $0 })
            group.cancelAll()
        }
        // Counted once the writer has stopped: a write in flight at the deadline may still have landed.
        let left = pending.withLock { $0.events.count + $0.writing }
        notWritten.store(left, ordering: .releasing)
        if left > 0 {
            queue.logger.error("token store \(queue.configuration): \(left) changes could not be written: \(failureState.withLock { $0 }.map { "\($0)" } ?? "closed")")
        }
    }

    /// Runs the store in a task of its own (``close()`` ends it). Returns the store.
    @discardableResult
    public func start() -> PostgresTokenStore {
        started.withLock { task in
            if task == nil { task = Task { await self.runLoops() } }
        }
        return self
    }

    // MARK: - TokenStore

    public func registered(_ token: DeviceToken, topic: String?, at time: UInt32, source: TokenEventSource) {
        record(TokenEvent(token: token, topic: topic, kind: .registered, time: time, source: source))
    }

    public func unregistered(_ token: DeviceToken, topic: String?, at time: UInt32, source: TokenEventSource) {
        record(TokenEvent(token: token, topic: topic, kind: .unregistered, time: time, source: source))
    }

    public func isSuppressed(_ token: DeviceToken, topic: String?) -> Bool {
        index.withLock { $0.isSuppressed(token, topic: topic) }
    }

    public var failure: (any Error)? { failureState.withLock { $0 } }

    func record(_ e: TokenEvent) {
        index.withLock { idx in
            // As SQLite's store: the index holds tokens with an unregistration, with every topic of theirs
            // (a token new to it gets its other topics from the writer, which reads them back).
            if e.kind == .unregistered || idx.contains(e.token) {
                idx.update(e.token, topic: e.topic, registered: e.kind == .registered ? e.time : nil, dead: e.kind == .unregistered ? e.time : nil)
            }
        }
        let waiter = pending.withLock { p -> CheckedContinuation<Void, Never>? in
            p.events.append(e)
            defer { p.waiter = nil }
            return p.waiter
        }
        waiter?.resume()
    }

    /// Waits until every change recorded so far is in the database (or the store is closed).
    public func flush() async {
        while pending.withLock({ !$0.closed && (!$0.events.isEmpty || $0.writing > 0) }) {
            try? await Task.sleep(for: .milliseconds(5))
        }
    }

    /// Stops ``run()`` (started here or in a service group): what is pending is
    /// written for at most `timeout`; returns how many changes could not be written.
    @discardableResult
    public func close(timeout: Duration = .seconds(10)) async -> Int {
        closing.withLock { $0 = timeout }
        stopping.open()
        if let task = started.withLock({ $0 }) {
            await task.value
        } else if running.load(ordering: .acquiring) {
            await ended.wait()
        }
        return changesNotWritten
    }

    /// Changes that could not be written, once ``run()`` has stopped.
    public var changesNotWritten: Int { notWritten.load(ordering: .acquiring) }

    /// Waits (for at most `timeout`) until nothing is pending, then closes the writer.
    func writePending(for timeout: Duration) async {
        let deadline = ContinuousClock.now.advanced(by: timeout)
        // Cancelled (the service group gave up on it): no waiting.
        while pending.withLock({ !$0.events.isEmpty || $0.writing > 0 }) && ContinuousClock.now < deadline && !Task.isCancelled {
            try? await Task.sleep(for: .milliseconds(5))
        }
        let waiter = pending.withLock { p -> CheckedContinuation<Void, Never>? in
            p.closed = true
            defer { p.waiter = nil }
            return p.waiter
        }
        waiter?.resume()
    }

    // MARK: - Writing

    func writeLoop() async {
        var failures = 0
        while true {
            // What is pending (taken whole), [] when nothing is, nil once closed and empty.
            let batch: [TokenEvent]? = pending.withLock { p in
                if p.events.isEmpty { return p.closed ? nil : [] }
                defer { p.events.removeAll() }
                p.writing = p.events.count
                return p.events
            }
            guard let batch else { return }
            if batch.isEmpty {
                await waitForChanges()
                continue
            }
            do {
                try await write(batch)
                failures = 0
                failureState.withLock { $0 = nil }
                pending.withLock { $0.writing = 0 }
            } catch {
                failures += 1
                let first = failureState.withLock { f -> Bool in
                    defer { f = f ?? error }
                    return f == nil
                }
                if first { queue.logger.error("\(error); token changes are kept and written again when the database answers") }
                // Kept, in order, for the next attempt.
                let closed = pending.withLock { p -> Bool in
                    p.events.insert(contentsOf: batch, at: 0)
                    p.writing = 0
                    return p.closed
                }
                if closed || Task.isCancelled { return }
                try? await Task.sleep(for: BackoffPolicy.queueDatabase.bound(afterFailures: failures))
            }
        }
    }

    func waitForChanges() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let now = pending.withLock { p -> Bool in
                if !p.events.isEmpty || p.closed { return true }
                p.waiter = c
                return false
            }
            if now { c.resume() }
        }
    }

    /// One statement: the changes merged per token and topic (a later time wins), upserted so that a
    /// time only moves forward; then every topic of tokens new to the index, read back into it.
    func write(_ events: [TokenEvent]) async throws(QueueError) {
        struct Row { var registered: (UInt32, String)?; var dead: (UInt32, String)? }
        var merged: [String: (DeviceToken, String, Row)] = [:]
        for e in events {
            let topic = e.topic ?? ""
            let key = e.token.hex + "|" + topic
            var entry = merged[key] ?? (e.token, topic, Row())
            if e.kind == .registered {
                if entry.2.registered.map({ e.time >= $0.0 }) ?? true { entry.2.registered = (e.time, e.source.rawValue) }
            } else if entry.2.dead.map({ e.time >= $0.0 }) ?? true {
                entry.2.dead = (e.time, e.source.rawValue)
            }
            merged[key] = entry
        }
        let rows = Array(merged.values)
        // Arrays of non-null elements (postgres-nio's array encoding): -1 and "" stand for NULL.
        let tokens = rows.map { ByteBuffer(bytes: $0.0.bytes) }
        let topics = rows.map(\.1)
        let registered = rows.map { $0.2.registered.map { Int64($0.0) } ?? -1 }
        let registeredSource = rows.map { $0.2.registered?.1 ?? "" }
        let dead = rows.map { $0.2.dead.map { Int64($0.0) } ?? -1 }
        let deadSource = rows.map { $0.2.dead?.1 ?? "" }
        // Every topic of a token with a new unregistration comes back into the index (its other topics decide too).
        let readBack = Array(Set(events.filter { $0.kind == .unregistered }.map(\.token))).map { ByteBuffer(bytes: $0.bytes) }
        try await queue.named("writing \(rows.count) token changes") { [self] () async throws in
            _ = try await queue.client.query(
                """
                INSERT INTO herald_tokens AS t (token, topic, registered_at, registered_source, unregistered_at, unregistered_source)
                SELECT token, topic, NULLIF(r, -1), NULLIF(rs, ''), NULLIF(d, -1), NULLIF(ds, '')
                FROM unnest(\(tokens)::bytea[], \(topics)::text[], \(registered)::bigint[], \(registeredSource)::text[],
                            \(dead)::bigint[], \(deadSource)::text[]) AS u(token, topic, r, rs, d, ds)
                ON CONFLICT (token, topic) DO UPDATE SET
                    registered_at = CASE WHEN excluded.registered_at >= coalesce(t.registered_at, 0) THEN excluded.registered_at ELSE t.registered_at END,
                    registered_source = CASE WHEN excluded.registered_at >= coalesce(t.registered_at, 0) THEN excluded.registered_source ELSE t.registered_source END,
                    unregistered_at = CASE WHEN excluded.unregistered_at >= coalesce(t.unregistered_at, 0) THEN excluded.unregistered_at ELSE t.unregistered_at END,
                    unregistered_source = CASE WHEN excluded.unregistered_at >= coalesce(t.unregistered_at, 0) THEN excluded.unregistered_source ELSE t.unregistered_source END,
                    updated_at = clock_timestamp()
                """, logger: queue.logger
            ).collect()
        }
        try await loadEveryTopic(of: readBack)
    }

    /// Reads every row of `tokens` into the index (a token's other topics decide its suppression too).
    func loadEveryTopic(of tokens: [ByteBuffer]) async throws(QueueError) {
        guard !tokens.isEmpty else { return }
        let rows = try await queue.named("reading \(tokens.count) tokens' topics") { [self] () async throws -> [(ByteBuffer, String, Int64?, Int64?)] in
            var out: [(ByteBuffer, String, Int64?, Int64?)] = []
            for try await row in try await queue.client.query(
                "SELECT token, topic, registered_at, unregistered_at FROM herald_tokens WHERE token = ANY(\(tokens)::bytea[])", logger: queue.logger
            ).decode((ByteBuffer, String, Int64?, Int64?).self) { out.append(row) }
            return out
        }
        index.withLock { idx in
            for (token, topic, r, d) in rows {
                idx.update(Self.token(token), topic: topic.isEmpty ? nil : topic, registered: r.map(Self.time), dead: d.map(Self.time))
            }
        }
    }

    // MARK: - Refreshing

    func refreshLoop() async {
        while !Task.isCancelled && !pending.withLock({ $0.closed }) {
            do {
                try await refresh()
            } catch {
                queue.logger.warning("\(error); the token store's index is refreshed again later")
            }
            let deadline = ContinuousClock.now.advanced(by: refreshInterval)
            while ContinuousClock.now < deadline && !Task.isCancelled && !pending.withLock({ $0.closed }) {
                try? await Task.sleep(for: .milliseconds(20))
            }
        }
    }

    /// Reads the rows changed since the last look (less an overlap) into the index.
    public func refresh() async throws(QueueError) {
        let since = seen.withLock { $0 } - Self.overlapMicroseconds
        let changed = try await queue.named("refreshing the token store") { [self] () async throws -> [(ByteBuffer, String, Int64?, Int64?, Int64)] in
            var out: [(ByteBuffer, String, Int64?, Int64?, Int64)] = []
            let rows = try await queue.client.query(
                """
                SELECT token, topic, registered_at, unregistered_at, (extract(epoch FROM updated_at - '2000-01-01'::timestamptz) * 1000000)::bigint
                FROM herald_tokens WHERE updated_at > '2000-01-01'::timestamptz + make_interval(secs => \(Double(since) / 1_000_000))
                ORDER BY updated_at
                """, logger: queue.logger)
            for try await row in rows.decode((ByteBuffer, String, Int64?, Int64?, Int64).self) { out.append(row) }
            return out
        }
        guard !changed.isEmpty else { return }
        var newlyDead: [ByteBuffer] = []
        index.withLock { idx in
            for (token, topic, r, d, _) in changed {
                let t = Self.token(token)
                if d != nil && !idx.contains(t) { newlyDead.append(token) }
                if d != nil || idx.contains(t) {
                    idx.update(t, topic: topic.isEmpty ? nil : topic, registered: r.map(Self.time), dead: d.map(Self.time))
                }
            }
        }
        seen.withLock { $0 = max($0, changed.map(\.4).max() ?? $0) }
        try await loadEveryTopic(of: newlyDead)
    }

    static func token(_ b: ByteBuffer) -> DeviceToken { DeviceToken(bytes: Array(b.readableBytesView)) }
    static func time(_ t: Int64) -> UInt32 { UInt32(clamping: t) }
}
