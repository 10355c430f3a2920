import HeraldCore
import Synchronization

/// Requests from the `notifications` table: claims batches of rows (see
/// ``PostgresQueue/claim(limit:)``), decodes each row's request line as `herald
/// send` decodes a JSON Lines line, and emits it, noting in the ``LeaseBook``
/// which row each sequence number is, so ``QueueOutcomeWriter`` can write its
/// outcome back. A row that is not a valid request ends `dropped` with the
/// reason (and the row id); the rows behind it carry on.
///
/// Idle, it waits for a `NOTIFY` on ``QueueSchema/channel`` (or `poll`,
/// whichever comes first). With `drain` it returns once nothing is queued and
/// no other worker holds a row (what others hold ends, or comes back to the
/// queue when their lease expires, so it waits for those); otherwise it runs
/// until the pipeline is shut down. A database that goes away is retried with
/// back-off, reported through `onProblem`.
public struct PostgresQueueSource: NotificationSource {
    public let queue: PostgresQueue
    public let book: LeaseBook
    public let drain: Bool
    public let decoder: RequestDecoder
    let onProblem: @Sendable (String) -> Void

    public init(
        queue: PostgresQueue, book: LeaseBook, drain: Bool, decoder: RequestDecoder = RequestDecoder(),
        onProblem: @escaping @Sendable (String) -> Void = { _ in }
    ) {
        self.queue = queue
        self.book = book
        self.drain = drain
        self.decoder = decoder
        self.onProblem = onProblem
    }

    /// Outcome lines name a row by its id: `"row": 17`.
    public var lineKey: StaticString { "row" }

    /// Rows a worker may hold (in the pipeline, or their outcomes not yet written) before it claims more.
    var heldLimit: Int { 4 * queue.configuration.batch + queue.configuration.writeBatch }

    /// Claims in flight ahead of the batch being emitted: their round trips overlap the pipeline's
    /// work and each other's (a claim's time is mostly waiting: for the database, for the answer's
    /// decoding), so one worker is not held to one claim per claim's latency.
    static let claimsAhead = 2

    /// How often the fast lane's looker claims that lane's new rows whatever its newest row
    /// (``lookForFastRows(_:until:)``): for rows the cheap question cannot see, and those a
    /// `NOTIFY` announced. A look that finds none is the claim's check (about 0.1 ms of the
    /// database's CPU since schema 18, 0.8 before): under 1% of a core while the worker has
    /// rows in flight, nothing otherwise.
    static let fastLook = Duration.milliseconds(20)

    /// How often the fast lane's looker asks whether that lane's newest row has changed, claiming
    /// its new rows in the same statement when it has (``PostgresQueue/lookFast(limit:token:seen:)``):
    /// an alert enqueued beside a campaign is claimed within a few milliseconds, beside the
    /// campaign's own claims rather than after them. About 0.1 ms of the database's CPU a question,
    /// some 3% of a core while the worker has rows in flight, and nothing while it is idle.
    static let fastProbe = Duration.milliseconds(4)

    /// Rows the main loop emits in one turn of the sink: between two turns the fast lane's rows,
    /// claimed meanwhile, go in (a claim's 2,000 rows take 5-10 ms to decode and emit).
    static let emitTurn = 256

    public func produce(into sink: SourceSink) async throws {
        // Scheduled rows whose time has come are moved where claims find them, beside the claiming.
        let releaser = Task { await releaseScheduled() }
        defer { releaser.cancel() }
        let shared = SharedSink(sink)
        // The fast lane's rows are looked for beside the claims below, in a task of their own: a
        // claim of the campaign's 2,000 rows takes 10-40 ms on two busy cores, and an alert must
        // not wait for it (nor for the worker to drop under its limit).
        let lookerDone = Latch()
        let looker = Task { await lookForFastRows(shared, until: lookerDone) }
        func stopLooking() async {
            lookerDone.open()
            await looker.value
        }
        var failures = 0
        // Claims in a row that found nothing: the wait after each grows from a few milliseconds to
        // `poll`. A claim finds nothing while another worker's claim holds the rows after the
        // cursor as well as when the queue is empty; waiting a whole `poll` for a NOTIFY (only
        // inserts send one) left a queued backlog to whichever worker claimed first.
        var emptyClaims = 0
        // Claims in flight, oldest first; emitted in that order.
        var ahead: [Task<[PostgresQueue.Claimed], any Error>] = []
        while true {
            if stopping(sink) {
                book.stopRequested.store(true, ordering: .releasing)
                // What the fast lane's looker claimed goes through, as does what was claimed ahead:
                // claimed rows are this worker's to finish.
                await stopLooking()
                for claim in ahead { if let rows = try? await claim.value { await shared.emit(rows, by: self) } }
                if let rows = try? await recoverUnansweredClaims(), !rows.isEmpty { await shared.emit(rows, by: self) }
                return
            }
            // Memory stays bounded when outcomes are written more slowly than rows are claimed:
            // no new claim while the worker holds more than a few batches (the fast lane's looker
            // still takes alerts, up to twice that).
            if book.held >= heldLimit && ahead.isEmpty {
                try? await Task.sleep(for: .milliseconds(5))
                continue
            }
            let rows: [PostgresQueue.Claimed]
            // Read before claiming: a NOTIFY after an empty claim still wakes the wait below.
            let notified = queue.notificationCount
            do {
                // First the rows of claims whose answer was lost (they may have committed): taken
                // back now, they are sent once, not claimed again when their lease runs out.
                let recovered = try await recoverUnansweredClaims()
                if !recovered.isEmpty {
                    rows = recovered
                } else if !ahead.isEmpty {
                    rows = try await ahead.removeFirst().value
                } else {
                    rows = try await claimBatch(fast: takesFastLane(shared))
                }
                if rows.isEmpty, ahead.isEmpty, drain, !(try await queue.hasWorkLeft(inFlight: book.leases)) {
                    // The looker may have claimed rows since: they are emitted before this returns.
                    await stopLooking()
                    return
                }
                failures = 0
            } catch {
                failures += 1
                let delay = BackoffPolicy.queueDatabase.bound(afterFailures: failures)
                onProblem("\(error); retrying in \(delay)")
                await queue.waitForNotification(timeout: delay) { stopping(sink) }
                continue
            }
            if rows.isEmpty {
                if ahead.isEmpty {
                    emptyClaims += 1
                    let wait = BackoffPolicy(initial: .milliseconds(5), maximum: queue.configuration.poll).bound(afterFailures: emptyClaims)
                    await queue.waitForNotification(timeout: wait, since: notified) { stopping(sink) }
                }
                continue
            }
            emptyClaims = 0
            // A full batch: more are likely waiting. Claimed rows are in the book as soon as claimed:
            // a batch waiting here (the worker at its limit, the pipeline full) has its leases renewed
            // like the rows in flight, or another worker would take it over once the lease ran out,
            // and both would send it.
            if rows.count >= queue.configuration.batch {
                // (Claims in flight count as full batches: what the worker holds stays under heldLimit plus one batch.)
                while ahead.count < Self.claimsAhead && book.held + ahead.count * queue.configuration.batch < heldLimit {
                    let fast = takesFastLane(shared)
                    ahead.append(Task { try await claimBatch(fast: fast) })
                }
            }
            await shared.emit(rows, by: self, turn: Self.emitTurn)
        }
    }

    /// The fast lane's looker (``produce(into:)``): while the worker holds rows, every
    /// ``fastProbe`` it asks whether the fast lane's newest row has changed, and if so claims that
    /// lane's new rows, in the same statement (``PostgresQueue/lookFast(limit:token:seen:)``);
    /// every ``fastLook``, and when woken, it claims whatever the newest row (rows the question
    /// cannot see: a transaction that began before the newest row's and committed after it). An
    /// idle worker's own claims take the fast lane's rows (a `NOTIFY`, its next look). Up to
    /// twice the worker's limit; a look that fills a whole batch found a backlog of the fast
    /// lane, not a few alerts: no more looks until the worker is under its limit again, and
    /// meanwhile the main loop's claims take that lane's rows first. Ends when `done` opens or
    /// the worker stops, having emitted what it claimed.
    func lookForFastRows(_ shared: SharedSink, until done: Latch) async {
        var newest: Int64?
        var lastLook = (notified: queue.notificationCount, at: ContinuousClock.now)
        var failures = 0
        while !done.isOpen && !stopping(shared.sink) {
            try? await Task.sleep(for: failures == 0 ? Self.fastProbe : BackoffPolicy.queueDatabase.bound(afterFailures: failures))
            let held = book.held
            if held < heldLimit { shared.fastBacklog.store(false, ordering: .relaxed) }
            guard held > 0, held < 2 * heldLimit, !shared.fastBacklog.load(ordering: .relaxed) else { continue }
            let whatever = queue.notificationCount != lastLook.notified || ContinuousClock.now - lastLook.at >= min(Self.fastLook, queue.configuration.poll)
            if whatever { lastLook = (queue.notificationCount, .now) }
            let token = queue.nextClaimToken()
            do {
                let look = try await queue.lookFast(limit: queue.configuration.batch, token: token, seen: whatever ? nil : newest)
                failures = 0
                newest = look.newest
                let rows = await noted(look.claim, tokens: [token])
                if rows.count >= queue.configuration.batch { shared.fastBacklog.store(true, ordering: .relaxed) }
                if !rows.isEmpty { await shared.emit(rows, by: self) }
            } catch {
                // It may have leased rows: the main loop finds them by the token.
                book.claimUnanswered(token)
                failures += 1
                // Once a run of failures: the main loop's claims report the database's state too.
                if failures == 1 { onProblem("\(error); looking again") }
            }
        }
    }

    /// Whether the main loop's claims take the fast lane's rows while the bulk lane has rows
    /// waiting: when the worker holds none (the looker looks only while it does) and while the
    /// looker found a backlog. Otherwise the looker's looks take them, each within a few
    /// milliseconds, where a claim of the campaign's 2,000 rows takes 10-40 ms on two busy cores.
    /// (With no bulk rows waiting, as in a campaign of alerts, the claims take the fast lane's.)
    func takesFastLane(_ shared: SharedSink) -> Bool {
        book.held == 0 || shared.fastBacklog.load(ordering: .relaxed)
    }

    /// Moves scheduled rows to `notifications` as their time comes (schema 13): every quarter of
    /// a second, at once again while there are more, and when a `NOTIFY` comes (a producer's
    /// rows, some perhaps due already). Any worker's release serves every worker. Ends when
    /// cancelled (``produce(into:)`` returning) or told to stop claiming.
    func releaseScheduled() async {
        var failures = 0
        let stop = { [book] in Task.isCancelled || book.stopRequested.load(ordering: .acquiring) }
        while !stop() {
            let notified = queue.notificationCount
            do {
                let moved = try await queue.releaseDue(limit: Self.releaseBatch)
                failures = 0
                if moved == Self.releaseBatch { continue }
            } catch {
                // Cancelled with its statement under way: the worker is done, and so is this.
                if stop() { return }
                failures += 1
                let delay = BackoffPolicy.queueDatabase.bound(afterFailures: failures)
                onProblem("\(error); retrying in \(delay)")
                try? await Task.sleep(for: delay)
                continue
            }
            await queue.waitForNotification(timeout: Self.releaseInterval, since: notified, stop: stop)
        }
    }

    /// Scheduled rows moved per statement, and how often a worker looks for rows whose time has come.
    static let releaseBatch = 5_000
    static let releaseInterval: Duration = .milliseconds(250)

    /// The pipeline is shutting down, or the worker was told to stop claiming
    /// (``LeaseBook/stopRequested``: a service's intake closed).
    func stopping(_ sink: SourceSink) -> Bool { sink.isStopping || book.stopRequested.load(ordering: .acquiring) }

    /// Claims a batch, never under one of the leases this worker holds, and notes it in the book at
    /// once: from then on its leases are renewed, whether or not it has been emitted yet.
    /// Without `fast`, none of the fast lane's while the bulk lane has rows waiting.
    func claimBatch(fast: Bool = true) async throws(QueueError) -> [PostgresQueue.Claimed] {
        let token = queue.nextClaimToken()
        do {
            let claim = try await queue.claim(
                limit: queue.configuration.batch, token: token, fast: fast, inFlight: { [book] in book.leases },
                leased: { [book] in book.reserve($0, token: token) })
            return await noted(claim, tokens: [token])
        } catch {
            book.claimUnanswered(token)
            throw error
        }
    }

    /// Notes the rows of the claims with these tokens in the book, and drops the leases they took
    /// over with nothing left to send (if that fails, the book keeps them and the next renewal
    /// drops them). Rows of a lease this worker holds already are not sent again
    /// (``LeaseBook/claim(_:tokens:)``).
    func noted(_ claim: PostgresQueue.Claim, tokens: [Int64]) async -> [PostgresQueue.Claimed] {
        let rows = book.claim(claim.rows, tokens: tokens)
        if rows.count < claim.rows.count {
            // Not expected: this worker's claims pass over the leases it holds (LeaseBook.leases).
            onProblem("a claim took over a lease this worker holds; its \(claim.rows.count - rows.count) rows in flight here are not sent again")
        }
        let empty = claim.emptyLeases.filter { !book.holds($0) }
        if !empty.isEmpty { await drop(empty, book: book, queue: queue, onProblem: onProblem) }
        return rows
    }

    /// The rows of this worker's unanswered claims, noted in the book like a claim's.
    func recoverUnansweredClaims() async throws(QueueError) -> [PostgresQueue.Claimed] {
        let tokens = book.takeUnansweredClaims()
        guard !tokens.isEmpty else { return [] }
        do {
            return await noted(try await queue.recoverClaims(tokens), tokens: tokens)
        } catch {
            for t in tokens { book.claimUnanswered(t) }
            throw error
        }
    }

    /// Emits claimed rows, noted in the book first (each is emitted once, in order, as the next
    /// sequence number); a row that is not a valid request is emitted as invalid.
    func emit(_ rows: ArraySlice<PostgresQueue.Claimed>, into sink: SourceSink, flush: Bool = true) async {
        book.hold(rows, from: sink.emitted)
        let now = Duration.sinceEpochMilliseconds
        for row in rows {
            var body = row.body
            switch body.withUTF8({ RequestLine.decode(UnsafeRawBufferPointer($0), decoder: decoder) }) {
            case .request(let request):
                if let expired = request.expiredBeforeSending(nowMilliseconds: now) {
                    await sink.emitDropped(request, line: Int(row.id), reason: expired)
                } else {
                    await sink.emit(request, line: Int(row.id))
                }
            case .invalid(let reason, let id, let token): await sink.emitInvalid(line: Int(row.id), reason: reason, id: id, token: token, lineKey: lineKey)
            }
        }
        // Hand the last partial batch on now: nothing may wait behind an idle source.
        if flush { await sink.flush() }
    }
}

/// A worker's sink, one task's at a time: the main loop's claims and the fast lane's looker
/// both emit into it (``PostgresQueueSource/produce(into:)``), each in its turn.
final class SharedSink: @unchecked Sendable {
    /// Used only within a turn (or read for ``SourceSink/isStopping``, an atomic).
    let sink: SourceSink
    let turn = FlowGate(limit: 1)
    /// The fast lane's looker found a backlog: the main loop's claims take that lane's rows too.
    let fastBacklog = Atomic<Bool>(false)
    init(_ sink: SourceSink) { self.sink = sink }

    /// Emits `rows` (``PostgresQueueSource/emit(_:into:flush:)``) in turns of at most
    /// `turn` rows, the last partial batch handed on at the end.
    func emit(_ rows: [PostgresQueue.Claimed], by source: PostgresQueueSource, turn size: Int = .max) async {
        var start = rows.startIndex
        while start < rows.endIndex {
            let end = rows.index(start, offsetBy: size, limitedBy: rows.endIndex) ?? rows.endIndex
            await turn.acquire(1)
            await source.emit(rows[start..<end], into: sink, flush: end == rows.endIndex)
            turn.remove(1)
            start = end
        }
    }
}

extension PostgresQueue {
    /// A worker on this queue: the source to run a pipeline from and the
    /// observer to add to its ledger, sharing one ``LeaseBook``.
    public func worker(drain: Bool, onProblem: @escaping @Sendable (String) -> Void = { _ in }) -> (source: PostgresQueueSource, writer: QueueOutcomeWriter) {
        let book = LeaseBook()
        return (PostgresQueueSource(queue: self, book: book, drain: drain, onProblem: onProblem), QueueOutcomeWriter(queue: self, book: book, onProblem: onProblem))
    }
}
