import HeraldCore
import PostgresNIO
import Synchronization

/// Which row (and lease) each of a run's sequence numbers came from: filled by
/// ``PostgresQueueSource`` as it claims and emits, emptied by
/// ``QueueOutcomeWriter`` as outcomes are written. Its size is the number of
/// rows in the pipeline.
public final class LeaseBook: Sendable {
    struct Lease {
        /// Rows of the lease held here whose outcome is not written yet.
        var remaining = 0
        /// An outcome write for some of its rows was given up: the lease must not be dropped, so
        /// that it runs out and those rows are taken over.
        var lost = false
        /// The lease's claims when this worker claimed it: what its rows' outcomes record. A claim
        /// of this worker's that took the lease over again meanwhile (``claim(_:)``) sent nothing
        /// twice, so it does not count.
        var attempts = 1
    }
    /// Rows emitted together (a claim's), numbered from `first` on: no per-row hashing, a claim's
    /// rows are noted with one lock and found again by their place.
    struct Span {
        var first: UInt64
        var rows: [Int64]
        var leases: [Int64]
        /// Whose outcome is decided.
        var decided: [Bool]
        var open: Int
        func index(of sequence: UInt64) -> Int? {
            guard sequence >= first, sequence - first < UInt64(rows.count) else { return nil }
            let k = Int(sequence - first)
            return decided[k] ? nil : k
        }
    }
    struct Rows {
        /// Rows claimed and not yet emitted (a batch claimed ahead, the rest of the batch being emitted).
        var claimed = 0
        /// Emitted rows whose outcome is not decided yet, by sequence number; oldest first.
        var spans: [Span] = []
        var undecided = 0
        /// Rows whose outcome is decided but not yet written back.
        var unwritten = 0
        /// The leases rows are held under.
        var leases: [Int64: Lease] = [:]
        /// Claims that failed without an answer: they may have leased rows to this worker.
        var unansweredClaims: [Int64] = []
        /// The span holding `sequence` undecided.
        func find(_ sequence: UInt64) -> (span: Int, index: Int)? {
            // Spans are in sequence order: the last one starting at or before it.
            var lo = 0, hi = spans.count
            while lo < hi {
                let mid = (lo + hi) / 2
                if spans[mid].first <= sequence { lo = mid + 1 } else { hi = mid }
            }
            guard lo > 0, let k = spans[lo - 1].index(of: sequence) else { return nil }
            return (lo - 1, k)
        }
    }
    let rows = Mutex(Rows())
    /// The source stopped because the run was told to stop (a signal, a graceful shutdown), not
    /// because the queue was drained: the writer's finish is then bounded (see ``QueueOutcomeWriter/finish()``).
    let stopRequested = Atomic<Bool>(false)
    public init() {}
    /// Rows just claimed: held (and their leases renewed) from now on, before they are emitted.
    /// Returns them, less the rows of leases held here already. A claim that runs ahead carries
    /// the leases held when it started; if one claimed after that ran out before the claim reached
    /// the database (an outage longer than a lease), the claim took it over, and its rows are in
    /// flight here already.
    @discardableResult
    func claim(_ claimed: [PostgresQueue.Claimed]) -> [PostgresQueue.Claimed] {
        rows.withLock { r in
            let fresh = claimed.filter { r.leases[$0.lease] == nil }
            r.claimed += fresh.count
            for row in fresh {
                r.leases[row.lease, default: Lease()].remaining += 1
                r.leases[row.lease]!.attempts = row.attempts
            }
            return fresh
        }
    }
    /// Whether rows of `lease` are held here (claimed, in flight, or their outcome not yet written).
    func holds(_ lease: Int64) -> Bool { rows.withLock { $0.leases[lease] != nil } }
    /// A claim failed without an answer: it may have committed, leasing rows no one here knows of.
    func claimUnanswered(_ token: Int64) { rows.withLock { $0.unansweredClaims.append(token) } }
    /// The unanswered claims to look for, and forgets them.
    func takeUnansweredClaims() -> [Int64] { rows.withLock { r in defer { r.unansweredClaims.removeAll() }; return r.unansweredClaims } }
    /// Claimed rows are about to be emitted as `first`, `first + 1`, … (one sequence number each, in order).
    func hold(_ claimed: [PostgresQueue.Claimed], from first: UInt64) {
        guard !claimed.isEmpty else { return }
        let span = Span(first: first, rows: claimed.map(\.id), leases: claimed.map(\.lease), decided: Array(repeating: false, count: claimed.count), open: claimed.count)
        rows.withLock { r in
            r.claimed -= claimed.count
            r.undecided += claimed.count
            r.spans.append(span)
        }
    }
    /// The row and lease of a decided sequence number: held, as unwritten, until ``settle(_:written:)``.
    func take(_ sequence: UInt64) -> (row: Int64, lease: Int64, attempts: Int)? {
        rows.withLock { r in
            guard let (i, k) = r.find(sequence) else { return nil }
            r.spans[i].decided[k] = true
            r.spans[i].open -= 1
            let lease = r.spans[i].leases[k]
            let held = (r.spans[i].rows[k], lease, r.leases[lease]?.attempts ?? 1)
            if r.spans[i].open == 0 { r.spans.remove(at: i) }
            r.undecided -= 1
            r.unwritten += 1
            return held
        }
    }
    /// The leases that writing `batch` finishes: every row of theirs held here is in it, and none was given up.
    func completing(_ batch: [PostgresQueue.Finished]) -> [Int64] {
        rows.withLock { r in
            var counts: [Int64: Int] = [:]
            for f in batch { counts[f.lease, default: 0] += 1 }
            return counts.compactMap { lease, n in
                guard let l = r.leases[lease], !l.lost, l.remaining == n else { return nil }
                return lease
            }.sorted()
        }
    }
    /// These rows' outcomes were written (`written`), or given up: the book no longer holds them. A
    /// lease none of whose rows are held any more leaves the book (no longer renewed); returns those
    /// of them with every outcome written.
    @discardableResult
    func settle(_ batch: [PostgresQueue.Finished], written: Bool) -> [Int64] {
        rows.withLock { r in
            r.unwritten -= batch.count
            var finished: [Int64] = []
            for f in batch {
                guard var l = r.leases[f.lease] else { continue }
                l.remaining -= 1
                if !written { l.lost = true }
                if l.remaining > 0 {
                    r.leases[f.lease] = l
                } else {
                    r.leases[f.lease] = nil
                    if !l.lost { finished.append(f.lease) }
                }
            }
            return finished
        }
    }
    func peek(_ sequence: UInt64) -> Int64? { rows.withLock { r in r.find(sequence).map { r.spans[$0.span].rows[$0.index] } } }
    /// Rows emitted whose outcome has not been decided yet.
    public var count: Int { rows.withLock { $0.undecided } }
    /// Rows held: claimed and not yet emitted, undecided, or decided and not yet written.
    public var held: Int { rows.withLock { $0.claimed + $0.undecided + $0.unwritten } }
    /// The leases this worker holds rows under: they are renewed, and this worker's own claims never
    /// take them over, even once they have run out (after a long outage).
    var leases: [Int64] { rows.withLock { Array($0.leases.keys) } }
}

/// Writes each outcome back to its row, in batches of one statement each, and
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

    /// Starts the writing task and the lease renewal.
    public func start() {
        let writing = Task { await self.writeUntilFinished() }
        let renewing = Task { await self.renewWhileRunning() }
        tasks.withLock { $0 = [writing, renewing] }
    }

    /// Writes what is still queued, stops renewing, and reports. When the run
    /// was told to stop (a signal, a graceful shutdown), this takes at most a
    /// lease's length while the database is away, however many batches wait.
    /// When it ended because the queue was drained, a database that is away is
    /// waited for as during the run: the outcomes are then written once it is
    /// back, rather than left for the rows to be sent again after their lease
    /// (a second signal still ends the process).
    public func finish() async -> Report {
        if book.stopRequested.load(ordering: .acquiring) {
            let by = ContinuousClock.now.advanced(by: queue.configuration.lease)
            outage.withLock { $0.finishBy = $0.finishBy ?? by }
        }
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
        var delay = Duration.milliseconds(50)
        let complete = book.completing(batch)
        while true {
            do {
                let result = try await queue.finish(batch, completing: complete)
                outage.withLock { $0.failingSince = nil }
                // A lease whose rows were written by two writes at once is finished by neither: dropped now.
                let finished = book.settle(batch, written: true).filter { !complete.contains($0) }
                if !finished.isEmpty { try? await queue.dropLeases(finished) }
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
                // The leases of rows in the pipeline, and of outcomes not yet written.
                try await queue.renewLeases(book.leases)
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
        public var lease: Int64
        public var record: OutcomeRecord
        /// The lease's claims when this worker claimed the row (nil: the lease's count when written).
        public var attempts: Int?
        public init(id: Int64, lease: Int64, record: OutcomeRecord, attempts: Int? = nil) {
            self.id = id
            self.lease = lease
            self.record = record
            self.attempts = attempts
        }
    }

    /// Whether a row with this outcome goes back to the queue instead of
    /// ending: it failed only because this process stopped (a second signal,
    /// the drain deadline), so another worker, or this one restarted, sends it.
    static func releases(_ outcome: Outcome) -> Bool {
        if case .failed(let why) = outcome { return why.code == .abandoned || why.code == .shutdownDeadline }
        return false
    }

    /// A write's rows with the same lease and the same outcome: one row of `herald_outcomes`.
    struct OutcomeGroup: Hashable {
        var lease: Int64
        var outcome: String
        /// -1: none.
        var status: Int32 = -1
        var code = ""
        var reason = ""
        var release = false
        /// The claims recorded (-1: the lease's count when written).
        var attempts: Int32 = -1
    }

    /// The groups of `rows`, in order of first appearance, each with its rows' positions in the
    /// flat arrays (ids ascending within a group, with their APNs ids, "" where none), as
    /// 1-based inclusive bounds `lo...hi`.
    static func grouped(_ rows: [Finished]) -> (groups: [OutcomeGroup], bounds: [(lo: Int32, hi: Int32)], ids: [Int64], apnsIDs: [String]) {
        var index: [OutcomeGroup: Int] = [:]
        var groups: [OutcomeGroup] = []
        var members: [[(id: Int64, apnsID: String)]] = []
        var last: (OutcomeGroup, Int)?
        for f in rows {
            let r = f.record
            var g = OutcomeGroup(
                lease: f.lease, outcome: r.outcome.kind.rawValue, release: Self.releases(r.outcome), attempts: f.attempts.map { Int32(clamping: $0) } ?? -1)
            switch r.outcome {
            case .rejected(let status):
                g.status = Int32(clamping: status.rawValue)
                g.reason = status.description
            case .dropped(let why), .failed(let why):
                g.code = why.code.name
                g.reason = why.message
            case .accepted, .suppressed:
                break
            }
            let k: Int
            // Nearly every row is in the group of the row before it: no hashing for those.
            if let (previous, at) = last, previous == g {
                k = at
            } else if let at = index[g] {
                k = at
            } else {
                k = groups.count
                index[g] = k
                groups.append(g)
                members.append([])
            }
            last = (g, k)
            members[k].append((f.id, r.apnsID ?? ""))
        }
        var ids: [Int64] = [], apnsIDs: [String] = [], bounds: [(lo: Int32, hi: Int32)] = []
        ids.reserveCapacity(rows.count)
        apnsIDs.reserveCapacity(rows.count)
        for var m in members {
            m.sort { $0.id < $1.id }
            bounds.append((Int32(ids.count + 1), Int32(ids.count + m.count)))
            for (id, apnsID) in m {
                ids.append(id)
                apnsIDs.append(apnsID)
            }
        }
        return (groups, bounds, ids, apnsIDs)
    }

    /// Writes outcomes, appending them to `herald_outcomes` (a row per lease and outcome among
    /// them), in one statement, only for rows whose lease this worker still holds, and drops the
    /// leases in `completing` (every row of theirs is finished with this write). Rows of a lease
    /// claimed more than once are marked `possible_duplicate`. Rows that failed only because this
    /// process stopped (``releases(_:)``) go back to the queue instead, in a lease no one holds,
    /// counted in `released`.
    public func finish(_ rows: [Finished], completing: [Int64] = []) async throws(QueueError) -> (written: Int, possibleDuplicates: Int, released: Int) {
        let (groups, bounds, ids, apns) = Self.grouped(rows)
        let statement = FinishStatement(
            owner: owner, groups: groups, bounds: bounds, ids: ids,
            // No APNs ids at all (the binary interface has none): none sent.
            apnsIDs: apns.contains { !$0.isEmpty } ? apns : [],
            released: zip(groups, bounds).filter(\.0.release).flatMap { ids[Int($1.lo - 1)..<Int($1.hi)] }, completing: completing)
        return try await named("writing \(rows.count) outcomes") { [self] in
            var result = (written: 0, possibleDuplicates: 0, released: 0)
            for try await (written, duplicates, released, _) in try await planned.execute(statement, logger: logger) {
                result = (written, duplicates, released)
            }
            if Self.takeOne(loseWriteAnswers) { throw QueueError("PostgreSQL \(configuration): writing outcomes: the answer was lost (a test's fault)", isOutage: true) }
            return result
        }
    }

    /// The outcome write (``PostgresQueue/finish(_:completing:)``) as a prepared statement, on the
    /// pool of generic plans: parsed and planned once per connection, not on every write (planning
    /// took as long as running it).
    ///
    /// One statement, its own transaction: no BEGIN and COMMIT round trips. The write does not wait for
    /// the WAL to reach the disk (`synchronous_commit` off for this transaction only): an outcome
    /// a database crash loses leaves its lease in place; once it runs out its rows are taken over
    /// and marked possible_duplicate, as after a worker's crash. The claim, whose loss would not
    /// be marked, keeps the default.
    struct FinishStatement: PostgresPreparedStatement {
        static let sql = """
            WITH durability AS (SELECT set_config('synchronous_commit', 'off', true)),
            mine AS (
                -- KEY SHARE: no one takes these leases over (or drops them) until this write commits,
                -- but renewing them goes on, however long the write takes.
                SELECT lease, attempts FROM herald_leases WHERE lease = ANY($2::bigint[]) AND owner = $1 FOR KEY SHARE
            ), g AS (
                -- The claims as when this worker claimed the rows: a takeover by one of its own
                -- claims since, which sent nothing twice, is not counted.
                SELECT g.*, coalesce(nullif(g.claimed, -1), m.attempts) AS attempts, ($3::bigint[])[g.lo:g.hi] AS ids,
                       CASE WHEN cardinality($4::text[]) > 0 THEN ($4::text[])[g.lo:g.hi] END AS apns
                FROM unnest($2::bigint[], $5::text[], $6::int[], $7::text[], $8::text[], $9::bool[], $10::int[], $11::int[], $14::int[])
                    AS g(lease, outcome, status, code, reason, release, lo, hi, claimed)
                JOIN mine m ON m.lease = g.lease
            ), w AS (
                INSERT INTO herald_outcomes (lease, first_id, ids, outcome, status, reason_code, reason, apns_ids, possible_duplicate, attempts, owner)
                SELECT g.lease, g.ids[1], g.ids, g.outcome, NULLIF(g.status, -1), NULLIF(g.code, ''), NULLIF(g.reason, ''), g.apns,
                       g.attempts > 1, g.attempts, $1
                FROM g WHERE NOT g.release
                -- Already there: this write was sent before and committed, its answer lost.
                ON CONFLICT (lease, first_id) DO NOTHING
                RETURNING cardinality(ids) AS n, possible_duplicate
            ), earlier AS (
                -- Groups this worker wrote already: this write was sent before and committed, its
                -- answer lost (its lease may be gone since). Counted as written, not as lost.
                SELECT o.ids, o.possible_duplicate FROM herald_outcomes o
                JOIN unnest($2::bigint[], $10::int[]) AS a(lease, lo) ON o.lease = a.lease AND o.first_id = ($3::bigint[])[a.lo]
                WHERE o.owner = $1
            ), back AS (
                -- Only rows the lease still holds: sent again after a lost answer, a release that
                -- committed finds its rows gone from the lease, and gives back nothing twice. (One
                -- INTERSECT per group: the lease's rows are listed once, not once per row given back.)
                INSERT INTO herald_leases (ids, owner, expires, attempts)
                SELECT array_agg(k.x ORDER BY k.x), '', '-infinity', max(g.attempts)
                FROM g JOIN herald_leases l ON l.lease = g.lease
                CROSS JOIN LATERAL (SELECT unnest(g.ids) INTERSECT SELECT y FROM \(PostgresQueue.leaseRows(of: "l")) AS y) AS k(x)
                WHERE g.release
                HAVING count(*) > 0
                RETURNING cardinality(ids) AS n
            ), trimmed AS (
                -- Read by nothing: a data-modifying CTE runs to completion all the same.
                -- A range lease becomes a lease of the ids left.
                UPDATE herald_leases l
                SET ids = ARRAY(SELECT x FROM \(PostgresQueue.leaseRows(of: "l")) AS x WHERE NOT x = ANY($12::bigint[])),
                    lo_xid = NULL, lo_id = NULL, hi_xid = NULL, hi_id = NULL
                WHERE cardinality($12::bigint[]) > 0 AND l.lease IN (SELECT lease FROM mine) AND l.owner = $1 AND NOT l.lease = ANY($13::bigint[])
                  AND EXISTS (SELECT 1 FROM \(PostgresQueue.leaseRows(of: "l")) AS x WHERE x = ANY($12::bigint[]))
            ), dropped AS (
                DELETE FROM herald_leases WHERE lease = ANY($13::bigint[]) AND owner = $1 AND lease IN (SELECT lease FROM mine)
            )
            SELECT coalesce((SELECT sum(n) FROM w), 0)::bigint + coalesce((SELECT sum(cardinality(ids)) FROM earlier), 0)::bigint,
                   coalesce((SELECT sum(n) FROM w WHERE possible_duplicate), 0)::bigint
                       + coalesce((SELECT sum(cardinality(ids)) FROM earlier WHERE possible_duplicate), 0)::bigint,
                   coalesce((SELECT sum(n) FROM back), 0)::bigint, (SELECT set_config FROM durability)
            """
        static let bindingDataTypes: [PostgresDataType] = [
            .text, .int8Array, .int8Array, .textArray, .textArray, .int4Array, .textArray, .textArray, .boolArray, .int4Array, .int4Array,
            .int8Array, .int8Array, .int4Array,
        ]
        typealias Row = (Int, Int, Int, String)

        var owner: String
        var groups: [OutcomeGroup]
        var bounds: [(lo: Int32, hi: Int32)]
        var ids: [Int64]
        var apnsIDs: [String]
        var released: [Int64]
        var completing: [Int64]

        /// In the order of `bindingDataTypes`: the groups' columns as arrays, one element per group.
        func makeBindings() throws -> PostgresBindings {
            var b = PostgresBindings(capacity: 14)
            b.append(owner)
            b.append(groups.map(\.lease))
            b.append(ids)
            b.append(apnsIDs)
            b.append(groups.map(\.outcome))
            b.append(groups.map(\.status))
            b.append(groups.map(\.code))
            b.append(groups.map(\.reason))
            b.append(groups.map(\.release))
            b.append(bounds.map(\.lo))
            b.append(bounds.map(\.hi))
            b.append(released)
            b.append(completing)
            b.append(groups.map(\.attempts))
            return b
        }

        func decodeRow(_ row: PostgresRow) throws -> Row { try row.decode(Row.self) }
    }
}
