import HeraldCore
import PostgresNIO
import ServiceLifecycle
import Synchronization

/// Writes each outcome back to its row, in batches of one statement each, and
/// keeps this worker's leases alive while rows are in flight.
///
/// ``observe(_:)`` only queues the records; a task of the writer's own writes
/// them (``PostgresQueue/finish(_:)``), retrying while the database is away.
/// While the database is away the writer waits for it (the rows stay in the
/// ``LeaseBook``, so this worker's own claims never take them back); a batch
/// the database refuses for a lease's length, or that cannot be written by
/// the end of ``finish()``, is given up (counted in ``Report/notWritten``):
/// by then its rows are someone else's to claim.
///
/// A swift-service-lifecycle `Service`: ``run()`` writes and renews until
/// ``finish()`` or a graceful shutdown. Or ``start()`` it before the
/// pipeline's run and ``finish()`` it after.
public final class QueueOutcomeWriter: OutcomeObserver, Service {
    let queue: PostgresQueue
    let book: LeaseBook
    let onProblem: @Sendable (String) -> Void
    let state = Mutex(State())
    let wakeups: AsyncStream<Void>
    let wake: AsyncStream<Void>.Continuation
    /// ``start()``'s task.
    let started = Mutex<Task<Void, Never>?>(nil)
    /// ``run()`` is running, and opened once it has returned.
    let running = Atomic<Bool>(false)
    let ended = Latch()

    struct State {
        var pending: [PostgresQueue.Finished] = []
        var report = Report()
        /// Rows whose outcomes were given up (``Report/notWritten``), at most ``givenUpKept``: one
        /// this worker claims again and then writes is no longer counted unwritten.
        var givenUp: Set<Int64> = []
    }

    /// Given-up rows remembered to be recognised when claimed again (beyond it, such a row stays
    /// counted in ``Report/notWritten``: a stricter answer, never a looser one).
    static let givenUpKept = 1_000_000

    /// What the writer did.
    public struct Report: Sendable, Hashable {
        /// Rows finished with their outcome.
        public var written = 0
        /// Of those, rows claimed more than once (another worker's lease had expired): they may have reached a device twice.
        public var possibleDuplicates = 0
        /// Outcomes not written because another worker had taken the row over (this worker's lease had expired).
        public var leaseLost = 0
        /// Outcomes given up after the database stayed away for a lease's length, and not written
        /// since (their rows are claimed again once their lease runs out; a row this worker claimed
        /// again and wrote is counted in ``recovered`` instead).
        public var notWritten = 0
        /// Outcomes given up whose rows this worker claimed again, sent again (marked
        /// `possible_duplicate`) and wrote: nothing of them is left unwritten.
        public var recovered = 0
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
                guard let held = book.take(r.sequence) else {
                    s.report.unmapped += 1
                    continue
                }
                s.pending.append(PostgresQueue.Finished(id: held.row, lease: held.lease, record: r, attempts: held.attempts))
            }
        }
        wake.yield()
    }

    /// What was written so far.
    public var report: Report { state.withLock { $0.report } }

    /// Writes outcomes as they are observed and keeps the leases alive, until
    /// ``finish()`` or a graceful shutdown; returns once what was observed is
    /// written (or given up, see ``finish()``).
    public func run() async {
        await withGracefulShutdownHandler {
            await runLoops()
        } onGracefulShutdown: {
            self.requestFinish()
        }
    }

    func runLoops() async {
        running.store(true, ordering: .releasing)
        defer { ended.open() }
        await withDiscardingTaskGroup { group in
            group.addTask { await self.renewWhileRunning() }
            await self.writeUntilFinished()
            group.cancelAll()
        }
    }

    /// Runs the writer in a task of its own, until ``finish()``: not stopped by
    /// a graceful shutdown of the service that starts it (a task inherits its
    /// creator's shutdown; the writer must outlast the pipeline's drain).
    public func start() {
        started.withLock { task in
            if task == nil { task = Task { await self.runLoops() } }
        }
    }

    /// No more outcomes will come: the writer writes what it holds, then stops.
    func requestFinish() {
        if book.stopRequested.load(ordering: .acquiring) {
            let by = ContinuousClock.now.advanced(by: queue.configuration.lease)
            outage.withLock { $0.finishBy = $0.finishBy ?? by }
        }
        wake.finish()
    }

    /// Writes what is still queued, stops renewing, and reports. When the run
    /// was told to stop (a signal, a graceful shutdown), this takes at most a
    /// lease's length while the database is away, however many batches wait.
    /// When it ended because the queue was drained, a database that is away is
    /// waited for as during the run: the outcomes are then written once it is
    /// back, rather than left for the rows to be sent again after their lease
    /// (a second signal still ends the process).
    public func finish() async -> Report {
        requestFinish()
        if let task = started.withLock({ $0 }) {
            await task.value
        } else if running.load(ordering: .acquiring) {
            await ended.wait()
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

    /// Writes batches two at a time (on two of the pool's connections): while the database works
    /// on one, the next is on its way.
    func writeUntilFinished() async {
        var previous: Task<Void, Never>?
        func pump() async {
            while let batch = nextBatch() {
                let earlier = previous
                previous = Task { await self.write(batch) }
                await earlier?.value
            }
        }
        for await _ in wakeups { await pump() }
        await pump()
        await previous?.value
    }

    /// Since when writes have been failing, and (once ``finish()`` began) by when writing must end.
    struct Outage {
        var failingSince: ContinuousClock.Instant?
        var finishBy: ContinuousClock.Instant?
    }
    let outage = Mutex(Outage())

    /// Writes one batch, retrying with back-off: for as long as the database is
    /// away, unless the run was told to stop; for a lease's length when it refuses
    /// the statement, or once a stopped run's `finish()` began (counted from the
    /// first failure, across batches: a long outage does not cost a lease per
    /// batch); never past a stopped run's `finish()` deadline.
    func write(_ batch: [PostgresQueue.Finished]) async {
        let clock = ContinuousClock()
        var failures = 0
        let complete = book.completing(batch)
        while true {
            do {
                let result = try await queue.finish(batch, completing: complete)
                outage.withLock { $0.failingSince = nil }
                // A lease whose rows were written by two writes at once is finished by neither: dropped now.
                let finished = book.settle(batch, written: true).filter { !complete.contains($0) }
                if !finished.isEmpty { await drop(finished, book: book, queue: queue, onProblem: onProblem) }
                state.withLock { s in
                    s.report.written += result.written
                    s.report.possibleDuplicates += result.possibleDuplicates
                    s.report.released += result.released
                    s.report.leaseLost += batch.count - result.written - result.released
                    // Rows given up earlier and claimed again by this worker: written now (at most
                    // as many as this write wrote), so no longer unwritten.
                    if !s.givenUp.isEmpty {
                        var again = 0
                        for f in batch where s.givenUp.remove(f.id) != nil { again += 1 }
                        let back = min(again, result.written)
                        s.report.recovered += back
                        s.report.notWritten -= back
                    }
                }
                return
            } catch {
                let (since, finishBy) = outage.withLock { o in
                    if o.failingSince == nil { o.failingSince = clock.now }
                    return (o.failingSince!, o.finishBy)
                }
                // Unless the run was told to stop, a database that is away is waited for however long:
                // no other worker can take the rows meanwhile, and the source claims nothing either, so
                // what waits is bounded. A database that answers with a refusal is given a lease's
                // length; so is any failure once a stopped run's finish() began, never past its deadline.
                let failedForALease = clock.now - since >= queue.configuration.lease
                if (failedForALease && (!error.isOutage || finishBy != nil)) || finishBy.map({ clock.now >= $0 }) == true {
                    onProblem("\(error); giving up on \(batch.count) outcomes (their rows will be claimed again once their lease expires)")
                    book.settle(batch, written: false)
                    state.withLock { s in
                        s.report.notWritten += batch.count
                        for f in batch where s.givenUp.count < Self.givenUpKept { s.givenUp.insert(f.id) }
                    }
                    return
                }
                failures += 1
                let delay = BackoffPolicy.queueOutcomes.bound(afterFailures: failures)
                onProblem("\(error); retrying in \(delay)")
                try? await Task.sleep(for: delay)
            }
        }
    }

    func renewWhileRunning() async {
        let period = queue.configuration.lease / 3
        while (try? await Task.sleep(for: period)) != nil {
            do {
                // The leases of rows in the pipeline, and of outcomes not yet written.
                try await queue.renewLeases(book.leases)
            } catch {
                // Cancelled: the writer has written everything and renewing is over (a statement
                // cut short then is not a problem to report).
                if Task.isCancelled { return }
                onProblem("\(error)")
            }
            if Task.isCancelled { return }
            let undropped = book.takeUndropped()
            if !undropped.isEmpty { await drop(undropped, book: book, queue: queue, onProblem: onProblem) }
        }
    }
}

/// Drops finished leases (``PostgresQueue/dropLeases(_:)``); if that fails, says so and keeps them in
/// the book, for the writer's next renewal to drop: a finished lease left in place is harmless
/// (no claim finds a row of it to send) but stays until it runs out and a claim takes it over.
func drop(_ leases: [Int64], book: LeaseBook, queue: PostgresQueue, onProblem: @Sendable (String) -> Void) async {
    do {
        try await queue.dropLeases(leases)
    } catch {
        book.dropFailed(leases)
        // A drop cut short because the writer's renewal ended is not a problem to report.
        if !Task.isCancelled { onProblem("\(error); dropping them again with the next renewal") }
    }
}
