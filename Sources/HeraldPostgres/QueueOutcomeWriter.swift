import HeraldCore
import PostgresNIO
import Synchronization

/// Which row each of a run's sequence numbers came from: filled by
/// ``PostgresQueueSource`` as it emits, emptied by ``QueueOutcomeWriter`` as
/// outcomes arrive. Its size is the number of rows in the pipeline.
public final class LeaseBook: Sendable {
    struct Rows {
        /// Rows claimed and not yet emitted (a batch claimed ahead, the rest of the batch being emitted).
        var claimed: Set<Int64> = []
        /// Emitted rows by sequence number, their outcome not decided yet.
        var undecided: [UInt64: Int64] = [:]
        /// Rows whose outcome is decided but not yet written back.
        var unwritten: Set<Int64> = []
        /// Claims that failed without an answer: they may have leased rows to this worker.
        var unansweredClaims: [Int64] = []
    }
    let rows = Mutex(Rows())
    public init() {}
    /// Rows just claimed: held (and their leases renewed) from now on, before they are emitted.
    func claim(_ ids: some Sequence<Int64>) { rows.withLock { r in for id in ids { r.claimed.insert(id) } } }
    /// A claim failed without an answer: it may have committed, leasing rows no one here knows of.
    func claimUnanswered(_ token: Int64) { rows.withLock { $0.unansweredClaims.append(token) } }
    /// The unanswered claims to look for, and forgets them.
    func takeUnansweredClaims() -> [Int64] { rows.withLock { r in defer { r.unansweredClaims.removeAll() }; return r.unansweredClaims } }
    /// A claimed row is emitted as `sequence`.
    func hold(_ sequence: UInt64, row: Int64) {
        rows.withLock { r in
            r.claimed.remove(row)
            r.undecided[sequence] = row
        }
    }
    /// The row of a decided sequence number: it stays held, as unwritten, until ``settle(_:)``.
    func take(_ sequence: UInt64) -> Int64? {
        rows.withLock { r in
            guard let id = r.undecided.removeValue(forKey: sequence) else { return nil }
            r.unwritten.insert(id)
            return id
        }
    }
    /// These rows' outcomes were written, or given up: the book no longer holds them.
    func settle(_ ids: some Sequence<Int64>) { rows.withLock { r in for id in ids { r.unwritten.remove(id) } } }
    func peek(_ sequence: UInt64) -> Int64? { rows.withLock { $0.undecided[sequence] } }
    /// Rows emitted whose outcome has not been decided yet.
    public var count: Int { rows.withLock { $0.undecided.count } }
    /// Rows held: claimed and not yet emitted, undecided, or decided and not yet written.
    public var held: Int { rows.withLock { $0.claimed.count + $0.undecided.count + $0.unwritten.count } }
    /// The rows this worker holds: claimed and not yet emitted, undecided, or decided and not yet
    /// written. Their leases are renewed, and this worker's own claims never take them back, even
    /// once their lease has expired (after a long outage).
    var ids: [Int64] { rows.withLock { Array($0.claimed) + Array($0.undecided.values) + Array($0.unwritten) } }
}

/// Writes each outcome back to its row, in batches of one `UPDATE` each, and
/// keeps this worker's leases alive while rows are in flight.
///
/// ``observe(_:)`` only queues the records; a task of the writer's own writes
/// them (``PostgresQueue/finish(_:)``), retrying while the database is away.
/// While the database is away the writer waits for it (the rows stay in the
/// ``LeaseBook``, so this worker's own claims never take them back); a batch
/// the database refuses for a lease's length, or that cannot be written by
/// the end of ``finish()``, is given up (counted in ``Report/notWritten``):
/// by then its rows are someone else's to claim. Call ``start()`` before the run and ``finish()`` after it.
public final class QueueOutcomeWriter: OutcomeObserver {
    let queue: PostgresQueue
    let book: LeaseBook
    let onProblem: @Sendable (String) -> Void
    let state = Mutex(State())
    let wakeups: AsyncStream<Void>
    let wake: AsyncStream<Void>.Continuation
    let tasks = Mutex<[Task<Void, Never>]>([])

    struct State {
        var pending: [PostgresQueue.Finished] = []
        var report = Report()
    }

    /// What the writer did.
    public struct Report: Sendable, Hashable {
        /// Rows finished with their outcome.
        public var written = 0
        /// Of those, rows claimed more than once (another worker's lease had expired): they may have reached a device twice.
        public var possibleDuplicates = 0
        /// Outcomes not written because another worker had taken the row over (this worker's lease had expired).
        public var leaseLost = 0
        /// Outcomes given up after the database stayed away for a lease's length.
        public var notWritten = 0
        /// Outcomes for sequence numbers no row was emitted for (a bug if ever non-zero).
        public var unmapped = 0
        /// Rows given back to the queue unsent: they failed only because this process stopped
        /// (a second signal, the drain deadline), so another worker sends them.
        public var released = 0
    }

    /// The row a pipeline sequence number stands for, while its outcome is not yet written
    /// (observers that run before this one, like `herald serve`'s webhook, name rows by it).
    public func rowID(of sequence: UInt64) -> Int64? { book.peek(sequence) }

    public init(queue: PostgresQueue, book: LeaseBook, onProblem: @escaping @Sendable (String) -> Void = { _ in }) {
        self.queue = queue
        self.book = book
        self.onProblem = onProblem
        (wakeups, wake) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    public func observe(_ records: [OutcomeRecord]) {
        state.withLock { s in
            for r in records {
                guard let id = book.take(r.sequence) else {
                    s.report.unmapped += 1
                    continue
                }
                s.pending.append(PostgresQueue.Finished(id: id, record: r))
            }
        }
        wake.yield()
    }

    /// What was written so far.
    public var report: Report { state.withLock { $0.report } }

    /// Starts the writing task and the lease renewal.
    public func start() {
        let writing = Task { await self.writeUntilFinished() }
        let renewing = Task { await self.renewWhileRunning() }
        tasks.withLock { $0 = [writing, renewing] }
    }

    /// Writes what is still queued, stops renewing, and reports. While the
    /// database is away this takes at most a lease's length, however many
    /// batches wait.
    public func finish() async -> Report {
        let by = ContinuousClock.now.advanced(by: queue.configuration.lease)
        outage.withLock { $0.finishBy = $0.finishBy ?? by }
        wake.finish()
        let running = tasks.withLock { $0 }
        if let writing = running.first { await writing.value }
        for t in running.dropFirst() {
            t.cancel()
            await t.value
        }
        return report
    }

    func nextBatch() -> [PostgresQueue.Finished]? {
        state.withLock { s in
            guard !s.pending.isEmpty else { return nil }
            let n = min(s.pending.count, queue.configuration.writeBatch)
            let batch = Array(s.pending.prefix(n))
            s.pending.removeFirst(n)
            return batch
        }
    }

    func writeUntilFinished() async {
        for await _ in wakeups {
            while let batch = nextBatch() { await write(batch) }
        }
        while let batch = nextBatch() { await write(batch) }
    }

    /// Since when writes have been failing, and (once ``finish()`` began) by when writing must end.
    struct Outage {
        var failingSince: ContinuousClock.Instant?
        var finishBy: ContinuousClock.Instant?
    }
    let outage = Mutex(Outage())

    /// Writes one batch, retrying with back-off: for as long as the database is
    /// away while the run goes on; for a lease's length when it refuses the
    /// statement, or once `finish()` began (counted from the first failure,
    /// across batches: a long outage does not cost a lease per batch); never
    /// past `finish()`'s deadline.
    func write(_ batch: [PostgresQueue.Finished]) async {
        let clock = ContinuousClock()
        var delay = Duration.milliseconds(50)
        while true {
            do {
                let result = try await queue.finish(batch)
                outage.withLock { $0.failingSince = nil }
                book.settle(batch.lazy.map(\.id))
                state.withLock { s in
                    s.report.written += result.written
                    s.report.possibleDuplicates += result.possibleDuplicates
                    s.report.released += result.released
                    s.report.leaseLost += batch.count - result.written - result.released
                }
                return
            } catch {
                let (since, finishBy) = outage.withLock { o in
                    if o.failingSince == nil { o.failingSince = clock.now }
                    return (o.failingSince!, o.finishBy)
                }
                // While the run goes on, a database that is away is waited for however long: no other
                // worker can take the rows meanwhile, and the source claims nothing either, so what
                // waits is bounded. A database that answers with a refusal is given a lease's length;
                // so is any failure once finish() began, and never past its deadline.
                let failedForALease = clock.now - since >= queue.configuration.lease
                if (failedForALease && (!error.isOutage || finishBy != nil)) || finishBy.map({ clock.now >= $0 }) == true {
                    onProblem("\(error); giving up on \(batch.count) outcomes (their rows will be claimed again once their lease expires)")
                    book.settle(batch.lazy.map(\.id))
                    state.withLock { s in
                        s.report.notWritten += batch.count
                    }
                    return
                }
                onProblem("\(error); retrying in \(delay)")
                try? await Task.sleep(for: delay)
                delay = min(delay * 2, .seconds(2))
            }
        }
    }

    func renewWhileRunning() async {
        let period = queue.configuration.lease / 3
        while (try? await Task.sleep(for: period)) != nil {
            do {
                // Rows in the pipeline, and outcomes not yet written.
                let ids = book.ids
                try await queue.renewLeases(ids)
            } catch {
                onProblem("\(error)")
            }
        }
    }
}

extension PostgresQueue {
    /// A row's outcome, to be written back.
    public struct Finished: Sendable {
        public var id: Int64
        public var record: OutcomeRecord
        public init(id: Int64, record: OutcomeRecord) {
            self.id = id
            self.record = record
        }
    }

    /// Whether a row with this outcome goes back to the queue instead of
    /// ending: it failed only because this process stopped (a second signal,
    /// the drain deadline), so another worker, or this one restarted, sends it.
    static func releases(_ outcome: Outcome) -> Bool {
        if case .failed(let why) = outcome { return why.code == .abandoned || why.code == .shutdownDeadline }
        return false
    }

    /// Writes outcomes and releases their rows (`state = 'done'`) in one
    /// statement, only where this worker still holds the lease. Rows claimed
    /// more than once are marked `possible_duplicate`. Rows that failed only
    /// because this process stopped (``releases(_:)``) go back to `queued`
    /// instead, counted in `released`.
    public func finish(_ rows: [Finished]) async throws(QueueError) -> (written: Int, possibleDuplicates: Int, released: Int) {
        var ids: [Int64] = [], outcomes: [String] = [], statuses: [Int32] = [], codes: [String] = [], reasons: [String] = [], apnsIDs: [String] = []
        var release: [Bool] = []
        for f in rows {
            let r = f.record
            ids.append(f.id)
            release.append(Self.releases(r.outcome))
            outcomes.append(r.outcome.kind.rawValue)
            apnsIDs.append(r.apnsID ?? "")
            switch r.outcome {
            case .rejected(let status):
                statuses.append(Int32(clamping: status.rawValue))
                codes.append("")
                reasons.append(status.description)
            case .dropped(let why), .failed(let why):
                statuses.append(-1)
                codes.append(why.code.name)
                reasons.append(why.message)
            case .accepted, .suppressed:
                statuses.append(-1)
                codes.append("")
                reasons.append("")
            }
        }
        return try await named("writing \(rows.count) outcomes") { [self, ids, outcomes, statuses, codes, reasons, apnsIDs, release] in
            // One statement, its own transaction: no BEGIN and COMMIT round trips. The write does not wait for
            // the WAL to reach the disk (`synchronous_commit` off for this transaction only): an outcome
            // a database crash loses leaves its row leased; once the lease expires it is claimed again
            // and marked possible_duplicate, as after a worker's crash. The claim, whose loss would not
            // be marked, keeps the default.
            let query: PostgresQuery = """
                WITH durability AS (SELECT set_config('synchronous_commit', 'off', true)),
                w AS (
                    UPDATE notifications n
                    SET state = CASE WHEN u.release THEN 'queued' ELSE 'done' END,
                        outcome = CASE WHEN u.release THEN NULL ELSE u.outcome END,
                        status = CASE WHEN u.release THEN NULL ELSE NULLIF(u.status, -1) END,
                        reason_code = CASE WHEN u.release THEN NULL ELSE NULLIF(u.code, '') END,
                        reason = CASE WHEN u.release THEN NULL ELSE NULLIF(u.reason, '') END,
                        apns_id = CASE WHEN u.release THEN NULL ELSE NULLIF(u.apns_id, '') END,
                        possible_duplicate = NOT u.release AND n.attempts > 1,
                        finished_at = CASE WHEN u.release THEN NULL ELSE now() END,
                        lease_owner = CASE WHEN u.release THEN NULL ELSE n.lease_owner END,
                        lease_expires = NULL
                    FROM unnest(\(ids)::bigint[], \(outcomes)::text[], \(statuses)::int[], \(codes)::text[], \(reasons)::text[], \(apnsIDs)::text[],
                                \(release)::bool[])
                        AS u(id, outcome, status, code, reason, apns_id, release)
                    WHERE n.id = u.id AND n.state = 'leased' AND n.lease_owner = \(owner)
                    RETURNING n.possible_duplicate, n.state = 'queued' AS released
                ) SELECT count(*) FILTER (WHERE NOT released), count(*) FILTER (WHERE possible_duplicate), count(*) FILTER (WHERE released),
                         (SELECT set_config FROM durability)
                  FROM w
                """
            var result = (written: 0, possibleDuplicates: 0, released: 0)
            for try await (written, duplicates, released, _) in try await client.query(query, logger: logger).decode((Int, Int, Int, String).self) {
                result = (written, duplicates, released)
            }
            return result
        }
    }
}
